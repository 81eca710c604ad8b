"""The `neuronforge_compile_publish` DAG's tasks, generated from the pipeline's one declaration
(`neuronforge.pipeline.STAGES`) by one task factory (`stage_task`). Only Airflow concerns live
here: the trigger's params become build states (`expand_targets`), stage settings become queues
and pools, the lease is heart-beaten while a task works, failures are recorded, and the publish
task emits the artifact's Asset event. The claim is a deferrable operator (operators/build_claim.py).

Tasks hand each other a `BuildState` as JSON: store references and small results, never a local
path; every task works in its own worker's NEURONFORGE_HOME (`settings.work_dir()`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from airflow.sdk import Asset, AssetAlias, get_current_context, task

from neuronforge import settings
from neuronforge.buildstate import BuildState, LeaseRef
from neuronforge.pipeline import STAGE_BY_NAME, Context, Stage, execute
from neuronforge.profiles.base import Placement
from neuronforge.target import TargetSpec
from operators.routing import DEFAULT_QUEUE, POOL, group_id

log = logging.getLogger(__name__)

ARTIFACTS_ALIAS = AssetAlias(name="neuronforge-artifacts")


def _store(state: BuildState):
    from neuronforge.stores import open_store

    return open_store(state.store_uri)


def _run_id() -> str:
    try:
        return str(get_current_context()["run_id"])
    except Exception:  # outside a task's context (e.g. a Kubernetes pod): Airflow's env, if any
        return os.environ.get("AIRFLOW_CTX_DAG_RUN_ID", "")


def _final_attempt() -> bool:
    try:
        context = get_current_context()
        return context["ti"].try_number > (context["task"].retries or 0)
    except Exception:  # outside a task's context: no retry will follow
        return True


@contextmanager
def _keeping_lease(state: BuildState, store) -> Iterator[list[BuildState]]:
    """While a stage of a run that holds the target's lease works, heart-beat the lease (and fail
    fast if it was taken over). The caller puts the stage's result in the yielded list; it leaves
    carrying the lease's latest version, which the next task renews from."""
    from neuronforge import leases

    out: list[BuildState] = []
    keeper = leases.LeaseKeeper(store, state.need("lease").lease(), release_on_exit=False)
    with keeper:
        keeper.assert_held()
        yield out
    keeper.assert_held()
    if out:
        out[0] = out[0].model_copy(update={"lease": LeaseRef.of(keeper.lease)})


def run_stage_task(name: str, payload: dict[str, Any]) -> dict[str, Any]:
    """The body of every generated task (also run inside a Kubernetes pod): one stage of the
    pipeline on this worker, under the lease when the stage needs it."""
    stage = STAGE_BY_NAME[name]
    state = BuildState.model_validate(payload)
    if state.hit is not None and stage.skip_on_hit:
        log.info("%s: cache hit, nothing to do (%s)", stage.name, state.hit.manifest_uri)
        return payload
    store = _store(state)
    ctx = Context(store, settings.work_dir(), run_id=_run_id())
    try:
        if stage.holds_lease and state.lease is not None:
            with _keeping_lease(state, store) as out:
                out.append(execute(stage, state, ctx))
            result = out[0]
        else:
            result = execute(stage, state, ctx)
    except Exception:
        _release_on_last_attempt(state, store)
        raise
    if stage.final and result.lease is not None:
        from neuronforge import leases

        leases.release(store, result.lease.lease())
    log.info("%s: %s", stage.name, result.summary())
    return result.model_dump(mode="json")


def _release_on_last_attempt(state: BuildState, store) -> None:
    """On the last attempt of a failed stage, release the run's compile lease so the next request
    for the key need not wait for it to expire."""
    if state.lease is None or not _final_attempt():
        return
    from neuronforge import leases

    try:
        current = leases.current(store, state.lease.key)
        # Ours if the holder matches (heartbeats moved its version past the state's).
        if current and current.holder == state.lease.holder:
            leases.release(store, current)
    except Exception as exc:
        log.warning("could not release the lease of %s: %s", state.lease.key[:12], exc)


def stage_task(stage: Stage, placement: Placement | None = None):
    """The TaskFlow task for one stage placed as its group's profiles place it: its queue, its pool
    (NeuronCores, only for a stage on a Neuron host), and (publish) its outlet."""
    placement = placement or Placement(None)

    def body(state: dict[str, Any]) -> dict[str, Any]:
        return run_stage_task(stage.name, state)

    body.__name__ = body.__qualname__ = stage.name
    body.__doc__ = stage.doc
    queue = placement.queue or DEFAULT_QUEUE
    options: dict[str, Any] = {"task_id": stage.name, "queue": queue, "show_return_value_in_logs": False}
    if placement.neuron_cores:
        options |= {"pool": POOL, "pool_slots": 1}  # sized per target by the cluster policy
    if stage.final:  # its result is the artifact: announce it as an Asset event
        return task(outlets=[ARTIFACTS_ALIAS], **options)(_with_asset_event(body))
    return task(**options)(body)


def _with_asset_event(body):
    def publish_artifact(state: dict[str, Any]) -> dict[str, Any]:
        """Publish (unless a hit) and emit the artifact's Asset event either way."""
        done = BuildState.model_validate(body(state))
        info = done.artifact
        assert info is not None and done.key is not None
        root = info.manifest_uri.rsplit("/", 1)[0]
        org, name = done.pinned_source().org_name
        asset = Asset(name=f"neuronforge/{org}/{name}/{done.target.slug}/{done.key[:12]}", uri=root)
        extra = {
            "cache_key": done.key,
            "manifest_uri": info.manifest_uri,
            "uris": info.uris,
            "status": "cache-hit" if done.hit is not None else "published",
        }
        get_current_context()["outlet_events"][ARTIFACTS_ALIAS].add(asset, extra=extra)
        log.info("%s %s: %s", extra["status"], done.target.slug, info.manifest_uri)
        return {"slug": done.target.slug, **extra}

    return publish_artifact


@task(show_return_value_in_logs=False)
def expand_targets(params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Validate the whole request (every target, its static plan) before any work: one build
    state per target."""
    conf: dict[str, Any]
    if params is None:
        from operators.compile_params import validate_conf

        context = get_current_context()
        conf = dict(context["dag_run"].conf or {})
        validate_conf(conf)  # without the cluster policy: refused here, before any work
        params = context["params"]
    else:
        conf = params
    model = params.get("model") or settings.DEFAULT_MODEL
    states, targets = [], []
    from neuronforge.profiles import get_profile, parse_target
    from operators.compile_params import requested_targets

    for raw in requested_targets(params, conf):
        target = parse_target(target_conf(raw, params))  # the edge: its profile pinned once
        targets.append(target)
        state = BuildState(
            model=model,
            target=target,
            store_uri=settings.store_uri(params.get("store")),
            prompts=list(params.get("prompts") or []),
            # as given: BuildState refuses 0, text or a value the sequence cannot hold (never "or 8")
            max_new_tokens=8 if params.get("max_new_tokens") is None else params["max_new_tokens"],
        )
        states.append(state.model_dump(mode="json"))
    from operators.deployment_checks import check_deployment

    neuron = [t for t in targets if get_profile(t.profile).neuron]  # pool + policy, before any lease or download
    check_deployment(needs_neuron=bool(neuron), max_tp=max((t.tp_degree for t in neuron), default=1))
    log.info(
        "%d target(s) of %s: %s",
        len(states),
        model,
        ", ".join(BuildState.model_validate(s).target.slug for s in states),
    )
    return states


def target_conf(raw: dict[str, Any], conf: dict[str, Any]) -> dict[str, Any]:
    """One target of a conf: its own `profile`, else the run's, else the form's default `cpu`."""
    return {**raw, "profile": raw.get("profile") or conf.get("profile") or "cpu"}


def queue_of(target: TargetSpec) -> str:
    """The queue of a target's toolchain (`neuron-compile-<sdk release>`, or default): it picks the
    target's task group."""
    from neuronforge.profiles import get_profile

    return get_profile(target.profile).queue or DEFAULT_QUEUE


def queues() -> list[str]:
    """Every toolchain queue a registered profile routes to: one task group each (read from the registry)."""
    from neuronforge.profiles import neuron_queues

    return [DEFAULT_QUEUE, *neuron_queues()]


def placements(queue: str) -> dict[str | None, Placement]:
    """Where each kind of stage of the group of toolchain queue `queue` runs. The profiles sharing a
    toolchain queue (one SDK release: one image) place every stage alike; a registry where they do
    not is refused here, so the DAG cannot route one profile's stage by another's placement."""
    from neuronforge.profiles import registry
    from neuronforge.profiles.base import STAGE_KINDS

    kinds: tuple[str | None, ...] = (None, *STAGE_KINDS)
    seen = {
        p.ref: {kind: p.placement(kind) for kind in kinds}
        for p in registry.all_profiles()
        if (p.queue or DEFAULT_QUEUE) == queue
    }
    distinct = {tuple(sorted(v.items(), key=lambda kv: str(kv[0]))) for v in seen.values()}
    if len(distinct) != 1:
        raise RuntimeError(
            f"profiles {sorted(seen)} share toolchain queue {queue!r} but place their stages differently"
        )
    return next(iter(seen.values()))


def tickets_for(queue: str):
    """The task that keeps a run's targets routed to `queue`, in the order of `conf["targets"]`."""

    @task(task_id=f"tickets_{group_id(queue).removesuffix('_target')}", show_return_value_in_logs=False)
    def tickets(states: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [s for s in states if queue_of(BuildState.model_validate(s).target) == queue]

    return tickets
