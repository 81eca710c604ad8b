"""A model's release channels, `GET /neuronforge/channels?model=org/name` (`channels.listing`: one
listing of its folder, one read per channel, one review read per current build, and per channel the
check of its build, `channels.pointer`): per channel its build, review state, whether it is still sound,
whether it requires approval, its last moves, and the buttons approve / reject its build, promote a
sibling channel's build, roll back to each earlier build (each to a confirmation page); then, per
target, a chart of its builds' latencies, oldest to newest, drawn from one `farm_page` of the model's
farm-index rows (no manifest)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from fastapi import Query
from fastapi.responses import HTMLResponse

from neuronforge.artifacts import attestations, channels
from neuronforge.common.errors import NeuronforgeError
from neuronforge.farm.rows import FarmQuery, farm_page
from neuronforge.interfaces.latency_chart import target_charts
from neuronforge.records.base import RecordError

from .base import ShownHTML, Store, app, log
from .params import model_param
from .reads import channels_of, review_of
from .render import PREFIX, artifact_href, release_href, render_page, review_view, state_css

HISTORY_SHOWN = 10  # a channel's last moves shown on its model's channels page


def _move_view(move: Any) -> dict[str, Any]:
    build = move.build
    return {
        "action": move.action,
        "short_key": build.key[:12],
        "href": artifact_href(build.key),
        "target": build.target,
        "previous": move.previous[:12],
        "previous_href": artifact_href(move.previous) if move.previous else "",
        "by": move.by,
        "at": move.at,
        "reason": move.reason,
        "review": move.review,
        "comparison": move.comparison,  # what the regression gate compared ("" none)
        "accepted_regression": move.accepted_regression,
    }


def _pointer_of(store: Any, record: Any) -> Any:
    """Whether the channel's build is still sound (`channels.pointer`: its damage record, then the
    checks a move makes); a store that cannot be read now makes it `unreadable`, said so."""
    try:
        return channels.pointer(store, record, by="catalog")
    except NeuronforgeError as exc:
        log.warning("neuronforge catalog: checking the build of channel %s failed: %s", record.channel, exc)
        return channels.Pointer("unreadable", "its build could not be read now (the api-server's log says why)")


def _pointer_view(found: Any) -> dict[str, str]:
    """A channel's build as sound or not: its state word and, when it is not sound, a warning in words."""
    if found is None or found.state == "ok":
        return {"state": found.state if found is not None else "", "loud": ""}
    if found.damage is not None:
        d = found.damage
        why = f"{d.reason}; found by {d.by} at {d.at}"
        return {"state": "damaged", "loud": f"DAMAGED ({why}): rebuild it, or roll back or promote another build."}
    why = f"UNREADABLE ({found.reason}): a move onto it would be refused now"
    return {"state": found.state, "loud": f"{why}; roll back or promote another build."}


def _channel_view(
    record: Any, state: str, review: Any, siblings: list[Any], pointer: Any = None, attested: bool | None = None
) -> dict[str, Any]:
    """One channel as its model's page shows it, with its buttons: approve / reject its build,
    promote a sibling channel's build here, roll back to each earlier build of its history; whether
    its build is still sound (`pointer`, `channels.Pointer`: None when not checked); and, for a channel
    requiring its fleet's SDK release, whether the build is attested for it (`attested`)."""
    key = record.current.build.key
    ref = {"model": record.model, "profile": record.profile_line, "channel": record.channel}
    actions = []
    if state != "approved":
        actions.append({"label": f"approve {key[:12]}", "href": release_href(action="approve", build=key)})
    if state != "rejected":
        actions.append({"label": f"reject {key[:12]}", "href": release_href(action="reject", build=key)})
    for other in siblings:
        theirs = other.current.build.key
        if other.channel != record.channel and other.profile_line == record.profile_line and theirs != key:
            actions.append(
                {
                    "label": f"promote {other.channel}'s {theirs[:12]} here",
                    "href": release_href(action="promote", **ref, build=theirs, reason=f"from {other.channel}"),
                }
            )
    rollback = {b.key: release_href(action="rollback", **ref, build=b.key) for b in channels.earlier_builds(record)}
    shown = record.history[:HISTORY_SHOWN]
    history = [{**_move_view(m), "rollback": rollback.pop(m.build.key, "")} for m in shown]
    needs_now = channels.requires_approval(record.channel)
    loud = ""
    if state == "rejected":
        why = f" by {review.current.by} at {review.current.at}: {review.current.reason}" if review is not None else ""
        loud = f"REJECTED{why}. This channel still points to it: roll back or promote another build."
    return {
        "id": f"channel-{record.profile_line}-{record.channel}",
        "name": record.channel,
        "line": record.profile_line,
        "requires_approval": record.requires_approval,
        "approval_changed": needs_now != record.requires_approval,
        "current": _move_view(record.current),
        "build": {
            "uri": record.current.build.artifact_uri,
            "profile": record.current.build.profile,
            "published_at": record.current.build.published_at,
            "smoke_host": record.current.build.smoke.host,
            "compiler": str(record.current.build.toolchain.get("compiler_version") or ""),
        },
        "state": state,
        "css": state_css(state),
        "review": review_view(state, review)["current"],
        "loud": loud,
        "pointer": _pointer_view(pointer),
        "requires_release": record.requires_release,
        "attested": attested,
        "attest": f"neuronforge attest {key[:12]} --sdk {record.requires_release}" if attested is False else "",
        "actions": actions,
        "history": history,
        "more": len(record.history) - len(shown),
    }


@app.get("/channels", response_class=HTMLResponse)
def channels_page(opened: Store, model: str | None = Query(None)) -> HTMLResponse:
    """A model's release channels: each one's current build, its review state and whether it is still
    sound (`channels.pointer`, per channel), whether it requires approval, its last moves, and the
    buttons that lead to a confirmation; then the model's speed across its builds (`_speed_view`)."""
    name = model_param(model)
    store = opened()
    records, damaged = channels_of(store, name)
    reviews: dict[str, tuple[str, Any]] = {}
    for r in records:
        key = r.current.build.key
        if key not in reviews:
            reviews[key] = review_of(store, key)
    views = [
        _channel_view(r, *reviews[r.current.build.key], records, _pointer_of(store, r), _attested_of(store, r))
        for r in records
    ]
    page_html = render_page(
        "channels.html.j2",
        title=f"{name} · channels — neuronforge",
        store_uri=store.root_uri,
        model=name,
        catalog_href=f"{PREFIX}/?{urlencode({'model': name})}",
        channels=views,
        damaged=damaged,
        **_speed_view(store, name, records),
    )
    return ShownHTML(page_html)


CHART_ROWS = 500  # the model's builds its channels page reads for the charts: farm-index rows, no manifest


def _speed_view(store: Any, model: str, records: list[Any]) -> dict[str, Any]:
    """The model's speed charts (`interfaces.latency_chart`) from the farm-index pages that may hold its
    rows (one `farm_page`, at most CHART_ROWS rows), each channel's current build marked."""
    shown = farm_page(store, FarmQuery(model=model, published_only=True), 0, CHART_ROWS)
    on: dict[str, list[str]] = {}
    for r in records:
        on.setdefault(r.current.build.key, []).append(r.channel)
    more = f"The first {CHART_ROWS} builds of the model are drawn." if len(shown.rows) == CHART_ROWS else ""
    return {"charts": target_charts([r for r in shown.rows if r.model == model], on), "charts_note": more}


def _attested_of(store: Any, record: Any) -> bool | None:
    """Whether the channel's build is attested for the SDK release the channel requires (one read; None:
    it requires none, or the attestations do not read)."""
    if not record.requires_release:
        return None
    build = record.current.build
    try:
        return attestations.attested_for(store, build.key, record.requires_release, build.sdk_release)
    except RecordError as exc:
        log.warning("neuronforge catalog: the attestations of %s do not validate: %s", build.key[:12], exc)
        return None
