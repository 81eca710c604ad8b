"""The CLI contract: arguments, JSON shape and exit codes (0 fits, 3 invalid / does not fit, 2 usage)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from neuronforge.interfaces.cli import main
from tests.test_planner import CONFIGS

LLAMA = CONFIGS / "meta-llama--Llama-3.1-8B.json"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_plan_fits_exit_0_and_json_shape(capsys) -> None:
    code, out, _ = run(capsys, "plan", "--model", str(LLAMA), "--instance", "inf2.xlarge", "--tp", "2",
                       "--batch-size", "1", "--seq-len", "4096", "--dtype", "bf16", "--json")  # fmt: skip
    assert code == 0
    data = json.loads(out)
    assert data["fits"] is True and data["gqa_strategy"] == "shard-over-heads"
    for field, kind in [("per_core_bytes", int), ("hbm_per_core_bytes", int), ("weight_bytes", int),
                        ("kv_cache_bytes", int), ("checks", list)]:  # fmt: skip
        assert isinstance(data[field], kind)
    assert all(set(c) == {"name", "ok", "message"} for c in data["checks"])
    assert "suggestions" not in data


def test_plan_does_not_fit_exit_3_with_the_fix(capsys) -> None:
    code, out, _ = run(
        capsys, "plan", "--model", str(LLAMA), "--instance", "inf2.xlarge", "--tp", "1", "--seq-len", "4096"
    )
    assert code == 3
    assert "[FAIL] memory: does not fit" in out and "use tp=2 (inf2.xlarge has 2 cores)" in out


def test_plan_invalid_config_exit_3(capsys) -> None:
    code, out, _ = run(capsys, "plan", "--model", str(CONFIGS / "Qwen--Qwen2.5-7B.json"), "--instance",
                       "inf2.48xlarge", "--tp", "8", "--seq-len", "4096", "--json")  # fmt: skip
    assert code == 3
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    assert checks["heads_divisible"]["ok"] is False


def test_plan_suggest(capsys) -> None:
    code, out, _ = run(capsys, "plan", "--model", str(LLAMA), "--instance", "inf2.xlarge", "--tp", "1",
                       "--seq-len", "4096", "--json", "--suggest")  # fmt: skip
    assert code == 3
    suggestions = json.loads(out)["suggestions"]
    assert suggestions and all(set(s) == {"tp", "batch_size", "seq_len", "per_core_bytes"} for s in suggestions)
    assert {s["tp"] for s in suggestions} == {2}


def test_plan_accepts_a_folder(capsys, tmp_path: Path) -> None:
    shutil.copy(LLAMA, tmp_path / "config.json")
    code, _, _ = run(
        capsys, "plan", "--model", str(tmp_path), "--instance", "trn1.2xlarge", "--tp", "2", "--seq-len", "2048"
    )
    assert code == 0


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["--instance", "inf9.xlarge", "--tp", "2", "--seq-len", "4096"], "unknown instance type 'inf9.xlarge'"),
        (["--instance", "inf2.xlarge", "--tp", "2", "--seq-len", "4096", "--dtype", "int3"], "target.dtype"),
        (["--instance", "inf2.xlarge", "--tp", "2", "--seq-len", "4096", "--quant", "int4"], "unknown dtype 'int4'"),
        (["--instance", "inf2.xlarge", "--tp", "0", "--seq-len", "4096"], "target.tp_degree"),
    ],
)
def test_plan_usage_errors_exit_2(capsys, args: list[str], text: str) -> None:
    code, _, err = run(capsys, "plan", "--model", str(LLAMA), *args)
    assert code == 2 and text in err


@pytest.mark.parametrize("tp", ["two", "٣", "2.0"])
def test_malformed_number_is_a_usage_error(capsys, tp: str) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["plan", "--model", str(LLAMA), "--instance", "inf2.xlarge", "--tp", tp, "--seq-len", "4096"])
    err = capsys.readouterr().err
    assert (
        exc.value.code == 2
        and err == f"neuronforge plan: error: argument --tp: {tp!r} is not a whole number (ASCII digits)\n"
    )


def test_plan_missing_model_is_a_usage_error(capsys, tmp_path: Path) -> None:
    code, _, err = run(
        capsys, "plan", "--model", str(tmp_path / "nope"), "--instance", "inf2.xlarge", "--tp", "1", "--seq-len", "8"
    )
    assert code == 2 and "no such folder" in err


def test_plan_accepts_the_built_in_model(capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`builtin:tiny-llama` is a model source everywhere one is taken, plan included."""
    monkeypatch.setenv("NEURONFORGE_HOME", str(tmp_path / "home"))  # generated there
    code, out, err = run(capsys, "plan", "--model", "builtin:tiny-llama", "--instance", "inf2.xlarge", "--tp", "1",
                         "--seq-len", "64", "--dtype", "fp32", "--profile", "cpu")  # fmt: skip
    assert code == 0 and out.startswith("LlamaForCausalLM (0.00B parameters) on inf2.xlarge, tp=1"), out + err
    code, out, _ = run(capsys, "plan", "--model", "builtin:tiny-llama", "--instance", "inf2.xlarge", "--tp", "1",
                       "--seq-len", "512", "--dtype", "fp32", "--profile", "cpu")  # fmt: skip
    assert code == 3 and "[FAIL] sequence_length" in out
    code, _, err = run(capsys, "plan", "--model", "builtin:huge-llama", "--instance", "inf2.xlarge", "--tp", "1",
                       "--seq-len", "64")  # fmt: skip
    assert code == 2 and "unknown built-in model 'huge-llama'; built-in models: tiny-llama" in err


def test_plan_unknown_architecture_exit_3(capsys, tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert", "architectures": ["BertModel"]}))
    code, _, err = run(
        capsys, "plan", "--model", str(tmp_path), "--instance", "inf2.xlarge", "--tp", "1", "--seq-len", "8"
    )
    assert code == 3 and "not an architecture neuronforge knows" in err


def test_fetch_store_ls_and_cache_key(capsys, tiny_llama: Path, tmp_path: Path) -> None:
    store = f"file://{tmp_path / 'store'}"
    work = str(tmp_path / "work")
    code, out, _ = run(capsys, "fetch", str(tiny_llama), "--store", store, "--work-dir", work, "--json")
    assert code == 0
    fetched = json.loads(out)
    assert fetched["reused"] is False and fetched["architecture"] == "LlamaForCausalLM"
    code, out, _ = run(capsys, "fetch", str(tiny_llama), "--store", store, "--work-dir", work)
    assert code == 0 and "already in the store (verified)" in out

    code, out, _ = run(capsys, "store", "ls", store, "--json")
    keys = [o["key"] for o in json.loads(out)]
    assert f"checkpoints/local/tiny-llama/{fetched['revision']}/MANIFEST.json" in keys

    target = ["--instance", "inf2.xlarge", "--tp", "1", "--seq-len", "256", "--work-dir", work]
    code, out, _ = run(capsys, "cache-key", "--model", str(tiny_llama), *target)
    assert code == 0 and len(out.strip()) == 64
    code, out2, _ = run(capsys, "cache-key", "--model", str(tiny_llama), *target, "--dtype", "fp16")
    assert out2 != out
    code, out3, _ = run(capsys, "cache-key", "--model", str(tiny_llama), *target, "--explain")
    material = json.loads(out3)["material"]
    assert material["model_revision"] == fetched["revision"] and material["toolchain"]["compiler"] == "torch-inductor"


def test_cache_key_for_a_neuron_backend_needs_versions_off_a_worker(capsys, tiny_llama: Path, tmp_path: Path) -> None:
    target = ["--instance", "inf2.xlarge", "--tp", "1", "--seq-len", "256", "--profile", "vllm-neuron@2.26.1"]
    code, _, err = run(capsys, "cache-key", "--model", str(tiny_llama), *target)
    assert (
        code == 2 and "NEURONFORGE_TOOLCHAIN_PYTHON_2_26_1" in err and "--backend-version and --compiler-version" in err
    )
    code, out, _ = run(capsys, "cache-key", "--model", str(tiny_llama), *target,
                       "--backend-version", "0.6.1", "--compiler-version", "2.21.33363.0+82129205")  # fmt: skip
    assert code == 0 and len(out.strip()) == 64


def test_fetch_of_a_broken_checkpoint_exits_3(capsys, tiny_llama: Path, tmp_path: Path) -> None:
    (tiny_llama / "config.json").unlink()
    code, _, err = run(
        capsys, "fetch", str(tiny_llama), "--store", str(tmp_path / "s"), "--work-dir", str(tmp_path / "w")
    )
    assert code == 3 and "checkpoint rejected" in err and "config.json" in err


def test_console_script_is_installed() -> None:
    exe = Path(sys.executable).parent / "neuronforge"
    proc = subprocess.run(
        [str(exe), "plan", "--model", str(LLAMA), "--instance", "inf2.xlarge", "--tp", "1", "--seq-len", "4096"],
        capture_output=True,
        text=True,
        env={**os.environ},
        check=False,
    )
    assert proc.returncode == 3, proc.stderr
    assert "does not fit" in proc.stdout


def test_run_show_and_ls(capsys, compiled, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    shutil.copytree(compiled.work_dir / "compile-cache", home / "work" / "compile-cache")
    monkeypatch.setenv("NEURONFORGE_HOME", str(home))
    store = f"file://{tmp_path / 'store'}"
    target = [
        "--instance",
        "inf2.xlarge",
        "--tp",
        "1",
        "--seq-len",
        "64",
        "--max-context-length",
        "32",
        "--dtype",
        "fp32",
    ]
    code, out, _ = run(capsys, "run", "--model", str(compiled.checkpoint), *target, "--store", store)
    assert code == 0
    first = json.loads(out)
    assert first["status"] == "published" and first["compiler_invocations"] == 0
    code, out, _ = run(capsys, "run", "--model", str(compiled.checkpoint), *target, "--store", store)
    assert json.loads(out)["status"] == "cache-hit"

    code, out, _ = run(capsys, "ls", store)
    assert code == 0 and first["cache_key"][:12] in out and "1 published artifact(s)" in out
    code, out, _ = run(capsys, "show", first["manifest_uri"])
    assert code == 0 and "smoke      passed" in out and f"cache key  {first['cache_key']}" in out
    # where each stage ran: the cpu profile spends nothing on a Neuron host
    assert "hosts      CPU hosts " in out and "Neuron hosts 0.0s (0% of the build on a Neuron host)" in out
    assert "compile_graphs " in out and "(cpu)" in out
    code, out, _ = run(capsys, "show", first["manifest_uri"].rsplit("/", 1)[0], "--json")
    assert json.loads(out)["cache_key"] == first["cache_key"]

    bad = ["--instance", "inf2.xlarge", "--tp", "4", "--seq-len", "64", "--dtype", "fp32"]
    code, _, err = run(capsys, "run", "--model", str(compiled.checkpoint), *bad, "--store", store)
    assert code == 3 and "tp=4 is not supported" in err


def test_quantize_command(capsys, tiny_llama: Path, tmp_path: Path) -> None:
    store = f"file://{tmp_path / 'store'}"
    args = ["quantize", str(tiny_llama), "--dtype", "int8", "--method", "per_channel", "--store", store]
    args += ["--work-dir", str(tmp_path / "w"), "--json"]
    assert main(args) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["quantization"] == "int8_per_channel" and summary["tensors_quantized"] == 14
    assert summary["uri"].startswith(store) and summary["uri"].endswith("/int8_per_channel-bf16")
    assert main(args) == 0 and json.loads(capsys.readouterr().out)["reused"]
    bad = ["quantize", str(tiny_llama), "--dtype", "int4", "--store", store, "--work-dir", str(tmp_path / "w")]
    assert main(bad) == 2 and "unknown dtype 'int4'" in capsys.readouterr().err
