"""The catalog's first page, `GET /neuronforge/?page=&per_page=` (filters model, profile, instance,
status): one page of the farm from one `farm.farm_page` call (the farm index's head and tail and the index
pages holding the rows shown, never a request per artifact): the summary, the filters, the matrix of
model × (profile, target), the latency plot and the page's rows, with previous / next links that keep
the filters."""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import urlencode

from fastapi import Query
from fastapi.responses import HTMLResponse

from neuronforge.farm.rows import STATUSES, farm_page
from neuronforge.profiles import profile_names
from neuronforge.spec.source import REVISION_SHOWN

from .base import ShownHTML, Store, app
from .params import MAX_PER_PAGE, PER_PAGE, Filters, whole
from .render import (
    PREFIX,
    artifact_href,
    channels_href,
    latency_view,
    model_ref,
    ms,
    release_view,
    render_page,
    short_target,
)

PLOT_ROWS = 30
METRICS = (("ttft_ms", "ttft", "time to first token"), ("per_token_ms", "per-token", "per output token"))


def _log_scale(values: list[float]) -> tuple[float, float]:
    """Whole decades around `values` (ms): a bar ten times the others still leaves them readable."""
    lo = 10 ** math.floor(math.log10(min(values)))
    hi = 10 ** math.ceil(math.log10(max(values)))
    return lo, hi if hi > lo else lo * 10


def _width(value: float, scale: tuple[float, float]) -> float:
    """A bar's width in % of its track on the log `scale` (at least 4%: the smallest is visible)."""
    lo, hi = scale
    return 4 + 96 * math.log10(value / lo) / math.log10(hi / lo)


def _tick(ms: float) -> str:
    return f"{ms:g}" if ms < 1000 else f"{ms / 1000:g}k"


def _ticks(scale: tuple[float, float]) -> list[dict[str, str]]:
    """The scale's decades in ms; beyond three, every other one (labels of a narrow column must not
    run into each other). The first label starts at its tick, the last ends at it."""
    lo, hi = scale
    decades = round(math.log10(hi / lo))
    step = 1 if decades <= 3 else 2
    ticks = [lo * 10**k for k in range(0, decades + 1, step)]
    if ticks[-1] != hi:
        ticks.append(hi)
    last = len(ticks) - 1
    return [
        {
            "x": f"{_width(t, scale):.1f}",
            "anchor": "start" if i == 0 else "end" if i == last else "middle",
            "label": _tick(t),
        }
        for i, t in enumerate(ticks)
    ]


def _plot_view(rows: list[Any]) -> dict[str, Any] | None:
    """What `_plot.html.j2` draws: per metric a log scale and its ticks, per artifact a bar width
    (% of its track, computed here) and its value as text. None: no smoke latencies on this page."""
    timed = [r for r in rows if (r.ttft_ms or 0) > 0 or (r.per_token_ms or 0) > 0]
    if not timed:
        return None
    shown = timed[:PLOT_ROWS]
    scales: dict[str, tuple[float, float] | None] = {}
    for attr, _, _ in METRICS:
        values = [getattr(r, attr) for r in shown if (getattr(r, attr) or 0) > 0]
        scales[attr] = _log_scale(values) if values else None
    lines = []
    for r in shown:
        cells: list[dict[str, Any] | None] = []
        for attr, css, title in METRICS:
            v, scale = getattr(r, attr), scales[attr]
            if not v or v <= 0 or scale is None:
                cells.append(None)
                continue
            cells.append({"css": css, "title": title, "width": f"{_width(v, scale):.1f}", "ms": v, "text": ms(v)})
        lines.append(
            {"model": r.model, "profile": r.profile, "target": short_target(r.profile, r.target), "cells": cells}
        )
    return {
        "more": f" (the first {PLOT_ROWS} of this page's {len(timed)})" if len(timed) > PLOT_ROWS else "",
        "metrics": [
            {"css": css, "title": title, "ticks": _ticks(scales[attr]) if scales[attr] else []}
            for attr, css, title in METRICS
        ],
        "lines": lines,
    }


def _matrix_view(rows: list[Any]) -> dict[str, Any] | None:
    """Model × (profile, target) of the page's rows; each cell links to its artifacts' pages (more
    than one when the model has builds of several revisions for that target: each is reachable, by its
    revision shortened as every listing shows it, `spec.source.model_ref`)."""
    if not rows:
        return None
    columns = sorted({(r.profile, r.target) for r in rows})
    cell: dict[tuple[str, str, str], list[Any]] = {}
    for r in rows:
        cell.setdefault((r.model, r.profile, r.target), []).append(r)
    lines = []
    for m in sorted({r.model for r in rows}):
        cells: list[dict[str, Any] | None] = []
        for p, t in columns:
            found = cell.get((m, p, t))
            if not found:
                cells.append(None)
                continue
            entries = [
                {
                    "rev": r.revision[:REVISION_SHOWN] if len(found) > 1 and r.revision else "",
                    "href": artifact_href(r.key),
                    "status": r.status,
                    "stage": r.stage,
                    "release": release_view(r.channels, r.review, r.review_reason)
                    if r.status in ("published", "stale")
                    else None,
                    **latency_view(r),
                }
                for r in found
            ]
            cells.append({"status": found[0].status, "entries": entries})
        lines.append({"model": m, "cells": cells, "channels_href": channels_href(m)})
    return {"columns": [{"profile": p, "target": short_target(p, t)} for p, t in columns], "lines": lines}


def _page_href(filters: dict[str, str | None], page: int, per_page: int) -> str:
    params: dict[str, Any] = {k: v for k, v in filters.items() if v}
    if page > 1:
        params["page"] = page
    if per_page != PER_PAGE:
        params["per_page"] = per_page
    return f"{PREFIX}/" + (f"?{urlencode(params)}" if params else "")


def _pager_view(filters: dict[str, str | None], page: int, per_page: int, shown: Any) -> dict[str, str]:
    """Previous / next links keeping the filters, and where this page is."""
    first = (page - 1) * per_page
    if shown.total is not None:
        pages = max(1, -(-shown.total // per_page))
        where = f"page {page} of {pages}"
        if shown.rows:
            where += f" (rows {first + 1}–{first + len(shown.rows)} of {shown.total})"
        more = first + per_page < shown.total
    else:  # a filtered view that stopped reading the index once it had this page: there may be more
        where = f"page {page}"
        if shown.rows:
            where += f" (rows {first + 1}–{first + len(shown.rows)})"
        more = True
    return {
        "prev": _page_href(filters, page - 1, per_page) if page > 1 else "",
        "where": where,
        "next": _page_href(filters, page + 1, per_page) if more else "",
    }


def _row_view(r: Any) -> dict[str, Any]:
    return {
        "release": release_view(r.channels, r.review, r.review_reason) if r.status in ("published", "stale") else None,
        "short_key": r.key[:12],
        "href": artifact_href(r.key),
        "model": model_ref(r.model, r.revision),
        "profile": r.profile,
        "target": r.target,
        "status": r.status,
        "stage": r.stage,
        "message": r.message,
        "at": r.at,
        "registry": _registry_badge(r),
    }


def _registry_badge(r: Any) -> dict[str, str] | None:
    """Where optimum-neuron's lookup finds a build (its farm-index row says: no manifest read)."""
    if not r.hub_registry:
        return None
    found = r.hub_registry_found is True
    note = "" if found else " (lookup misses it)"
    return {"repo": r.hub_registry, "css": "published" if found else "failed", "note": note}


@app.get("/", response_class=HTMLResponse)
def catalog_page(
    opened: Store,
    query: Filters,
    page: str | None = Query(None, description="1-based page number (default 1)"),
    per_page: str | None = Query(None, description=f"rows per page (default {PER_PAGE}, at most {MAX_PER_PAGE})"),
) -> HTMLResponse:
    number = whole("page", page, 1, 1)
    size = whole("per_page", per_page, PER_PAGE, 1, MAX_PER_PAGE)
    store = opened()
    shown = farm_page(store, query, (number - 1) * size, size)
    filters = {"model": query.model, "profile": query.profile, "instance": query.instance, "status": query.status}
    api = f"{PREFIX}/api/artifacts?" + urlencode(
        {**{k: v for k, v in filters.items() if v}, "offset": (number - 1) * size, "limit": size}
    )
    page_html = render_page(
        "catalog.html.j2",
        title="neuronforge artifact catalog",
        store_uri=store.root_uri,
        summary=", ".join(f"{n} {s}" for s, n in shown.counts.items() if n) or "empty",
        api_href=api,
        filters={k: v or "" for k, v in filters.items()},
        profiles=profile_names(),
        instances=list(shown.instances),
        statuses=list(STATUSES),
        per_page_field=size if size != PER_PAGE else "",
        pager=_pager_view(filters, number, size, shown),
        matrix=_matrix_view(shown.rows),
        past_the_end=number > 1,
        plot=_plot_view(shown.rows),
        rows=[_row_view(r) for r in shown.rows],
    )
    return ShownHTML(page_html)
