"""A build of a Hub model for profile optimum-neuron, registered in a cache repository, is found by
optimum-neuron 0.4.5's OWN lookup: `select_hub_cached_entries` (what `optimum-cli neuron serve` and its
vLLM platform call) and `optimum-cli neuron cache lookup`, both run from the installed package in a fresh
process against the FAKE Hub (tests/fakes/hub) — the model downloaded from it, the build compiled by the
fake SDK 2.26.1 toolchain, smoke-tested, registered, then published.

Sources, huggingface/optimum-neuron at tag v0.4.5: optimum/neuron/cache/hub_cache.py
(get_hub_cached_entries, select_hub_cached_entries, get_hub_cached_models, hub_registry_path),
optimum/commands/neuron/cache.py (the lookup command's table).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from neuronforge.common.errors import InvalidInput
from neuronforge.pipeline.runner import run_target
from neuronforge.spec.target import TargetSpec
from neuronforge.stores import open_store
from tests.conftest import NEURON_TARGET
from tests.fakes.hub import FakeHub, online

MODEL = "tiny-org/tiny-llama"
REPO = "my-org/neuron-cache"
TARGET = {**NEURON_TARGET, "profile": "optimum-neuron"}


@pytest.fixture
def hub(fake_hub: FakeHub, served_llama: Path, monkeypatch: pytest.MonkeyPatch, request, tmp_path: Path) -> FakeHub:
    """The fake Hub holding the tiny model, this process online against it, the writer's token in HF_TOKEN
    (as `hf auth login` or a CI secret would give it) and a Hugging Face cache of the test's own."""
    online(fake_hub, monkeypatch, request)
    monkeypatch.setenv("HF_ENDPOINT", fake_hub.endpoint)
    monkeypatch.setenv("HF_TOKEN", "hf_writer")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    fake_hub.add_model(MODEL, served_llama)
    return fake_hub


def consumer(hub: FakeHub, tmp_path: Path, code: str) -> str:
    """Run `code` with the INSTALLED optimum-neuron in a fresh process pointed at the fake Hub (huggingface_hub
    reads HF_ENDPOINT at import) with a fresh HF_HOME: what a serving host's lookup sees."""
    home = tmp_path / f"consumer-home-{len(list(tmp_path.glob('consumer-home-*')))}"
    env = {
        **os.environ,
        "HF_ENDPOINT": hub.endpoint,
        "HF_TOKEN": "hf_writer",
        "HF_HUB_OFFLINE": "0",
        "HF_HOME": str(home),
        "CUSTOM_CACHE_REPO": REPO,
        "COLUMNS": "200",
    }
    env.pop("HF_HUB_CACHE", None)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_optimums_own_lookup_finds_the_published_build(
    fake_optimum: Path, hub: FakeHub, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(f"file://{tmp_path / 'store'}")
    target = TargetSpec.parse(TARGET)
    out = run_target(MODEL, target, store, tmp_path / "work", hub_registry=REPO)
    manifest = out.published.manifest
    reg = manifest.hub_registry
    assert reg is not None and reg.repo_id == REPO and reg.endpoint == hub.endpoint
    measured = manifest.smoke.measurement  # through the fake optimum-neuron: synthetic, never a device's numbers
    assert measured is not None and measured.synthetic and measured.host.runtime_line == "optimum-neuron 0.4"
    assert reg.lookup.found and reg.lookup.listed_model and reg.lookup.selected == 1, reg.lookup
    assert reg.versions == {"optimum-neuron": "0.4.5", "neuronx-cc": "2.21.33363.0+82129205", "transformers": "4.57.6"}
    assert reg.compiler_dir == "neuronxcc-2.21.33363.0+82129205"
    assert reg.entry_path == f"{reg.compiler_dir}/0_REGISTRY/0.4.5/{reg.arch_digest}/{reg.entry_hash}.json"
    assert reg.alias_path == f"{reg.compiler_dir}/0_REGISTRY/0.4.5/llama/{MODEL}/{reg.entry_hash}.json"
    graphs = sorted(g["entry"] for g in manifest.compile["graphs"])
    assert reg.modules == graphs and reg.commit
    # The repository holds the build's NEFF folders byte for byte as the store's compile cache does.
    repo = hub.state.files(REPO)
    for name in graphs:
        stored = tmp_path / "store" / "neuron-cache" / reg.compiler_dir / name
        for f in stored.iterdir():
            assert (repo / reg.compiler_dir / name / f.name).read_bytes() == f.read_bytes()
    assert (repo / reg.entry_path).read_bytes() == (repo / reg.alias_path).read_bytes()
    assert "hf_writer" not in json.dumps(manifest.to_json()) and "hf_writer" not in caplog.text

    # A serving host: optimum's selection for the build's shape returns our entry, field for field.
    neuron = manifest.hub_registry.neuron
    t = target.normalized()
    code = (
        "import json\nfrom optimum.neuron.cache.hub_cache import select_hub_cached_entries\n"
        f"print(json.dumps(select_hub_cached_entries({MODEL!r}, task='text-generation', instance_type='trn1', "
        f"batch_size={t.batch_size}, sequence_length={t.sequence_length}, tensor_parallel_size={t.tp_degree}, "
        "torch_dtype='float32')))"
    )
    found = json.loads(consumer(hub, tmp_path, code).strip().splitlines()[-1])
    assert found == [neuron]
    assert (found[0]["batch_size"], found[0]["sequence_length"], found[0]["tp_degree"], found[0]["torch_dtype"]) == (
        t.batch_size,
        t.sequence_length,
        t.tp_degree,
        "float32",
    )
    assert found[0]["checkpoint_id"] == MODEL and found[0]["checkpoint_revision"] == manifest.source.revision

    # `optimum-cli neuron cache lookup`'s own table shows it.
    table = consumer(
        hub,
        tmp_path,
        "import sys\nfrom optimum.commands.optimum_cli import main\n"
        f"sys.argv = ['optimum-cli', 'neuron', 'cache', 'lookup', {MODEL!r}, '--task', 'text-generation', "
        f"'--repo_id', {REPO!r}]\nmain()",
    )
    assert f"Cached entries for {MODEL}" in table
    row = [c.strip() for c in next(ln for ln in table.splitlines() if "trn1" in ln).strip("│| ").split("│")]
    assert row == [str(t.batch_size), str(t.sequence_length), str(t.tp_degree), "float32", "trn1"], table

    # The catalog: the row names the repository (from the farm index), the page shows the entry, the lookup
    # result and the consumer's own lookup command.
    catalog(store, out.key, monkeypatch)


def catalog(store, key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import html

    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    from tests.plugins.conftest import load_plugin, read_from

    plugin = load_plugin("neuronforge_catalog")
    read_from(plugin, lambda: store)
    plugin.app.dependency_overrides[get_user] = lambda: None
    try:
        with TestClient(plugin.app) as client:
            listing = client.get("/").text
            detail = html.unescape(client.get(f"/artifacts/{key[:12]}").text)
            rows = client.get("/api/artifacts").json()
    finally:
        plugin.app.dependency_overrides.clear()
    assert f"optimum registry {REPO}" in html.unescape(listing).replace("<wbr>", "")
    assert 'id="hub-registry"' in detail and "returns this build" in detail
    lookup = f"CUSTOM_CACHE_REPO={REPO} optimum-cli neuron cache lookup {MODEL} --task text-generation"
    assert lookup in detail.replace("<wbr>", "")
    assert "optimum-neuron 0.4.5 · transformers 4.57.6" in detail.replace("<wbr>", "")
    assert "hf_writer" not in listing + detail
    (row,) = [r for r in rows["rows"] if r["key"] == key]
    assert (row["hub_registry"], row["hub_registry_found"]) == (REPO, True)


def test_a_second_build_commits_nothing_twice(fake_optimum: Path, hub: FakeHub, tmp_path: Path) -> None:
    """Registering what the repository holds already is a no-op commit: same paths, same bytes."""
    for store in ("a", "b"):
        out = run_target(
            MODEL, TargetSpec.parse(TARGET), open_store(f"file://{tmp_path / store}"), tmp_path / f"w{store}",
            hub_registry=REPO,
        )  # fmt: skip
    reg = out.published.manifest.hub_registry
    assert reg is not None and reg.lookup.found
    assert (reg.commit, reg.uploaded_files, reg.uploaded_bytes) == ("", 0, 0) and len(reg.modules) == 2
    commits = [r for r in hub.requests if r.method == "POST" and "/commit/" in r.path]
    assert len(commits) == 1


def test_a_failed_smoke_test_writes_nothing_to_the_registry(
    fake_optimum: Path, hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from neuronforge.common.errors import NeuronforgeError

    monkeypatch.delenv("FAKE_NEURON_DEVICES")  # the smoke host has no device: the load fails
    with pytest.raises(NeuronforgeError):
        run_target(
            MODEL, TargetSpec.parse(TARGET), open_store(f"file://{tmp_path / 's'}"), tmp_path / "w", hub_registry=REPO
        )
    assert not [r for r in hub.requests if r.method in ("POST", "PUT")]
    assert hub.state.meta(REPO) is None


def test_a_token_without_write_access_is_refused_in_one_line_and_nothing_is_published(
    fake_optimum: Path, hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from neuronforge.artifacts.hub_registry import HubRefused

    store = open_store(f"file://{tmp_path / 's'}")
    with pytest.raises(HubRefused) as err:
        run_target(MODEL, TargetSpec.parse(TARGET), store, tmp_path / "w", hub_registry="someone-else/cache")
    assert str(err.value).startswith(f"the Hub at {hub.endpoint} refused creating someone-else/cache (HTTP 403)")
    assert "hf_writer" not in str(err.value) and "\n" not in str(err.value)
    assert store.list("index") == []


def test_a_run_that_could_never_be_found_is_refused_before_any_work(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path / 's'}")
    with pytest.raises(InvalidInput, match="is not a Hugging Face model"):
        run_target(str(tmp_path), TargetSpec.parse(TARGET), store, tmp_path / "w", hub_registry=REPO)
    assert store.list("") == []


def test_a_build_published_before_says_it_is_not_registered(
    fake_optimum: Path, hub: FakeHub, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A published build is never rewritten: asking to register a target already published (without a
    registry, or in another repository) is said in one warning, naming the build and the repository."""
    store = open_store(f"file://{tmp_path / 's'}")
    first = run_target(MODEL, TargetSpec.parse(TARGET), store, tmp_path / "w")
    assert first.published.manifest.hub_registry is None
    again = run_target(MODEL, TargetSpec.parse(TARGET), store, tmp_path / "w", hub_registry=REPO)
    assert again.status == "cache-hit"
    (line,) = [r.getMessage() for r in caplog.records if "is not registered in" in r.getMessage()]
    assert f"(build {first.key[:12]}) and is not registered in {REPO}" in line
    assert not [r for r in hub.requests if r.method in ("POST", "PUT")]


def test_show_names_the_versions_and_the_registry(fake_optimum: Path, hub: FakeHub, tmp_path: Path, capsys) -> None:
    from neuronforge.interfaces.cli import main

    store_uri = f"file://{tmp_path / 's'}"
    out = run_target(MODEL, TargetSpec.parse(TARGET), open_store(store_uri), tmp_path / "w", hub_registry=REPO)
    capsys.readouterr()
    assert main(["show", out.key[:12], "--store", store_uri]) == 0
    shown = capsys.readouterr().out
    assert "loads in   optimum-neuron 0.4.5 · neuronx-cc 2.21.33363.0+82129205 · transformers 4.57.6" in shown
    assert f"registry   {REPO} at {hub.endpoint}: optimum-neuron's lookup returns it" in shown
    assert out.published.manifest.hub_registry.entry_path in shown
    assert main(["ls", "--json", "--store", store_uri]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["hub_registry"], row["hub_registry_found"]) == (REPO, True)


def test_a_lookup_that_fails_is_recorded_not_fatal(
    fake_optimum: Path, hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog
) -> None:
    """The entry is committed; a self-test that cannot run (the Hub gone in between) is what the manifest
    records — the build, smoke-tested, is published."""
    from neuronforge.compilation.backends.child import ChildFailed
    from neuronforge.profiles.optimum_registry import OptimumRegistry

    def unreachable(*args, **kwargs):
        raise ChildFailed("the lookup failed (exit 1): ConnectionError: refused", [])

    monkeypatch.setattr(OptimumRegistry, "lookup", unreachable)
    out = run_target(
        MODEL, TargetSpec.parse(TARGET), open_store(f"file://{tmp_path / 's'}"), tmp_path / "w", hub_registry=REPO
    )
    check = out.published.manifest.hub_registry.lookup
    assert not check.found and check.reason.startswith(f"optimum-neuron's lookup of {REPO} failed: ")
    assert any("does not return this build" in r.getMessage() for r in caplog.records if r.levelname == "WARNING")


def test_an_unreachable_registry_is_one_retryable_line_and_nothing_is_published(
    fake_optimum: Path, hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from neuronforge.common.errors import ServiceUnreachable, outcome
    from tests.hubdown import closed_endpoint

    closed = closed_endpoint()
    monkeypatch.setenv("HF_ENDPOINT", closed)  # where the registry is written (the model came from the hub)
    store = open_store(f"file://{tmp_path / 's'}")
    with pytest.raises(ServiceUnreachable) as err:
        run_target(MODEL, TargetSpec.parse(TARGET), store, tmp_path / "w", hub_registry=REPO)
    assert str(err.value).startswith(f"cannot reach the Hub at {closed} (creating {REPO}): ConnectionError")
    found = outcome(err.value)
    assert found is not None and found.retryable and "\n" not in found.line
    assert store.list("index") == []


def test_a_dtype_the_lookup_cannot_see_is_refused_by_the_plan_before_the_compile(
    fake_optimum: Path, hub: FakeHub, tmp_path: Path
) -> None:
    """The tiny model's config.json says float32; a bf16 build's entry would go under a digest no lookup
    reads: the plan refuses it (exit 3), naming the fix in the surface's words, before any compile."""
    from neuronforge.pipeline.planner import PlanRejected

    store = open_store(f"file://{tmp_path / 's'}")
    with pytest.raises(PlanRejected) as err:
        run_target(MODEL, TargetSpec.parse({**TARGET, "dtype": "bf16"}), store, tmp_path / "w", hub_registry=REPO)
    assert "the dtype of the model's config.json (float32), this target is bfloat16" in str(err.value)
    assert "use --dtype fp32 (the model's own dtype)" in str(err.value)
    assert "use dtype: fp32 (the model's own dtype)" in err.value.said("form")
    assert store.list("neuron-cache") == [] and not [r for r in hub.requests if r.method in ("POST", "PUT")]


def test_the_workers_default_registry_registers_what_it_can_and_never_refuses_a_build(
    fake_optimum: Path, hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog
) -> None:
    """NEURONFORGE_HUB_REGISTRY (e.g. for the recompile DAG's rebuilds): a build in the model's dtype is
    registered; one in another dtype is built and published unregistered, with the plan's reason."""
    monkeypatch.setenv("NEURONFORGE_HUB_REGISTRY", REPO)
    store = open_store(f"file://{tmp_path / 's'}")
    same = run_target(MODEL, TargetSpec.parse(TARGET), store, tmp_path / "w")
    assert same.published.manifest.hub_registry.lookup.found
    other = run_target(MODEL, TargetSpec.parse({**TARGET, "dtype": "bf16"}), store, tmp_path / "w")
    assert other.status == "published" and other.published.manifest.hub_registry is None
    (line,) = [r.getMessage() for r in caplog.records if "(NEURONFORGE_HUB_REGISTRY)" in r.getMessage()]
    assert line.startswith(f"not registering in {REPO} (NEURONFORGE_HUB_REGISTRY): ") and "float32" in line
