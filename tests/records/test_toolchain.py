"""The toolchain record (`toolchains/<name>@<version>.json`) as a typed record."""

from __future__ import annotations

from pathlib import Path

from neuronforge.artifacts import layout
from neuronforge.pipeline.toolchain_records import last_detected
from neuronforge.profiles import get_profile
from neuronforge.records.toolchain import ToolchainRecord
from neuronforge.spec.toolchain import Toolchain
from neuronforge.stores import open_store
from tests.records.stored_fixtures import (
    check_newer_refused,
    check_reads_back_as_written,
    check_wrong_type_refused,
    raw,
)

V1 = "toolchain-v1.json"  # written by ce27dfa's record_detected (vllm-neuron's pins)


def test_a_record_the_previous_release_wrote_reads_and_writes_back_byte_for_byte() -> None:
    r = check_reads_back_as_written(ToolchainRecord, V1)
    assert r.profile.startswith("vllm-neuron@") and Toolchain.from_json(r.toolchain).backend == "nxdi"
    assert r.to_bytes() == raw(V1)


def test_the_previous_releases_record_keys_a_hit_while_it_is_the_pins(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path / 'store'}")
    profile = get_profile("vllm-neuron@2.26.1")
    store.put_bytes(raw(V1), layout.toolchain_record(profile.name, profile.version))
    detected = last_detected(store, profile)
    assert detected is not None and detected.compiler_version == profile.pins.compiler_version


def test_a_newer_record_is_refused_with_the_upgrade_and_then_is_no_hint(tmp_path: Path) -> None:
    check_newer_refused(ToolchainRecord, V1, tmp_path)
    store = open_store(f"file://{tmp_path / 'hint'}")
    profile = get_profile("vllm-neuron@2.26.1")
    store.put_bytes(
        raw(V1).replace(b'"schema_version": 1', b'"schema_version": 9'),
        layout.toolchain_record(profile.name, profile.version),
    )
    assert last_detected(store, profile) is None  # a hint this release cannot read: the target goes the normal way


def test_a_record_with_a_wrong_type_names_the_field_and_the_uri(tmp_path: Path) -> None:
    check_wrong_type_refused(ToolchainRecord, V1, tmp_path, ("toolchain",), "nxdi 0.6")
