"""Toolchain detection on a worker: pip packages (keyed), OS runtime packages and the library's
model types (recorded in the manifest, never keyed)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from neuronforge.compilation.detect import detect_runtime
from neuronforge.profiles.registry import compile_request, detect_toolchain
from neuronforge.profiles.request import cache_key, cache_key_material
from neuronforge.spec.source import ModelSource
from neuronforge.spec.target import TargetSpec
from neuronforge.spec.toolchain import Toolchain


def _fake_dpkg(bin_dir: Path, versions: dict[str, str]) -> None:
    """A stand-in `dpkg-query` that knows only `versions` (a test double on PATH)."""
    bin_dir.mkdir()
    cases = "".join(f'  {pkg}) echo -n "{v}"; exit 0;;\n' for pkg, v in versions.items())
    script = bin_dir / "dpkg-query"
    script.write_text(f'#!/bin/sh\ncase "$3" in\n{cases}  *) exit 1;;\nesac\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


def test_runtime_versions_come_from_the_os_packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_dpkg(tmp_path / "bin", {"aws-neuronx-runtime-lib": "2.28.23.0-dd5879008"})
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    assert detect_runtime()["aws-neuronx-runtime-lib"] == "2.28.23.0-dd5879008"
    assert "aws-neuronx-collectives" not in detect_runtime()


def test_worker_facts_are_recorded_but_not_keyed(
    fake_neuron: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_dpkg(tmp_path / "bin", {"aws-neuronx-runtime-lib": "2.28.23.0"})
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    tc = detect_toolchain("vllm-neuron@2.26.1")
    assert tc.worker["runtime"] == {"aws-neuronx-runtime-lib": "2.28.23.0"}
    assert tc.worker["architectures"] == ["llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe"]
    assert Toolchain.from_json(tc.to_json()) == tc and tc.to_json()["worker"] == tc.worker
    request = compile_request(
        ModelSource.parse("org/m").pinned("a" * 40),
        TargetSpec.parse(
            {"instance_type": "inf2.xlarge", "tp_degree": 2, "sequence_length": 64, "profile": "vllm-neuron@2.26.1"}
        ),
    )
    upgraded_runtime = Toolchain.from_json({**tc.to_json(), "worker": {"runtime": {"aws-neuronx-runtime-lib": "9"}}})
    assert cache_key(request, tc) == cache_key(request, upgraded_runtime)
    assert "worker" not in cache_key_material(request, tc)["toolchain"]


def test_what_a_profiles_queue_detected_is_recorded_once_and_used_while_pinned(tmp_path: Path) -> None:
    """`prepare` on a Neuron profile's queue records its toolchain for the run's first task, only when
    what the key hashes changed; the record is used only while it is the profile's pins."""
    from dataclasses import replace

    from neuronforge.artifacts import layout
    from neuronforge.pipeline.toolchain_records import last_detected, record_detected
    from neuronforge.profiles import get_profile
    from neuronforge.stores import open_store

    store = open_store(f"file://{tmp_path / 'store'}")
    profile = get_profile("vllm-neuron@2.26.1")
    pins = profile.pins
    pinned = Toolchain("nxdi", "0.6.10598", "neuronxcc", pins.compiler_version, dict(pins.packages), worker={"a": 1})
    assert last_detected(store, profile) is None  # nothing recorded yet: the target is not known to hit
    assert record_detected(store, profile, pinned, "run-1")
    assert store.exists(layout.toolchain_record("vllm-neuron", profile.version))
    assert store.exists(f"toolchains/vllm-neuron@{profile.version}.json")
    assert not record_detected(store, profile, replace(pinned, worker={"a": 2}), "run-2")  # another host, same key
    assert last_detected(store, profile) == pinned
    assert store.read_json(layout.toolchain_record("vllm-neuron", profile.version))["run_id"] == "run-1"
    other = replace(pinned, compiler_version="9.9.9")  # not what vllm-neuron pins: never keys a hit
    assert record_detected(store, profile, other)
    assert last_detected(store, profile) is None
