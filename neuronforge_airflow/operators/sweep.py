"""Tasks of the `neuronforge_config_sweep` DAG: the export-configuration sweep (`neuronforge.farm.sweep`)
with each candidate a mapped task.

- `plan_sweep` validates the form, reads the model's config and lists the candidates in the
  sweep's order (before any compile: a bad tp or sequence list fails the run with one sentence).
- `try_<queue>` (one mapped task per candidate, on the queue of the profile's SDK release, one at a
  time): each decides the candidates up to its own from the records the earlier tasks left in the
  store (`sweep(..., until=candidate)`), compiling at most its own candidate as an ordinary build
  of the pipeline; a candidate a rule, the planner or monotonicity decided is marked skipped.
- `finish_sweep` emits an event on the `neuronforge-config-sweeps` Asset naming the two files.

The cache-config file and the per-candidate record live in the store (`layout.sweep_files`), so a
run on any worker, and any later run of the same model, instance and profile, resumes from them.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
from pathlib import Path
from typing import Any

from airflow.sdk import Asset, get_current_context, task
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException
from pydantic import BaseModel, ConfigDict

from neuronforge.artifacts import layout
from neuronforge.common import deployment_names as names
from neuronforge.common import settings
from neuronforge_airflow.hooks.store import store_uri as deployment_store
from neuronforge_airflow.operators.error_policy import by_policy

log = logging.getLogger(__name__)
SWEEP_ASSET = Asset(name=names.SWEEP_ASSET)


class SweepRequest(BaseModel):
    """What every task of one sweep run works from (typed, JSON in XCom; store keys, no paths)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    instance: str
    profile: str
    queue: str
    tps: list[int]
    batch_sizes: list[int]
    seq_lens: list[int]
    dtype: str
    method: str
    retry_failed: bool
    store_uri: str
    out_key: str
    records_key: str


def plan_request(params: dict[str, Any]) -> tuple[SweepRequest, list[dict[str, int]]]:
    """The run's request and its candidates in order; InvalidInput for anything the rules refuse."""
    from neuronforge.farm.sweep import Space
    from neuronforge.farm.sweep.modelinfo import read_arch
    from neuronforge.farm.sweep.space import refuse_profile
    from neuronforge.profiles import get_profile
    from neuronforge.spec.instances import get_instance
    from neuronforge.spec.source import ModelSource
    from neuronforge_airflow.operators.compile_publish import DEFAULT_QUEUE

    model = params.get("model") or settings.DEFAULT_MODEL
    instance = get_instance(params["instance"])
    profile = get_profile(params["profile"])
    arch = read_arch(model)
    space = Space.build(arch, instance, params.get("tp"), params.get("batch_sizes"), params.get("seq_lens"))
    refuse_profile(profile, instance, arch, space)
    out_key, records_key = layout.sweep_files(ModelSource.parse(model), instance.name, profile.ref)
    request = SweepRequest(
        model=model,
        instance=instance.name,
        profile=params["profile"],
        queue=profile.queue or DEFAULT_QUEUE,
        tps=list(space.tps),
        batch_sizes=list(space.batch_sizes),
        seq_lens=list(space.seq_lens),
        dtype=params.get("dtype") or "bf16",
        method=params.get("method") or "planned",
        retry_failed=bool(params.get("retry_failed")),
        store_uri=deployment_store(params.get("store")),
        out_key=out_key,
        records_key=records_key,
    )
    order = space.candidates("planned" if request.method == "planned" else "document")
    return request, [c.to_json() for c in order]


@task(show_return_value_in_logs=False)
def plan_sweep(params: dict[str, Any] | None = None) -> dict[str, Any]:
    if params is None:
        from neuronforge.common.deployment_names import SWEEP_DAG
        from neuronforge_airflow.params import ALLOWED_KEYS, refuse_unknown_keys

        context = get_current_context()
        refuse_unknown_keys(context["dag_run"].conf, ALLOWED_KEYS[SWEEP_DAG], SWEEP_DAG)
        params = context["params"]
    with by_policy():  # a bad form: its one line, no retry (`error_policy`)
        request, candidates = plan_request(params)
    log.info("%d candidates of %s on %s (%s)", len(candidates), request.model, request.instance, request.method)
    return {"request": request.model_dump(), "candidates": candidates}


def candidates_for(queue: str):
    """The candidates of a run whose profile routes to `queue` (none for the other queues' tasks)."""
    from neuronforge_airflow.operators.compile_publish import group_id

    @task(task_id=f"candidates_{group_id(queue).removesuffix('_target')}", show_return_value_in_logs=False)
    def candidates(plan: dict[str, Any]) -> list[dict[str, int]]:
        return plan["candidates"] if plan["request"]["queue"] == queue else []

    return candidates


def decide(request: SweepRequest, candidate: dict[str, int]) -> tuple[bool, str]:
    """Decide the candidates up to `candidate` (from the store's records), compiling only what no
    rule decides; (whether `candidate` was compiled now, its outcome)."""
    from neuronforge.farm.sweep import CacheConfig, Candidate, PipelineTrial, RecordLog, Space, records_path, sweep
    from neuronforge.farm.sweep.modelinfo import model_id, read_arch
    from neuronforge.spec.instances import get_instance
    from neuronforge.stores import NotFound
    from neuronforge_airflow.hooks.store import open_store

    store = open_store(request.store_uri)
    instance = get_instance(request.instance)
    arch = read_arch(request.model)
    space = Space(tuple(request.tps), tuple(request.batch_sizes), tuple(request.seq_lens))
    target = Candidate.from_json(candidate)
    with tempfile.TemporaryDirectory(prefix="nf-sweep-") as tmp:
        out = Path(tmp) / request.out_key.rsplit("/", 1)[1]
        for key, local in ((request.out_key, out), (request.records_key, records_path(out))):
            with contextlib.suppress(NotFound):  # absent for the first task of the first run
                store.get_file(key, local)
        header = {
            "model": request.model,
            "instance": request.instance,
            "profile": request.profile,
            "method": request.method,
            "space": space.to_json(),
        }
        log_file, earlier = RecordLog.load(records_path(out), header)
        trial = PipelineTrial(
            request.model,
            request.instance,
            request.profile,
            store,  # opened by the hook: the deployment's identity
            settings.work_dir(),
            request.dtype,
        )
        result = sweep(
            arch,
            instance,
            space,
            trial,
            CacheConfig.load(out, model_id(request.model), instance.family),
            log_file,
            earlier,
            method=request.method,
            retry_failed=request.retry_failed,
            dtype=request.dtype,
            until=target,
        )
        # records first, the cache-config file last: what consumers read is never ahead of the record
        store.put_file(records_path(out), request.records_key)
        if out.exists():
            store.put_file(out, request.out_key)
    record = next(r for r in result.records if r.candidate == target)
    # compiled something: its own candidate, or (tasks started out of order) earlier ones
    return result.attempts > 0, f"{record.outcome} ({record.by}): {record.reason}"


def try_candidates(queue: str):
    """The mapped task trying the candidates of a run whose profile's toolchain is on `queue`, one
    at a time across runs. A try is a whole build, smoke test included, so it runs where the smoke
    test does (the profile's Neuron hosts)."""
    from neuronforge_airflow.operators.compile_publish import DEFAULT_QUEUE, group_id, placements

    runs_on = placements(queue)["smoke"].queue or DEFAULT_QUEUE

    @task(task_id=f"try_{group_id(queue).removesuffix('_target')}", queue=runs_on, max_active_tis_per_dag=1)
    def try_candidate(plan: dict[str, Any], candidate: dict[str, int]) -> str:
        request = SweepRequest.model_validate(plan["request"])
        with by_policy():  # retried only when it may pass: an unreachable store or Hub, a full disk
            compiled, outcome = decide(request, candidate)
        log.info("%s: %s", candidate, outcome)
        if not compiled:
            raise AirflowSkipException(f"decided without a compile: {outcome}")
        return outcome

    return try_candidate


@task(trigger_rule="all_done", outlets=[SWEEP_ASSET])
def finish_sweep(plan: dict[str, Any]) -> dict[str, Any]:
    """The sweep's result as an Asset event (extra: the files' URIs, valid count, finished)."""
    from neuronforge.records.sweep import SweepRecords
    from neuronforge.stores import NotFound
    from neuronforge_airflow.hooks.store import open_store

    request = SweepRequest.model_validate(plan["request"])
    with by_policy():  # an unreachable store: retried; a record damaged since the try_* tasks wrote it: failed
        store = open_store(request.store_uri)
        try:
            records = SweepRecords.read(store, request.records_key)
        except NotFound:
            raise AirflowFailException("no candidate was decided: see the try_* tasks' logs") from None
    valid = [r for r in records.candidates if r.outcome == "valid"]
    extra = {
        "model": request.model,
        "instance": request.instance,
        "profile": request.profile,
        "cache_config": store.uri(request.out_key),
        "records": store.uri(request.records_key),
        "valid": len(valid),
        "decided": len(records.candidates),
        "finished": records.finished,
    }
    if not extra["finished"]:
        raise AirflowFailException(f"the sweep did not finish ({extra['decided']} decided): see the try_* tasks")
    get_current_context()["outlet_events"][SWEEP_ASSET].extra = extra
    return extra
