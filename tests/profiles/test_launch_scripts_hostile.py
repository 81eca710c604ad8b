"""A build's own launch scripts treat the store and their records as data (issue 51): serve.sh of
vllm-neuron and optimum-neuron, published for a store whose folder's name holds every shell metacharacter,
copy or serve that folder and exec the server with it as one argument — nothing an injected `$(...)` or
backquote would run runs — and run-lmi.sh refuses NEFF cache entries that leave the cache in one line.
(vllm-neuron-native's sync.sh and serve.sh: test_vllm_native_k8s.py; a channel's resolve.sh:
tests/releases/test_resolve_hostile.py.)"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

from neuronforge.artifacts import launch_script
from neuronforge.profiles import get_profile
from neuronforge.profiles.base import LaunchContext
from neuronforge.spec.target import TargetSpec
from neuronforge.spec.toolchain import Toolchain

# A folder's name holding every shell metacharacter (a line of an env file holds it: no newline, no tab).
HOSTILE = "$(touch INJECTED) `touch INJECTED`; & | < > * ? [ ] { } ' \" \\ x"


def _launch(tmp_path: Path, profile_ref: str) -> tuple[Path, Path]:
    """The profile's launch files for an artifact of a file:// store at a hostile path, written into the
    artifact's launch/ folder (with a model file). Returns (the artifact's folder, its launch folder)."""
    profile = get_profile(profile_ref)
    target = TargetSpec.parse(
        {"instance_type": "inf2.xlarge", "tp_degree": 2, "batch_size": 4, "sequence_length": 64, "profile": profile.ref}
    ).normalized()
    artifact = tmp_path / f"store {HOSTILE}" / "artifacts" / "abcdef012345"
    ctx = LaunchContext(target, Toolchain("x", "1", "neuronxcc", "2"), f"file://{artifact}", "", "llama")
    launch = artifact / "launch"
    launch.mkdir(parents=True)
    for name, text in profile.launch_spec(ctx).items():
        (launch / name).write_text(text)
    (artifact / profile.folder).mkdir()
    (artifact / profile.folder / "config.json").write_text('{"model_type": "llama"}\n')
    return artifact, launch


def _serve(tmp_path: Path, launch: Path, server: str, *args: str) -> list[str]:
    """Run launch/serve.sh (in a folder of its own, where an injected `touch` would write) with `server`
    a stand-in that prints the arguments it is execed with, one per line; those arguments."""
    bindir, cwd = tmp_path / "bin", tmp_path / "cwd"
    bindir.mkdir()
    cwd.mkdir()
    (bindir / server).write_text("#!/bin/sh\nprintf '%s\\n' \"$@\"\n")
    (bindir / server).chmod(0o755)
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", str(launch / "serve.sh"), *args], cwd=cwd, capture_output=True, text=True, timeout=60, env=env
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_vllm_neuron_serve_sh_copies_a_hostile_store_folder_as_data(tmp_path: Path) -> None:
    artifact, launch = _launch(tmp_path, "vllm-neuron@2.28.0")
    env_file = (launch / "vllm.env").read_text()
    assert f"MODEL_URI=file://{artifact}/nxdi\n" in env_file
    model_dir = tmp_path / f"host {HOSTILE}" / "nxdi"  # where the host keeps it: hostile too
    (launch / "vllm.env").write_text(env_file.replace("MODEL_DIR=/opt/neuronforge/", f"MODEL_DIR={model_dir}/#"))
    served = _serve(tmp_path, launch, "vllm", "--served-model-name", "a b")
    assert served[:2] == ["serve", str(model_dir) + "/#models/abcdef012345/nxdi"], served
    assert served[-4:] == ["--port", "8000", "--served-model-name", "a b"]
    assert (Path(served[1]) / "config.json").is_file()  # the folder, copied from the hostile store
    assert not list(tmp_path.rglob("INJECTED"))


def test_optimum_serve_sh_serves_a_hostile_store_folder_where_it_is(tmp_path: Path) -> None:
    artifact, launch = _launch(tmp_path, "optimum-neuron")
    served = _serve(tmp_path, launch, "optimum-cli")
    assert served[:4] == ["neuron", "serve", "--model", f"{artifact}/optimum-neuron"], served
    assert not list(tmp_path.rglob("INJECTED"))


def _run_lmi(tmp_path: Path, neff_cache: dict, artifact_prefix: str = "artifacts/a") -> subprocess.CompletedProcess:
    """run-lmi.sh --print of a file:// artifact of the classes without load(dir) (its NEFFs in the store's
    cache, copied into the run folder), with this neff-cache.json."""
    store = tmp_path / f"store {HOSTILE}"
    artifact = store / artifact_prefix
    (artifact / "split/model").mkdir(parents=True)
    (artifact / "split/model/config.json").write_text("{}\n")
    launch = artifact / "launch"
    launch.mkdir()
    for name in ("serving.properties", "lmi.env"):
        (launch / name).write_text("# x\n")
    (launch / "neff-cache.json").write_text(json.dumps(neff_cache))
    (launch / "run-lmi.sh").write_text(
        launch_script.render(
            "run-lmi.sh",
            REF="lmi-neuronx@2.21.1",
            KIND="local-cache",
            ARTIFACT_PREFIX=artifact_prefix,
            CACHE_PREFIX="neuron-cache",
            KEY=HOSTILE,
            DEVICES=1,
            IMAGE=HOSTILE,
        )
    )
    entry = store / "neuron-cache" / "neuronxcc-2" / "MODULE_1"
    entry.mkdir(parents=True)
    (entry / "model.done").write_text("")
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    env = {**os.environ, "TMPDIR": str(tmp_path / f"tmp {HOSTILE}")}
    return subprocess.run(
        ["bash", str(launch / "run-lmi.sh"), "--print"], cwd=cwd, capture_output=True, text=True, timeout=60, env=env
    )


def test_run_lmi_takes_a_hostile_store_and_image_as_data(tmp_path: Path) -> None:
    done = _run_lmi(tmp_path, {"compiler_dir": "neuronxcc-2", "entries": ["MODULE_1"]})
    assert done.returncode == 0, done.stderr
    run = tmp_path / f"tmp {HOSTILE}" / "neuronforge-lmi" / HOSTILE  # the run folder: under TMPDIR, by its key
    assert (run / "neuron-cache" / "neuronxcc-2" / "MODULE_1" / "model.done").is_file()
    words = shlex.split(done.stdout)  # printed with printf %q: one shell word each
    assert words[-1] == HOSTILE and words[words.index("--env-file") + 1] == f"{run}/lmi.env"
    assert f"{run}:/opt/ml/model" in words
    assert not list(tmp_path.rglob("INJECTED"))


def test_run_lmi_refuses_neff_cache_entries_that_leave_the_cache_in_one_line(tmp_path: Path) -> None:
    for n, record in enumerate(
        [
            {"compiler_dir": "neuronxcc-2", "entries": ["../../../../victim"]},
            {"compiler_dir": "/etc", "entries": ["MODULE_1"]},
            {"compiler_dir": "neuronxcc-2", "entries": ["a\nb"]},
            {"compiler_dir": "neuronxcc-2", "entries": "MODULE_1"},
            ["not", "a record"],
        ]
    ):
        done = _run_lmi(tmp_path / str(n), record)
        assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
        assert "neff-cache.json: compiler_dir and entries are not folders inside the NEFF cache" in done.stderr
    (tmp_path / "cut").mkdir()
    done = _run_lmi(tmp_path / "cut", {})
    launch = tmp_path / "cut" / f"store {HOSTILE}" / "artifacts/a/launch"
    (launch / "neff-cache.json").write_text('{"compiler_dir": "neuronxcc-2", "entr')
    done = subprocess.run(["bash", str(launch / "run-lmi.sh"), "--print"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stderr.count("\n") == 1 and "neff-cache.json: not JSON (" in done.stderr
