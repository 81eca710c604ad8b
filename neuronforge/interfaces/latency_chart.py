"""A model's speed across its builds, as the catalog's channels page draws it: per target (profile line
and target slug), one chart per charted figure (time to first token at the short prompt, per-token
latency), the builds oldest to newest — the median as points joined by a line, the p10–p90 band around
it, the build each channel points to now marked and named, a synthetic measurement drawn hollow and
said so, a build without a measurement a gap with a note.

Only the geometry is computed here (SVG coordinates in a fixed viewBox, as text) and the words a reader
or a screen reader gets (a title, a description, a table of the numbers); the catalog's template
`_chart.html.j2` writes the SVG with autoescape on, styled by the catalog's style sheet (its
Content-Security-Policy allows no inline style: every colour is a class). The data are the farm-index
rows the page already reads (`farm.rows.FarmRow.measured`): no manifest is read for a chart.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from neuronforge.artifacts.farm_index.entry import CHARTED
from neuronforge.records.smoke import FIGURE_TITLES

BUILDS_SHOWN = 24  # the newest builds of a target a chart draws (the table below it lists them too)
WIDTH, HEIGHT = 640, 250  # the viewBox: scaled to the column, text with it
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 34, 44  # margins: y labels, channel names above, build labels below
LABEL_PX = 44  # the least room a build's label takes on the x axis


def _ms(seconds: float) -> str:
    ms = seconds * 1e3
    return f"{ms:.3g} ms" if ms < 100 else f"{ms:,.0f} ms"


def _nice_top(value: float) -> float:
    """The y axis's top: the first 1, 2, 4, 5 or 8 × 10^k at or above `value` (seconds), so its quarter
    ticks are round numbers and the highest p90 fills most of the height."""
    if value <= 0:
        return 1e-3
    k = math.floor(math.log10(value))
    for m in (1, 2, 4, 5, 8, 10):
        if m * 10**k >= value:
            return m * 10**k
    return 10 ** (k + 1)


def _points(coords: Iterable[tuple[float, float]]) -> str:
    return " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)


def _runs(items: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Consecutive measured builds: a line and a band never cross a build without a measurement."""
    out: list[list[dict[str, Any]]] = [[]]
    for item in items:
        if item["figure"] is None:
            if out[-1]:
                out.append([])
        else:
            out[-1].append(item)
    return [run for run in out if run]


def _figure_chart(name: str, title: str, builds: list[dict[str, Any]], chart_id: str) -> dict[str, Any]:
    """One figure's chart over `builds` (oldest first): everything `_chart.html.j2` writes."""
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    n = len(builds)
    step = plot_w / n
    measured = [b for b in builds if b["measured"] is not None and name in b["measured"]["figures"]]
    top = _nice_top(max((b["measured"]["figures"][name]["p90"] for b in measured), default=0.0) * 1.05)

    def y(seconds: float) -> float:
        return TOP + plot_h * (1 - seconds / top)

    items = []
    every = max(1, math.ceil(LABEL_PX / step))  # label every `every`-th build, and the newest
    for i, b in enumerate(builds):
        f = b["measured"]["figures"].get(name) if b["measured"] is not None else None
        x = LEFT + step * (i + 0.5)
        item: dict[str, Any] = {
            "x": f"{x:.1f}",
            "key": b["key"],
            "short": b["key"][:8],
            "label": (i % every == 0 or i == n - 1),
            "channels": b["channels"],
            "synthetic": bool(b["measured"] and b["measured"]["synthetic"]),
            "figure": f,
            "xf": x,
        }
        if f is not None:
            item |= {
                "y": f"{y(f['median']):.1f}",
                "y10": f"{y(f['p10']):.1f}",
                "y90": f"{y(f['p90']):.1f}",
                "text": f"{_ms(f['median'])} (p10 {_ms(f['p10'])}, p90 {_ms(f['p90'])})",
            }
        items.append(item)
    runs = _runs(items)
    bands = [
        _points([(i["xf"], y(i["figure"]["p90"])) for i in run] + [(i["xf"], y(i["figure"]["p10"])) for i in run[::-1]])
        for run in runs
        if len(run) > 1
    ]
    ticks = [
        {"y": f"{y(top * k / 4):.1f}", "label": _ms(top * k / 4) if k else "0"} for k in range(5)
    ]  # five lines, 0 to the top
    gaps = sum(1 for i in items if i["figure"] is None)
    marked = [f"{', '.join(i['channels'])}: {i['short']}" for i in items if i["channels"]]
    said = [
        f"{n} build(s) oldest to newest, {len(measured)} measured",
        *([f"{gaps} without a measurement (published before the protocol), shown as gaps"] if gaps else []),
        *(["synthetic numbers (a fake consumer's) drawn hollow"] if any(i["synthetic"] for i in items) else []),
    ]
    if measured:
        last = next(i for i in reversed(items) if i["figure"] is not None)
        said.append(f"newest measured {last['short']}: {last['text']}")
    if marked:
        said.append("channels now: " + "; ".join(marked))
    return {
        "id": chart_id,
        "name": name,
        "title": title,
        "desc": ". ".join(said) + ".",
        "width": WIDTH,
        "height": HEIGHT,
        "left": LEFT,
        "right": WIDTH - RIGHT,
        "top": TOP,
        "bottom": HEIGHT - BOTTOM,
        "label_y": HEIGHT - BOTTOM + 16,
        "note_y": HEIGHT - 8,
        "ticks": ticks,
        "bands": bands,
        "lines": [_points((i["xf"], float(i["y"])) for i in run) for run in runs if len(run) > 1],
        "builds": [{k: v for k, v in i.items() if k not in ("xf", "figure")} for i in items],
        "measured": bool(measured),
    }


def target_charts(rows: Iterable[Any], channels: Mapping[str, list[str]]) -> list[dict[str, Any]]:
    """Per target of `rows` (a model's published farm rows, `FarmRow`), its charts and the table of its
    builds, oldest first (the newest `BUILDS_SHOWN` of each). `channels`: build key -> the channels
    (`line · channel`) pointing to it now."""
    by_target: dict[tuple[str, str], list[Any]] = {}
    for r in rows:
        by_target.setdefault((r.profile.partition("@")[0], r.target), []).append(r)
    out = []
    for n, ((line, target), found) in enumerate(sorted(by_target.items())):
        found.sort(key=lambda r: (r.at, r.key))
        shown = found[-BUILDS_SHOWN:]
        builds = [{"key": r.key, "measured": r.measured, "channels": channels.get(r.key, []), "row": r} for r in shown]
        chart_id = f"chart-{n}"
        figures = [
            _figure_chart(name, FIGURE_TITLES[name], builds, f"{chart_id}-{k}") for k, name in enumerate(CHARTED)
        ]
        out.append(
            {
                "id": chart_id,
                "line": line,
                "target": target,
                "more": len(found) - len(shown),
                "figures": figures,
                "table": [_table_row(b) for b in builds],
                "names": [FIGURE_TITLES[name] for name in CHARTED],
            }
        )
    return out


def _table_row(build: dict[str, Any]) -> dict[str, Any]:
    """A build as the chart's table lists it: its numbers, or why it has none."""
    r, m = build["row"], build["measured"]
    cells = []
    for name in CHARTED:
        f = m["figures"].get(name) if m is not None else None
        cells.append(f"{_ms(f['median'])} ({_ms(f['p10'])}–{_ms(f['p90'])})" if f is not None else "—")
    if m is None:
        note = "no measurement (published before the protocol)"
    else:
        host = " with ".join(x for x in (m["instance_type"], m["runtime_line"]) if x)
        note = ("synthetic (a fake consumer's numbers)" if m["synthetic"] else "measured") + (
            f" on {host}" if host else ""
        )
    return {
        "key": r.key,
        "short": r.key[:12],
        "profile": r.profile,
        "at": r.at,
        "cells": cells,
        "note": note,
        "channels": ", ".join(build["channels"]),
    }
