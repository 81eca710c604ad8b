"""TaskFlow tasks of the `neuronforge_compile_publish` DAG: thin translations between Airflow (params,
XCom, outlet events, logs) and the core stages in `neuronforge.stages`. No pipeline logic here.

State travels between tasks as one JSON-serializable dict per target ("the ticket"): the pinned
source, the target, the toolchain and cache key, and what each stage produced. A ticket whose key
was already published carries `hit`, and the later tasks pass it through untouched.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from airflow.sdk import Asset, AssetAlias, get_current_context, task

from neuronforge import settings
from neuronforge.instances import INSTANCES
from neuronforge.request import CompileRequest, Toolchain
from neuronforge.source import ModelSource
from neuronforge.stages.publish import FORMATS
from neuronforge.target import TargetSpec

log = logging.getLogger(__name__)

ARTIFACTS_ALIAS = AssetAlias(name="neuronforge-artifacts")
POOL = "neuron_cores"
NEURON_QUEUE = "neuron"
QUANTIZATIONS = ["none"] + [
    f"{d}:{m}" for d in ("int8", "f8e4m3", "f8e5m2") for m in ("per_tensor_symmetric", "per_channel_symmetric")
]

# JSON schema of one target in the trigger form (Airflow validates it before any task runs).
TARGET_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["instance_type", "tp_degree", "sequence_length"],
    "properties": {
        "instance_type": {"type": "string", "enum": list(INSTANCES)},
        "tp_degree": {"type": "integer", "minimum": 1, "maximum": 128},
        "batch_size": {"type": "integer", "minimum": 1, "maximum": 1024},
        "sequence_length": {"type": "integer", "minimum": 8, "maximum": 1048576},
        "max_context_length": {"type": ["integer", "null"], "minimum": 1},
        "dtype": {"type": "string", "enum": ["bf16", "fp16", "fp32"]},
        "quantization": {"type": "string", "enum": QUANTIZATIONS},
        # Optional per-target overrides of the run's backend and publish formats (the recompile DAG
        # sends each catalog model's targets in one run), and the planner's finer knobs.
        "backend": {"type": "string", "enum": ["cpu", "optimum", "nxdi"]},
        "publish_formats": {"type": "array", "items": {"type": "string", "enum": list(FORMATS)}},
        "logical_nc_config": {"type": ["integer", "null"], "enum": [1, 2, None]},
        "context_encoding_buckets": {"type": ["array", "null"], "items": {"type": "integer", "minimum": 1}},
        "token_generation_buckets": {"type": ["array", "null"], "items": {"type": "integer", "minimum": 1}},
        "backend_options": {
            "type": "object",
            "additionalProperties": {"type": ["string", "integer", "number", "boolean"]},
        },
    },
}


def _source_json(s: ModelSource) -> dict[str, Any]:
    return {"kind": s.kind, "location": s.location, "revision": s.revision, "resolved_revision": s.resolved_revision}


def _request(ticket: dict[str, Any]) -> CompileRequest:
    return CompileRequest(ModelSource(**ticket["source"]), TargetSpec.model_validate(ticket["target"]))


def _store(ticket: dict[str, Any]):
    from neuronforge.stores import open_store

    return open_store(ticket["store_uri"])


@contextmanager
def _keeping_lease(ticket: dict[str, Any]) -> Iterator[None]:
    """While a task of a run that holds the target's lease works, heart-beat the lease (and fail
    fast if it was taken over); afterwards the ticket carries the lease's latest version, which
    the next task renews from. A run that lost its lease stops here and publishes nothing."""
    if "lease" not in ticket:
        yield
        return
    from neuronforge import leases

    keeper = leases.LeaseKeeper(_store(ticket), leases.Lease(**ticket["lease"]), release_on_exit=False)
    with keeper:
        keeper.assert_held()
        yield
    keeper.assert_held()
    ticket["lease"] = asdict(keeper.lease)


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


def _records_failure(body: Callable[[dict[str, Any]], dict[str, Any]]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A task body that, when it fails for a ticket whose key is known, records the failure in the
    store (`failures/<key>.json`) so the recompile report can say what failed and why, and, on the
    last attempt, releases the run's compile lease so the next request for the key need not wait
    for it to expire."""

    @functools.wraps(body)
    def wrapper(ticket: dict[str, Any]) -> dict[str, Any]:
        try:
            return body(ticket)
        except Exception as exc:
            if ticket.get("key"):
                from neuronforge import leases
                from neuronforge.failures import record_failure

                try:
                    store = _store(ticket)
                    record_failure(store, ticket["key"], body.__name__, exc, _run_id())
                    current = leases.current(store, ticket["key"]) if "lease" in ticket else None
                    # Ours if the holder matches (heartbeats moved its version past the ticket's).
                    if current and current.holder == ticket["lease"]["holder"] and _final_attempt():
                        leases.release(store, current)
                except Exception as record_exc:  # the build's own error matters more
                    log.warning("could not record the failure of %s: %s", ticket["key"][:12], record_exc)
            raise

    return wrapper


@task
def expand_targets(params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Validate the whole request (every target) before any work: one ticket per target."""
    params = params or get_current_context()["params"]
    model = params.get("model") or str(settings.demo_model())
    backend = params.get("backend", "cpu")
    tickets = []
    for raw in params["targets"]:
        raw = dict(raw)
        formats = raw.pop("publish_formats", None) or params.get("publish_formats") or ["optimum"]
        target = TargetSpec.parse({**raw, "backend": raw.get("backend") or backend})
        tickets.append(
            {
                "model": model,
                "target": target.model_dump(mode="json"),
                "store_uri": settings.store_uri(params.get("store")),
                "work_dir": str(settings.work_dir()),
                "prompts": list(params.get("prompts") or []),
                "max_new_tokens": int(params.get("max_new_tokens", 8)),
                "formats": list(formats),
            }
        )
    log.info("%d target(s): %s", len(tickets), ", ".join(TargetSpec.model_validate(t["target"]).slug for t in tickets))
    return tickets


def _route(ticket: dict[str, Any]) -> str:
    return "cpu" if ticket["target"]["backend"] == "cpu" else "neuron"


@task
def cpu_tickets(tickets: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tickets that run on the default queue (cpu backend)."""
    return [t for t in tickets if _route(t) == "cpu"]


@task
def neuron_tickets(tickets: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tickets that need Neuron workers (queue `neuron`)."""
    return [t for t in tickets if _route(t) == "neuron"]


@task
def prepare(ticket: dict[str, Any]) -> dict[str, Any]:
    """Resolve the source, detect the toolchain, compute the key, look it up in the index."""
    from neuronforge.pipeline import prepare as prepare_stage
    from neuronforge.stages.publish import lookup

    target = TargetSpec.model_validate(ticket["target"])
    prep = prepare_stage(ticket["model"], target, Path(ticket["work_dir"]))
    hit = lookup(_store(ticket), prep.key)
    from operators.kubernetes import neuron_devices

    ticket = {
        **ticket,
        "neuron_devices": neuron_devices(target) if target.backend != "cpu" else 0,
        "source": _source_json(prep.request.source),
        "toolchain": prep.toolchain.to_json(),
        "key": prep.key,
    }
    if hit is not None:
        log.info("cache hit for %s: %s %s", prep.key[:12], hit.manifest_uri, hit.uris)
        ticket["hit"] = {"manifest_uri": hit.manifest_uri, "prefix": hit.prefix, "uris": hit.uris}
    else:
        log.info("no published artifact for key %s: building %s", prep.key[:12], target.slug)
    return ticket


@task
@_records_failure
def fetch_checkpoint(ticket: dict[str, Any]) -> dict[str, Any]:
    if "hit" in ticket:
        return ticket
    from neuronforge.stages.fetch import FetchRequest, fetch, fetch_summary

    source = ModelSource(**ticket["source"])
    with _keeping_lease(ticket):
        result = fetch(FetchRequest(str(source), ticket["store_uri"], Path(ticket["work_dir"])), _store(ticket))
    log.info("checkpoint: %s", fetch_summary(result))
    return {**ticket, "checkpoint_dir": str(result.local_dir)}


@task
@_records_failure
def plan_target(ticket: dict[str, Any]) -> dict[str, Any]:
    """Fail fast with the planner's messages: nothing is compiled or published."""
    if "hit" in ticket:
        return ticket
    from neuronforge.pipeline import check_plan

    result = check_plan(
        Path(ticket["checkpoint_dir"]),
        TargetSpec.model_validate(ticket["target"]),
        Toolchain.from_json(ticket["toolchain"]),  # as detected on the worker that compiles
    )
    for c in result.checks:
        log.info("plan %s: %s", c.name, c.message)
    return {**ticket, "plan": result.to_json()}


@task
@_records_failure
def quantize_weights(ticket: dict[str, Any]) -> dict[str, Any]:
    """Stage `quantize` when the target asks for it (CPU work, default queue): the quantized
    checkpoint, reused by every target with the same quantization; a pass-through otherwise."""
    if "hit" in ticket:
        return ticket
    from neuronforge.pipeline import quantize_for

    target = TargetSpec.model_validate(ticket["target"])
    inputs = quantize_for(
        Path(ticket["checkpoint_dir"]),
        ModelSource(**ticket["source"]),
        target,
        Path(ticket["work_dir"]),
        _store(ticket),
    )
    if inputs.info:
        log.info("quantized checkpoint %s: %s", target.quantization.slug, inputs.info)
    paths = {
        "compile_checkpoint_dir": inputs.compile_dir,
        "quantized_dir": inputs.quantized_dir,
        "reference_dir": inputs.reference_dir,
        "unquantized_dir": inputs.unquantized_dir,
    }
    return {**ticket, **{k: str(v) for k, v in paths.items() if v}, "quantized": inputs.info}


def _path(ticket: dict[str, Any], key: str, default: str | None = None) -> Path | None:
    value = ticket.get(key, default)
    return Path(value) if value else None


@task(queue="default", pool=POOL, pool_slots=1)
def compile_graphs(ticket: dict[str, Any]) -> dict[str, Any]:
    return compile_ticket(ticket)


@_records_failure
def compile_ticket(ticket: dict[str, Any]) -> dict[str, Any]:
    """The compile task's body (also run inside a Kubernetes pod, see operators/kubernetes.py)."""
    if "hit" in ticket:
        return ticket
    from neuronforge.stages.compile import CompileInput, compile_target

    inp = CompileInput(
        _request(ticket),
        Toolchain.from_json(ticket["toolchain"]),
        ticket["key"],
        _path(ticket, "compile_checkpoint_dir", ticket["checkpoint_dir"]),
        Path(ticket["work_dir"]),
        _path(ticket, "quantized_dir"),
    )
    with _keeping_lease(ticket):
        out = compile_target(inp, _store(ticket))
    for g in out.graphs:
        log.info(
            "graph %s: %s (%s, %.1fs)",
            g["name"],
            g["entry"],
            "cache hit" if g["cached"] else "compiled",
            g["seconds"] or 0.0,
        )
    compiled = {
        "graphs": out.graphs,
        "compiler_invocations": out.compiler_invocations,
        "seconds": out.seconds,
        "graph_set": out.graph_set,
    }
    if ticket.get("quantized"):
        compiled["quantized"] = ticket["quantized"]
    return {**ticket, "build_dir": str(out.build_dir), "compile": compiled}


@task
@_records_failure
def sync_compile_cache(ticket: dict[str, Any]) -> dict[str, Any]:
    if "hit" in ticket:
        return ticket
    from neuronforge.stages.compile import sync_cache

    report = sync_cache(
        Path(ticket["work_dir"]), Toolchain.from_json(ticket["toolchain"]), _store(ticket), ticket["compile"]
    )
    log.info("compile cache sync: %s", report.to_json())
    return {**ticket, "cache_sync": report.to_json()}


@task(queue="default", pool=POOL, pool_slots=1)
def smoke(ticket: dict[str, Any]) -> dict[str, Any]:
    return smoke_ticket(ticket)


@_records_failure
def smoke_ticket(ticket: dict[str, Any]) -> dict[str, Any]:
    """The smoke task's body (also run inside a Kubernetes pod, see operators/kubernetes.py)."""
    if "hit" in ticket:
        return ticket
    from neuronforge.stages.smoke import DEFAULT_PROMPTS, SmokeInput, smoke_test

    target = TargetSpec.model_validate(ticket["target"])
    smoke_input = SmokeInput(
        Path(ticket["build_dir"]),
        _path(ticket, "compile_checkpoint_dir", ticket["checkpoint_dir"]),
        target.dtype,
        target.backend,
        ticket["prompts"] or list(DEFAULT_PROMPTS),
        ticket["max_new_tokens"],
        reference_dir=_path(ticket, "reference_dir"),
        unquantized_dir=_path(ticket, "unquantized_dir"),
    )
    with _keeping_lease(ticket):
        result = smoke_test(smoke_input)
    log.info(
        "smoke: %s (load %.2fs, first token %.4fs, %.5fs/token)",
        result.reason,
        result.load_s or 0,
        result.time_to_first_token_s or 0,
        result.per_token_s or 0,
    )
    if not result.passed:
        from neuronforge.pipeline import SmokeFailed

        raise SmokeFailed(f"{target.slug}: {result.reason}")
    return {**ticket, "smoke": result.to_json()}


@task(outlets=[ARTIFACTS_ALIAS])
@_records_failure
def publish_artifact(ticket: dict[str, Any]) -> dict[str, Any]:
    """Publish (unless a hit) and emit the artifact's Asset event either way."""
    if "hit" in ticket:
        info = ticket["hit"]
    else:
        from neuronforge.stages.publish import PublishInput, publish

        publish_input = PublishInput(
            _request(ticket),
            Toolchain.from_json(ticket["toolchain"]),
            ticket["key"],
            Path(ticket["build_dir"]),
            ticket["smoke"],
            {**ticket["compile"], "cache_sync": ticket.get("cache_sync")},  # failed entries listed
            Path(ticket["work_dir"]),
            tuple(ticket["formats"]),
            Path(ticket["checkpoint_dir"]),
        )
        with _keeping_lease(ticket):  # a run whose lease was taken over publishes nothing
            published = publish(publish_input, _store(ticket))
        if "lease" in ticket:
            from neuronforge import leases

            leases.release(_store(ticket), leases.Lease(**ticket["lease"]))
        info = {"manifest_uri": published.manifest_uri, "prefix": published.prefix, "uris": published.uris}
        log.info("published %s", published.manifest_uri)
    root = info["manifest_uri"].rsplit("/", 1)[0]
    target = TargetSpec.model_validate(ticket["target"])
    org, name = ModelSource(**ticket["source"]).org_name
    asset = Asset(name=f"neuronforge/{org}/{name}/{target.slug}/{ticket['key'][:12]}", uri=root)
    extra = {
        "cache_key": ticket["key"],
        "manifest_uri": info["manifest_uri"],
        "uris": info["uris"],
        "status": "cache-hit" if "hit" in ticket else "published",
    }
    get_current_context()["outlet_events"][ARTIFACTS_ALIAS].add(asset, extra=extra)
    return {"slug": target.slug, **extra}
