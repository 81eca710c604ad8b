"""The pipeline end to end on the cpu backend: one real compile per test session, shared."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest

from neuronforge.artifacts import layout
from neuronforge.artifacts.published import lookup, verify_manifest
from neuronforge.farm.rows import farm_rows
from neuronforge.pipeline.planner import PlanRejected
from neuronforge.pipeline.runner import run_target
from neuronforge.pipeline.stages.compile import CompileInput, compile_target
from neuronforge.pipeline.stages.publish import PublishInput, publish
from neuronforge.records.smoke import SmokeRecord
from neuronforge.spec.target import TargetSpec
from neuronforge.stores import open_store
from tests.conftest import NEURON_TARGET, TARGET, Compiled, smoke_payload


def test_cold_run_publishes_a_verifiable_artifact(compiled: Compiled, tmp_path: Path) -> None:
    out = compiled.first
    assert out.status == "published" and out.compiler_invocations == 2  # prefill-32 + decode
    manifest_key = f"{out.published.prefix}/{layout.ARTIFACT_MANIFEST}"
    assert verify_manifest(compiled.store, manifest_key, download_to=tmp_path) == []
    m = out.published.manifest.to_json()  # as stored
    paths = {f["path"] for f in m["files"]}
    assert {"cpu-aoti/config.json", "cpu-aoti/tokenizer.json", "cpu-aoti/compiled.json",
            "cpu-aoti/graphs/prefill-32.pt2", "cpu-aoti/graphs/decode.pt2", "cpu-aoti/weights.safetensors",
            "launch/load.py", "smoke.json"} <= paths  # fmt: skip
    # A CPU artifact says what it is: no `neuron_config.json` a Neuron loader could take for an
    # Optimum export, no folder named after one.
    assert not any(p.endswith("neuron_config.json") or p.startswith("optimum") for p in paths)
    assert m["formats"].keys() == {"cpu-aoti", "launch"}
    assert m["profile"]["ref"] == "cpu@local" and m["profile"]["backend"] == "cpu"
    assert m["cache_key"] == out.key and m["smoke"]["passed"] is True
    assert m["toolchain"]["compiler"] == "torch-inductor"
    assert compiled.store.exists(layout.index_entry(out.key))


def test_second_run_is_a_cache_hit_without_compiling(compiled: Compiled) -> None:
    again = run_target(str(compiled.checkpoint), compiled.target, compiled.store, compiled.work_dir)
    assert again.status == "cache-hit" and again.compiler_invocations == 0
    assert again.published.manifest_uri == compiled.first.published.manifest_uri
    assert set(again.timings) == {"prepare"}  # no fetch, no compile


def test_a_hit_reads_the_index_once(compiled: Compiled, monkeypatch: pytest.MonkeyPatch) -> None:
    """The outcome of a hit is the artifact prepare's lookup found, not a second read of the index."""
    import neuronforge.pipeline.runner as pipeline
    import neuronforge.pipeline.stages.prepare as prepare_stage

    keys: list[str] = []

    def counted(real):
        return lambda store, key, **kw: keys.append(key) or real(store, key, **kw)

    for module in (pipeline, prepare_stage):  # prepare's lookup (it records damage), and the runner's
        monkeypatch.setattr(module, "lookup", counted(module.lookup))
    again = run_target(str(compiled.checkpoint), compiled.target, compiled.store, compiled.work_dir)
    assert again.status == "cache-hit" and keys == [compiled.first.key]
    assert again.published.manifest == compiled.first.published.manifest


def test_compile_cache_entries_are_in_the_store_in_neuron_layout(compiled: Compiled) -> None:
    tc = compiled.first.published.manifest.toolchain.model_dump()
    prefix = layout.neuron_cache_prefix(tc["compiler"], tc["compiler_version"])
    assert prefix.startswith("neuron-cache/torch-inductor-2.13.0")
    names = {o.key.split("/")[2]: o.key for o in compiled.store.list(prefix)}
    assert len(names) == 2 and all(n.startswith("MODULE_") and "+" in n for n in names)
    for name in names:
        files = {o.key.rsplit("/", 1)[-1] for o in compiled.store.list(f"{prefix}/{name}")}
        assert files == {"model.pt2", "compile_flags.json", "model.done"}


def test_another_worker_reuses_graphs_from_the_store(compiled: Compiled, tmp_path: Path) -> None:
    """A fresh host (empty local cache) pulls the graphs instead of compiling them."""
    first = compiled.first
    src = first.published.manifest.source.model_dump()
    from neuronforge.pipeline.stages.prepare import prepare

    prep = prepare(src["location"], compiled.target, tmp_path / "work")
    assert prep.key == first.key
    built = compile_target(
        CompileInput(prep.request, prep.toolchain, prep.key, compiled.checkpoint, tmp_path / "work"), compiled.store
    )
    assert built.compiler_invocations == 0 and all(g["cached"] for g in built.graphs)


def test_corrupted_graph_fails_the_smoke_test_and_nothing_is_published(compiled: Compiled, tmp_path: Path) -> None:
    payload = tmp_path / "payload"
    shutil.copytree(compiled.build_dir, payload)
    graph = payload / "cpu-aoti" / "graphs" / "decode.pt2"
    graph.write_bytes(graph.read_bytes()[: graph.stat().st_size // 2])  # a truncated upload
    smoke = smoke_payload(payload, compiled.target, tmp_path / "cache")
    assert not smoke.passed and "failed to load or run" in smoke.reason
    store = open_store(f"file://{tmp_path / 'store'}")
    from neuronforge.artifacts.localcache import TreeRef
    from neuronforge.common.errors import InvalidInput
    from neuronforge.pipeline.stages.prepare import prepare

    prep = prepare(str(compiled.checkpoint), compiled.target, tmp_path / "w")
    staged = TreeRef(prefix="builds/x", manifest_sha256="0" * 64)
    with pytest.raises(InvalidInput, match=r"refusing to publish .* smoke test failed"):
        publish(
            PublishInput(
                prep.request, prep.toolchain, prep.key, staged, SmokeRecord.model_validate(smoke.to_json()), {}
            ),
            store,
        )
    assert store.list() == []


def test_wrong_weights_fail_the_smoke_test(compiled: Compiled, tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file

    payload = tmp_path / "payload"
    shutil.copytree(compiled.build_dir, payload)
    weights = load_file(payload / "cpu-aoti" / "weights.safetensors")
    weights = {k: (-v if k.endswith("lm_head.weight") else v) for k, v in weights.items()}
    save_file(weights, payload / "cpu-aoti" / "weights.safetensors")
    smoke = smoke_payload(payload, compiled.target, tmp_path / "cache")
    assert not smoke.passed and "tokens match the reference, 4 required" in smoke.reason


def test_smoke_reports_latencies_and_agreement(compiled: Compiled) -> None:
    smoke = compiled.first.published.manifest.smoke
    assert smoke.load_s > 0 and smoke.time_to_first_token_s > 0 and smoke.per_token_s > 0
    for row in smoke.prompts:
        assert row["matching_prefix"] >= 4 and row["max_logit_diff"] < 1e-3


def test_planner_rejection_publishes_nothing(compiled: Compiled, tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path / 'store'}")
    bad = TargetSpec.parse({**TARGET, "tp_degree": 4})
    with pytest.raises(PlanRejected, match=r"tp=4 is not supported on inf2\.xlarge"):
        run_target(str(compiled.checkpoint), bad, store, compiled.work_dir)
    # Refused by the static checks in `prepare`: no lease taken, nothing fetched; the failure recorded
    # (and told to the farm index, which shows it as a failed build).
    assert {o.key.split("/")[0] for o in store.list()} == {"failures", "farm-index"}
    assert [r.status for r in farm_rows(store)] == ["failed"]


def test_a_sequence_longer_than_the_model_is_refused_from_its_config_alone(compiled: Compiled, tmp_path: Path) -> None:
    """The model's config.json (read alone) decides heads and sequence length before any lease or
    download; the message names the limit."""
    store = open_store(f"file://{tmp_path / 'store'}")
    bad = TargetSpec.parse({**TARGET, "sequence_length": 4096, "max_context_length": 1024})
    with pytest.raises(PlanRejected, match=r"exceeds the model's max_position_embeddings 256"):
        run_target(str(compiled.checkpoint), bad, store, compiled.work_dir)
    assert {o.key.split("/")[0] for o in store.list()} == {"failures", "farm-index"}  # no lease, no fetch


def test_a_failed_quantization_publishes_nothing(tiny_llama: Path, tmp_path: Path) -> None:
    """NaN weights are found by the quantize stage, after fetch and plan and before any compile."""
    from safetensors.torch import load_file, save_file

    from neuronforge.common.errors import InvalidInput

    weights = load_file(tiny_llama / "model.safetensors")
    weights["model.layers.1.mlp.down_proj.weight"][0, 0] = float("nan")
    save_file(weights, tiny_llama / "model.safetensors")
    store = open_store(f"file://{tmp_path / 'store'}")
    target = TargetSpec.parse({**TARGET, "quantization": "int8"})
    with pytest.raises(InvalidInput, match="NaN or Inf"):
        run_target(str(tiny_llama), target, store, tmp_path / "w")
    assert store.list("quantized") == [] and store.list("artifacts") == [] and store.list("index") == []
    assert not (tmp_path / "w" / "build").exists()  # nothing was compiled


def test_same_flow_against_s3(compiled: Compiled, s3_bucket: str) -> None:
    store = open_store(f"s3://{s3_bucket}/nf")
    out = run_target(str(compiled.checkpoint), compiled.target, store, compiled.work_dir)  # local cache: no compile
    assert out.status == "published" and out.compiler_invocations == 0
    assert out.published.manifest_uri.startswith(f"s3://{s3_bucket}/nf/artifacts/")
    assert verify_manifest(store, f"{out.published.prefix}/manifest.json") == []
    assert lookup(store, out.key) is not None
    assert run_target(str(compiled.checkpoint), compiled.target, store, compiled.work_dir).status == "cache-hit"


def test_a_build_to_s3_stages_the_bytes_the_store_holds_by_copying_them(compiled: Compiled, s3_bucket: str) -> None:
    """Bytes once: the staged payload's compiled graphs are the compile-cache entries the compile just
    synced, and its config and tokenizer are the checkpoint mirror's, byte for byte; each is copied
    inside the store (CopyObject: `x-amz-copy-source`, no body), not uploaded a second time."""
    import uuid
    from urllib.parse import unquote, urlsplit

    store = open_store(f"s3://{s3_bucket}/nf")
    puts: list[tuple[str, str | None]] = []  # (key, copy source) of every PUT, as sent

    def seen(request, **_) -> None:
        if request.method == "PUT":
            src = request.headers.get("x-amz-copy-source")
            src = src.decode() if isinstance(src, bytes) else src
            key = unquote(urlsplit(request.url).path).removeprefix(f"/{s3_bucket}/nf/")
            puts.append((key, unquote(src).lstrip("/").removeprefix(f"{s3_bucket}/nf/") if src else None))

    hook = f"bytes-once-{uuid.uuid4().hex}"
    store.client.meta.events.register("before-send.s3", seen, unique_id=hook)
    try:
        out = run_target(str(compiled.checkpoint), compiled.target, store, compiled.work_dir)
    finally:
        store.client.meta.events.unregister("before-send.s3", unique_id=hook)
    assert out.status == "published"
    staged = {key.split("/", 3)[3]: src for key, src in puts if key.startswith(f"builds/{out.key}/")}
    graphs = {path: src for path, src in staged.items() if path.endswith(".pt2")}
    assert sorted(graphs) == ["cpu-aoti/graphs/decode.pt2", "cpu-aoti/graphs/prefill-32.pt2"]
    entries = {o.key for o in store.list("neuron-cache") if o.key.endswith("/model.pt2")}
    assert set(graphs.values()) == entries  # each from its compile-cache entry, none uploaded
    assert staged["cpu-aoti/tokenizer.json"].startswith("checkpoints/")
    assert staged["cpu-aoti/config.json"].startswith("checkpoints/")
    assert staged["cpu-aoti/weights.safetensors"] is None  # re-saved for the artifact: new bytes, uploaded
    manifest = f"{out.published.prefix}/{layout.ARTIFACT_MANIFEST}"
    assert verify_manifest(store, manifest) == []  # the artifact copied from the staged payload is intact


def test_lookup_ignores_an_index_pointing_at_an_incomplete_artifact(compiled: Compiled, tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path / 'copy'}")
    for o in compiled.store.list():
        store.put_bytes(compiled.store.get_bytes(o.key), o.key)
    assert lookup(store, compiled.first.key) is not None
    store.delete_prefix(f"{compiled.first.published.prefix}/cpu-aoti/graphs")
    assert lookup(store, compiled.first.key) is None


def test_an_artifact_its_consumer_would_refuse_is_not_published(
    compiled: Compiled, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The profile's preflight runs on the assembled payload, on the compile host, before any byte of
    it is uploaded: a failing rule leaves no artifact, no manifest and no index entry behind."""
    from neuronforge.pipeline.stages.payload import PreflightFailed
    from neuronforge.profiles.cpu import CpuProfile

    monkeypatch.setattr(CpuProfile, "preflight", lambda self, artifact: ["compiled.json: a rule the loader checks"])
    store = open_store(f"file://{tmp_path / 'store'}")
    work = tmp_path / "w"
    shutil.copytree(compiled.work_dir / "compile-cache", work / "compile-cache")
    with pytest.raises(
        PreflightFailed, match=re.escape("cpu@local's consumer would not load it: compiled.json: a rule")
    ):
        run_target(str(compiled.checkpoint), compiled.target, store, work)
    assert store.list("artifacts") == [] and store.list("index") == []
    assert store.read_json(store.list("failures")[0].key)["stage"] == "compile_graphs"
    assert store.list("builds") == []  # not even staged


def test_verify_rehashes_the_files_and_runs_the_preflight(compiled: Compiled, tmp_path: Path) -> None:
    """`neuronforge verify`: exit 0 on the published artifact; 3 with the reasons once a file
    changed (sha256) or the consumer's rule breaks (compiled.json vs the target)."""
    from neuronforge.interfaces.cli import main

    store = open_store(f"file://{tmp_path / 'copy'}")
    for o in compiled.store.list(compiled.first.published.prefix):
        store.put_bytes(compiled.store.get_bytes(o.key), o.key)
    manifest_uri = store.uri(f"{compiled.first.published.prefix}/manifest.json")
    assert main(["verify", manifest_uri, "--work-dir", str(tmp_path / "v")]) == 0
    key = f"{compiled.first.published.prefix}/cpu-aoti/compiled.json"
    meta = store.read_json(key)
    store.write_json(key, {**meta, "sequence_length": meta["sequence_length"] * 2})
    assert main(["verify", manifest_uri.rsplit("/", 1)[0], "--work-dir", str(tmp_path / "v")]) == 3
    from neuronforge.farm.verify import verify_artifact

    problems = verify_artifact(store, f"{compiled.first.published.prefix}/manifest.json", tmp_path / "v").problems
    assert len(problems) == 2 and problems[0].startswith("cpu-aoti/compiled.json: ")  # size or sha256
    assert problems[1] == (
        f"preflight (cpu@local): cpu-aoti/compiled.json: sequence_length={meta['sequence_length'] * 2}, "
        f"the target says {meta['sequence_length']}"
    )


def test_a_quantized_target_runs_end_to_end_on_the_cpu_backend(compiled: Compiled, tmp_path: Path) -> None:
    """int8 per channel: quantized once (NxD format, in the store), compiled from the dequantized
    weights, smoke-tested against them; agreement with the unquantized model is reported."""
    target = TargetSpec.parse({**TARGET, "quantization": "int8:per_channel"})
    work = tmp_path / "work"
    shutil.copytree(compiled.work_dir / "compile-cache", work / "compile-cache")
    # a store of its own: the session's shared one holds one build, which other files' tests count on
    shutil.copytree(compiled.store.root_uri.removeprefix("file://"), tmp_path / "store")
    store = open_store(f"file://{tmp_path / 'store'}")
    out = run_target(str(compiled.checkpoint), target, store, work)
    assert out.status == "published" and out.key != compiled.first.key  # quantization is in the key
    m = out.published.manifest.to_json()  # as stored
    quantized = m["compile"]["quantized"]
    assert not quantized["reused"] and quantized["tensors_quantized"] == 14 and quantized["max_rel_error"] < 0.02
    assert "/quantized/" in quantized["uri"] and quantized["uri"].endswith("int8_per_channel-fp32")
    assert m["smoke"]["passed"] and 0.0 <= m["smoke"]["unquantized_agreement"] <= 1.0
    assert all("unquantized" in p for p in m["smoke"]["prompts"])
    # Another target with the same quantization reuses the quantized checkpoint.
    other = TargetSpec.parse({**TARGET, "quantization": "int8:per_channel", "max_context_length": 48})
    again = run_target(str(compiled.checkpoint), other, store, work)
    assert again.published.manifest.compile["quantized"]["reused"]
    assert [o.key for o in compiled.store.list("index")] == [f"index/{compiled.first.key}.json"]


def test_a_quantized_nxdi_target_points_neuron_config_at_the_quantized_checkpoint(
    fake_neuron: Path, served_llama: Path, tmp_path: Path
) -> None:
    store = open_store(f"file://{tmp_path / 'store'}")
    target = TargetSpec.parse({**NEURON_TARGET, "profile": "vllm-neuron@2.26.1", "quantization": "f8e4m3:per_tensor"})
    out = run_target(str(served_llama), target, store, tmp_path / "work")
    assert out.status == "published" and out.published.manifest.smoke.passed
    from neuronforge.artifacts.localcache import lookup_local

    build = lookup_local(out.state.compiled.build, tmp_path / "work")
    nc = json.loads((build / "nxdi" / "neuron_config.json").read_text())["neuron_config"]
    assert nc["quantized"] and (nc["quantization_dtype"], nc["quantization_type"]) == ("f8e4m3", "per_tensor_symmetric")
    # The quantized checkpoint as the compile host materialized it from the store (verified copy).
    quantized = json.loads((Path(nc["quantized_checkpoints_path"]) / "MANIFEST.json").read_text())
    assert quantized["quantization"] == {"dtype": "f8e4m3", "method": "per_tensor_symmetric"}
    assert Path(nc["quantized_checkpoints_path"]).name == out.state.quantized.checkpoint.manifest_sha256


def test_a_worker_whose_toolchain_is_not_the_profiles_pins_is_refused_before_any_download(
    upgrade_fake_neuron, tiny_llama: Path, tmp_path: Path
) -> None:
    """The consumer checks the compiler version at load time (optimum-neuron 0.4.5 compares
    `neuronxcc_version` with `neuronxcc.__version__`), so a worker of another SDK release must not
    build for the profile: prepare refuses, naming both versions, before any lease or download."""
    upgrade_fake_neuron("2.22.12471.0+3c3b1e8d")
    store = open_store(f"file://{tmp_path / 'store'}")
    target = TargetSpec.parse({**NEURON_TARGET, "profile": "vllm-neuron@2.26.1"})
    with pytest.raises(PlanRejected) as err:
        run_target(str(tiny_llama), target, store, tmp_path / "work")
    assert (
        "profile vllm-neuron@2.26.1 needs neuronx-cc 2.21.33363.0+82129205; the worker has 2.22.12471.0+3c3b1e8d"
        in (str(err.value))
    )
    assert store.list("checkpoints") == [] and store.list("locks") == []
    assert store.read_json(store.list("failures")[0].key)["stage"] == "prepare"


def test_a_manifest_path_leaving_the_artifact_is_refused_not_downloaded(tmp_path: Path) -> None:
    """A manifest is store content, not trusted input: `../` or an absolute path in its file list is
    reported and never fetched outside the download folder, also for a manifest at the store root."""
    from neuronforge.artifacts.published import verify_files
    from neuronforge.records.parts import FileEntry

    store = open_store(f"file://{tmp_path / 'store'}")
    store.put_bytes(b"ok", "ok.txt")
    store.put_bytes(b"secret", "outside.txt")
    files = [
        FileEntry(path="ok.txt", size=2, sha256=hashlib.sha256(b"ok").hexdigest()),
        FileEntry(path="../outside.txt", size=6, sha256="0" * 64),
        FileEntry(path="/etc/passwd", size=1, sha256="0" * 64),
    ]
    dest = tmp_path / "dl" / "inner"
    dest.mkdir(parents=True)
    assert verify_files(store, "", files, download_to=dest) == [
        "../outside.txt: path escapes the artifact folder",
        "/etc/passwd: path escapes the artifact folder",
    ]
    assert (dest / "ok.txt").read_bytes() == b"ok" and not (tmp_path / "dl" / "outside.txt").exists()
