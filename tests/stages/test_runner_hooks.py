"""The runner around a stage: each stage declared in its own module, its declared reads checked
before it runs and its declared writes after, and the hooks (lease keeping, host timing, failure
records) run around it in the order nested `with` blocks would — what the CLI, the DAG's tasks and
the pods share through `execute`."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest

from neuronforge.artifacts import layout, leases
from neuronforge.pipeline.buildstate import BuildState, LeaseRef
from neuronforge.pipeline.hooks import FailureRecords, HostTiming, LeaseKeeping
from neuronforge.pipeline.runner import STAGES, execute
from neuronforge.pipeline.stage import Context, Stage
from neuronforge.spec.target import TargetSpec
from neuronforge.stores import ArtifactStore, open_store
from tests.conftest import TARGET

KEY = "ab" * 32


@pytest.fixture
def store(tmp_path: Path) -> ArtifactStore:
    return open_store(f"file://{tmp_path / 'store'}")


def _state(store: ArtifactStore, **update) -> BuildState:
    state = BuildState(model="org/model", target=TargetSpec.parse(TARGET), store_uri=store.root_uri)
    return state.model_copy(update=update)


class Recorder:
    def __init__(self, name: str, calls: list[str], fail_before: bool = False) -> None:
        self.name, self.calls, self.fail_before = name, calls, fail_before

    def before_stage(self, stage, state, ctx) -> None:
        self.calls.append(f"before {self.name}")
        if self.fail_before:
            raise RuntimeError(f"{self.name} refused")

    def after_stage(self, stage, state, ctx, seconds):
        self.calls.append(f"after {self.name}")
        return state

    def on_stage_error(self, stage, state, ctx, exc) -> None:
        self.calls.append(f"error {self.name}: {exc}")


def test_each_stage_is_declared_next_to_its_adapter() -> None:
    """`STAGES` is the stage modules' own declarations, in the pipeline's order, each run by a
    function of the module that declares it."""
    assert [s.name for s in STAGES] == [
        "prepare",
        "claim_build",
        "fetch_checkpoint",
        "plan_target",
        "quantize_weights",
        "compile_graphs",
        "smoke",
        "register_hub_cache",
        "publish_artifact",
    ]
    for stage in STAGES:
        owners = [
            m
            for m in ("prepare", "claim", "fetch", "plan", "quantize", "compile", "smoke", "register", "publish")
            if importlib.import_module(f"neuronforge.pipeline.stages.{m}").STAGE is stage
        ]
        assert len(owners) == 1, stage.name
        if stage.run is not None:
            assert inspect.getmodule(stage.run).__name__ == f"neuronforge.pipeline.stages.{owners[0]}"


def test_a_missing_read_is_refused_naming_the_stage_and_the_field(store: ArtifactStore, tmp_path: Path) -> None:
    ran = []
    stage = Stage("plan_target", lambda s, c: ran.append(1) or s, "doc", reads=("toolchain", "checkpoint"))
    with pytest.raises(RuntimeError, match="stage plan_target needs toolchain, checkpoint"):
        execute(stage, _state(store), Context(store, tmp_path))
    assert ran == []


def test_a_declared_write_left_unwritten_fails_and_is_recorded(store: ArtifactStore, tmp_path: Path) -> None:
    stage = Stage("plan_target", lambda s, c: s, "doc", writes=("plan",))
    with pytest.raises(RuntimeError, match="stage plan_target did not write plan"):
        execute(stage, _state(store, key=KEY), Context(store, tmp_path))
    assert store.exists(layout.failure_entry(KEY))  # the default hooks recorded it


def test_hooks_nest_like_with_blocks(store: ArtifactStore, tmp_path: Path) -> None:
    calls: list[str] = []
    stage = Stage("fetch_checkpoint", lambda s, c: calls.append("run") or s, "doc")
    execute(stage, _state(store), Context(store, tmp_path), [Recorder("outer", calls), Recorder("inner", calls)])
    assert calls == ["before outer", "before inner", "run", "after inner", "after outer"]

    calls.clear()

    def boom(state, ctx):
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        execute(
            Stage("fetch_checkpoint", boom, "doc"),
            _state(store),
            Context(store, tmp_path),
            [
                Recorder("outer", calls),
                Recorder("inner", calls),
            ],
        )
    assert calls == ["before outer", "before inner", "error inner: boom", "error outer: boom"]

    calls.clear()  # a hook that refuses: the stage does not run; only the hooks entered before it are told
    with pytest.raises(RuntimeError, match="inner refused"):
        execute(
            stage,
            _state(store),
            Context(store, tmp_path),
            [
                Recorder("outer", calls),
                Recorder("inner", calls, fail_before=True),
                Recorder("last", calls),
            ],
        )
    assert calls == ["before outer", "before inner", "error outer: inner refused"]


def test_host_timing_and_failure_records(store: ArtifactStore, tmp_path: Path) -> None:
    stage = Stage("compile_graphs", lambda s, c: s, "doc", kind="compile")
    done = execute(stage, _state(store), Context(store, tmp_path), [HostTiming()])
    assert [(r.stage, r.host) for r in done.hosts] == [("compile_graphs", "cpu")]

    def boom(state, ctx):
        raise ValueError("no space left")

    hooks = [FailureRecords()]
    with pytest.raises(ValueError):  # no key yet: nothing to record under
        execute(Stage("fetch_checkpoint", boom, "doc"), _state(store), Context(store, tmp_path), hooks)
    with pytest.raises(ValueError):  # a stage outside the lease (prepare records its own rejections)
        execute(Stage("x", boom, "doc", holds_lease=False), _state(store, key=KEY), Context(store, tmp_path), hooks)
    assert not store.exists(layout.failure_entry(KEY))
    with pytest.raises(ValueError):
        execute(Stage("fetch_checkpoint", boom, "doc"), _state(store, key=KEY), Context(store, tmp_path), hooks)
    assert store.exists(layout.failure_entry(KEY))


def test_lease_keeping_for_one_task_hands_the_lease_on_and_releases_after_the_final_stage(
    store: ArtifactStore, tmp_path: Path
) -> None:
    lease = leases.try_acquire(store, KEY, leases.holder_id(), 60)
    assert lease is not None
    state = _state(store, key=KEY, lease=LeaseRef.of(lease))
    seen = []
    stage = Stage("fetch_checkpoint", lambda s, c: seen.append(c.keeper) or s, "doc")
    done = execute(stage, state, Context(store, tmp_path), [LeaseKeeping(hand_on=True)])
    assert seen[0] is not None  # the stage ran with the keeper (publish checks it)
    held = leases.current(store, KEY)
    assert held is not None and held.live and done.lease is not None and done.lease.version == held.version

    final = Stage("publish_artifact", lambda s, c: s, "doc", final=True)
    execute(final, done, Context(store, tmp_path), [LeaseKeeping(hand_on=True)])
    after = leases.current(store, KEY)
    assert after is None or not after.live


def test_lease_keeping_for_a_build_holds_across_stages_and_releases_on_failure(
    store: ArtifactStore, tmp_path: Path
) -> None:
    lease = leases.try_acquire(store, KEY, leases.holder_id(), 60)
    assert lease is not None
    state = _state(store, key=KEY, lease=LeaseRef.of(lease))
    ctx, keeping = Context(store, tmp_path), LeaseKeeping(60)
    execute(Stage("fetch_checkpoint", lambda s, c: s, "doc"), state, ctx, [keeping])
    first = ctx.keeper
    execute(Stage("plan_target", lambda s, c: s, "doc"), state, ctx, [keeping])
    assert ctx.keeper is first  # one keeping for the whole build
    held = leases.current(store, KEY)
    assert held is not None and held.live

    def boom(state, ctx):
        raise ValueError("boom")

    with pytest.raises(ValueError):
        execute(Stage("compile_graphs", boom, "doc"), state, ctx, [keeping])
    after = leases.current(store, KEY)
    assert after is None or not after.live
