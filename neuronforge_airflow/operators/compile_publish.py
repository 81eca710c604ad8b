"""The `neuronforge_compile_publish` DAG's tasks, generated from the pipeline's one declaration
(`neuronforge.pipeline.runner.STAGES`, each declared in its stage module) by one task factory
(`stage_task`), each running its stage through the runner's `execute` and hooks. Only Airflow
concerns live here: the trigger's params become build states (`expand_targets`, which also reports the targets
already published and ends the run there when every target is), stage settings become queues
and pools, a failure becomes a retry or not (and releases the lease on the last attempt), and the publish
task emits the artifact's Asset event — and, when the run's `promote_to` names a release channel, promotes
the build there (`promote_if_asked`; a target already published is promoted by `expand_targets`). The
claim is a deferrable operator (neuronforge_airflow/operators/build_claim.py).

Tasks hand each other a `BuildState` as JSON: store references and small results, never a local
path; every task works in its own worker's NEURONFORGE_HOME (`settings.work_dir()`).
"""

from __future__ import annotations

import logging
import os
from typing import Any

from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import Asset, AssetAlias, SkipMixin, get_current_context, task
from airflow.sdk.bases.decorator import DecoratedOperator, task_decorator_factory
from airflow.sdk.bases.xcom import BaseXCom
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowTaskTerminated

from neuronforge.common import deployment_names as names
from neuronforge.common import interrupts, settings
from neuronforge.pipeline.buildstate import BuildState
from neuronforge.pipeline.hooks import LeaseKeeping, default_hooks
from neuronforge.pipeline.runner import STAGE_BY_NAME, execute
from neuronforge.pipeline.stage import Context, Stage
from neuronforge.profiles.base import Placement
from neuronforge.spec.target import TargetSpec
from neuronforge_airflow.hooks.store import store_uri as deployment_store
from neuronforge_airflow.operators.releases import CHANNELS_ALIAS
from neuronforge_airflow.policies.routing import DEFAULT_QUEUE, POOL, group_id

log = logging.getLogger(__name__)

ARTIFACTS_ALIAS = AssetAlias(name=names.ARTIFACTS_ALIAS)


def _store(state: BuildState):
    from neuronforge_airflow.hooks.store import open_store

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


def run_stage_task(name: str, payload: dict[str, Any]) -> dict[str, Any]:
    """The body of every generated task (also run inside a Kubernetes pod): one stage of the
    pipeline on this worker through the runner's `execute`, with the hooks the CLI uses (host timing,
    failure records) and the lease kept for this task only (`LeaseKeeping(hand_on=True)`)."""
    stage = STAGE_BY_NAME[name]
    state = BuildState.model_validate(payload)
    if state.hit is not None and stage.skip_on_hit:
        log.info("%s: cache hit, nothing to do (%s)", stage.name, state.hit.manifest_uri)
        return payload
    try:
        store = _store(state)
    except Exception as exc:
        failure = task_failure(exc, state)
        if failure is None:
            raise
        raise failure from None
    ctx = Context(store, settings.work_dir(), run_id=_run_id(), connections=hub_connection)
    # Heart-beaten while the stage works, checked before publishing, left held for the next task
    # (which renews it from the version the result carries), released after the final stage.
    hooks = (LeaseKeeping(hand_on=True), *default_hooks())
    try:
        # Airflow stops a task with SIGTERM (marked failed, cleared, the run stopped) and SIGKILL 5 s
        # later, its own handler leaving the task running: turned into `Interrupted`, the stage unwinds
        # (its toolchain children stopped), the lease is released (a retry could not renew it: its
        # heartbeats moved the version past the state's) and the task ends with one line.
        next_step = "its build lease is released"
        with interrupts.raising("the task", publishes=True, next_step=next_step) as doing, interrupts.stage(stage.name):
            result = execute(stage, state, ctx, hooks)
    except interrupts.Interrupted as exc:
        _release_on_last_attempt(state, store, final=True)
        line = doing.line(exc.signum)
        log.error("%s", line)
        raise AirflowTaskTerminated(line) from None
    except Exception as exc:
        failure = task_failure(exc, state)
        _release_on_last_attempt(state, store, final=isinstance(failure, AirflowFailException))
        if failure is None:
            raise  # not an explained failure: a bug, with its traceback
        raise failure from None
    log.info("%s: %s", stage.name, result.summary())
    return result.model_dump(mode="json")


def hub_connection(conn_id: str):  # -> HubCredentials | None
    """The Hub credentials of Airflow connection `conn_id` (host: the endpoint, password: the token),
    or None when Airflow has no such connection (the environment's HF_ENDPOINT / HF_TOKEN then)."""
    from airflow.sdk import BaseHook

    from neuronforge.artifacts.hub_registry import HubCredentials

    try:
        conn = BaseHook.get_connection(conn_id)
    except Exception:  # AirflowNotFoundException (or no connection backend reachable): the environment
        return None
    endpoint = None
    if conn.host:
        endpoint = conn.host if "://" in conn.host else f"{conn.schema or 'https'}://{conn.host}"
        if conn.port:
            endpoint = f"{endpoint.rstrip('/')}:{conn.port}"
    return HubCredentials(endpoint, conn.password or None, f"Airflow connection {conn_id}")


def task_failure(exc: BaseException, state: BuildState) -> AirflowException | None:
    """What a stage task raises for `exc`, by `errors.outcome` (the policy the CLI's exit codes
    follow): its one line (what failed, the resource, the fix: the message the CLI prints) in an
    `AirflowException`, retried as the task's `retries` say, when the error class (or the disk error)
    is retryable — it may pass on its own: an unreachable store endpoint or Hub, a lease taken over, a
    full disk —, else in an `AirflowFailException`, no retry, as a retry cannot change the outcome
    (bad input, a rejected checkpoint, a missing bucket, rejected credentials, a read-only disk). None
    for anything else: a bug keeps its traceback."""
    from neuronforge_airflow.operators.error_policy import failure

    def places() -> list:
        from neuronforge.stores import local_folder

        store = local_folder(state.store_uri)
        return [settings.work_dir(), *([store] if store else [])]

    return failure(exc, places)  # a plan's fixes in the form's words


def _release_on_last_attempt(state: BuildState, store, final: bool = False) -> None:
    """On the last attempt of a failed stage (or a failure no retry follows), release the run's
    compile lease so the next request for the key need not wait for it to expire."""
    if state.lease is None or not (final or _final_attempt()):
        return
    from neuronforge.artifacts import leases

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
    if stage.final:  # its result is the artifact: announce it as an Asset event (and its channel's, promoted)
        return task(outlets=[ARTIFACTS_ALIAS, CHANNELS_ALIAS], **options)(_with_asset_event(body))
    return task(**options)(body)


def _with_asset_event(body):
    def publish_artifact(state: dict[str, Any]) -> dict[str, Any]:
        """Publish (unless a hit) and emit the artifact's Asset event either way."""
        return emit_artifact_event(BuildState.model_validate(body(state)))

    return publish_artifact


def emit_artifact_event(done: BuildState) -> dict[str, Any]:
    """Add the Asset event of a build's artifact (published now, or a cache hit) to the running task's
    events on ARTIFACTS_ALIAS — one Asset per artifact root, `extra` = cache key, manifest URI,
    format URIs, status — and return what the task reports (the same, with the target's slug, and
    the `promotion` when the run asked for one)."""
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
    log.info("%s %s: %s", "cache hit" if done.hit is not None else "published", done.target.slug, info.manifest_uri)
    promotion = promote_if_asked(done)
    return {"slug": done.target.slug, **extra, **({"promotion": promotion} if promotion else {})}


def promote_if_asked(done: BuildState) -> dict[str, Any] | None:
    """The run's `promote_to`: point that channel of the build's model and profile line at the build
    (published now or before; the channel checks its smoke test, its manifest and, for `stable`, its
    approval). A refusal is reported (`refused`), never raised: the target's build is published
    either way, and its task succeeds. None when the run asked for no promotion."""
    context = get_current_context()
    channel = str(context["params"].get("promote_to") or "").strip()
    if not channel:
        return None
    from neuronforge_airflow.operators.releases import promote_published, triggered_by

    assert done.key is not None
    model = done.pinned_source().name  # a channel spans revisions: the model without one
    return promote_published(_store(done), model, done.target.profile, done.key, channel, triggered_by(context))


class RoutingTaskOperator(DecoratedOperator, PythonOperator, SkipMixin):
    """A TaskFlow task that branches: its function's result (the run's outcome, `build` listing the
    targets left to build) is its XCom; then it follows only the `tickets_*` tasks of the queues with
    a target left and skips every other task downstream — all of them when no target is left (the run
    succeeds with them skipped). Skipped at once, the tasks behind the tickets too (as
    `ShortCircuitOperator` does), rather than through their trigger rules one scheduler loop per level."""

    custom_operator_name = "@task"
    template_fields = ("templates_dict", "op_args", "op_kwargs")
    inherits_from_skipmixin = True

    def __init__(self, *, python_callable, op_args, op_kwargs, **kwargs) -> None:
        upstream = {"python_callable": python_callable, "op_args": op_args, "op_kwargs": op_kwargs}
        super().__init__(kwargs_to_upstream=upstream, **upstream, **kwargs)

    def execute(self, context: Any) -> None:
        outcome = super().execute(context)
        # Pushed first: skipping ends the task (Airflow raises to skip) before a return value is pushed.
        context["ti"].xcom_push(BaseXCom.XCOM_RETURN_KEY, outcome)
        left = {queue_of(BuildState.model_validate(s).target) for s in outcome["build"]}
        follow = {tickets_task_id(q) for q in queues() if q in left}
        for task_id in list(follow):
            follow |= self.dag.get_task(task_id).get_flat_relative_ids(upstream=False)
        skip = [t for t in self.get_flat_relatives(upstream=False) if t.task_id not in follow]
        log.info("following %s; skipping %d task(s)", sorted(t for t in follow if t.startswith("tickets_")), len(skip))
        self.skip(context["ti"], skip)


def routing_task(**kwargs: Any):
    """`@routing_task(...)`: like `@task(...)`, as a `RoutingTaskOperator`."""
    return task_decorator_factory(decorated_operator_class=RoutingTaskOperator, **kwargs)


@routing_task(outlets=[ARTIFACTS_ALIAS, CHANNELS_ALIAS], show_return_value_in_logs=False)
def expand_targets(params: dict[str, Any] | None = None) -> dict[str, Any]:
    """Validate the whole request (every target, its static plan) before any work; then look each
    target up, once, in the store's index: a target already published is reported here ("cache hit"
    and its manifest URI; its Asset event emitted, and with `promote_to` the build promoted, by this
    task) and goes no further. Returns `targets` (per target, in the request's order: the hit's
    report, or `to build` and its task group) and `build` (the build states of the others, which the
    `tickets_*` tasks route)."""
    conf: dict[str, Any]
    if params is None:
        from neuronforge_airflow.params import validate_conf

        context = get_current_context()
        conf = dict(context["dag_run"].conf or {})
        validate_conf(conf)  # without the cluster policy: refused here, before any work
        params = context["params"]
    else:
        conf = params
    model = params.get("model") or settings.DEFAULT_MODEL
    states: list[BuildState] = []
    from neuronforge.profiles import parse_target
    from neuronforge_airflow.params import requested_targets

    for raw in requested_targets(params, conf):
        target = parse_target(target_conf(raw, params))  # the edge: its profile pinned once
        state = BuildState(
            model=model,
            target=target,
            store_uri=deployment_store(params.get("store")),
            prompts=list(params.get("prompts") or []),
            # as given: BuildState refuses 0, text or a value the sequence cannot hold (never "or 8")
            max_new_tokens=8 if params.get("max_new_tokens") is None else params["max_new_tokens"],
            hub_registry=params.get("hub_registry") or None,
        )
        states.append(state)
    _warn_shared_channel(params.get("promote_to"), states)
    report, build = [], []
    for state in _looked_up(states):
        if state.hit is not None:
            _note_unregistered(state)
            report.append(emit_artifact_event(state))
        else:
            build.append(state)
            report.append({"slug": state.target.slug, "status": "to build", "group": group_id(queue_of(state.target))})
    from neuronforge_airflow.policies.deployment_checks import check_deployment

    # pool + policy for the Neuron targets left to build, before any lease or download
    neuron = [s.target for s in build if s.profile.neuron]
    check_deployment(needs_neuron=bool(neuron), max_tp=max((t.tp_degree for t in neuron), default=1))
    log.info(
        "%d target(s) of %s: %d cache hit(s), %d to build%s",
        len(states),
        model,
        len(states) - len(build),
        len(build),
        "".join(f"; {r['slug']} {r['status']}" for r in report),
    )
    return {"targets": report, "build": [s.model_dump(mode="json") for s in build]}


def _note_unregistered(state: BuildState) -> None:
    """A hit the run asks to register in a repository its manifest does not name: said in the task log."""
    if not state.hub_registry or state.hit is None:
        return
    from neuronforge.artifacts.layout import ARTIFACT_MANIFEST
    from neuronforge.artifacts.published import read_manifest
    from neuronforge.pipeline.stages.register import hit_note

    try:
        note = hit_note(state, read_manifest(_store(state), f"{state.hit.prefix}/{ARTIFACT_MANIFEST}"))
    except Exception as exc:  # the warning is advisory: the hit stands
        note = f"{state.target.slug}: could not read {state.hit.manifest_uri} to tell where it is registered ({exc})"
    if note:
        log.warning("%s", note)


def _warn_shared_channel(channel: str | None, states: list[BuildState]) -> None:
    """A channel points to one build per model and profile line: with `promote_to`, several targets of
    one line each move it, and it ends at whichever publishes last (every move is in its history)."""
    lines: dict[str, list[str]] = {}
    for s in states:
        lines.setdefault(s.target.profile.partition("@")[0], []).append(s.target.slug)
    for line, slugs in sorted(lines.items()) if channel else ():
        if len(slugs) > 1:
            log.warning(
                "promote_to %s: %d targets of profile line %s (%s) each move it; it ends at the last one published",
                channel, len(slugs), line, ", ".join(slugs),
            )  # fmt: skip


def _looked_up(states: list[BuildState]) -> list[BuildState]:
    """Each target with its source pinned (once per model) and, when the store's index has it, its
    hit (`pipeline.find_published`: one lookup). Whatever fails here (an unreachable store, a source
    that cannot be pinned) is left to the target's own `prepare`, which reports it."""
    from neuronforge.pipeline.buildstate import SourcePin
    from neuronforge.pipeline.stages.prepare import find_published
    from neuronforge.pipeline.stages.resolve import resolve_source

    work_dir = settings.work_dir()
    pins: dict[tuple[str, bool], SourcePin | None] = {}
    stores: dict[str, Any] = {}
    out = []
    for state in states:
        model = (state.model, state.allow_pickle)
        if model not in pins:
            try:
                pinned = resolve_source(state.model, work_dir=work_dir, allow_pickle=state.allow_pickle)
                pins[model] = SourcePin.of(pinned)
            except Exception as exc:
                log.info("%s not pinned here (%s); each target's prepare pins it", state.model, exc)
                pins[model] = None
        if pins[model] is not None:
            state = state.model_copy(update={"source": pins[model]})
        try:
            store = stores.get(state.store_uri) or stores.setdefault(state.store_uri, _store(state))
            found = find_published(state, store, work_dir)
        except Exception as exc:
            log.info("%s: not looked up here (%s); its prepare looks it up", state.target.slug, exc)
            found = None
        out.append(found[0] if found is not None else state)
    return out


def target_conf(raw: dict[str, Any], conf: dict[str, Any]) -> dict[str, Any]:
    """One target of a conf: its own `profile`, else the run's, else the form's default `cpu`."""
    return {**raw, "profile": raw.get("profile") or conf.get("profile") or "cpu"}


def queue_of(target: TargetSpec) -> str:
    """The queue of a target's toolchain (`neuron-compile-<sdk release>`, or default): it picks the
    target's task group."""
    from neuronforge.profiles.registry import profile_of

    return profile_of(target).queue or DEFAULT_QUEUE


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


def tickets_task_id(queue: str) -> str:
    """`tickets_cpu`, `tickets_neuron_2_26_1`, …: the task routing a run's targets to `queue`'s group."""
    return f"tickets_{group_id(queue).removesuffix('_target')}"


def tickets_for(queue: str):
    """The task that keeps the run's targets left to build routed to `queue`, in the order of
    `conf["targets"]` (it runs only when there is one: `expand_targets` skips it otherwise)."""

    @task(task_id=tickets_task_id(queue), show_return_value_in_logs=False)
    def tickets(outcome: dict[str, Any]) -> list[dict[str, Any]]:
        return [s for s in outcome["build"] if queue_of(BuildState.model_validate(s).target) == queue]

    return tickets
