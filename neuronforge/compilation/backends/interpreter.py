"""The toolchain's own interpreter: where the Neuron backends run the SDK.

A Neuron SDK comes as an image with its own Python (the LMI image of SDK 2.21.1: Python 3.10; the
SDK 2.26.1 DLC: 3.11), not the Airflow worker's venv. The worker therefore never imports the SDK:
it starts `neuronforge_toolchain` (a small package with no dependency beyond the SDK, Python 3.10
compatible) under the interpreter of the profile version's toolchain and speaks its versioned JSON
protocol (`neuronforge_toolchain.protocol`): one request file in, one response file out, the
toolchain's progress relayed into the task log.

Which interpreter: `NEURONFORGE_TOOLCHAIN_PYTHON_<release>` (dots as underscores, e.g.
`NEURONFORGE_TOOLCHAIN_PYTHON_2_21_1`), else `NEURONFORGE_TOOLCHAIN_PYTHON` (what a worker image of
one release sets), else the interpreter the profile declares for its SDK image
(`ServingProfile.toolchain_python`). The child gets exactly the package on its PYTHONPATH — never
the worker's site-packages, whose torch or transformers would shadow the SDK's.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neuronforge.common import settings
from neuronforge.common.errors import InvalidInput
from neuronforge.compilation.backends.child import ChildFailed, run_process
from neuronforge.compilation.graph_env import child_environment

PACKAGE = "neuronforge_toolchain"
GLOBAL_VAR = settings.TOOLCHAIN_PYTHON_VAR
release_var = settings.toolchain_python_var  # the per-release setting, e.g. NEURONFORGE_TOOLCHAIN_PYTHON_2_21_1


@dataclass(frozen=True)
class ToolchainPython:
    """The interpreter a profile version's toolchain runs in, and where that choice came from."""

    path: str
    release: str  # the Neuron SDK release whose toolchain it holds
    source: str  # the setting that named it, or "the SDK image's interpreter"

    @classmethod
    def resolve(cls, release: str, declared: str) -> ToolchainPython:
        named = settings.current().toolchain_python_for(release)
        if named is not None:
            return cls(named[0], release, named[1])
        return cls(declared, release, "the SDK image's interpreter")

    def check(self) -> None:
        """A specific error, before any work, when this host has no such interpreter."""
        path = shutil.which(self.path) if os.sep not in self.path else self.path
        if not path or not os.access(path, os.X_OK):
            raise InvalidInput(
                f"the Neuron SDK {self.release} toolchain runs in {self.path} ({self.source}), which this worker "
                f"does not have; run this task on a worker of that SDK's image (docker/neuron-worker.Dockerfile "
                f"with NEURON_SDK_VERSION={self.release}) or set {release_var(self.release)} to the Python "
                "that has the SDK"
            )


@functools.cache
def staged_package() -> Path:
    """A folder holding only `neuronforge_toolchain` (copied once per content), for the child's
    PYTHONPATH: the package travels without the rest of neuronforge or its dependencies."""
    import neuronforge_toolchain

    source = Path(neuronforge_toolchain.__file__).parent
    files = sorted(p for p in source.glob("*.py"))
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    base = Path(tempfile.gettempdir()) / "neuronforge-toolchain-side" / digest.hexdigest()[:16]
    if (base / PACKAGE / "__init__.py").exists():
        return base
    tmp = base.with_name(f".{base.name}-{uuid.uuid4().hex[:8]}")
    (tmp / PACKAGE).mkdir(parents=True)
    for f in files:
        shutil.copyfile(f, tmp / PACKAGE / f.name)
    try:
        tmp.rename(base)
    except OSError:  # another process staged the same content first
        shutil.rmtree(tmp, ignore_errors=True)
    return base


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The worker's environment minus what belongs to its own Python, plus the package's path. The
    variables the stray-environment rule governs (graph-shaping ones, cache locations) come only from
    `extra`, what the backend declares: never from the worker (`graph_env.child_environment`)."""
    worker = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env = child_environment(extra or {}, worker)
    env["PYTHONPATH"] = str(staged_package())
    return env


def run_toolchain(
    python: ToolchainPython,
    action: str,
    spec: dict[str, Any],
    *,
    toolchain: str | None = None,
    env: dict[str, str] | None = None,
    timeout_s: float,
    what: str,
) -> tuple[dict[str, Any], list[str]]:
    """Run one request in the toolchain's interpreter; returns (its result, its output lines).
    Raises ChildFailed with the toolchain's own error (type and message) when the action failed."""
    from neuronforge_toolchain import PROTOCOL

    python.check()
    with tempfile.TemporaryDirectory(prefix="nf-toolchain-") as tmp:
        request, response = Path(tmp) / "request.json", Path(tmp) / "response.json"
        body = {"protocol": PROTOCOL, "action": action, "toolchain": toolchain, "spec": spec}
        request.write_text(json.dumps(body), encoding="utf-8")
        rc, lines = run_process(
            [python.path, "-m", PACKAGE, str(request), str(response)],
            env=child_env(env),
            timeout_s=timeout_s,
            what=what,
        )
        answer = _read_response(response)
    if answer is None:
        raise ChildFailed(f"{what} failed (exit {rc}) without an answer from {python.path}", lines[-20:])
    if answer.get("protocol") != PROTOCOL:
        raise ChildFailed(
            f"{what}: {python.path} answered in protocol {answer.get('protocol')!r}, this worker speaks {PROTOCOL}",
            [],
        )
    if not answer.get("ok"):
        error = answer.get("error") or {}
        raise ChildFailed(
            f"{what} failed (exit {rc}): {error.get('type', 'Error')}: {error.get('message', '')}",
            [*error.get("traceback", [])[-3:], *lines[-10:]],
            output=lines,
        )
    return answer.get("result") or {}, lines


def _read_response(path: Path) -> dict[str, Any] | None:
    try:
        answer = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return answer if isinstance(answer, dict) else None
