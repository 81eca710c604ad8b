"""The confirmation of one release action, `GET /neuronforge/release?action=&model=&profile=&channel=
&build=&from_channel=&steps=&reason=` (a `farm.releases.ReleaseRequest`), which changes nothing.

It names the change (before -> after: the build the channel points to now and after, or the review
state), warns (a rejected build still on a channel), says why the run would refuse it now and then
offers nothing, and otherwise shows the request as the release DAG's conf, pinned to the key it names
(a promote from a channel and a rollback by steps become the key they resolve to now): the run does
what the page said, or refuses. Release actions are never taken here: the page's button leads to
Airflow's own trigger form of the DAG `neuronforge_release`, so a move or a decision needs exactly the
permission that form needs, and is run, logged and retried by Airflow like any run. Airflow 3.3's UI
cannot fill its trigger form from a link (no route or query parameter takes a conf), so the page copies
the conf to the clipboard and shows it, to paste as the form's configuration JSON."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from fastapi import Query
from fastapi.responses import HTMLResponse

from neuronforge.artifacts import channels
from neuronforge.artifacts.published import find_key
from neuronforge.common import deployment_names as names
from neuronforge.common.errors import InvalidInput
from neuronforge.farm import releases
from neuronforge.farm.releases import ReleaseRequest
from neuronforge.farm.speed import against_channel

from .base import ShownHTML, Store, app
from .params import REASON_LIMIT, text
from .reads import review_of
from .render import artifact_href, render_page, sentence

RELEASE_DAG = names.RELEASE_DAG  # its Params are the fields of `farm.releases.ReleaseRequest`


def _release_request(fields: dict[str, str | None]) -> Any:
    """The query's `ReleaseRequest` (else its `InvalidInput`). A reject without a reason is not
    refused here: its confirmation asks for the reason."""
    given = {k: v for k, v in fields.items() if v is not None}
    if not given.get("action"):
        raise InvalidInput("give the action: promote, rollback, approve or reject.")
    unreasoned = given.get("action") == "reject" and not given.get("reason")
    request = ReleaseRequest.from_json({**given, "reason": "-"} if unreasoned else given)
    return replace(request, reason="") if unreasoned else request


def _plan(store: Any, request: Any) -> dict[str, Any]:
    """What `request` will change, read from the store now: the pinned request (the key it names),
    before and after, warnings, and why the run would refuse it ("" when it would not). A channel
    record that does not read (`channels.ChannelDamaged`, or too new) raises its `RecordError`: the
    answer says which record and what to do."""
    warnings: list[str] = []
    if request.action in ("promote", "rollback"):
        ref = request.channel_ref()
        plan, pinned = releases.plan(store, request)
        record, before, key = plan.record, plan.before, plan.key
        refused = str(plan.refused) if plan.refused is not None else ""
        if not plan.changes and not refused:
            refused = f"{ref} already points to {key[:12]}: nothing would change"
        since = f"{record.current.action} by {record.current.by} at {record.current.at}" if record else ""
        speed = (
            _comparison_view(store, record, key, ref.channel) if request.action == "promote" and plan.changes else None
        )
        change = {
            "what": f"{ref} points to",
            "before": before[:12],
            "before_href": artifact_href(before) if before else "",
            "after": key[:12],
            "after_href": artifact_href(key),
            "since": since,
        }
    else:
        key = find_key(store, request.build)  # a published build's (its index entry)
        state, _ = review_of(store, key)
        after = request.review_state
        pinned = replace(request, build=key)
        refused = ""
        if request.action == "reject" and not request.reason:
            refused = "a rejection needs its reason, so whoever deployed the build can act on it: give it below"
        held = channels.pointing_to(store, key)
        if held and after == "rejected":
            warnings.append(
                f"{', '.join(held)} still point(s) to {key[:12]}: rejecting moves no channel; roll back after"
            )
        if state == after:
            warnings.append(f"{key[:12]} is already {after}: the run adds this decision to its history")
        change = {
            "what": f"the review of build {key[:12]}",
            "before": state,
            "after": after,
            "before_href": "",
            "after_href": "",
            "since": "",
        }
        speed = None
    return {
        "describe": sentence(pinned.describe()),
        "change": change,
        "comparison": speed,
        "warnings": warnings,
        "refused": sentence(refused) if refused else "",
        "conf": json.dumps(pinned.to_json(), indent=2, ensure_ascii=False),
        "request": pinned.to_json(),
    }


def _comparison_view(store: Any, record: Any, key: str, channel: str) -> dict[str, Any]:
    """The candidate against the build `channel` serves (`farm.speed.against_channel`: the same comparison
    the gate makes), as the confirmation's table, its verdict and whether the channel's policy refuses it."""
    found = against_channel(store, record, key)
    c = found.comparison
    bad = c is not None and c.refuses
    return {
        "channel": channel,
        "base": found.base[:12],
        "verdict": found.verdict,
        "css": "verdict-bad" if bad else "verdict-ok" if found.verdict == "no regression" else "verdict-none",
        "summary": found.summary,
        "rows": [
            {"title": f.title, "cells": f.cells(), "verdict": f.verdict, "regression": f.regression} for f in c.figures
        ]
        if c is not None
        else [],
        "numerics": c.numerics_line() if c is not None else "",
        "gated": channels.gate(channel) is not None,
        "refuses": found.refused,
    }


@app.get("/release", response_class=HTMLResponse)
def release_page(
    opened: Store,
    action: str | None = Query(None),
    model: str | None = Query(None),
    profile: str | None = Query(None),
    channel: str | None = Query(None),
    build: str | None = Query(None),
    from_channel: str | None = Query(None),
    steps: str | None = Query(None),
    to: str | None = Query(None),
    reason: str | None = Query(None),
) -> HTMLResponse:
    """The confirmation of one release action: what will change, before and after, and the way to
    Airflow's trigger form of the release DAG with the request (nothing changes from this page)."""
    fields = {
        "action": text("action", action),
        "model": text("model", model),
        "profile": text("profile", profile),
        "channel": text("channel", channel),
        "build": text("build", build),
        "from_channel": text("from_channel", from_channel),
        "steps": text("steps", steps),
        "reason": text("reason", reason, REASON_LIMIT),
    }
    if to is not None:  # a link made before a rollback's build was `build` (`ReleaseRequest` reads it so)
        fields["to"] = text("to", to)
    request = _release_request(fields)
    store = opened()
    plan = _plan(store, request)
    page_html = render_page(
        "release.html.j2",
        title=f"confirm: {request.action} — neuronforge",
        store_uri=store.root_uri,
        action=request.action,
        plan=plan,
        dag=RELEASE_DAG,
        trigger_href=f"/dags/{RELEASE_DAG}",
        hidden=[(k, v) for k, v in plan["request"].items() if k != "reason" and v not in ("", None)],
        reason=request.reason,
        reason_limit=REASON_LIMIT,
    )
    return ShownHTML(page_html)
