"""What earlier releases wrote still reads (`tests/data/records/`, see its README): every record of
every fixture store reads with the current classes, each index entry leads `lookup` to a complete
artifact, and the current publish stage writes what the last release wrote."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from neuronforge.artifacts.farm_index.entry import published_record
from neuronforge.artifacts.published import lookup, scan_index, verify_manifest
from neuronforge.records.artifact_manifest import ArtifactManifest
from neuronforge.records.hosts import HostsReport
from neuronforge.records.index_entry import IndexEntry
from neuronforge.records.payload_manifest import PayloadManifest
from neuronforge.records.smoke import SmokeRecord
from neuronforge.stores import open_store

DATA = Path(__file__).parent.parent / "data" / "records"
STORES = sorted(p.name for p in DATA.iterdir() if p.is_dir())


@pytest.fixture(params=STORES)
def store_copy(request: pytest.FixtureRequest, tmp_path: Path):
    shutil.copytree(DATA / request.param, tmp_path / request.param)
    return open_store(f"file://{tmp_path / request.param}")


def test_every_fixture_is_there() -> None:
    assert STORES == ["62b593a", "ce27dfa"]


def test_every_record_of_every_fixture_reads(store_copy) -> None:
    index_keys = [o.key for o in store_copy.list("index")]
    manifests = [o.key for o in store_copy.list("artifacts") if o.key.endswith("/manifest.json")]
    payloads = [o.key for o in store_copy.list("builds") if o.key.endswith("/MANIFEST.json")]
    assert len(index_keys) == len(manifests) == 1
    for key in index_keys:
        entry = IndexEntry.read(store_copy, key)
        assert entry.manifest in manifests and key == f"index/{entry.cache_key}.json"
    for key in manifests:
        m = ArtifactManifest.read(store_copy, key)
        assert len(m.cache_key) == 64 and m.files and m.toolchain.compiler and m.source.location
        assert m.as_stored() == store_copy.read_json(key)
    for key in payloads:
        assert PayloadManifest.read(store_copy, key).files


def test_each_fixture_is_a_complete_artifact_to_the_readers(store_copy) -> None:
    [found] = list(scan_index(store_copy))
    assert found.problem is None and found.manifest is not None and found.index is not None
    hit = lookup(store_copy, found.manifest.cache_key)
    assert hit is not None and hit.manifest == found.manifest
    assert verify_manifest(store_copy, found.index.manifest) == []
    # the outputs are URIs of the store being read, also where the manifest held its writer's URIs
    assert hit.uris and all(uri.startswith(f"{store_copy.root_uri}/{hit.prefix}/") for uri in hit.uris.values())
    record = published_record(found.index, found.manifest)
    assert record.key == found.manifest.cache_key and record.published is not None
    assert record.published["files"] == len(found.manifest.files)


def test_the_first_manifests_had_no_profile_and_uris_for_outputs() -> None:
    store = open_store(f"file://{DATA / '62b593a'}")
    [m] = [ArtifactManifest.read(store, o.key) for o in store.list("artifacts") if o.key.endswith("manifest.json")]
    assert m.profile is None and m.hosts == HostsReport() and m.run_id == ""
    assert m.formats["optimum"].startswith("file:///")


def test_the_publish_stage_writes_what_the_last_release_wrote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The inputs of `ce27dfa/` (its README) through today's publish stage: the same manifest,
    payload manifest and farm-index record byte for byte, the same index entry key for key."""
    import hashlib
    import time

    from neuronforge.artifacts import layout
    from neuronforge.artifacts.localcache import file_entries, publish_tree
    from neuronforge.common.hosts import StageRun, host_report
    from neuronforge.pipeline.stages import publish as publish_stage
    from neuronforge.profiles.registry import compile_request
    from neuronforge.profiles.request import cache_key
    from neuronforge.spec.source import ModelSource
    from neuronforge.spec.target import TargetSpec
    from neuronforge.spec.toolchain import Toolchain

    monkeypatch.setattr(time, "strftime", lambda fmt, t=None: "2026-11-25T12:00:00Z")
    monkeypatch.setattr(publish_stage.neuronforge, "__version__", "0.1.0")
    src = ModelSource.parse("org/model").pinned("0123456789abcdef0123456789abcdef01234567")
    spec = {"instance_type": "inf2.xlarge", "tp_degree": 2, "sequence_length": 2048, "profile": "vllm-neuron@2.26.1"}
    tc = Toolchain("nxdi", "0.6.1", "neuronxcc", "2.21.33363.0+82129205", {"torch": "2.8.0", "transformers": "4.57.6"})
    req = compile_request(src, TargetSpec.parse(spec))
    key = cache_key(req, tc)
    payload = tmp_path / "payload"
    (payload / "nxdi").mkdir(parents=True)
    (payload / "launch").mkdir()
    (payload / "nxdi" / "config.json").write_text('{"model_type": "llama"}\n')
    (payload / "nxdi" / "model.pt").write_bytes(b"traced")
    (payload / "launch" / "vllm.env").write_text("VLLM_NEURON_FRAMEWORK=neuronx-distributed-inference\n")
    store = open_store(f"file://{tmp_path / 'store'}")
    staged = PayloadManifest(cache_key=key, files=file_entries(payload))
    ref = publish_tree(store, payload, layout.build_prefix(key, hashlib.sha256(staged.to_bytes()).hexdigest()), staged)
    smoke = {
        "passed": True,
        "reason": "6/6 tokens match the reference",
        "prompts": [{"prompt": "Hello, my name is", "matching_prefix": 6}],
        "load_s": 4.5,
        "time_to_first_token_s": 0.031,
        "per_token_s": 0.0125,
        "seconds": 12.0,
        "unquantized_agreement": None,
    }
    compile_info = {
        "graphs": ["context_encoding", "token_generation"],
        "compiler_invocations": 2,
        "seconds": 95.0,
        "graph_set": "nxdi",
        "formats": {"nxdi": "nxdi", "launch": "launch"},
    }
    hosts = host_report(
        [
            StageRun(stage="compile", seconds=95.0, host="cpu", hostname="cpu-1"),
            StageRun(stage="smoke", seconds=12.0, host="neuron", hostname="inf2-1"),
        ]
    )
    inp = publish_stage.PublishInput(
        req, tc, key, ref, SmokeRecord.model_validate(smoke), compile_info, "manual__2026-11-25T11:00:00", hosts
    )
    published = publish_stage.publish(inp, store)
    then = DATA / "ce27dfa"
    manifest_key = published.manifest_uri.removeprefix(store.root_uri).strip("/")
    for same in (manifest_key, ref.manifest_key, "farm-index/tail.json"):
        assert store.get_bytes(same) == (then / same).read_bytes(), same
    index_key = layout.index_entry(key)
    assert store.read_json(index_key) == open_store(f"file://{then}").read_json(index_key)
