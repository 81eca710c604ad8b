"""`re-verify`: a vllm-neuron-native build made on SDK 2.33.0, at 2.33.1 (libtorch-neuronx-lite rebuilt, the
compiler not: the plugin's key may hash LNL's version). The consumer's own re-trace, in 2.33.1's interpreter
against the published cache with compiling forbidden, decides: every key found → attested (0 compiles);
a key missing → a failed attestation naming it, and the decision `rebuild` — on a profile version for
2.33.1, which none is yet: the build is kept, nothing compiled, and the row says what to register.

Both readings of the unverified fact, through the FAKE plugin (tests/fakes/README.md): by default it hashes
LNL's version (2.33.1 misses every key); `FAKE_LNL_VERSION_HASHED=0` hashes torch-neuronx's (unchanged).
Each reading builds its own store, on the hosts of that reading."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from neuronforge.artifacts import attestations, layout
from neuronforge.compilation.vllm_cache import CacheManifest
from neuronforge.interfaces.cli import main
from neuronforge.pipeline.runner import run_target
from neuronforge.records.local import read_local
from neuronforge.spec.target import TargetSpec
from neuronforge.spec.tinymodel import make_tiny_llama
from neuronforge.stores import open_store
from tests.fakes import VLLM_SDK_2_33_0, VLLM_SDK_2_33_1, fake_python

TARGET = {
    "instance_type": "trn2.3xlarge",
    "tp_degree": 4,
    "batch_size": 2,
    "sequence_length": 256,
    "dtype": "fp32",
    "profile": "vllm-neuron-native@2.33",
}
HASHED, UNHASHED = "lnl-hashed", "lnl-unhashed"


@pytest.fixture(scope="module", params=[HASHED, UNHASHED])
def world(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """Hosts with SDK 2.33.0's and 2.33.1's interpreters (fake), Neuron devices, one reading of the key;
    a tiny Llama built on 2.33.0 and published to a file store."""
    base = tmp_path_factory.mktemp(request.param)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NEURONFORGE_HOME", str(base / "home"))
        mp.setenv("NEURONFORGE_TOOLCHAIN_PYTHON_2_33_0", str(fake_python(base / "py233", *VLLM_SDK_2_33_0)))
        mp.setenv("NEURONFORGE_TOOLCHAIN_PYTHON_2_33_1", str(fake_python(base / "py2331", *VLLM_SDK_2_33_1)))
        mp.setenv("FAKE_NEURON_DEVICES", "2")
        mp.setenv("FAKE_LNL_VERSION_HASHED", "1" if request.param == HASHED else "0")
        store = open_store(f"file://{base / 'store'}")
        model = make_tiny_llama(base / "model", tokenizer=True)
        built = run_target(str(model), TargetSpec(**TARGET), store, base / "work")
        prefix = built.published.manifest_uri.removeprefix(store.uri("")).rsplit("/", 1)[0].lstrip("/")
        store.get_tree(prefix, base / "artifact")
        cache = read_local(CacheManifest, base / "artifact" / "launch" / "vllm-cache.json")
        yield {
            "reading": request.param,
            "base": base,
            "store": store,
            "model": model,
            "key": built.key,
            "keys": [e.key for e in cache.entries],
        }


def _copy(world: dict, tmp_path: Path):
    """A copy of the world's store: each test attests or rebuilds in its own."""
    import shutil

    shutil.copytree(world["base"] / "store", tmp_path / "store")
    return open_store(f"file://{tmp_path / 'store'}")


def _compiles(store) -> list[str]:
    """The cache entries the store holds for SDK 2.33.0 (a compile adds one per graph)."""
    listed = store.list(layout.vllm_cache_prefix("2.33.0"))
    return sorted(o.key.rsplit("/", 2)[-2] for o in listed if o.key.endswith("/graph.hlo"))


def test_attest_runs_the_re_trace_in_the_release_interpreter(
    world: dict, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    store = _copy(world, tmp_path)
    before = _compiles(store)
    argv = ["attest", world["key"][:12], "--sdk", "2.33.1", "--store", store.root_uri, "--work-dir", str(tmp_path)]
    code = main([*argv, "--json"])
    out = json.loads(capsys.readouterr().out)
    a = out["attestation"]
    assert (out["decision"], a["run"]) == ("re-verify", "re-verify")
    assert _compiles(store) == before  # compiling forbidden: nothing was added to the published cache
    if world["reading"] == HASHED:
        # LNL 2.11.0.1.0.4089 is in every key: the first graph misses, the trace stops there
        assert code == 3 and a["passed"] is False
        assert a["keys_found"] == [] and len(a["keys_missing"]) == 1
        assert a["keys_missing"][0] not in world["keys"]
        assert "more may follow" in a["detail"] and "py2331" in a["detail"]
        assert attestations.attested_for(store, world["key"], "2.33.1", "2.33.0") is False
        assert main(["show", world["key"][:12], "--store", store.root_uri]) == 0
        shown = capsys.readouterr().out
        assert "SDK 2.33.1: re-verify FAILED" in shown and "1 MISSING" in shown
        assert main(argv) == 3
        line = capsys.readouterr().out.strip()
        assert a["keys_missing"][0] in line and line.endswith("rebuild it on a profile version for SDK 2.33.1")
        return
    assert code == 0 and a["passed"] is True, a
    assert sorted(a["keys_found"]) == sorted(world["keys"]) and a["keys_missing"] == []
    assert "tokens match" in a["detail"]  # the smoke ran too, in 2.33.1's interpreter
    assert attestations.attested_for(store, world["key"], "2.33.1", "2.33.0")
    assert main(["show", world["key"][:12], "--store", store.root_uri]) == 0
    shown = capsys.readouterr().out
    assert "SDK 2.33.1: re-verify passed" in shown and f"{len(world['keys'])} key(s) found" in shown


def _recompile(world: dict, store, tmp_path: Path, *extra: str) -> int:
    catalog = tmp_path / "models.yaml"
    target = {k: v for k, v in TARGET.items() if k != "profile"} | {"profile": "vllm-neuron-native"}
    catalog.write_text(f"models:\n  - source: {world['model']}\n    targets:\n      - {json.dumps(target)}\n")
    return main(["recompile", str(catalog), "--sdk", "2.33.1", "--store", store.root_uri, "--json", *extra])


def test_recompile_attests_or_rebuilds_by_the_re_trace(
    world: dict, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    store = _copy(world, tmp_path)
    code = _recompile(world, store, tmp_path, "--dry-run")
    [row] = json.loads(capsys.readouterr().out)["targets"]
    assert code == 0 and row["status"] == "fresh" and row["key"] == world["key"]
    assert row["upgrade"]["decision"] == "re-verify" and row["upgrade"]["keys_missing"] == []
    before = _compiles(store)
    code = _recompile(world, store, tmp_path)
    [row] = json.loads(capsys.readouterr().out)["targets"]
    up = row["upgrade"]
    if world["reading"] == UNHASHED:
        assert code == 0 and row["outcome"] == "attested" and up["decision"] == "re-verify"
        assert sorted(up["keys_found"]) == sorted(world["keys"]) and up["keys_missing"] == []
        assert _compiles(store) == before  # 0 compiles
        return
    # the re-trace missed a key: `rebuild`, which needs a profile version of the line for 2.33.1 (its image,
    # so the rebuilt build's launch files name the consumer that computes its keys): none is registered, so
    # nothing is compiled, the build is kept and not attested, and the row says what to register
    assert up["decision"] == "rebuild" and up["action"] == "unknown", up
    assert len(up["keys_missing"]) == 1 and up["reverified_key"] == world["key"]
    assert up["keys_missing"][0] in up["sentence"] and "lines.vllm-neuron-native.profile" in up["sentence"]
    assert row["outcome"] == "attest-failed" and row["key"] == world["key"] and row["status"] == "fresh"
    assert _compiles(store) == before  # nothing compiled
    assert attestations.attested_for(store, world["key"], "2.33.1", "2.33.0") is False
    # the next run decides the same from the failed attestation, without tracing again
    code = _recompile(world, store, tmp_path, "--dry-run")
    out = json.loads(capsys.readouterr().out)
    [row] = out["targets"]
    assert row["key"] == world["key"] and row["upgrade"]["decision"] == "rebuild" and row["status"] == "fresh"
    assert row["upgrade"]["keys_missing"] == up["keys_missing"] and row["upgrade"]["action"] == "unknown"
