"""The DAG's tasks × the environment failure classes, from one table (the CLI's is test_matrix.py;
the environments are its `make_env`).

Each stage task's body (`run_stage_task`, what the Celery task and the Kubernetes pod run) is called
directly with the build state the task before it hands over, its store or source replaced by a
failing one. It must fail with one line naming the resource and the fix (the CLI's message), and
say whether Airflow should retry: an `AirflowFailException` (no retry) when a retry cannot change
the outcome, a plain `AirflowException` when the failure may pass (an endpoint or the Hub down, a
full disk). The first task, `expand_targets`, pins and looks up every target but leaves what fails
there to each target's own `prepare` (so each target reports its own error): under every class it
returns with every target still to build, and no traceback.

`test_the_table_covers_every_task_of_the_dag` reads the DAG's task ids: a new task fails it until
it has a row here or a reason in `EXEMPT`.
"""

from __future__ import annotations

import importlib.util
import re
import time
from pathlib import Path
from typing import Any

import pytest

from neuronforge.records.smoke import SmokeRecord
from tests.reliability.test_matrix import (  # noqa: F401 (fixtures)
    _auth,
    hub_503,
    iam_keys,
    live_bucket,
    make_env,
    stopped_endpoint,
)

TARGET = {"instance_type": "inf2.xlarge", "tp_degree": 1, "sequence_length": 64, "dtype": "fp32", "profile": "cpu"}
S3 = ("endpoint down", "bucket absent", "no credentials", "unknown access key", "access denied")
HUB = ("Hub offline", "Hub refuses connections", "Hub answers 503")
WRITING = ("read-only store", "store disk full")
READS = "reads the store only after the stage before wrote it (a read-only or full store is its normal case)"

# task -> (the classes it runs under, why not the others)
TASKS: dict[str, tuple[tuple[str, ...], str]] = {
    "expand_targets": ((*S3, *WRITING, "file for folder", *HUB), ""),
    "prepare": ((*S3, *WRITING, "file for folder", *HUB), ""),
    "fetch_checkpoint": ((*S3, *WRITING, "file for folder", *HUB), ""),
    "plan_target": ((*S3, "file for folder"), f"its source is the store's checkpoint; {READS}"),
    "compile_graphs": (
        (*S3, "file for folder"),
        "its source is the store's checkpoint; it writes the store only after compiling (prepare probes that "
        "the store takes writes before any work: its rows)",
    ),
    "smoke": ((*S3, "file for folder"), f"its source is the staged payload; {READS}"),
    "publish_artifact": (
        (*S3, "file for folder"),
        "its source is the staged payload; prepare probes that the store takes writes before any work (its rows)",
    ),
}
ALL_CLASSES = tuple(dict.fromkeys(k for applies, _ in TASKS.values() for k in applies))

# Tasks that open neither a store nor a source, or are covered elsewhere, with why.
EXEMPT = {
    "tickets_*": "routes the first task's build states to its queue's group; opens nothing",
    "claim_build": "a deferrable operator waiting on the lease (tests/test_leases.py, tests/dags); its store was "
    "checked by prepare just before",
    "register_hub_cache": "a pass-through unless the run registers an optimum-neuron build of a Hub model; "
    "registering, it reads the store only after the stages that wrote what it reads (the checkpoint's config.json, "
    "the staged neuron_config.json, the compile cache), and its Hub failures (unreachable: one retried line; a "
    "refused token: one line) are tests/stages/test_hub_registry.py's",
    "quantize_weights": "a pass-through for targets that do not quantize; quantizing, it runs the quantize stage "
    "the CLI matrix's `quantize` row covers after the same materialize as plan_target",
}
# The classes a retry may cure: the task raises AirflowException, not AirflowFailException.
TRANSIENT = {"endpoint down", "store disk full", "Hub refuses connections", "Hub answers 503"}


def _dag():
    path = Path(__file__).resolve().parents[2] / "dags" / "neuronforge_compile_publish.py"
    spec = importlib.util.spec_from_file_location("nf_matrix_dag", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.neuronforge_compile_publish()


def test_the_table_covers_every_task_of_the_dag() -> None:
    names = {re.sub(r"^tickets_.*", "tickets_*", t.rsplit(".", 1)[-1]) for t in _dag().task_ids}
    assert names - set(EXEMPT) == set(TASKS), "add the new task to TASKS (or, with a reason, to EXEMPT)"
    for task, (applies, why) in TASKS.items():
        assert set(applies) == set(ALL_CLASSES) or why, f"{task}: say why it skips {set(ALL_CLASSES) - set(applies)}"


# -- the build states each task is handed --------------------------------------------------------
@pytest.fixture(scope="module")
def handed(tmp_path_factory: pytest.TempPathFactory, tiny_llama_template: Path) -> dict[str, dict[str, Any]]:
    """The state each stage receives in a healthy run (prepare and fetch run for real on a file
    store; the compile's and smoke's results stand in: the failing store is met before they are read)."""
    from neuronforge.artifacts.localcache import TreeRef
    from neuronforge.pipeline.buildstate import BuildState, CompiledRef
    from neuronforge.profiles import parse_target
    from neuronforge_airflow.operators.compile_publish import run_stage_task

    base = tmp_path_factory.mktemp("tasks")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NEURONFORGE_HOME", str(base / "home"))
        start = BuildState(model=str(tiny_llama_template), target=parse_target(TARGET), store_uri=f"file://{base}/s")
        prepared = run_stage_task("prepare", start.model_dump(mode="json"))
        fetched = run_stage_task("fetch_checkpoint", prepared)
    key = prepared["key"]
    build = TreeRef(prefix=f"builds/{key}/payload", manifest_sha256="0" * 64)
    compiled = BuildState.model_validate(fetched).model_copy(
        update={"compiled": CompiledRef(build=build), "smoke": SmokeRecord(passed=True, reason="stand-in")}
    )
    after = compiled.model_dump(mode="json")
    return {
        "expand_targets": start.model_dump(mode="json"),
        "prepare": start.model_dump(mode="json"),
        "fetch_checkpoint": prepared,
        "plan_target": fetched,
        "compile_graphs": fetched,
        "smoke": after,
        "publish_artifact": after,
    }


def _failing(state: dict[str, Any], store: str, model: str, kind: str) -> dict[str, Any]:
    """The state with the class's store, and for a task that reads the source, its source."""
    state = {**state, "store_uri": store}
    if kind in HUB or kind == "file for folder":
        state["model"] = model
        if state.get("source"):  # the first task pinned it: a Hub model at a revision, or the file
            hub = kind in HUB
            location = model.removeprefix("hf://")
            state["source"] = {
                "kind": "hf" if hub else "local",
                "location": location,
                "revision": "main" if hub else None,
                "resolved_revision": "0" * 40 if hub else "",
            }
    return state


CASES = [(t, k) for t, (applies, _) in TASKS.items() for k in applies]


@pytest.mark.parametrize(("task", "kind"), CASES, ids=[f"{t}|{k}" for t, k in CASES])
def test_task_matrix(task: str, kind: str, make_env, handed, caplog: pytest.LogCaptureFixture) -> None:  # noqa: F811
    from airflow.sdk.exceptions import AirflowException, AirflowFailException

    from neuronforge_airflow.operators.compile_publish import expand_targets, run_stage_task

    env = make_env(kind)
    state = _failing(handed[task], env.store, env.model, kind)
    before = env.state() if env.state else None
    started = time.monotonic()
    if task == "expand_targets":
        params = {"model": state["model"], "targets": [TARGET], "store": state["store_uri"], "prompts": []}
        with _auth(env.auth):
            outcome = expand_targets.function(params)
        assert [t["status"] for t in outcome["targets"]] == ["to build"], outcome
        assert len(outcome["build"]) == 1
    else:
        with _auth(env.auth), pytest.raises(AirflowException) as raised:
            run_stage_task(task, state)
        line = str(raised.value)
        assert "\n" not in line and "Traceback" not in line, line
        assert isinstance(raised.value, AirflowFailException) == (kind not in TRANSIENT), (type(raised.value), line)
        for word in env.words:
            assert word.format(model=env.model) in line, (word, line)
        for secret in env.secrets:
            assert secret not in line and secret not in caplog.text
    assert time.monotonic() - started < env.seconds
    if env.state:  # what a failed stage may add: its failure record, the farm index telling it, a work lock
        assert _lasting(env.state()) == _lasting(before)


RECORDS = re.compile(r"(^|/)(failures|farm-index|locks)/")


def _lasting(state: object) -> object:
    """A store's (or a folder's) state without the failure records a failed stage writes by design."""
    if isinstance(state, dict):
        return {k: _lasting(v) for k, v in state.items() if not RECORDS.search(k)}
    if isinstance(state, list):
        return [k for k in state if not RECORDS.search(k)]
    return state


def test_how_a_task_tells_airflow_whether_to_retry(handed) -> None:
    import errno

    from airflow.sdk.exceptions import AirflowFailException

    from neuronforge.artifacts.leases import LeaseLost
    from neuronforge.common.errors import CheckpointError
    from neuronforge.pipeline.buildstate import BuildState
    from neuronforge.pipeline.planner import PlanRejected
    from neuronforge_airflow.operators.compile_publish import task_failure

    state = BuildState.model_validate(handed["prepare"])
    assert task_failure(KeyError("a bug"), state) is None  # re-raised as it is: its traceback is the report
    plan = task_failure(PlanRejected("tp 3 does not divide 32 heads: use 2 or 4\ndoes not fit: use tp 8"), state)
    assert isinstance(plan, AirflowFailException)
    assert str(plan) == "tp 3 does not divide 32 heads: use 2 or 4; does not fit: use tp 8"
    assert str(task_failure(CheckpointError("x.safetensors is truncated"), state)).startswith("checkpoint rejected: ")
    lost = task_failure(LeaseLost("the lease of abc was taken over"), state)
    assert lost is not None and not isinstance(lost, AirflowFailException)
    full = task_failure(OSError(errno.ENOSPC, "No space left on device"), state)
    assert full is not None and not isinstance(full, AirflowFailException)
    assert str(full).startswith("No space left on device: ") and "free space there" in str(full)
    assert isinstance(task_failure(OSError(errno.EROFS, "Read-only file system", "/srv"), state), AirflowFailException)
