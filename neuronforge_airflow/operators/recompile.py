"""Tasks of the `neuronforge_recompile_on_upgrade` DAG: thin translations between Airflow and
`neuronforge.farm.recompile` (the stale set, run requests, settling, the report).

State travels as one JSON dict, "the plan": the catalog, the store, the toolchains the workers of
each profile version's queue reported, every catalog target's state, and the compile runs to trigger.

Neuron profiles detect their toolchain on one queue per SDK release (`neuron-compile-<release>`, the
CPU workers of that release's image; `neuron-<release>` where compiling needs a device), so there is
one toolchain watch per toolchain queue (`watch_toolchain_neuron_compile_2_26_1`, ...), on that queue:
it detects the toolchain of every profile routed there and checks it against the profile's pins.
The cpu profile's toolchain is this worker's, detected by `find_stale` on the default queue.

Kept builds: a published target the upgrade keeps with decision `re-smoke` is smoked at the release and
attested, never rebuilt: on the default queue by `attest_kept_default` (a profile that reads no Neuron
SDK, e.g. cpu), on the Neuron hosts of the release the run aims at by `attest_kept_neuron` — queue
`neuron-<release>` (`recompile.attest_queue`) whatever the release is: one registered with a profile,
one only the release table knows, one accepted from the feed. Airflow copies a task's declared queue to
each instance it creates, and the release is known only once `find_stale` has decided, so
`attest_kept_neuron` is mapped over what `route_attests` returns (the Neuron queues with kept builds and
a worker) and the cluster policy puts each instance on its queue as the scheduler expands it
(`neuronforge_airflow.policies.routing`). A queue no worker consumes is not attested on: the report
says, for each build no task attested, why and the command.

Release channels: every rebuild run promotes what it publishes to the `candidate` channel of its model
and profile line (the compile DAG's `promote_to`), and the report says, per model and profile line,
what `stable` still points to (one GET of that channel each) — so whoever approves the rebuilt build
sees what a promotion would replace.

Without a Neuron worker the run decides in seconds: `check_workers` (default queue) asks Celery
which queues have consumers and skips the watch of every queue the catalog needs that nobody
consumes (and of every queue it does not need), instead of leaving it queued until the scheduler's
`task_queued_timeout` (10 min, re-queued twice: about 30 min).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk import Asset, get_current_context, task
from airflow.sdk.exceptions import AirflowSkipException

from neuronforge.common import deployment_names as names
from neuronforge.common import settings
from neuronforge.profiles import ServingProfile, neuron_queues, registry
from neuronforge_airflow.hooks.store import store_uri as deployment_store
from neuronforge_airflow.operators.base import NeuronforgeOperator
from neuronforge_airflow.operators.kubernetes import image_for, pod_settings, release_of, runner
from neuronforge_airflow.params import validate_recompile_conf
from neuronforge_airflow.policies.routing import (
    ATTEST_ROUTE_TASK,
    DEFAULT_QUEUE,
    NEURON_ATTEST_TASK,
    UNROUTED_QUEUE,
)

# the trigger's classpath before it moved to triggers/: a task deferred by an earlier release is stored with it
from neuronforge_airflow.triggers.rebuilds_settled import RebuildsSettledTrigger, settle_states

if TYPE_CHECKING:
    from neuronforge.farm.recompile import TargetState
    from neuronforge.stores import ArtifactStore

log = logging.getLogger(__name__)

REPORT_ASSET = Asset(name=names.REPORT_ASSET)
CATALOG_VARIABLE = names.CATALOG_VARIABLE
# Rebuild runs of the compile DAG in flight at once when throttled (the compile DAG's
# max_active_runs is 4: the other slots stay free for manual runs).
REBUILD_SLOTS = 2
WORKERS_XCOM = "workers"
# The fan-out of rebuilds: `rebuild_runs` lists them, `trigger_rebuilds` (mapped, index i = plan["runs"][i])
# starts each compile run; the DAG file names the mapped task with this id.
RUNS_TASK, TRIGGER_TASK = "rebuild_runs", "trigger_rebuilds"
FAILED_STATES = ("failed", "upstream_failed")
# Where each rebuild run promotes what it publishes (`promote_to` of the compile DAG), and the channel
# the report reads for each model and profile line: what deployments run.
REBUILD_CHANNEL = "candidate"
SERVING_CHANNEL = "stable"


def catalog_path(explicit: str | None = None) -> Path:
    """The run's `catalog` param, else the Airflow Variable `neuronforge_catalog`, else
    NEURONFORGE_CATALOG, else the repository's catalog/models.yaml. None and "" mean unset."""
    from neuronforge.farm.catalog import default_path

    if explicit:
        return Path(explicit)
    from airflow.sdk import Variable

    try:
        value = Variable.get(CATALOG_VARIABLE, default=None)
    except Exception:  # no Variable backend reachable (e.g. outside a task): fall through
        value = None
    return Path(value) if value else default_path()


def default_executor() -> str:
    """The class name of the deployment's default executor (`[core] executor`, first entry; an
    `alias:module.Class` entry gives `Class`), which runs tasks that name no executor."""
    from airflow.configuration import conf

    first = (conf.get("core", "executor", fallback="") or "LocalExecutor").split(",")[0].strip()
    return first.split(":")[-1].rsplit(".", 1)[-1]


def celery_active_queues(timeout: float = 5.0) -> dict[str, list[dict[str, Any]]] | None:
    """Celery's answer to "which queues does each worker consume" (None: no worker answered)."""
    from airflow.providers.celery.executors.celery_executor import app

    return app.control.inspect(timeout=timeout).active_queues()


def queue_served(executor: str, active_queues: Any, queue: str, pod_image: str | None = None) -> tuple[bool, str]:
    """Whether a task on `queue` can start, and why. Only Celery routes by queue: every other
    executor (Local, Kubernetes, ...) runs a task whatever its queue, and with
    NEURONFORGE_NEURON_RUNNER=kubernetes the queue's watch is a pod of `pod_image`, not a task on
    the queue. `active_queues` is Celery's inspect answer, or the exception asking raised (then the
    queue is assumed served, and the watch's own timeouts bound the wait)."""
    if pod_image is not None:
        return True, f"NEURONFORGE_NEURON_RUNNER=kubernetes: a pod of {pod_image} runs its watch, no worker needed"
    if "Celery" not in executor:
        return True, f"{executor} runs tasks of every queue"
    if isinstance(active_queues, BaseException):
        return True, f"could not ask Celery which queues have workers ({active_queues}); trying queue {queue!r}"
    if not active_queues:
        return False, f"no Celery worker answered, so nothing consumes queue {queue!r}"
    consumers = sorted(w for w, qs in active_queues.items() if any(q.get("name") == queue for q in qs or []))
    if consumers:
        return True, f"queue {queue!r} is consumed by {', '.join(consumers)}"
    seen = "; ".join(
        f"{w}: {', '.join(sorted(q.get('name', '?') for q in qs or [])) or 'none'}"
        for w, qs in sorted(active_queues.items())
    )
    return False, f"no Celery worker consumes queue {queue!r} (workers and their queues: {seen})"


def watch_task_id(queue: str) -> str:
    """The toolchain watch of a Neuron queue: `watch_toolchain_neuron_2_26_1`, ..."""
    return "watch_toolchain_" + queue.replace("-", "_").replace(".", "_")


def profiles_on(queue: str) -> list[ServingProfile]:
    """The registered profile versions whose compile and smoke tasks go to `queue`."""
    return [p for p in registry.all_profiles() if p.queue == queue]


def needed_queues(explicit_catalog: str | None, release: str | None = None, migrate: bool = False) -> list[str]:
    """The Neuron queues the catalog's profile versions need at SDK `release` (with `migrate`, the
    migrations' too); every registered one when the catalog cannot be read (`find_stale` then fails
    on it with its problems, scheduling nothing)."""
    from neuronforge.farm import recompile
    from neuronforge.farm.catalog import load_catalog

    try:
        catalog = load_catalog(catalog_path(explicit_catalog))
    except Exception as exc:  # missing file, unreadable: find_stale reports it
        log.info("catalog unreadable (%s): checking every Neuron queue", exc)
        return neuron_queues()
    return recompile.queues_of(catalog, release, migrate) if catalog.ok else neuron_queues()


def aimed_release(params: dict[str, Any]) -> str:
    """The SDK release the run upgrades to: the form's `sdk`, else the newest the profile data knows
    (a malformed one is refused with one line by `upgrades.target_release`)."""
    from neuronforge.farm.upgrades import target_release

    return target_release(params.get("sdk"))


@task.branch
def check_workers(params: dict[str, Any] | None = None) -> list[str]:
    """On the default queue, first: refuse a conf with unknown keys, then decide, for every Neuron
    queue a profile version of the catalog needs, whether a worker consumes it. The watch of a queue
    nobody consumes is skipped (never queued) and its profiles' targets are reported unavailable with
    the reason; the watches of queues the catalog does not need are skipped too. The cpu targets are
    checked either way."""
    context = get_current_context()
    validate_recompile_conf(context["dag_run"].conf)
    params = params or context["params"]
    queues = needed_queues(params.get("catalog"), aimed_release(params), bool(params.get("migrate")))
    pods = runner() == "kubernetes"  # the watches are pods: no Celery worker of a Neuron queue to ask about
    workers = served_queues(queues, lambda q: image_for(release_of(q)) if pods else None)
    context["ti"].xcom_push(key=WORKERS_XCOM, value=workers)
    return [watch_task_id(q) for q, w in workers.items() if w["served"]] + ["find_stale"]


def served_queues(queues: list[str], pod_image: Callable[[str], str | None] | None = None) -> dict[str, dict[str, Any]]:
    """Queue -> {"served": whether a task on it can start, "detail": why} (`queue_served`), Celery asked
    once for all of them; `pod_image(queue)`: the image of the pod that runs the queue's task instead
    (NEURONFORGE_NEURON_RUNNER=kubernetes), or None."""
    executor = default_executor()
    images = {q: pod_image(q) if pod_image else None for q in queues}
    answer: Any = None
    if "Celery" in executor and any(image is None for image in images.values()):
        try:
            answer = celery_active_queues()
        except Exception as exc:  # broker unreachable, provider missing: let the tasks try
            answer = exc
    out: dict[str, dict[str, Any]] = {}
    for queue in queues:
        served, detail = queue_served(executor, answer, queue, images[queue])
        log.info("queue %s: %s", queue, detail)
        out[queue] = {"served": served, "detail": detail}
    return out


def detect_on(queue: str) -> dict[str, Any]:
    """Where the toolchain of `queue`'s SDK image is (a worker of the queue, or a pod of its image):
    the toolchain of every profile version routed there, as its backend detects it, or why it cannot
    be used (not installed, or not the profile's pins: the consumer checks those versions at load,
    so a rebuild with another toolchain is useless)."""
    from neuronforge.farm import recompile

    found = recompile.detect_toolchains(profiles_on(queue), f"on the workers of queue {queue!r}")
    for ref, tc in found.items():
        log.info("%s: %s", ref, tc if isinstance(tc, str) else f"{tc.backend} {tc.backend_version}, "
                 f"{tc.compiler} {tc.compiler_version}")  # fmt: skip
    return {ref: tc if isinstance(tc, str) else tc.to_json() for ref, tc in found.items()}


def _watch_pod(queue: str) -> dict[str, Any]:
    # `@task.kubernetes` runs this function's own source in the pod: no closures, imports inside.
    from neuronforge_airflow.operators.recompile import detect_on

    return detect_on(queue)


def watch_toolchain(queue: str):
    """The watch task of one Neuron queue (call it in the DAG: one per `neuron_queues()`): a task on
    that queue, or with NEURONFORGE_NEURON_RUNNER=kubernetes a CPU pod of the queue's SDK image (as
    the compile DAG's `prepare` is), so no Celery worker of a Neuron queue is needed."""
    options: dict[str, Any] = {"task_id": watch_task_id(queue), "retries": 0, "execution_timeout": timedelta(minutes=5)}
    if runner() == "kubernetes":
        pod = pod_settings(watch_task_id(queue), release_of(queue), neuron_cores=False)
        return task.kubernetes(**options, **pod)(_watch_pod)(queue)

    @task(queue=queue, **options)
    def watch() -> dict[str, Any]:
        """On a worker of this queue: what `detect_on` finds there."""
        return detect_on(queue)

    return watch()


def _queue_reports(ti: Any, profiles: list[ServingProfile]) -> dict[str, Any]:
    """Profile ref -> what the watch of its queue reported (toolchain JSON or why not), or, when the
    watch reported nothing (skipped: no worker; failed: e.g. the queued-task timeout), why."""
    from neuronforge.farm import recompile

    workers = ti.xcom_pull(task_ids="check_workers", key=WORKERS_XCOM) or {}
    out: dict[str, Any] = {}
    for queue in sorted({p.queue for p in profiles if p.queue}):
        found = ti.xcom_pull(task_ids=watch_task_id(queue)) or {}
        checked = workers.get(queue) or {}
        for profile in (p for p in profiles if p.queue == queue):
            if profile.ref in found:
                out[profile.ref] = found[profile.ref]
            elif checked.get("served") is False:
                out[profile.ref] = recompile.no_worker(profile, checked["detail"])
            else:
                out[profile.ref] = recompile.no_worker(profile, f"{watch_task_id(queue)} did not succeed")
    return out


@task
def sync_releases(params: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """Beside the worker check, before deciding: the release feed's sync from the store's mirror of
    AWS's release manifest (`release_feed.sync_mirror`; none mirrored: nothing), so the report names
    every release proposed and waiting for review. It never fails the run: a failing sync is reported."""
    from neuronforge.farm import release_feed
    from neuronforge_airflow.hooks.store import open_store

    params = params or get_current_context()["params"]
    try:
        feed = release_feed.sync_mirror(open_store(params.get("store")))
    except Exception as exc:  # a store that cannot be read, or anything else: said, never the run's failure
        log.warning("release feed: the sync failed: %s", exc)
        return {"manifest": "", "proposed": [], "problem": f"the sync failed: {exc}"}
    for line in (feed or {}).get("synced", []) + (feed or {}).get("proposed", []):
        log.info("release feed: %s", line)
    if feed and feed["problem"]:
        log.warning("release feed: %s", feed["problem"])
    return feed


@task(trigger_rule="all_done")
def find_stale(params: dict[str, Any] | None = None, feed: dict[str, Any] | None = None) -> dict[str, Any]:
    """Validate the catalog (a bad catalog schedules nothing), then every entry × target's key for
    the profile version it resolves to, under the toolchain the workers of that version's queue
    reported, and whether it is published. Runs even when a Neuron queue's watch did not report
    (no worker, or the scheduler's queued-task timeout): that queue's targets are then reported
    `unavailable` and the others are still kept current."""
    from neuronforge.common.errors import InvalidInput
    from neuronforge.farm.catalog import check_catalog
    from neuronforge.farm.release_feed import known_table
    from neuronforge.profiles.sdk_releases import in_effect
    from neuronforge_airflow.hooks.store import open_store

    context = get_current_context()
    validate_recompile_conf(context["dag_run"].conf)  # check_workers failed on it too
    params = params or context["params"]
    path = catalog_path(params.get("catalog"))
    catalog = check_catalog(path)
    for note in catalog.notes:
        log.info("catalog: %s", note)
    if not catalog.ok:
        raise InvalidInput(f"catalog {path} has problems; nothing scheduled:\n" + "\n".join(catalog.problems))
    store_uri = deployment_store(params.get("store"))
    store = open_store(store_uri)
    with in_effect(known_table(store)):  # the table's releases and the store's accepted ones
        return _find_stale(context, params, path, catalog, store, store_uri, feed)


def _find_stale(
    context: Any, params: dict[str, Any], path: Path, catalog: Any, store: ArtifactStore, store_uri: str, feed: Any
) -> dict[str, Any]:
    from neuronforge.farm import recompile
    from neuronforge.spec.toolchain import Toolchain

    release, migrate = aimed_release(params), bool(params.get("migrate"))
    profiles = recompile.profiles_of(catalog, release, migrate)
    reported = _queue_reports(context["ti"], [p for p in profiles if p.queue])
    # The cpu profile compiles on the default queue: its toolchain is this worker's.
    local = recompile.detect_toolchains([p for p in profiles if not p.queue], "on the default queue's worker")
    reported.update({ref: tc if isinstance(tc, str) else tc.to_json() for ref, tc in local.items()})
    toolchains: dict[str, Toolchain | str] = {
        ref: Toolchain.from_json(v) if isinstance(v, dict) else v for ref, v in reported.items()
    }
    for ref, tc in sorted(reported.items()):
        if isinstance(tc, str):
            log.warning("%s: %s; its targets are unavailable", ref, tc)
    states = recompile.find_stale(catalog, toolchains, store, settings.work_dir(), release, migrate)
    stamp = recompile.stamp_of(context.get("logical_date") or context["dag_run"].run_after)
    runs, attests = [], {}
    if not params.get("dry_run"):
        runs = recompile.run_requests(states, store_uri, f"recompile__{stamp}", max_map_length())
        attests = recompile.attest_plan(states, release)
    log.info("%s", recompile.summary_line(release, states))  # first: at farm scale the rows run to thousands
    for s in states:
        log.info("%-11s %s %s %s %s", s.outcome or s.status, s.source, s.slug, s.profile, s.key[:12] or s.detail)
    for line in recompile.upgrade_lines(states):
        log.info("upgrade to SDK %s: %s", release, line)
    return {
        "release": release,
        "stamp": stamp,
        "catalog": str(path),
        "store_uri": store_uri,
        "toolchains": reported,
        "sdk": _with_feed(recompile.sdk_release_status(store, recompile.newest_compiler(reported)), feed),
        "states": [s.to_json() for s in states],
        "runs": runs,
        "attests": attests,  # queue -> the rows whose kept build its attest task smokes
    }


def max_map_length() -> int:
    """Airflow's `[core] max_map_length` (1 024 by default): a mapped task of more items fails the run
    (the API server refuses the upstream's XCom), so the rebuild triggers are at most that many."""
    from airflow.configuration import conf

    return conf.getint("core", "max_map_length", fallback=1024)


def _with_feed(sdk: dict[str, Any] | None, feed: dict[str, Any] | None) -> dict[str, Any] | None:
    """The report's SDK section with the release feed's sync in it (`recompile.feed_markdown`)."""
    if feed is None:
        return sdk
    return {**(sdk or {"problem": "no release manifest is mirrored in the store"}), "feed": feed}


@task(task_id=RUNS_TASK)
def rebuild_runs(plan: dict[str, Any], params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The compile runs to trigger, in catalog order (the order the scheduler will start them in), each
    promoting what it publishes to REBUILD_CHANNEL. Throttled (the default), each trigger waits,
    deferred, for its run to end, and at most REBUILD_SLOTS triggers are in flight: the rest of the
    compile DAG's run slots stay free."""
    from neuronforge.farm import recompile

    throttle = bool((params or get_current_context()["params"]).get("throttle_rebuilds", True))
    for run in plan["runs"]:
        log.info("%s: %s, %d target(s)", run["trigger_run_id"], run["conf"]["model"], len(run["conf"]["targets"]))
    if throttle and plan["runs"]:
        log.info("throttled: at most %d rebuild run(s) in flight at once", REBUILD_SLOTS)
    waiting = sum(s["outcome"] == recompile.WAITING for s in plan["states"])
    if waiting:
        log.info("%d stale target(s) wait for the next recompile run: [core] max_map_length", waiting)
    return [
        {**run, "conf": {**run["conf"], "promote_to": REBUILD_CHANNEL}, "wait_for_completion": throttle}
        for run in plan["runs"]
    ]


ATTESTS_XCOM = "attest_queues"
DEFAULT_ATTEST_TASK = "attest_kept_default"


def _untriggered(ti: Any, plan: dict[str, Any], states: list[TargetState]) -> None:
    """Rows whose compile run was never started because the task that lists or triggers it failed: FAILED,
    naming that task (its log says why) — not "not started yet", which would let the run end green with
    nothing rebuilt. A row whose run the store shows started keeps what the store says. The task states
    come from the Task SDK (`get_task_states`: a worker has no metadata DB); unreadable, nothing changes."""
    from neuronforge.farm import recompile

    if not plan["runs"]:
        return
    try:
        found = ti.get_task_states(dag_id=ti.dag_id, task_ids=[RUNS_TASK, TRIGGER_TASK], run_ids=[ti.run_id])
        tasks = found.get(ti.run_id) or {}
    except Exception:  # the report is written whatever the API says
        log.warning("could not read the states of %s / %s", RUNS_TASK, TRIGGER_TASK, exc_info=True)
        return
    why: dict[str, str] = {}
    for i, run in enumerate(plan["runs"]):
        if tasks.get(RUNS_TASK) in FAILED_STATES:
            why[run["trigger_run_id"]] = f"task {RUNS_TASK} {tasks[RUNS_TASK]}"
        elif (state := tasks.get(f"{TRIGGER_TASK}_{i}")) in FAILED_STATES:
            why[run["trigger_run_id"]] = f"task {TRIGGER_TASK}[{i}] {state}"
    for s in states:
        if s.run_id in why and s.outcome == recompile.QUEUED:
            s.outcome = recompile.FAILED
            s.outcome_detail = f"its compile run {s.run_id} was not started: {why[s.run_id]} (its log says why)"


@task(task_id=ATTEST_ROUTE_TASK)
def route_attests(plan: dict[str, Any]) -> list[str]:
    """On the default queue, after `find_stale`: which attests run. The queues with kept builds to attest
    (`plan["attests"]`: the default queue, and `neuron-<release>` of the release the run aims at) are
    asked whether a worker consumes them (`served_queues`, as `check_workers` asks); why one is not served
    goes to the report, which marks its builds to attest by hand, with the command. Returns the Neuron
    queues to attest on — what `attest_kept_neuron` is mapped over, each instance put on its queue by the
    cluster policy (none: the task is skipped, never queued). With NEURONFORGE_NEURON_RUNNER=kubernetes a
    Neuron queue's attest has no pod yet, and without the cluster policy (the deployment's
    airflow_local_settings, as the compile DAG's run-start check asks) nothing would put it on its queue:
    each said the same way, never left to wait on `neuron-unrouted`."""
    from neuronforge_airflow.policies.deployment_checks import policy_loaded, policy_missing

    queues = [q for q, rows in plan["attests"].items() if rows]
    pods = runner() == "kubernetes"
    routed = pods or policy_loaded()
    served = served_queues([q for q in queues if q == DEFAULT_QUEUE or (routed and not pods)])
    for q in queues:
        if pods and q != DEFAULT_QUEUE:
            served[q] = {"served": False, "detail": "NEURONFORGE_NEURON_RUNNER=kubernetes: no attest pod yet"}
        elif not routed and q != DEFAULT_QUEUE:
            served[q] = {"served": False, "detail": policy_missing(f"the Neuron attest could not be put on queue {q}")}
    get_current_context()["ti"].xcom_push(key=ATTESTS_XCOM, value=served)
    return sorted(q for q, w in served.items() if w["served"] and q != DEFAULT_QUEUE)


def attest_on(queue: str, plan: dict[str, Any]) -> dict[str, list[str]]:
    """On a worker of `queue`: the kept builds the plan routes there, each smoked at the plan's release
    against its published artifact and its attestation recorded (`recompile.attest_kept`, as the CLI
    does); row -> [outcome, detail]."""
    from neuronforge.farm import recompile
    from neuronforge.farm.release_feed import known_table
    from neuronforge.profiles.sdk_releases import in_effect
    from neuronforge_airflow.hooks.store import open_store

    rows = set(plan["attests"].get(queue, []))
    states = [recompile.TargetState.from_json(s) for s in plan["states"] if s["order"] in rows]
    store = open_store(plan["store_uri"])
    with in_effect(known_table(store)):  # an accepted release is in effect here as where it was decided
        recompile.attest_kept(store, states, plan["release"], settings.work_dir())
    for st in states:
        log.info("%s %s %s: %s (%s)", st.source, st.slug, st.key[:12], st.outcome, st.outcome_detail)
    return {str(st.order): [st.outcome, st.outcome_detail] for st in states}


@task(task_id=DEFAULT_ATTEST_TASK, queue=DEFAULT_QUEUE, retries=0)
def attest_kept_default(plan: dict[str, Any]) -> dict[str, list[str]]:
    """On the default queue, after `route_attests`: the kept builds of profiles that read no Neuron SDK
    (cpu), smoked and attested at the run's release (`attest_on`); skipped when there are none."""
    if not plan["attests"].get(DEFAULT_QUEUE):
        raise AirflowSkipException("no kept build of a profile without a Neuron SDK to attest")
    return attest_on(DEFAULT_QUEUE, plan)


@task(task_id=NEURON_ATTEST_TASK, queue=UNROUTED_QUEUE, retries=0)
def attest_kept_neuron(hosts: str, plan: dict[str, Any]) -> dict[str, list[str]]:
    """On a Neuron host of the run's release (`hosts`: their queue, `neuron-<release>`, where the cluster
    policy puts each instance): its kept builds smoked and attested (`attest_on`). Call it mapped over what
    `route_attests` returned: `attest_kept_neuron.partial(plan=plan).expand(hosts=route_attests(plan))`."""
    return attest_on(hosts, plan)


def _attest_results(ti: Any, plan: dict[str, Any]) -> dict[str, dict[str, list[str]]]:
    """Queue -> what its attest returned (row -> [outcome, detail]); a queue whose attest did not run
    or not succeed is absent."""
    out = {DEFAULT_QUEUE: ti.xcom_pull(task_ids=DEFAULT_ATTEST_TASK) or {}}
    for index, queue in enumerate(ti.xcom_pull(task_ids=ATTEST_ROUTE_TASK) or []):
        out[queue] = ti.xcom_pull(task_ids=NEURON_ATTEST_TASK, map_indexes=index) or {}
    return out


def _attested(ti: Any, plan: dict[str, Any], states: list[TargetState]) -> None:
    """Each kept build's attest outcome, as its queue's attest returned it; a build whose attest did not
    run or not succeed (its queue unserved, the task failed) is marked to attest by hand, why said."""
    from neuronforge.farm import recompile

    by_order = {s.order: s for s in states}
    served = ti.xcom_pull(task_ids=ATTEST_ROUTE_TASK, key=ATTESTS_XCOM) or {}
    results = _attest_results(ti, plan)
    for queue, rows in (plan.get("attests") or {}).items():
        done = results.get(queue) or {}
        checked = served.get(queue) or {}
        task_id = DEFAULT_ATTEST_TASK if queue == DEFAULT_QUEUE else f"{NEURON_ATTEST_TASK} on queue {queue!r}"
        why = checked["detail"] if checked.get("served") is False else f"{task_id} did not succeed"
        for order in rows:
            s = by_order[order]
            if str(order) in done:
                s.outcome, s.outcome_detail = done[str(order)]
            else:
                recompile.leave_to_attest(s, plan["release"], plan["store_uri"], why)


def poll_s() -> float:
    """How often the wait looks at the triggered rebuilds (NEURONFORGE_RECOMPILE_POLL_S, default 60 s)."""
    from neuronforge.common import settings

    return settings.current().recompile_poll_s


class AwaitRebuildsOperator(NeuronforgeOperator):
    """Waits, deferred (no worker slot held), until the triggered rebuilds have all ended or
    `wait_minutes` passed; what is still running then is reported as such."""

    template_fields = ("plan", "wait_minutes")

    def __init__(self, *, plan: Any, wait_minutes: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.plan, self.wait_minutes = plan, wait_minutes

    def run(self, context: Any) -> None:
        done, _ = settle_states(self.plan["store_uri"], self.plan["states"])
        minutes = float(self.wait_minutes or 0)
        if done or minutes <= 0 or not self.plan["runs"]:
            return
        deadline = time.time() + minutes * 60
        log.info("waiting up to %.0f min for %d rebuild run(s)", minutes, len(self.plan["runs"]))
        self.defer(
            trigger=RebuildsSettledTrigger(self.plan["store_uri"], self.plan["states"], deadline, poll_s()),
            method_name="resume",
        )

    def resume(self, context: Any, event: dict[str, Any] | None = None) -> None:
        if event and not event.get("settled"):
            log.info("deadline reached with rebuilds still running; the report lists them")


def serving_channels(store: ArtifactStore, states: list[TargetState]) -> list[dict[str, Any]]:
    """Per model and profile line of the report's targets, what its SERVING_CHANNEL points to now (one
    GET of that channel each, no listing): `key`, `target`, who moved it and when, or `key` None
    for a line without the channel. A model a channel cannot name (a pinned revision that does not
    parse) is reported with the reason."""
    from neuronforge.artifacts import channels
    from neuronforge.common.errors import NeuronforgeError
    from neuronforge.spec.source import model_name

    seen: dict[tuple[str, str], dict[str, Any]] = {}
    for s in states:
        line = (s.profile or s.target.get("profile") or "").partition("@")[0]
        model = model_name(s.pinned or s.source)
        if not line or (model, line) in seen:
            continue
        row: dict[str, Any] = {"model": model, "profile": line, "channel": SERVING_CHANNEL, "key": None}
        try:
            record, _ = channels.read(store, channels.ChannelRef.parse(model, line, SERVING_CHANNEL))
        except NeuronforgeError as exc:
            row["problem"] = str(exc)
        else:
            if record is not None:
                build = record.current.build
                row |= {"key": build.key, "target": build.target, "by": record.current.by, "at": record.current.at}
        seen[(model, line)] = row
    return list(seen.values())


def serving_markdown(rows: list[dict[str, Any]]) -> str:
    """The report's channel section: per model and profile line, what deployments of SERVING_CHANNEL
    still run."""
    lines = [f"## What `{SERVING_CHANNEL}` points to", ""]
    for r in rows:
        where = f"{r['model']} · {r['profile']} · {r['channel']}"
        if r.get("problem"):
            lines.append(f"- {where}: not read ({r['problem']})")
        elif r["key"] is None:
            lines.append(f"- {where}: no such channel yet (rebuilt builds go to {REBUILD_CHANNEL})")
        else:
            lines.append(f"- {where}: {r['key'][:12]} {r.get('target', '')} (moved by {r['by']} at {r['at']})")
    return "\n".join(lines)


@task(trigger_rule="all_done", outlets=[REPORT_ASSET])
def report(plan: dict[str, Any]) -> dict[str, Any]:
    """The run's summary: in this log, as reports/recompile-<stamp>.{md,json} in the store, and as
    an event on the `neuronforge-recompile-report` Asset (extra: the report's URIs and counts, and
    `stable`: what that channel of each model and profile line still points to)."""
    from neuronforge.farm import recompile, speed
    from neuronforge_airflow.hooks.store import open_store

    if plan is None:  # find_stale failed (e.g. a bad catalog): nothing was scheduled, nothing to report
        raise AirflowSkipException("no plan: find_stale failed and scheduled nothing (its log says why)")
    store = open_store(plan["store_uri"])
    states = [recompile.TargetState.from_json(s) for s in plan["states"]]
    recompile.settle(store, states)
    _untriggered(get_current_context()["ti"], plan, states)
    _attested(get_current_context()["ti"], plan, states)
    recompile.reverify_outcomes(store, states, plan.get("release", ""))  # a failed re-verify: `rebuild`, its keys
    speed.against_stable(store, states, plan.get("release", ""), SERVING_CHANNEL)  # each rebuilt or re-smoked row
    rep = recompile.Report(
        plan["stamp"],
        plan["catalog"],
        store.root_uri,
        plan["toolchains"],
        states,
        plan.get("sdk"),
        [r["trigger_run_id"] for r in plan["runs"]],
        plan.get("release", ""),
    )
    uris = recompile.write_report(store, rep)
    serving = serving_channels(store, states)
    log.info("recompile report (%s):\n%s\n\n%s", uris["markdown"], rep.to_markdown(), serving_markdown(serving))
    extra = {**uris, "counts": rep.counts(), "runs": rep.runs, SERVING_CHANNEL: serving}
    get_current_context()["outlet_events"][REPORT_ASSET].extra = extra
    failed = [
        s for s in states if s.outcome in (recompile.FAILED, recompile.NOT_ATTESTED) or s.status == recompile.UNRESOLVED
    ]
    return {**extra, "failed": [f"{s.source} {s.slug}: {s.outcome_detail or s.detail}" for s in failed]}


@task
def verdict(summary: dict[str, Any]) -> None:
    """Fails the run when a rebuild failed or a catalog source could not be resolved, so the run's
    colour says so; the report was written either way."""
    if summary["failed"]:
        raise RuntimeError(f"{len(summary['failed'])} catalog target(s) failed:\n" + "\n".join(summary["failed"]))
