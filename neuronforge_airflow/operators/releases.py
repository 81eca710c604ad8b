"""Release channels in Airflow: the `neuronforge_release` DAG's task, the compile DAG's promotion after
publishing (`promote_to`), and the Asset each channel is announced on.

Every move of a channel (promote, rollback) adds an event to the Asset of that channel, through the
`neuronforge-channels` alias (the channel is known only when the task runs). A consumer's DAG
schedules on the channel it deploys, named by the one function here:

    from neuronforge_airflow.operators.releases import channel_asset

    @dag(schedule=channel_asset("s3://bucket/store", "meta-llama/Llama-3.1-8B", "vllm-neuron", "stable"))
    def redeploy(): ...

The event's `extra` says what moved: `key` (the build the channel points to now), `previous`,
`action`, `by`, and the channel. A request that changes nothing (the channel already points there)
emits no event. What a move checks and how concurrent movers are settled is
`neuronforge.artifacts.channels`; which action does what is `neuronforge.farm.releases`.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from airflow.sdk import Asset, AssetAlias, get_current_context, task

from neuronforge.common import deployment_names as names
from neuronforge_airflow.operators.error_policy import by_policy

log = logging.getLogger(__name__)

CHANNELS_ALIAS = AssetAlias(name=names.CHANNELS_ALIAS)
DEFAULT_BY = "airflow"


def channel_asset(store_uri: str, model: str, profile: str, channel: str) -> Asset:
    """The Asset of the release channel (`model`, `profile`'s line, `channel`) of the store at
    `store_uri`: named `neuronforge/channel/<org>/<name>/<line>/<channel>`, its URI the channel record's
    (`s3://bucket/prefix/channels/.../channel.json`, `file:///abs/path/channels/.../channel.json`: a
    local store's path made absolute, as Airflow keys a `file://` asset by its path). Airflow matches
    an Asset by name and URI together, so producers and consumers must both build it here. Opens no
    store (a DAG file may call it when parsed); bad names are `InvalidInput`, in one sentence."""
    from neuronforge.artifacts.channels import ChannelRef
    from neuronforge.stores import local_folder

    ref = ChannelRef.parse(model, profile, channel)
    folder = local_folder(store_uri)
    root = f"file://{os.path.abspath(folder)}" if folder is not None else store_uri.rstrip("/")
    name = "neuronforge/channel/" + ref.prefix.partition("/")[2]
    return Asset(name=name, uri=f"{root}/{ref.record_key}")


def emit_channel_event(store_uri: str, outcome: Any, by: str) -> dict[str, Any] | None:
    """Add the channel's Asset event for a move (`releases.ReleaseOutcome`) to the running task's
    events on CHANNELS_ALIAS, when the move changed the channel; returns the event's extra (None: no
    event)."""
    if not outcome.changed or outcome.channel is None:
        return None
    moved = outcome.channel  # a ChannelRecord
    asset = channel_asset(store_uri, moved.model, moved.profile_line, moved.channel)
    extra = {
        "key": outcome.key,
        "previous": outcome.previous,
        "action": outcome.action,
        "by": by,
        "model": moved.model,
        "profile": moved.profile_line,
        "channel": moved.channel,
    }
    get_current_context()["outlet_events"][CHANNELS_ALIAS].add(asset, extra=extra)
    log.info("channel event %s: %s", asset.name, extra)
    return extra


def triggered_by(context: Any) -> str:
    """Who a move is recorded as made by: the user who triggered the run (the REST API's, the UI's),
    else "airflow" (a scheduled or asset-triggered run)."""
    run = context.get("dag_run")
    return str(getattr(run, "triggering_user_name", None) or DEFAULT_BY)


def _log_line(line: str) -> None:
    """One line of a gated promote's comparison table, logged before anything moves or is refused."""
    log.info("%s", line)


@task(outlets=[CHANNELS_ALIAS])
def release(params: dict[str, Any] | None = None) -> dict[str, Any]:
    """Do the release request of the run's form (`neuronforge.farm.releases.run`) against the store,
    as the user who triggered the run; log the comparison table of a promote to a gated channel before
    anything moves (refused on a regression unless the form's `accept_regression` gives the reason), then
    its one line and, when a channel moved, emit the channel's Asset event. Returns the outcome
    (`ReleaseOutcome.to_json()`: the comparison too)."""
    from neuronforge.farm import releases
    from neuronforge_airflow.hooks.store import open_store
    from neuronforge_airflow.params import validate_release_conf

    context = get_current_context()
    params = params or context["params"]
    by = triggered_by(context)
    with by_policy():
        validate_release_conf(context["dag_run"].conf)  # without the cluster policy: refused here
        request = releases.ReleaseRequest.from_json({k: v for k, v in params.items() if k != "store"})
        log.info("%s, as %s", request.describe(), by)
        store = open_store(params.get("store"))
        done = releases.run(store, request, by=by, show=_log_line)
    log.info("%s", done.line)
    emit_channel_event(store.root_uri, done, by)
    return done.to_json()


def promote_published(store: Any, model: str, profile: str, key: str, channel: str, by: str) -> dict[str, Any]:
    """The compile DAG's `promote_to`: point `channel` of the build's model and profile line at the
    build `key` just published (or found published), and emit the channel's event. A refusal (stable
    takes only approved builds, the smoke test did not pass, another run moved the channel meanwhile)
    does not fail the task that published: the build stays published, and the refusal is returned
    (`refused`, one line) and logged as a warning, for the run's XCom. A regression against the build a
    gated channel serves is such a refusal: this never accepts one by itself (a person does, with the
    release DAG's `accept_regression` or `promote --accept-regression`); the comparison's table is logged
    before. A bug keeps its traceback."""
    from neuronforge.common.errors import outcome
    from neuronforge.farm import releases

    request = releases.ReleaseRequest(
        action="promote", model=model, profile=profile, channel=channel, build=key, reason="promote_to of the run"
    )
    try:
        done = releases.run(store, request, by=by, show=_log_line)
    except Exception as exc:
        found = outcome(exc, surface="form")
        if found is None:
            raise
        log.warning("not promoted to %s: %s (the build stays published)", channel, found.line)
        return {"channel": channel, "promoted": False, "refused": found.line}
    log.info("%s", done.line)
    emit_channel_event(store.root_uri, done, by)
    return {"channel": channel, "promoted": True, "changed": done.changed, "line": done.line, "key": done.key}
