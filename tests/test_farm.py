"""The farm view of a store (what the artifact catalog page and its JSON endpoints show): a store
seeded by the pipeline, a smoke failure and a compile failure recorded as the pipeline records
them, a live and an expired lease, and a profile version newer than the artifact's."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from neuronforge.artifacts import farm_index, leases
from neuronforge.artifacts.farm_index import record_failure
from neuronforge.farm.rows import FarmQuery, FarmRow, farm_page, farm_row, farm_rows, filter_rows
from neuronforge.spec.target import TargetSpec
from neuronforge.stores import open_store
from tests.conftest import TARGET, Compiled


@pytest.fixture
def store(compiled: Compiled, tmp_path: Path):
    copy = tmp_path / "store"
    shutil.copytree(Path(compiled.store.root_uri.removeprefix("file://")), copy)
    return open_store(f"file://{copy}")


def _state(seq: int) -> SimpleNamespace:
    return SimpleNamespace(model="org/model", target=TargetSpec.parse({**TARGET, "sequence_length": seq}))


def _first(store, compiled: Compiled):
    """The session build's row (other tests may publish more into the shared session store)."""
    (row,) = [r for r in farm_rows(store) if r.key == compiled.first.key]
    return row


def test_a_published_artifact(store, compiled: Compiled) -> None:
    row = _first(store, compiled)
    assert row.status == "published" and row.key == compiled.first.key
    assert row.model == str(compiled.checkpoint) and row.profile == "cpu@local" and row.instance == "inf2.xlarge"
    assert row.compiler_version and row.size_bytes and row.size_bytes > 0
    assert row.ttft_ms is not None and row.per_token_ms is not None
    assert row.cpu_seconds and row.cpu_seconds > 0 and row.neuron_seconds == 0.0  # a cpu build: no Neuron host
    assert row.manifest_uri == store.uri(compiled.first.published.manifest_uri.split("/store/", 1)[1])
    assert row.uris and all(u.startswith(store.root_uri) for u in row.uris.values())
    assert row.launch and all(u.startswith(row.artifact_uri + "/launch/") for u in row.launch.values())
    assert row.incomplete is None  # a page of the farm does not list every artifact's folder
    detail, manifest = farm_row(store, row.key[:12])  # one artifact: its own manifest and listing
    assert detail == FarmRow(**{**row.to_json(), "incomplete": []})
    assert manifest is not None and manifest.cache_key == row.key


def test_failures_leases_and_filters(store) -> None:
    record_failure(store, "a" * 64, "smoke", RuntimeError("greedy tokens differ"), "manual__1", _state(32))
    record_failure(store, "b" * 64, "compile_graphs", RuntimeError("NCC_EXTP004"), "manual__2", _state(48))
    mine = leases.try_acquire(store, "c" * 64, "worker-1", ttl_s=600)
    assert mine is not None
    farm_index.announce(store, mine, _state(56))
    dead = leases.try_acquire(store, "d" * 64, "worker-2", ttl_s=-1)  # expired at once
    assert dead is not None
    farm_index.announce(store, dead, _state(60))
    rows = {r.key[:1]: r for r in farm_rows(store) if r.key[0] in "abcd" and r.key[1] == r.key[0]}
    assert rows["a"].status == "smoke-failed" and rows["a"].model == "org/model" and rows["a"].stage == "smoke"
    assert "greedy tokens differ" in rows["a"].message and rows["a"].run_id == "manual__1"
    assert rows["a"].target.endswith("s32-fp32") and rows["a"].instance == "inf2.xlarge"
    assert rows["b"].status == "failed" and rows["b"].stage == "compile_graphs"
    assert rows["c"].status == "building" and "worker-1" in rows["c"].message
    assert "d" not in rows
    assert {r.status for r in filter_rows(list(rows.values()), status="failed")} == {"failed"}
    assert {r.key[:1] for r in filter_rows(list(rows.values()), model="ORG/")} == {"a", "b", "c"}
    failed = farm_page(store, FarmQuery(status="failed"))
    assert [r.key for r in failed.rows] == ["b" * 64] and failed.total == 1 and failed.counts["smoke-failed"] == 1
    assert farm_row(store, "a" * 12)[0].message == rows["a"].message  # the detail reads failures/<key>.json
    assert farm_row(store, "d" * 64) is None  # nothing published or failed, the lease expired


def test_a_newer_profile_version_makes_it_stale(store, compiled: Compiled, monkeypatch: pytest.MonkeyPatch) -> None:
    from neuronforge.profiles import registry
    from neuronforge.profiles.cpu import CpuProfile

    class Newer(CpuProfile):
        @property
        def version(self) -> str:
            return "2"

    registered = registry.all_profiles()
    monkeypatch.setattr(registry, "all_profiles", lambda: (*registered, Newer()))
    row = _first(store, compiled)
    assert row.status == "stale" and "cpu@2" in row.message


def test_a_truncated_file_is_listed(store, compiled: Compiled) -> None:
    row = _first(store, compiled)
    victim = next(Path(row.artifact_uri.removeprefix("file://")).glob("launch/*"))
    victim.write_bytes(victim.read_bytes()[:-1])
    row, _ = farm_row(store, row.key)
    assert row.incomplete == [
        f"{victim.relative_to(Path(row.artifact_uri.removeprefix('file://')))}: missing or wrong size"
    ]


def test_a_forged_record_is_read_without_what_it_mistyped(tmp_path: Path) -> None:
    """The farm index is the store's: a record whose numbers are text, NaN or booleans and whose
    outputs are not a mapping gives a row without them, not an error on the catalog page."""
    from neuronforge.artifacts.farm_index import Entry
    from neuronforge.farm.rows import row_of
    from neuronforge.records.farm_index import LogRecord

    e = Entry("k" * 64, model="m", profile="cpu@local")
    e.apply(
        LogRecord.model_validate(
            {
                "kind": "published",
                "key": e.key,
                "published": {
                    "size_bytes": "<b>",
                    "ttft_ms": float("nan"),
                    "per_token_ms": True,
                    "cpu_seconds": "1",
                    "neuron_seconds": 2,
                    "formats": ["x"],
                    "launch": "serve.sh",
                    "prefix": "artifacts/x",
                },
            }
        )
    )
    row = row_of(open_store(f"file://{tmp_path}"), e, {})
    assert (row.size_bytes, row.ttft_ms, row.per_token_ms, row.cpu_seconds) == (None, None, None, None)
    assert row.neuron_seconds == 2.0 and row.uris == {} and row.launch == {}


def test_a_manifest_with_sizes_that_are_not_numbers_is_no_artifact() -> None:
    from neuronforge.artifacts.published import manifest_problem

    files = [{"path": "a", "size": 1, "sha256": "0" * 64}]
    manifest = {"cache_key": "k", "source": {}, "toolchain": {}, "files": files}
    assert manifest_problem(manifest) is None
    for size in ("1", True, -1, 1.5, None):
        assert "files are not path/size/sha256" in manifest_problem({**manifest, "files": [{**files[0], "size": size}]})


def test_a_hosts_report_that_is_not_numbers_describes_nothing() -> None:
    from pydantic import TypeAdapter

    from neuronforge.common.hosts import StageRun, host_report
    from neuronforge.records.hosts import HostsPart, HostsReport

    def read(value: object) -> HostsReport:  # as the manifest's `hosts` part reads it
        return TypeAdapter(HostsPart).validate_python(value)

    runs = [StageRun(stage="compile", seconds=3, host="cpu"), StageRun(stage="smoke", seconds=1, host="neuron")]
    good = host_report(runs)
    assert read(good).describe() == [
        "CPU hosts 3.0s, Neuron hosts 1.0s (25% of the build on a Neuron host)",
        "compile 3.0s (cpu), smoke 1.0s (neuron)",
    ]
    assert read(good).hostnames("smoke") == [runs[1].hostname]
    assert read(good).model_dump(mode="json") == good  # written key for key
    inf = float("inf")
    for bad in ({**good, "cpu_seconds": "<b>"}, {**good, "stages": "x"}, ["x"], {**good, "neuron_seconds": inf}):
        assert read(bad).describe() == []
    assert read({**good, "cpu_seconds": "3"}).neuron_share is None
    assert read({**good, "stages": ["x", {"stage": "smoke", "seconds": "?"}]}).hostnames("smoke") == [""]


def test_a_holder_dead_on_this_host_is_not_building(store) -> None:
    """A run SIGKILLed on this host left its lease unexpired: the farm does not call it building (the
    identical rerun takes that lease over at once, so no one is building it), whatever its TTL says."""
    import subprocess
    import sys

    taker = (
        "import sys; from neuronforge.artifacts import leases; from neuronforge.stores import open_store;"
        "assert leases.try_acquire(open_store(sys.argv[1]), 'e' * 64, 'worker-3', ttl_s=600)"
    )
    subprocess.run([sys.executable, "-c", taker, store.root_uri], check=True, cwd=Path(__file__).parents[1])
    lease = leases.current(store, "e" * 64)
    assert lease is not None and lease.live  # unexpired by its clock, its process gone
    farm_index.announce(store, lease, _state(64))
    assert "e" * 64 not in {r.key for r in farm_rows(store)}
    assert farm_row(store, "e" * 64) is None
