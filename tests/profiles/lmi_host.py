"""A host that starts LMI from an `lmi-neuronx` artifact's launch files as published: `run-lmi.sh
--print` (the REAL script) gives the `docker run`; its bind mounts stand in for the container's
filesystem, and LMI's start-up is replayed as djl-serving afece25d's code does it, loading with the FAKE
transformers-neuronx 0.13.380 (tests/fakes/neuron_sdk_2_21_1), which logs every graph it compiles.

What is replayed (djl-serving afece25d):
- LMI reads `/opt/ml/model/serving.properties` (serving/docker/config.properties `model_store=/opt/ml/model`);
  `OPTION_<KEY>` variables add `option.<key>` only where the file has none (wlm ModelInfo.java, putIfAbsent);
- the Python worker's environment is the container's plus `option.env`'s pairs (PyModel.java `case "env"`,
  PyEnv.java getEnvironmentVars);
- a compiled_graph_path becomes NEURON_COMPILE_CACHE_URL (tnx_properties.py compiled_path_validator), a
  local one is also given to `model.load(dir)` (model_loader.py maybe_compile_model);
- a NEURON_COMPILE_CACHE_URL folder the worker cannot write is copied to /var/tmp/neuron-compile-cache
  first (model_loader.py move_read_only_neuron_cache): here, one under a `:ro` mount.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neuronforge.profiles.base import read_env_file
from neuronforge.profiles.lmi_neuronx import (
    COMPILER_VERSION,
    LMI_CC_FLAGS,
    PROFILE,
    env_to_properties,
    lmi_load,
    parse_properties,
)

# LMI's model store, where it reads serving.properties (djl-serving afece25d serving/docker/config.properties
# `model_store=/opt/ml/model`): stated here from LMI's source, not taken from the profile under test.
MODEL_STORE = "/opt/ml/model"


@dataclass(frozen=True)
class DockerRun:
    """The `docker run` run-lmi.sh prints: its bind mounts (host, container, read-only), env file, image."""

    mounts: tuple[tuple[Path, str, bool], ...]
    env_file: Path
    devices: tuple[str, ...]
    image: str

    @classmethod
    def parse(cls, line: str) -> DockerRun:
        words = shlex.split(line)
        assert words[:3] == ["docker", "run", "--rm"], words
        mounts, devices, env_file = [], [], None
        i = 3
        while i < len(words) - 1:
            flag, value = words[i], words[i + 1]
            if flag == "-v":
                host, container, *mode = value.split(":")
                mounts.append((Path(host), container, mode == ["ro"]))
            elif flag == "--device":
                devices.append(value)
            elif flag == "--env-file":
                env_file = Path(value)
            i += 2 if flag in ("-v", "--device", "--env-file", "-p", "-e") else 1
        assert env_file is not None, words
        return cls(tuple(mounts), env_file, tuple(devices), words[-1])

    def _mount(self, container_path: str) -> tuple[Path, str, bool]:
        found = [m for m in self.mounts if container_path == m[1] or container_path.startswith(m[1] + "/")]
        assert found, f"{container_path} is on no mount of the docker command: LMI would find nothing there"
        return max(found, key=lambda m: len(m[1]))

    def host_path(self, container_path: str) -> Path:
        host, container, _ = self._mount(container_path)
        return host / container_path.removeprefix(container).lstrip("/")

    def read_only(self, container_path: str) -> bool:
        return self._mount(container_path)[2]


def run_lmi_print(launch: Path, env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], DockerRun | None]:
    """`bash launch/run-lmi.sh --print` on this host; the docker command it printed, when it did."""
    done = subprocess.run(
        ["bash", str(launch / "run-lmi.sh"), "--print"], env=env, capture_output=True, text=True, timeout=120
    )
    return done, DockerRun.parse(done.stdout.splitlines()[0]) if done.returncode == 0 else None


def lmi_start(run: DockerRun, scratch: Path, prompt: list[int]) -> dict[str, Any]:
    """LMI's start-up in the container `run` describes, then one generation: the FAKE
    transformers-neuronx's load through the NEFFs the launch files point it at (`Backend.generate`:
    "compiled" lists what the load had to compile)."""
    from neuronforge.compilation.backends.base import GenerateJob
    from neuronforge.compilation.backends.tnx import BACKEND
    from neuronforge.compilation.compile_cache import CompileCache

    props = parse_properties((run.host_path(MODEL_STORE) / "serving.properties").read_text())
    env = read_env_file(run.env_file)
    for key, value in env_to_properties(env).items():
        props.setdefault(key, value)
    worker = {**env, **dict(kv.split("=", 1) for kv in props.get("option.env", "").split(",") if "=" in kv)}
    model_dir = run.host_path(props["option.model_id"])
    model_type = json.loads((model_dir / "config.json").read_text())["model_type"]
    load, problems = lmi_load(props, model_type)
    assert load is not None and not problems, problems
    graphs = props.get("option.compiled_graph_path")
    url = graphs or worker.get("NEURON_COMPILE_CACHE_URL")
    if url is None:  # libneuronxla's default cache: empty on a fresh container
        cache_root = scratch / "var-tmp-neuron-compile-cache"
    elif run.read_only(url):
        cache_root = scratch / "var-tmp-neuron-compile-cache"
        shutil.copytree(run.host_path(url), cache_root)
    else:
        cache_root = run.host_path(url)
    settings = {"tnx": load, "neuron_cc_flags": LMI_CC_FLAGS, "load_neffs": bool(graphs)}
    if graphs:
        settings["neff_dir"] = run.host_path(graphs)
    cache = CompileCache(cache_root, "neuronxcc", COMPILER_VERSION)
    return BACKEND.generate(GenerateJob(model_dir, [prompt], 4, 300, cache, settings, python=PROFILE.python()))
