"""neuronforge_toolchain: the package the worker runs in a Neuron SDK image's own interpreter, and its
versioned JSON protocol, exercised across a real process boundary (this venv's Python stands in
for the image's: no Python 3.10 can be installed here, so 3.10 compatibility is checked statically,
by vermin and ruff with target-version py310, below and in `make lint`)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import neuronforge_toolchain
from neuronforge.common.errors import InvalidInput
from neuronforge.compilation.backends.child import ChildFailed
from neuronforge.compilation.backends.interpreter import ToolchainPython, release_var, run_toolchain, staged_package

PACKAGE = Path(neuronforge_toolchain.__file__).parent
BIN = Path(sys.executable).parent
# What the toolchain side may import: the standard library, itself, and the SDK it drives.
SDK_MODULES = {"torch", "transformers", "optimum", "neuronx_distributed_inference", "transformers_neuronx", "vllm"}


def _here() -> ToolchainPython:
    return ToolchainPython(sys.executable, "test", "this venv's Python")


def _raw(request: dict | str, tmp_path: Path) -> tuple[int, dict]:
    """`python -m neuronforge_toolchain REQUEST RESPONSE` with only the staged package on the path."""
    req, resp = tmp_path / "request.json", tmp_path / "response.json"
    req.write_text(request if isinstance(request, str) else json.dumps(request))
    env = {**os.environ, "PYTHONPATH": str(staged_package())}
    done = subprocess.run(
        [sys.executable, "-m", "neuronforge_toolchain", str(req), str(resp)], env=env, capture_output=True, text=True
    )
    return done.returncode, json.loads(resp.read_text())


def test_detect_answers_across_a_process_boundary() -> None:
    result, _ = run_toolchain(
        _here(),
        "detect",
        {"packages": ["torch", "no-such-package"], "modeling_modules": {"llama": "json", "gpt2": "no_such_module"}},
        timeout_s=60,
        what="detect",
    )
    assert set(result["packages"]) == {"torch"} and result["architectures"] == ["llama"]
    assert result["python"] == ".".join(map(str, sys.version_info[:3])) and result["neuron_devices"] == 0


@pytest.mark.parametrize(
    ("request_body", "said"),
    [
        ({"protocol": 0, "action": "detect", "spec": {}}, "request protocol 0, but this neuronforge_toolchain speaks"),
        ({"protocol": neuronforge_toolchain.PROTOCOL, "action": "explode", "spec": {}}, "unknown action 'explode'"),
        ({"protocol": neuronforge_toolchain.PROTOCOL, "action": "compile", "spec": {}}, "unknown toolchain None"),
        ({"protocol": neuronforge_toolchain.PROTOCOL, "action": "detect"}, "no 'spec' object"),
        ("[1, 2]", "a request is a JSON object"),
    ],
)
def test_requests_it_cannot_run_are_answered_not_crashed(request_body, said: str, tmp_path: Path) -> None:
    rc, answer = _raw(request_body, tmp_path)
    assert rc == 2 and answer["protocol"] == neuronforge_toolchain.PROTOCOL and answer["ok"] is False
    assert said in answer["error"]["message"]


def test_the_toolchains_own_failure_reaches_the_worker_with_its_type_and_message(tmp_path: Path) -> None:
    """An SDK that raises (here: optimum-neuron's loader on a folder with no export) is reported as
    the child's error, not as a bare exit status."""
    with pytest.raises(ChildFailed, match=r"smoke load failed \(exit 1\): \w+(Error|Exception): ") as exc:
        run_toolchain(
            _here(),
            "generate",
            {"model_dir": str(tmp_path / "nothing"), "prompt_ids": [[1]], "max_new_tokens": 1},
            toolchain="nxdi",
            timeout_s=120,
            what="smoke load",
        )
    assert "neuronx_distributed_inference" in str(exc.value) or "module" in str(exc.value)


def test_a_worker_and_a_toolchain_side_of_other_protocol_versions_refuse_each_other(tmp_path: Path) -> None:
    old = tmp_path / "old-python"
    old.write_text(
        "#!/bin/sh\n"
        f'"{sys.executable}" -c \'import json, sys; json.dump({{"protocol": 0, "ok": True, "result": {{}}}}, '
        'open(sys.argv[1], "w"))\' "$4"\n'
    )
    old.chmod(0o755)
    with pytest.raises(
        ChildFailed, match=f"answered in protocol 0, this worker speaks {neuronforge_toolchain.PROTOCOL}"
    ):
        run_toolchain(ToolchainPython(str(old), "test", "test"), "detect", {}, timeout_s=60, what="detect")


def test_a_missing_interpreter_is_named_with_the_setting_to_fix_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(release_var("2.21.1"), raising=False)
    monkeypatch.delenv("NEURONFORGE_TOOLCHAIN_PYTHON", raising=False)
    python = ToolchainPython.resolve("2.21.1", "/nonexistent/python3.10")
    with pytest.raises(
        InvalidInput,
        match=r"/nonexistent/python3.10 \(the SDK image's interpreter\).*NEURONFORGE_TOOLCHAIN_PYTHON_2_21_1",
    ):
        run_toolchain(python, "detect", {}, timeout_s=60, what="detect")
    monkeypatch.setenv("NEURONFORGE_TOOLCHAIN_PYTHON", sys.executable)
    assert ToolchainPython.resolve("2.21.1", "/nonexistent").source == "NEURONFORGE_TOOLCHAIN_PYTHON"
    monkeypatch.setenv(release_var("2.21.1"), "/opt/sdk/python")
    assert ToolchainPython.resolve("2.21.1", "/nonexistent").path == "/opt/sdk/python"


def test_a_hung_toolchain_is_killed_at_the_timeout(tmp_path: Path) -> None:
    hang = tmp_path / "python"
    hang.write_text("#!/bin/sh\nsleep 60\n")
    hang.chmod(0o755)
    with pytest.raises(ChildFailed, match="did not finish within 2s; killed"):
        run_toolchain(ToolchainPython(str(hang), "test", "test"), "detect", {}, timeout_s=2, what="detect")


def test_the_child_sees_the_package_alone_not_the_workers_site_packages(tmp_path: Path) -> None:
    """Its PYTHONPATH holds a copy of the package and nothing else (the worker's torch must never
    shadow the SDK image's), and importing every module loads no neuronforge, Airflow or pydantic."""
    staged = staged_package()
    assert sorted(p.name for p in staged.iterdir()) == ["neuronforge_toolchain"]
    assert sorted(p.name for p in (staged / "neuronforge_toolchain").iterdir()) == sorted(
        p.name for p in PACKAGE.glob("*.py")
    )
    modules = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module('neuronforge_toolchain.' + m)\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'neuronforge', 'airflow', 'pydantic', 'torch'}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(staged)}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_it_imports_only_the_standard_library_and_the_sdk() -> None:
    """Every import in the package, at any depth: the standard library, the package itself, the SDK
    (inside the functions that drive it). A neuronforge import would not exist in an SDK image."""
    found = set()
    for path in PACKAGE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
    outside = sorted(found - set(sys.stdlib_module_names) - SDK_MODULES - {"neuronforge_toolchain"})
    assert outside == []


def test_it_is_python_3_10_compatible() -> None:
    """vermin (the minimum version of every construct and API used) and ruff against py310 (the
    package's ruff.toml): the LMI image of SDK 2.21.1 runs Python 3.10."""
    vermin = subprocess.run(
        [str(BIN / "vermin"), "-t=3.10-", "--violations", "--no-tips", "--eval-annotations", str(PACKAGE)],
        capture_output=True,
        text=True,
    )
    assert vermin.returncode == 0, vermin.stdout + vermin.stderr
    ruff = subprocess.run(
        [str(BIN / "ruff"), "check", "--show-settings", str(PACKAGE / "__init__.py")], capture_output=True, text=True
    )
    assert "linter.unresolved_target_version = 3.10" in ruff.stdout
    assert subprocess.run([str(BIN / "ruff"), "check", str(PACKAGE)], capture_output=True).returncode == 0
