"""Profile `vllm-neuron-native`: the vLLM Neuron plugin of SDK 2.32/2.33 through the FAKE plugin
(tests/fakes/vllm_neuron_native, its cache as libtorch-neuronx-lite's compile/cache.py keeps it).

The rules encoded here are the plugin's, each from the source `neuronforge.compilation.vllm_neuron_sources`
names: an entry is complete with graph.hlo, graph_<key>.neff, its metadata naming the key, and
`.compilation_complete` written last, and the key hashes the graph, every input shape, TP groups, the
compiler / NKI versions and the target (the in-plugin 0.21 cache, CACHE_CODE); a local miss with
VLLM_NEURON_DISABLE_WARMUP_COMPILE raises before the remote tier is read (BACKEND_CODE); the cache
switches are VLLM_NEURON_* in plugin 0.21 and NEURON_LIBTORCH_* from 0.24 (CACHE_PAGE, LNL_CACHE_CODE)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from neuronforge.artifacts import layout
from neuronforge.common.errors import InvalidInput
from neuronforge.compilation.vllm_cache import MARKER, CacheManifest, entry_problems, local_keys
from neuronforge.pipeline.runner import run_target
from neuronforge.profiles import get_profile
from neuronforge.profiles.base import Artifact
from neuronforge.profiles.registry import target_problems
from neuronforge.records.local import read_local, write_local
from neuronforge.spec.target import TargetSpec
from neuronforge.spec.tinymodel import make_tiny_llama
from neuronforge.stores import open_store
from tests.fakes import VLLM_NATIVE, VLLM_SDK_2_32_0, VLLM_SDK_2_33_0, fake_python
from tests.vllm_serving import serve, serving_host

TARGET = {"instance_type": "trn2.3xlarge", "tp_degree": 4, "batch_size": 2, "sequence_length": 256, "dtype": "fp32"}


def target(profile: str = "vllm-neuron-native@2.32", **kw) -> TargetSpec:
    return TargetSpec(**{**TARGET, "profile": profile, **kw})


# -- the declaration -------------------------------------------------------------------------------------
def test_both_releases_are_registered_and_resolve_by_series() -> None:
    assert get_profile("vllm-neuron-native@2.32").ref == "vllm-neuron-native@2.32.0"
    assert get_profile("vllm-neuron-native").ref == "vllm-neuron-native@2.33.0"
    p = get_profile("vllm-neuron-native@2.32")
    # SDK 2.32.0's pins with their local labels (the DLC's), compiled on CPU workers of that image
    assert p.pins.compiler_version == "2.27.5334.0+f702b353"
    assert p.pins.packages["libtorch-neuronx-lite"] == "2.11.0.1.0.1284+f49d8626"
    assert (p.queue, p.device_queue) == ("neuron-compile-2.32.0", "neuron-2.32.0")
    assert not p.placement("compile").neuron_cores and p.placement("smoke").neuron_cores


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        ({"instance_type": "inf2.xlarge", "tp_degree": 2}, "for inf2 use profile vllm-neuron"),
        ({"instance_type": "trn1.32xlarge", "tp_degree": 8}, "Trn2/Trn3 only"),
        ({"quantization": "int8"}, "does not yet produce a quantized checkpoint"),
        ({"max_context_length": 128}, "leave max_context_length unset"),
        ({"backend_options": {"num_blocks": 16}}, "needs at least 17 KV blocks, vLLM's null block included"),
        ({"backend_options": {"fused_qkv": True}}, "not accepted by profile vllm-neuron-native"),
    ],
)
def test_what_the_plugin_cannot_serve_is_refused_with_the_fix(kw: dict, expected: str) -> None:
    t = target(**kw)
    problems = target_problems(get_profile(t.profile), t, "llama")
    assert any(expected in p for p in problems), problems


@pytest.mark.parametrize("instance_type", ["inf2.xlarge", "trn1.32xlarge"])
def test_the_instance_refusal_cites_the_release_tables_source_for_the_family(instance_type: str) -> None:
    """One line: what is refused, the source a user can open (the release table's for that family's
    status on this line), and the profile to use instead."""
    t = target(instance_type=instance_type, tp_degree=2)
    p = get_profile(t.profile)
    refusal = next(m for m in target_problems(p, t, "llama") if "Trn2/Trn3 only" in m)
    source = p.lifecycle.phase(t.instance.family, p.release.sdk).source.url
    assert source.startswith("https://") and f"Trn2/Trn3 only: {source});" in refusal, refusal
    assert "\n" not in refusal and "use profile vllm-neuron (vLLM on NxD Inference)" in refusal


def test_a_refused_model_type_names_the_profiles_that_serve_it() -> None:
    """One line per refusal: the plugin's registry with the vLLM line that serves the type, or, when no
    vLLM line does, the registry's generic answer naming the profiles that do."""
    t = target()
    mixtral = target_problems(get_profile(t.profile), t, "mixtral")
    assert len(mixtral) == 1 and "model registry does not list it" in mixtral[0], mixtral
    assert "use profile vllm-neuron@" in mixtral[0], mixtral
    mistral = target_problems(get_profile(t.profile), t, "mistral")
    # cpu is no Neuron server and lmi-neuronx never served trn2: neither is named (issue 54)
    assert mistral == ["profile 'vllm-neuron-native' does not support mistral; no profile serves mistral on trn2 today"]


CONFIGS = Path(__file__).resolve().parents[1] / "data" / "model-configs"


@pytest.mark.parametrize("profile", ["vllm-neuron-native@2.32", "vllm-neuron-native@2.33"])
def test_a_qwen2_target_is_refused_at_planning_with_the_line_that_serves_it(profile: str) -> None:
    """Case 2: the plugin's model registry (vllm_neuron/model/registry.py) has no Qwen2ForCausalLM at
    either release: a Qwen2.5 target is refused at planning, naming vLLM on NxD Inference at its newest
    release for trn2. Llama and Qwen3 are served."""
    from neuronforge.pipeline.planner import plan
    from neuronforge.spec.modelconfig import ModelArch

    qwen = ModelArch.from_config(json.loads((CONFIGS / "Qwen--Qwen2.5-7B.json").read_text()))
    t = target(profile, instance_type="trn2.48xlarge", tp_degree=16, dtype="bf16")
    refused = [c.message for c in plan(qwen, t).checks if c.name == "profile" and not c.ok]
    assert any(
        "qwen2 (Qwen2ForCausalLM)" in m
        and "model registry does not list it" in m
        and "use profile vllm-neuron@2.31.1 (vLLM on NxD Inference serves qwen2 on trn2)" in m
        for m in refused
    ), refused
    p = get_profile(profile)
    assert {"llama", "qwen3"} <= p.architectures and "qwen2" not in p.architectures
    assert target_problems(p, t, "llama") == [] and target_problems(p, t, "qwen3") == []


def test_an_architecture_the_plugin_serves_but_neuronforge_does_not_plan_says_so() -> None:
    p = get_profile("vllm-neuron-native@2.32")
    problems = target_problems(p, target(), "gpt_oss")
    assert any("serves GptOssForCausalLM, but neuronforge does not plan" in m for m in problems), problems


def test_one_command_renders_the_compile_the_launch_and_the_manifest() -> None:
    """The KV block count is pinned: without it the plugin sizes the KV cache from HBM, which the
    CPU compile reads from a static table and the device from the runtime (vllm_native.RULE_KV)."""
    p = get_profile("vllm-neuron-native@2.32")
    command = p.serve_command(target())
    flags = command.flags()
    assert flags["num-gpu-blocks-override"] == "17"  # ceil(256/32) * 2 sequences + vLLM's null block
    assert (flags["max-model-len"], flags["tensor-parallel-size"], flags["block-size"]) == ("256", "4", "32")
    assert command.env == {"NEURON_PLATFORM_TARGET_OVERRIDE": "trn2", "NEURON_LOGICAL_NC_CONFIG": "2"}
    settings = p.compile_settings(target(), "llama")
    assert settings["argv"] == list(command.argv) and settings["env"] == dict(command.env)
    assert settings["cache_env"] == "NEURON_LIBTORCH_"


# -- built through the fake, published to a real S3 endpoint -----------------------------------------
@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory, s3_endpoint: str) -> Iterator[dict]:
    """A Llama on SDK 2.32.0 and a Qwen3 on SDK 2.33.0, built by the pipeline (compile in CPU-compile
    mode, smoke from the synced cache with compiling forbidden), published to an S3 bucket."""
    import boto3

    base = tmp_path_factory.mktemp("vllm-native")
    bucket = f"nf-{uuid.uuid4().hex[:12]}"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AWS_ENDPOINT_URL", s3_endpoint)
        boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket=bucket)
        mp.setenv("NEURONFORGE_TOOLCHAIN_PYTHON_2_32_0", str(fake_python(base / "py232", *VLLM_SDK_2_32_0)))
        mp.setenv("NEURONFORGE_TOOLCHAIN_PYTHON_2_33_0", str(fake_python(base / "py233", *VLLM_SDK_2_33_0)))
        mp.setenv("FAKE_NEURON_DEVICES", "2")
        store = open_store(f"s3://{bucket}/farm")
        out = {"store": store, "base": base, "endpoint": s3_endpoint}
        for name, model_type, profile in (
            ("llama", "llama", "vllm-neuron-native@2.32"),
            ("qwen3", "qwen3", "vllm-neuron-native@2.33"),
        ):
            model = make_tiny_llama(base / "models" / name, tokenizer=True, model_type=model_type)
            t = target(profile)
            with pytest.MonkeyPatch.context() as worker:  # a worker image that sets LNL's own cache root
                worker.setenv("NEURON_LIBTORCH_CACHE_ROOT", str(base / "worker-lnl-root"))
                outcome = run_target(str(model), t, store, base / "work")
            root = base / "artifacts" / name
            prefix = outcome.published.manifest_uri.removeprefix(store.uri("")).rsplit("/", 1)[0]
            store.get_tree(prefix.lstrip("/"), root)
            out[name] = {"outcome": outcome, "root": root, "target": t, "prefix": prefix.lstrip("/")}
        yield out


def _artifact(item: dict, where: Path) -> Artifact:
    from neuronforge.spec.toolchain import Toolchain

    root = where / "artifact"
    shutil.copytree(item["root"], root)
    manifest = json.loads((root / "manifest.json").read_text())
    return Artifact(root, item["target"].normalized(), Toolchain.from_json(manifest["toolchain"]))


@pytest.mark.parametrize("name", ["llama", "qwen3"])
def test_every_compiled_graph_is_published_complete_marker_last(published: dict, name: str) -> None:
    store, item = published["store"], published[name]
    manifest = read_local(CacheManifest, item["root"] / "launch" / "vllm-cache.json")
    version = get_profile(item["target"].profile).version
    assert manifest.store_prefix == store.uri(layout.vllm_cache_prefix(version))
    assert len(manifest.entries) == 4  # prefill 128, 256; decode 1, 2
    local = published["base"] / "pulled" / name
    for record in manifest.entries:
        entry = local / record.key
        store.get_tree(f"{layout.vllm_cache_prefix(version)}/{record.key}", entry)
        assert entry_problems(entry) == []
        assert json.loads((entry / ".artifact_metadata_v0.json").read_text())["cache_key"] == record.key
        assert not (entry / ".cache_accessed").exists()  # host-local, never published
    summary = item["outcome"].summary()
    assert summary["status"] == "published" and summary["compiler_invocations"] == 4


def test_the_manifest_records_the_image_versions_argv_env_and_target(published: dict) -> None:
    manifest = read_local(CacheManifest, published["llama"]["root"] / "launch" / "vllm-cache.json")
    assert manifest.versions["neuronx-cc"] == "2.27.5334.0+f702b353"
    assert manifest.versions["libtorch-neuronx-lite"] == "2.11.0.1.0.1284+f49d8626"
    assert manifest.versions["vllm-neuron"] == "0.24.0.1.1.0+e8242a9"
    assert (manifest.target, manifest.route) == ("trn2", "xla")
    assert "--num-gpu-blocks-override" in manifest.argv and manifest.built["mode"] == "cpu-compile"
    qwen = read_local(CacheManifest, published["qwen3"]["root"] / "launch" / "vllm-cache.json")
    assert qwen.route == "native" and qwen.versions["neuronx-cc"].startswith("2.28.7631.0+")
    measured = published["llama"]["outcome"].published.manifest.smoke.measurement  # through the fake plugin
    assert measured is not None and measured.synthetic and measured.host.runtime_line == "vllm-neuron 0.24"
    assert measured.batch_size == published["llama"]["outcome"].state.target.batch_size


@pytest.mark.parametrize("name", ["llama", "qwen3"])
def test_the_published_artifact_passes_preflight_and_verify(published: dict, name: str, tmp_path: Path) -> None:
    """Case 5: 2.32's layout is proven (the in-plugin cache code; LNL's entries synced by a third party on
    SDK 2.32); 2.33's native route is not shown to write it, so `verify` calls a 2.33 artifact deployable
    only with the P1 re-trace in the serving image, and says why in one line."""
    from neuronforge.farm.verify import verify_artifact

    artifact = _artifact(published[name], tmp_path)
    profile = get_profile(artifact.target.profile)
    assert profile.preflight(artifact) == []
    manifest = f"{published[name]['prefix']}/manifest.json"
    result = verify_artifact(published["store"], manifest, tmp_path / "v")
    if name == "llama":
        assert result.problems == [] and profile.retrace_required() is None
        return
    (problem,) = result.problems
    assert problem.startswith("retrace (vllm-neuron-native@2.33.0): required before deploying, not run (--retrace): ")
    assert "native route" in problem and "StableHLO" in problem and "graph_<key>.neff" in problem
    retraced = verify_artifact(published["store"], manifest, tmp_path / "r", retrace=True)
    assert (retraced.problems, retraced.retraced) == ([], True)


def test_the_compile_and_the_smoke_ignore_a_cache_root_the_worker_sets(published: dict) -> None:
    """Case 4, the worker side: the compile and the smoke load set NEURON_LIBTORCH_CACHE_ROOT to their own
    cache root, so a worker image's value never takes the graphs elsewhere (the fixture set one)."""
    assert not (published["base"] / "worker-lnl-root").exists()


@pytest.mark.parametrize("name", ["llama", "qwen3"])
def test_vllm_env_fails_closed_with_the_documented_pair_and_one_cache_root(published: dict, name: str) -> None:
    """Case 3: cpu_compilation.md l.79-92 pairs VLLM_NEURON_DISABLE_WARMUP_COMPILE=1 with
    NEURON_LIBTORCH_DISABLE_GRAPH_CAPTURE_BACKEND=1; NEURON_LIBTORCH_ASSERT_CACHE_HIT is kept (read by LNL
    2.11.0.1.0.1284: foxl-ai/kiln bench 2026-10-07). Case 4: LNL's root is the synced one, in vllm.env and
    again after the host's own VLLM_CACHE_ROOT in serve.sh and sync.sh."""
    from neuronforge.profiles.base import read_env_file

    launch = published[name]["root"] / "launch"
    env = read_env_file(launch / "vllm.env")
    for switch in (
        "VLLM_NEURON_DISABLE_WARMUP_COMPILE",
        "NEURON_LIBTORCH_DISABLE_GRAPH_CAPTURE_BACKEND",
        "NEURON_LIBTORCH_ASSERT_CACHE_HIT",
    ):
        assert env[switch] == "1", switch
    assert env["NEURON_LIBTORCH_CACHE_ROOT"] == env["VLLM_CACHE_ROOT"]
    for script in ("serve.sh", "sync.sh"):
        assert 'export NEURON_LIBTORCH_CACHE_ROOT="$VLLM_CACHE_ROOT"' in (launch / script).read_text()


def test_a_host_whose_image_sets_lnls_cache_root_still_hits_the_synced_graphs(published: dict, tmp_path: Path) -> None:
    item = published["llama"]
    env = _serving_host(tmp_path, item, published["endpoint"])
    env["NEURON_LIBTORCH_CACHE_ROOT"] = str(tmp_path / "image-root")
    started, lines = _serve(item["root"] / "launch", env)
    assert started, "\n".join(lines[-15:])
    assert not (tmp_path / "image-root").exists()


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new))


BROKEN = {
    "serve.sh --max-model-len": (
        ("serve.sh", "--max-model-len 256", "--max-model-len 128"),
        "--max-model-len 128, the graphs were compiled with 256",
    ),
    "serve.sh without the KV block count": (
        ("serve.sh", "  --num-gpu-blocks-override 17 \\\n", ""),
        "--num-gpu-blocks-override <absent>, the graphs were compiled with 17",
    ),
    "serve.sh skips the sync": (("serve.sh", 'bash "$here/sync.sh"\n', ""), "does not sync the cache"),
    "vllm.env target": (
        ("vllm.env", "NEURON_PLATFORM_TARGET_OVERRIDE=trn2", "NEURON_PLATFORM_TARGET_OVERRIDE=trn3"),
        "NEURON_PLATFORM_TARGET_OVERRIDE='trn3', the graphs were compiled with 'trn2'",
    ),
    "vllm.env not fail-closed": (
        ("vllm.env", "VLLM_NEURON_DISABLE_WARMUP_COMPILE=1", "VLLM_NEURON_DISABLE_WARMUP_COMPILE=0"),
        "VLLM_NEURON_DISABLE_WARMUP_COMPILE is not 1",
    ),
    "vllm.env with the 0.21 names": (
        ("vllm.env", "NEURON_LIBTORCH_ASSERT_CACHE_HIT=1", "VLLM_NEURON_ASSERT_CACHE_HIT=1"),
        "VLLM_NEURON_ASSERT_CACHE_HIT is not read by vLLM Neuron 0.24.0.1.1.0+e8242a9",
    ),
    "vllm.env without the graph-capture switch": (
        (
            "vllm.env",
            "NEURON_LIBTORCH_DISABLE_GRAPH_CAPTURE_BACKEND=1",
            "NEURON_LIBTORCH_DISABLE_GRAPH_CAPTURE_BACKEND=0",
        ),
        "NEURON_LIBTORCH_DISABLE_GRAPH_CAPTURE_BACKEND is not 1: a missing graph would be compiled at start-up "
        "(cpu_compilation.md l.79-92",
    ),
    "vllm.env turns the cache off": (
        ("vllm.env", "PORT=8000\n", "PORT=8000\nNEURON_LIBTORCH_DISABLE_COMPILE_CACHE=1\n"),
        "NEURON_LIBTORCH_DISABLE_COMPILE_CACHE=1 with the fail-closed switches: the plugin raises ValueError",
    ),
    "vllm.env with LNL's root elsewhere": (
        ("vllm.env", "NEURON_LIBTORCH_CACHE_ROOT=/var/cache/neuronforge/vllm", "NEURON_LIBTORCH_CACHE_ROOT=/opt/lnl"),
        "NEURON_LIBTORCH_CACHE_ROOT='/opt/lnl' is not VLLM_CACHE_ROOT='/var/cache/neuronforge/vllm'",
    ),
    "serve.sh keeps the image's LNL root": (
        ("serve.sh", 'export NEURON_LIBTORCH_CACHE_ROOT="$VLLM_CACHE_ROOT"\n', ""),
        "serve.sh: does not set NEURON_LIBTORCH_CACHE_ROOT to the host's VLLM_CACHE_ROOT",
    ),
    "model/config.json names Qwen2": (
        ("../model/config.json", '"LlamaForCausalLM"', '"Qwen2ForCausalLM"'),
        "model/config.json: architectures ['Qwen2ForCausalLM']: vLLM Neuron 0.24.0.1.1.0 loads only",
    ),
    "manifest compiler version": (
        ("vllm-cache.json", '"neuronx-cc": "2.27.5334.0+f702b353"', '"neuronx-cc": "2.26.6360.0+aaaaaaaa"'),
        "neuronx-cc 2.26.6360.0+aaaaaaaa, the profile pins 2.27.5334.0+f702b353",
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_each_broken_rule_is_named_by_preflight(published: dict, case: str, tmp_path: Path) -> None:
    artifact = _artifact(published["llama"], tmp_path)
    (name, old, new), expected = BROKEN[case]
    _edit(artifact.root / "launch" / name, old, new)
    problems = get_profile(artifact.target.profile).preflight(artifact)
    assert any(expected in p for p in problems), problems


def test_an_entry_missing_from_the_store_is_named_by_verify(published: dict, tmp_path: Path) -> None:
    """Checked against the cache the manifest names (here a file:// copy of the published entries, so the
    shared bucket stays as it is), wherever `verify` was pointed."""
    from neuronforge.stores import open_store as opener

    store, item = published["store"], published["llama"]
    artifact = _artifact(item, tmp_path)
    path = artifact.root / "launch" / "vllm-cache.json"
    manifest = read_local(CacheManifest, path)
    copy = opener(f"file://{tmp_path / 'store'}")
    prefix = layout.vllm_cache_prefix("2.32.0")
    for record in manifest.entries:
        store.get_tree(f"{prefix}/{record.key}", tmp_path / "e" / record.key)
        copy.put_tree(tmp_path / "e" / record.key, f"{prefix}/{record.key}")
    assert manifest.nki  # the decode graphs call an NKI kernel: their results travel with the entries
    for f in manifest.nki:
        store.get_file(f"{prefix}/{f.path}", tmp_path / "e" / f.path)
        copy.put_file(tmp_path / "e" / f.path, f"{prefix}/{f.path}")
    write_local(manifest.model_copy(update={"store_prefix": copy.uri(prefix)}), path)
    profile = get_profile(item["target"].profile)
    assert profile.store_problems(artifact, store) == []
    copy.delete_prefix(f"{prefix}/{manifest.nki[0].path}")
    assert any("NKI results travel with the entries" in p for p in profile.store_problems(artifact, store))
    copy.put_file(tmp_path / "e" / manifest.nki[0].path, f"{prefix}/{manifest.nki[0].path}")
    gone = manifest.entries[0].key
    copy.delete_prefix(f"{prefix}/{gone}/{MARKER}")
    problems = profile.store_problems(artifact, store)
    assert len(problems) == 1 and gone in problems[0] and "the server would compile this graph" in problems[0]


def test_retrace_in_the_image_accepts_the_published_command(published: dict, tmp_path: Path) -> None:
    """P1: the serving command traced again in CPU-compile mode against the synced cache, compiling
    forbidden, in the SDK image's interpreter (no device)."""
    from neuronforge.farm.verify import verify_artifact

    result = verify_artifact(
        published["store"], f"{published['llama']['prefix']}/manifest.json", tmp_path / "v", retrace=True
    )
    assert (result.problems, result.retraced) == ([], True)


def test_retrace_refuses_a_command_the_cache_was_not_built_for(published: dict, tmp_path: Path) -> None:
    """A change P0 cannot see (a flag vLLM accepts that changes a shape): the trace misses a key."""
    artifact = _artifact(published["qwen3"], tmp_path)
    _edit(artifact.root / "launch" / "serve.sh", "--block-size 32", "--block-size 16")
    problems = get_profile(artifact.target.profile).retrace_problems(artifact, tmp_path / "work")
    assert problems and "local compile cache miss for key" in problems[0], problems


# -- a serving host: sync.sh + `vllm serve`, compiling forbidden ------------------------------------------
def _serving_host(tmp_path: Path, item: dict, endpoint: str, tool: str = "aws") -> dict[str, str]:
    return serving_host(tmp_path, get_profile(item["target"].profile).version, endpoint, tool)


def _serve(launch: Path, env: dict[str, str]) -> tuple[bool, list[str]]:
    return serve(launch, env)


@pytest.mark.parametrize(("name", "tool"), [("llama", "aws"), ("qwen3", "s5cmd"), ("llama", "boto3")])
def test_a_fresh_serving_host_syncs_and_hits_every_graph(published: dict, name: str, tool: str, tmp_path: Path) -> None:
    item = published[name]
    launch = item["root"] / "launch"
    env = _serving_host(tmp_path, item, published["endpoint"], tool)
    started, lines = _serve(launch, env)
    assert started, "\n".join(lines[-15:])
    assert not any("Compiling graph" in line for line in lines)
    manifest = read_local(CacheManifest, launch / "vllm-cache.json")
    cache = Path(env["VLLM_CACHE_ROOT"]) / "neuron" / "compile_cache"
    assert {r.key for r in manifest.entries} <= {p.name for p in cache.iterdir() if p.is_dir()}
    assert all((cache / r.key / ".cache_accessed").exists() for r in manifest.entries)  # each one a local hit
    assert manifest.nki and all((cache / f.path).is_file() for f in manifest.nki)  # synced with data
    # a second start syncs nothing and still hits
    started, _ = _serve(launch, env)
    assert started


def test_the_published_kubernetes_manifest_applies_as_written(published: dict, tmp_path: Path) -> None:
    """Issue 38 case 7: the build's own k8s-init-container.yaml is a whole manifest — the REAL kubectl
    takes it (client dry-run against a discovery stub) and every document is strictly valid for
    Kubernetes 1.37 (tests/kube.py; tests/profiles/test_vllm_native_k8s.py checks what it holds)."""
    from tests.kube import applied, schema_problems

    for name in ("llama", "qwen3"):
        manifest = published[name]["root"] / "launch" / "k8s-init-container.yaml"
        done = applied(manifest, tmp_path)
        assert done.returncode == 0, done.stderr
        assert [line.split("/")[0] for line in done.stdout.splitlines()] == ["configmap", "deployment.apps"]
        assert schema_problems(manifest.read_text()) == []


def test_a_one_field_change_to_serve_sh_fails_the_start_instead_of_compiling(published: dict, tmp_path: Path) -> None:
    item = published["llama"]
    launch = tmp_path / "launch"
    shutil.copytree(item["root"] / "launch", launch)
    _edit(launch / "serve.sh", "--max-model-len 256", "--max-model-len 128")
    env = _serving_host(tmp_path, item, published["endpoint"])
    started, lines = _serve(launch, env)
    assert not started
    assert any("local compile cache miss for key" in line for line in lines), lines[-5:]
    cache = Path(env["VLLM_CACHE_ROOT"]) / "neuron" / "compile_cache"
    manifest = read_local(CacheManifest, launch / "vllm-cache.json")
    assert local_keys(cache) == {r.key for r in manifest.entries}  # nothing compiled


def test_sync_refuses_bytes_that_differ_from_the_manifest(published: dict, tmp_path: Path) -> None:
    item = published["llama"]
    launch = tmp_path / "launch"
    shutil.copytree(item["root"] / "launch", launch)
    manifest = json.loads((launch / "vllm-cache.json").read_text())
    manifest["entries"][0]["files"][0]["sha256"] = "0" * 64
    (launch / "vllm-cache.json").write_text(json.dumps(manifest))
    env = _serving_host(tmp_path, item, published["endpoint"])
    done = subprocess.run(["bash", str(launch / "sync.sh")], env=env, capture_output=True, text=True)
    assert done.returncode == 1 and "differs from vllm-cache.json" in done.stderr
    cache = Path(env["VLLM_CACHE_ROOT"]) / "neuron" / "compile_cache"
    # no entry appears (each is renamed in whole, only once every file checked out); NKI results are
    # renamed in one by one, each only once verified: what is there is what was compiled
    assert not [p for p in cache.iterdir() if p.is_dir() and not p.name.startswith(".") and p.name != "nki"]
    manifest = read_local(CacheManifest, launch / "vllm-cache.json")
    assert all(_sha_of(cache / f.path) == f.sha256 for f in manifest.nki if (cache / f.path).exists())
    assert not list(cache.rglob("*.part"))


def _sha_of(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- the fake itself: the plugin's observable rules --------------------------------------------------------
def _fake(tmp_path: Path, code: str, env: dict[str, str], folders: tuple[Path, ...] = VLLM_SDK_2_32_0) -> str:
    python = fake_python(tmp_path / f"py-{uuid.uuid4().hex[:6]}", *folders)
    done = subprocess.run(
        [str(python), "-c", code], env={**os.environ, **env}, capture_output=True, text=True, check=False
    )
    return done.stdout + done.stderr


KEYS = (
    "import json, sys; from libtorch_neuronx_lite.compile.cache import create_cache_hash as h; "
    "print(json.dumps([h('g', [('bfloat16', (2, 4), (4, 1))], {'compiler_args': '-O1'}), "
    "h('g', [('bfloat16', (2, 8), (8, 1))], {'compiler_args': '-O1'}), "
    "h('g', [('bfloat16', (2, 4), (4, 1))], {'compiler_args': '-O2'})]))"
)


def test_the_fake_key_changes_with_shapes_flags_target_and_versions(tmp_path: Path) -> None:
    def keys(env: dict[str, str], folders: tuple[Path, ...] = VLLM_SDK_2_32_0) -> list[str]:
        return json.loads(_fake(tmp_path, KEYS, env, folders).splitlines()[-1])

    trn2 = keys({"NEURON_PLATFORM_TARGET_OVERRIDE": "trn2"})
    assert len(set(trn2)) == 3 and all(len(k) == 32 for k in trn2)
    assert keys({"NEURON_PLATFORM_TARGET_OVERRIDE": "trn2"}) == trn2  # deterministic
    assert set(keys({"NEURON_PLATFORM_TARGET_OVERRIDE": "trn3"})).isdisjoint(trn2)
    assert set(keys({"NEURON_PLATFORM_TARGET_OVERRIDE": "trn2"}, VLLM_SDK_2_33_0)).isdisjoint(trn2)


LOOKUP = (
    "import os, sys; from pathlib import Path; from libtorch_neuronx_lite.compile import cache; "
    "print(cache.lookup_or_compile(Path(sys.argv[1] if len(sys.argv) > 1 else os.environ['LOCAL']), "
    "os.environ['KEY'], 'hlo', 'cmd'))"
)


def _remote_entry(tmp_path: Path) -> tuple[Path, str]:
    key = "0123456789abcdef0123456789abcdef"
    remote = tmp_path / "remote"
    out = _fake(tmp_path, LOOKUP, {"LOCAL": str(remote), "KEY": key})
    assert out.strip().endswith("compiled")
    return remote, key


def test_the_fake_fails_closed_before_the_remote_tier(tmp_path: Path) -> None:
    remote, key = _remote_entry(tmp_path)
    env = {"LOCAL": str(tmp_path / "local"), "KEY": key, "NEURON_LIBTORCH_REMOTE_CACHE": str(remote)}
    assert _fake(tmp_path, LOOKUP, env).strip().endswith("remote")
    shutil.rmtree(tmp_path / "local")
    out = _fake(tmp_path, LOOKUP, {**env, "VLLM_NEURON_DISABLE_WARMUP_COMPILE": "1"})
    assert "local compile cache miss for key" in out and not (tmp_path / "local" / key).exists()


def test_the_fake_reads_the_cache_switches_of_its_generation(tmp_path: Path) -> None:
    """sdk#1368: on 0.24 the VLLM_NEURON_* names have no effect; on 0.21 the NEURON_LIBTORCH_* ones."""
    remote, key = _remote_entry(tmp_path)
    old = tmp_path / "plugin-0.21"
    info = old / "vllm_neuron-0.21.0.1.0.0+794754d.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm-neuron\nVersion: 0.21.0.1.0.0+794754d\n")
    for folders, works, ignored in (
        (VLLM_SDK_2_32_0, "NEURON_LIBTORCH_", "VLLM_NEURON_"),
        ((old, *VLLM_SDK_2_32_0), "VLLM_NEURON_", "NEURON_LIBTORCH_"),
    ):
        local = tmp_path / f"local-{works}"
        env = {"LOCAL": str(local), "KEY": key, f"{ignored}REMOTE_CACHE": str(remote)}
        assert _fake(tmp_path, LOOKUP, env, folders).strip().endswith("compiled")
        shutil.rmtree(local)
        env = {"LOCAL": str(local), "KEY": key, f"{works}REMOTE_CACHE": str(remote)}
        assert _fake(tmp_path, LOOKUP, env, folders).strip().endswith("remote")


def test_the_fake_refuses_an_entry_whose_metadata_names_another_key(tmp_path: Path) -> None:
    remote, key = _remote_entry(tmp_path)
    meta = remote / key / ".artifact_metadata_v0.json"
    meta.write_text(json.dumps({"cache_key": "f" * 32}))
    assert "Cache key mismatch" in _fake(tmp_path, LOOKUP, {"LOCAL": str(remote), "KEY": key})
    assert entry_problems(remote / key) and "Cache key mismatch" in entry_problems(remote / key)[0]


FAIL_CLOSED = {"VLLM_NEURON_DISABLE_WARMUP_COMPILE": "1", "NEURON_LIBTORCH_DISABLE_GRAPH_CAPTURE_BACKEND": "1"}


def test_an_unpinned_kv_block_count_makes_the_server_miss_what_the_cpu_compiled(tmp_path: Path) -> None:
    """Why the profile pins --num-gpu-blocks-override (vllm_native.RULE_KV): CPU-compile sizes KV from the static
    table, the device from what the runtime reports."""
    model = make_tiny_llama(tmp_path / "m", tokenizer=True)
    code = (
        "import transformers, sys; from vllm import LLM; "
        f"LLM({str(model)!r}, tensor_parallel_size=2, max_model_len=256, max_num_seqs=1, block_size=32)"
    )
    common = {"VLLM_CACHE_ROOT": str(tmp_path / "c"), "NEURON_PLATFORM_TARGET_OVERRIDE": "trn2"}
    compiled = _fake(tmp_path, code, {**common, "VLLM_NEURON_CPU_COMPILE": "1"})
    served = _fake(tmp_path, code, {**common, "FAKE_NEURON_DEVICES": "2", **FAIL_CLOSED})
    assert "Compilation cache key" in compiled and "local compile cache miss" in served
    assert VLLM_NATIVE.is_dir()


def test_the_unknown_profile_names_the_new_one(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match=r"unknown profile .vllm-neuron-plugin.*vllm-neuron-native"):
        get_profile("vllm-neuron-plugin")
