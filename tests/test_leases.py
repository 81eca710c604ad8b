"""Compile leases on both stores (a directory and a real S3 endpoint), and the pipeline using them:
identical concurrent requests compile once; a dead holder's lease is taken over after expiry."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from neuronforge.artifacts import layout, leases
from neuronforge.pipeline.runner import run_target
from neuronforge.spec.target import TargetSpec
from neuronforge.stores import ArtifactStore, open_store
from tests.conftest import NEURON_TARGET

KEY = "k" * 64


@pytest.fixture(params=["file", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ArtifactStore:
    if request.param == "file":
        return open_store(f"file://{tmp_path / 'store'}")
    return open_store(f"s3://{request.getfixturevalue('s3_bucket')}/nf")


def test_one_holder_at_a_time_and_takeover_after_expiry(store: ArtifactStore) -> None:
    first = leases.try_acquire(store, KEY, "a", ttl_s=0.5)
    assert first is not None and leases.try_acquire(store, KEY, "b", ttl_s=0.5) is None
    renewed = leases.renew(store, first, ttl_s=0.5)
    assert renewed.version != first.version and renewed.expires > first.expires
    time.sleep(0.6)  # "a" stops heart-beating: its lease expires
    second = leases.try_acquire(store, KEY, "b", ttl_s=30)
    assert second is not None and leases.current(store, KEY).holder == "b"
    with pytest.raises(leases.LeaseLost):
        leases.renew(store, renewed)  # the old holder learns it lost the lease
    leases.release(store, second)
    assert leases.try_acquire(store, KEY, "c", ttl_s=30) is not None  # released: no need to wait


def test_exactly_one_waiter_takes_over_an_expired_lease(store: ArtifactStore) -> None:
    assert leases.try_acquire(store, KEY, "dead", ttl_s=0.2) is not None
    time.sleep(0.3)
    barrier = threading.Barrier(8)

    def contend(i: int):
        barrier.wait()
        return leases.try_acquire(store, KEY, f"w{i}", ttl_s=30)

    with ThreadPoolExecutor(8) as pool:
        won = [lease for lease in pool.map(contend, range(8)) if lease is not None]
    assert len(won) == 1 and leases.current(store, KEY).holder == won[0].holder


def test_a_keeper_heartbeats_and_notices_a_takeover(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path / 'store'}")
    lease = leases.try_acquire(store, KEY, "a", ttl_s=1.5)
    with leases.LeaseKeeper(store, lease, ttl_s=1.5) as keeper:
        time.sleep(2.5)  # longer than the TTL: only the heartbeats (every 0.5 s) keep it alive
        assert leases.try_acquire(store, KEY, "b", ttl_s=30) is None
        keeper.assert_held()
    assert not leases.current(store, KEY).live  # released on exit
    stolen = leases.try_acquire(store, KEY, "a2", ttl_s=0.3)
    keeper = leases.LeaseKeeper(store, stolen, ttl_s=0.3)
    time.sleep(0.4)
    assert leases.try_acquire(store, KEY, "thief", ttl_s=30) is not None
    with pytest.raises(leases.LeaseLost):
        keeper.assert_held()


def test_assert_held_beside_the_heartbeat_is_no_takeover(tmp_path: Path) -> None:
    """The pipeline proves its lease (`assert_held`) while the keeper's thread heart-beats it: the two
    renewals must not take each other's write for a takeover, and the lease is released after."""
    store = open_store(f"file://{tmp_path / 'store'}")
    lease = leases.try_acquire(store, KEY, "a", ttl_s=30)
    with leases.LeaseKeeper(store, lease, ttl_s=0.006) as keeper:  # a heartbeat every 2 ms; no other worker
        for _ in range(300):
            keeper.assert_held()
        assert keeper.lost is None
    assert not leases.current(store, KEY).live


def test_keeping_releases_after_the_work_failed_or_not(tmp_path: Path) -> None:
    """The CLI's runner: the build is over either way, so waiters need not sit out the TTL."""
    store = open_store(f"file://{tmp_path / 'store'}")
    with leases.keeping(store, leases.try_acquire(store, KEY, "a", ttl_s=30), ttl_s=30):
        assert leases.current(store, KEY).live
    assert not leases.current(store, KEY).live
    with pytest.raises(RuntimeError), leases.keeping(store, leases.try_acquire(store, KEY, "b", ttl_s=30), ttl_s=30):
        raise RuntimeError("the stage failed")
    assert not leases.current(store, KEY).live


def test_keeping_hands_a_held_lease_on_at_its_latest_version(tmp_path: Path) -> None:
    """A DAG task: the lease stays held for the next task, which renews it from `keeper.lease`."""
    store = open_store(f"file://{tmp_path / 'store'}")
    lease = leases.try_acquire(store, KEY, "a", ttl_s=30)
    with leases.keeping(store, lease, ttl_s=30, hand_on=True) as keeper:
        pass
    assert leases.current(store, KEY).live and keeper.lease.version != lease.version
    assert leases.renew(store, keeper.lease).holder == "a"  # the next task's renewal is no takeover


def test_keeping_refuses_a_lease_taken_over_before_or_during_the_work(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path / 'store'}")
    stale = leases.try_acquire(store, KEY, "a", ttl_s=0.2)
    time.sleep(0.3)
    taken = leases.try_acquire(store, KEY, "thief", ttl_s=30)
    ran = []
    with pytest.raises(leases.LeaseLost), leases.keeping(store, stale, ttl_s=0.2, hand_on=True):
        ran.append(1)  # pragma: no cover - refused before the work starts
    assert not ran and leases.current(store, KEY).holder == "thief"
    with pytest.raises(leases.LeaseLost), leases.keeping(store, taken, ttl_s=30, hand_on=True):
        time.sleep(0.05)
        leases.renew(store, leases.current(store, KEY))  # another worker's write: ours is no longer the version
    assert leases.current(store, KEY).live  # not released: it is not ours


def _nxdi_target() -> TargetSpec:
    return TargetSpec.parse({**NEURON_TARGET, "profile": "vllm-neuron@2.26.1"})


def test_concurrent_identical_requests_compile_once(
    store: ArtifactStore, fake_neuron: Path, served_llama: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_NEURON_SLEEP", "3")  # a compile long enough for the runs to overlap
    barrier = threading.Barrier(2)

    def run(i: int):
        barrier.wait()
        return run_target(str(served_llama), _nxdi_target(), store, tmp_path / f"worker{i}", lease_poll_s=0.5)

    with ThreadPoolExecutor(2) as pool:
        outcomes = list(pool.map(run, range(2)))
    assert len(fake_neuron.read_text().splitlines()) == 2  # one compile: two graphs
    assert sorted(o.status for o in outcomes) == ["cache-hit", "published"]
    assert outcomes[0].published.manifest_uri == outcomes[1].published.manifest_uri
    waiter = next(o for o in outcomes if o.status == "cache-hit")
    assert waiter.timings["claim_build"] > 0


def test_a_dead_holders_lease_is_taken_over_after_expiry(fake_neuron: Path, served_llama: Path, tmp_path: Path) -> None:
    from neuronforge.artifacts.published import lookup
    from neuronforge.pipeline.stages.prepare import prepare

    store = open_store(f"file://{tmp_path / 'store'}")
    key = prepare(str(served_llama), _nxdi_target(), tmp_path / "w").key
    # A worker took the lease, then was killed mid-compile: no heartbeat, no artifact.
    assert leases.try_acquire(store, key, "killed-host:4242:dead", ttl_s=2) is not None
    acquired = time.monotonic()
    assert lookup(store, key) is None and store.list("artifacts") == []  # nothing partial is visible
    started = time.monotonic()
    out = run_target(str(served_llama), _nxdi_target(), store, tmp_path / "w", lease_poll_s=0.2)
    assert out.status == "published" and time.monotonic() - acquired >= 2.0  # waited out the expiry
    # ... and the waiting was the claim's: the lease expired 2 s after it was taken, so the claim
    # lasted at least what was left of those 2 s when it began (the stages before it ran first).
    stages = list(out.timings)
    before_claim = sum(out.timings[name] for name in stages[: stages.index("claim_build")])
    left_at_claim = 2.0 - (started - acquired) - before_claim
    assert out.timings["claim_build"] >= left_at_claim - 0.01, (out.timings, left_at_claim)
    assert leases.current(store, key).holder != "killed-host:4242:dead"
    assert store.exists(layout.index_entry(key))
