"""The host probe (`neuronforge.compilation.host_probe`): both `neuron-ls` JSON formats from recorded
output (tests/data/neuron-ls/README.md names each file's source: the Neuron docs at a tag, two real
captures, and one 2.34 sample CONSTRUCTED from the docs since none is public), the fallback from
`--output-format json` to `-j` through the fake `neuron-ls` of SDK 2.26.1 (tests/fakes/neuron_tools),
each error line, and the host/target check."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from neuronforge.common.errors import outcome
from neuronforge.compilation.host_probe import (
    HostMismatch,
    HostProbeFailed,
    NeuronHost,
    check_host,
    chip_family,
    instance_type_from_table,
    parse_neuron_ls,
    probe,
)
from neuronforge.spec.target import TargetSpec
from tests.fakes import NEURON_TOOLS

DATA = Path(__file__).parent / "data" / "neuron-ls"
GIB = 1024**3
FAKE_LS = str(NEURON_TOOLS / "neuron-ls")


def _read(name: str) -> str:
    return (DATA / name).read_text()


# -- each recorded format ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # SDK 2.22 docs: -j, trn2n.48xlarge, devices 0 and 15 of the example (the `...` removed)
        ("json-output-2.22-trn2n.48xlarge.json", NeuronHost("json-output", 2, 8, None, 2, 96 * GIB)),
        # SDK 2.25+ docs (same at 2.26.1): adds cpu_affinity, numa_node, neuroncore_ids
        ("json-output-2.26-trn2n.48xlarge.json", NeuronHost("json-output", 2, 8, None, 2, 96 * GIB)),
        # real trn1.2xlarge capture, tools 2.28.23.0: one device, no LNC, no instance type
        ("json-output-2.28-trn1.2xlarge.json", NeuronHost("json-output", 1, 2, None, None, 32 * GIB)),
        # real trn2.3xlarge capture: names its instance in each device
        ("json-output-trn2.3xlarge.json", NeuronHost("json-output", 1, 4, "trn2.3xlarge", 2, 96 * GIB)),
        # SDK 2.34 --output-format json, CONSTRUCTED from the docs: instance at the top, 16 devices
        (
            "output-format-json-2.34-trn2u.48xlarge.constructed.json",
            NeuronHost("output-format-json", 16, 64, "trn2u.48xlarge", 2, 96 * GIB),
        ),
    ],
)
def test_each_recorded_format_parses(name: str, expected: NeuronHost) -> None:
    host = parse_neuron_ls(_read(name))
    assert host == expected
    assert host.physical_cores == host.cores * (host.lnc or 1)


def test_the_derived_values_of_a_host() -> None:
    trn2 = parse_neuron_ls(_read("output-format-json-2.34-trn2u.48xlarge.constructed.json"))
    assert (trn2.family, trn2.physical_cores, trn2.memory_per_core) == ("trn2", 128, 24 * GIB)
    trn1 = parse_neuron_ls(_read("json-output-2.28-trn1.2xlarge.json"), instance_type="trn1.2xlarge")
    assert (trn1.instance_type, trn1.family, trn1.memory_per_core) == ("trn1.2xlarge", "trn1", 16 * GIB)
    assert trn1.to_json() == {
        "format": "json-output",
        "devices": 1,
        "cores": 2,
        "instance_type": "trn1.2xlarge",
        "lnc": None,
        "memory_per_device": 32 * GIB,
        "family": "trn1",
        "physical_cores": 2,
    }
    # the JSON's own instance type wins over the table's
    assert parse_neuron_ls(_read("json-output-trn2.3xlarge.json"), "inf2.xlarge").instance_type == "trn2.3xlarge"


def test_the_2_34_device_list_is_found_by_its_content_not_its_key() -> None:
    """The key of the 2.34 device list is not published: another name still parses."""
    import json

    data = json.loads(_read("output-format-json-2.34-trn2u.48xlarge.constructed.json"))
    data["devices"] = data.pop("neuron_devices")
    host = parse_neuron_ls(json.dumps(data))
    assert (host.format, host.devices, host.cores, host.instance_type) == (
        "output-format-json",
        16,
        64,
        "trn2u.48xlarge",
    )


def test_the_plain_table_names_the_instance() -> None:
    assert instance_type_from_table(_read("plain-2.26-trn2n.48xlarge.txt")) == "trn2n.48xlarge"
    assert instance_type_from_table("+----+\n| NEURON |\n") is None


@pytest.mark.parametrize(
    ("name", "family"),
    [("inf2.xlarge", "inf2"), ("trn1n.32xlarge", "trn1"), ("trn2u.48xlarge", "trn2"), ("m5.large", None)],
)
def test_chip_family(name: str, family: str | None) -> None:
    assert chip_family(name) == family


# -- each parse error: one line, what, the value, what to do -------------------------------------
@pytest.mark.parametrize(
    ("text", "line"),
    [
        (
            "not json at all\nsecond line",
            "neuron-ls printed no JSON (first line 'not json at all'); run `neuron-ls -j`",
        ),
        ("", "neuron-ls printed no JSON (empty output)"),
        (
            '{"instance_info": {}, "cards": 3}',
            "a shape neuronforge does not know (an object with keys cards, instance_info)",
        ),
        ("42", "a shape neuronforge does not know (a int: 42)"),
        ('[{"neuron_device": 0, "nc_count": "2"}]', "device 0 in neuron-ls JSON has nc_count='2', not a count"),
        ('[{"neuron_device": 3}]', "device 3 in neuron-ls JSON has nc_count=None"),
    ],
)
def test_unreadable_output_is_one_line(text: str, line: str) -> None:
    with pytest.raises(HostProbeFailed) as info:
        parse_neuron_ls(text)
    said = outcome(info.value)
    assert said is not None and line in said.line and "\n" not in said.line
    assert "host_probe.py" in said.line or "neuron-ls" in said.line


# -- probing: the tool the way each release wants ------------------------------------------------
def _tool(tmp_path: Path, body: str) -> str:
    """A stand-in `neuron-ls` (a Python script) that logs its arguments next to itself."""
    path = tmp_path / "neuron-ls"
    path.write_text(
        f"#!{sys.executable}\nimport sys, pathlib\n"
        "pathlib.Path(__file__).with_suffix('.calls').open('a').write(' '.join(sys.argv[1:]) + '\\n')\n" + body
    )
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def _calls(tool: str) -> list[str]:
    return Path(tool).with_suffix(".calls").read_text().splitlines()


def test_an_sdk_2_26_1_tool_is_asked_with_output_format_then_j(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake neuron-ls of SDK 2.26.1 rejects `--output-format`; the probe falls back to `-j`, and
    reads the instance type from the plain table's header since `-j` names none."""
    monkeypatch.setenv("FAKE_NEURON_DEVICES", "2")
    monkeypatch.setenv("FAKE_NEURON_INSTANCE_TYPE", "inf2.xlarge")
    host = probe(FAKE_LS)
    assert host == NeuronHost("json-output", 2, 4, "inf2.xlarge", None, 32 * GIB)
    monkeypatch.setenv("FAKE_NEURON_INSTANCE_TYPE", "trn2.3xlarge")
    assert probe(FAKE_LS) == NeuronHost("json-output", 2, 8, "trn2.3xlarge", 2, 96 * GIB)
    monkeypatch.delenv("FAKE_NEURON_INSTANCE_TYPE")  # the table names no instance: family unknown
    assert probe(FAKE_LS).instance_type is None


def test_a_2_34_tool_answers_the_first_call(tmp_path: Path) -> None:
    sample = DATA / "output-format-json-2.34-trn2u.48xlarge.constructed.json"
    tool = _tool(
        tmp_path,
        "if sys.argv[1:] != ['--output-format', 'json']:\n"
        "    sys.exit(1)  # 2.34 dropped -j\n"
        f"print(open({str(sample)!r}).read())\n",
    )
    assert probe(tool) == parse_neuron_ls(sample.read_text())
    assert _calls(tool) == ["--output-format json"]


def test_an_old_tool_is_asked_twice_and_the_table_once(tmp_path: Path) -> None:
    sample = DATA / "json-output-2.28-trn1.2xlarge.json"
    tool = _tool(
        tmp_path,
        "if '--output-format' in sys.argv:\n"
        "    sys.exit('unknown option --output-format')\n"
        "if sys.argv[1:] == ['-j']:\n"
        f"    print(open({str(sample)!r}).read())\n"
        "else:\n"
        "    print('instance-type: trn1.2xlarge\\ninstance-id: i-0123\\n+---+')\n",
    )
    assert probe(tool) == NeuronHost("json-output", 1, 2, "trn1.2xlarge", None, 32 * GIB)
    assert _calls(tool) == ["--output-format json", "-j", ""]


def test_a_host_without_devices_fails_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the real tool prints on a host without the driver (logfmt on stderr, exit 1), both calls."""
    monkeypatch.delenv("FAKE_NEURON_DEVICES", raising=False)
    with pytest.raises(HostProbeFailed) as info:
        probe(FAKE_LS)
    line = outcome(info.value).line
    assert (
        "neuron-ls cannot list this host's Neuron devices: `--output-format json` gave exit 1: neuron-ls: unknown"
        in line
    )
    assert '`-j` gave exit 1: time="' in line and 'error="failed to discover Neuron devices"' in line
    assert line.endswith("that this worker has the devices (/dev/neuron*)") and outcome(info.value).exit_code == 1


def test_a_missing_tool_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from neuronforge.compilation import host_probe

    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(host_probe, "TOOL_DIR", tmp_path / "opt-aws-neuron-bin")
    with pytest.raises(
        HostProbeFailed, match=r"^neuron-ls not found on PATH or in .*opt-aws-neuron-bin: install aws-neuronx-tools"
    ):
        probe()


def test_a_hanging_tool_is_one_line(tmp_path: Path) -> None:
    tool = _tool(tmp_path, "import time\ntime.sleep(30)\n")
    with pytest.raises(HostProbeFailed, match=r"`.*neuron-ls --output-format json` did not answer in 0.5s: check"):
        probe(tool, timeout_s=0.5)


def test_the_tool_found_on_path_is_the_fake(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.fakes import neuron_host_path

    monkeypatch.setenv("PATH", neuron_host_path())
    monkeypatch.setenv("FAKE_NEURON_DEVICES", "1")
    assert probe().devices == 1 and os.access(FAKE_LS, os.X_OK)


# -- the host/target check -----------------------------------------------------------------------
def _target(**fields) -> TargetSpec:
    return TargetSpec(**{"instance_type": "inf2.xlarge", "tp_degree": 2, "sequence_length": 64, **fields})


def test_a_host_of_the_target_family_with_its_cores_passes() -> None:
    check_host(NeuronHost("json-output", 1, 2, "inf2.xlarge"), _target())
    check_host(NeuronHost("json-output", 1, 2, "trn1n.32xlarge"), _target(instance_type="trn1.2xlarge"))
    # trn2 at LNC 2: 4 cores per device as neuron-ls counts them, 8 physical
    check_host(NeuronHost("json-output", 1, 4, "trn2.3xlarge", 2), _target(instance_type="trn2.3xlarge", tp_degree=4))
    check_host(NeuronHost("json-output", 2, 4, None), _target())  # family unknown: the cores are checked


def test_another_family_is_one_line() -> None:
    host = parse_neuron_ls(_read("json-output-trn2.3xlarge.json"))
    with pytest.raises(HostMismatch) as info:
        check_host(host, _target())
    said = outcome(info.value)
    assert said.line == (
        "wrong host: this host is trn2.3xlarge, 1 device × 4 NeuronCores at LNC 2 (neuron-ls -j): a trn2 host, "
        "and the target inf2.xlarge tp 2 × LNC 1 was compiled for inf2; run this stage on a host of the inf2 family"
    )
    assert said.retryable and said.exit_code == 1


def test_too_few_cores_is_one_line() -> None:
    host = parse_neuron_ls(_read("json-output-2.28-trn1.2xlarge.json"), "trn1.2xlarge")
    with pytest.raises(HostMismatch) as info:
        check_host(host, _target(instance_type="trn1.32xlarge", tp_degree=32))
    assert outcome(info.value).line == (
        "wrong host: this host is trn1.2xlarge, 1 device × 2 NeuronCores (neuron-ls -j): 2 physical NeuronCores, "
        "and the target trn1.32xlarge tp 32 × LNC 1 needs 32 (16 device(s)); "
        "run this stage on a trn1.32xlarge or larger"
    )


def test_a_host_listing_no_device_has_no_cores() -> None:
    host = parse_neuron_ls("[]")
    assert (host.devices, host.cores, host.memory_per_core) == (0, 0, None)
    with pytest.raises(HostMismatch, match="0 physical NeuronCores"):
        check_host(host, _target())
