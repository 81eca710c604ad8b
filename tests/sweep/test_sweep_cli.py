"""`neuronforge sweep` as users and scripts run it: `--try-command` receives each candidate as one
JSON object on stdin and answers with its exit code; `--out` is the inference-cache-config file,
the per-candidate record goes beside it; exit 0 when the sweep completed, 2 for usage errors."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from tests.reliability.harness import cli, expect_error
from tests.test_planner import CONFIGS

LLAMA = CONFIGS / "meta-llama--Llama-3.1-8B.json"
LLAMA_ID = "meta-llama/Llama-3.1-8B"  # what LLAMA is the config.json of: --model-id
# Loads when batch * sequence <= 4096 * tp; logs every candidate it is given.
TRY = """
import json, sys
c = json.load(sys.stdin)
with open(sys.argv[1], "a") as log:
    log.write(json.dumps(c, sort_keys=True) + "\\n")
ok = c["batch_size"] * c["sequence_length"] <= 4096 * c["tensor_parallel_size"]
sys.exit(0 if ok else 3)
"""


@pytest.fixture
def try_command(tmp_path: Path) -> tuple[str, Path]:
    script, log = tmp_path / "try.py", tmp_path / "tried.jsonl"
    script.write_text(TRY)
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(script))} {shlex.quote(str(log))}", log


def test_a_sweep_with_a_try_command(try_command: tuple[str, Path], tmp_path: Path) -> None:
    command, log = try_command
    out = tmp_path / "llama.json"
    argv = ["sweep", "--model", LLAMA, "--model-id", LLAMA_ID, "--instance", "inf2.xlarge", "--out", out]
    argv += ["--try-command", command]
    result = cli([*argv, "--seq-lens", "4096", "2048", "1024", "--json"])
    assert result.traceback is None and result.code == 0, result.text
    tried = [json.loads(line) for line in log.read_text().splitlines()]
    assert tried and set(tried[0]) == {
        "model",
        "instance_type",
        "tensor_parallel_size",
        "batch_size",
        "sequence_length",
    }
    assert tried[0]["model"] == str(LLAMA) and tried[0]["instance_type"] == "inf2.xlarge"
    entries = json.loads(out.read_text())[LLAMA_ID]  # keyed by the Hub id, never the file's path
    # optimum-neuron's spelling: the family (huggingface/optimum-neuron @213224e6,
    # optimum/neuron/utils/instance.py SUPPORTED_INSTANCE_TYPES; tools/cache/auto_fill_llm_cache.py)
    assert {e["instance_type"] for e in entries} == {"inf2"}
    assert {(e["tensor_parallel_size"], e["batch_size"], e["sequence_length"]) for e in entries} == {
        (2, 1, 4096),
        (2, 4, 2048),
        (2, 8, 1024),
    }
    records = json.loads((tmp_path / "llama.records.json").read_text())
    assert records["finished"] and len(records["candidates"]) == 7 * 3
    assert {r["outcome"] for r in records["candidates"]} == {"valid", "failed", "skipped"}
    failed = [r for r in records["candidates"] if r["outcome"] == "failed"]
    assert all(r["reason"].startswith("exit 3") for r in failed)
    summary = json.loads(result.out)
    assert summary["attempts"] == len(tried) and summary["records"] == str(tmp_path / "llama.records.json")
    # run again: everything is known, nothing is tried
    again = cli([*argv, "--seq-lens", "4096", "2048", "1024"])
    assert again.code == 0 and len(log.read_text().splitlines()) == len(tried), again.text
    assert "3 valid configuration(s)" in again.out and "0 tried by --try-command" in again.out


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("true", "exit 0"),
        (f"{shlex.quote(sys.executable)} -c \"print('cache hit: loaded in 3 s, nothing compiled')\"",
         "exit 0: cache hit: loaded in 3 s, nothing compiled"),
    ],
)  # fmt: skip
def test_a_try_command_s_candidate_is_reported_as_the_command_said(tmp_path: Path, command: str, reason: str) -> None:
    """`--try-command true` was reported "compiled and loaded": the sweep does not know what a try command
    did, so it reports what the command said (its exit code, its last line) and counts tries, not compiles."""
    argv = ["sweep", "--model", LLAMA, "--model-id", LLAMA_ID, "--instance", "inf2.xlarge", "--tp", "2"]
    argv += ["--batch-sizes", "1", "--seq-lens", "4096", "--try-command", command, "--out", tmp_path / "x.json"]
    result = cli(argv)
    assert result.code == 0, result.text
    assert result.out.splitlines()[0].endswith(f"tp=2 batch=1 seq=4096  {reason}"), result.out
    assert "compiled" not in result.out.replace("nothing compiled", "") and "1 tried by --try-command" in result.out
    (record,) = json.loads((tmp_path / "x.records.json").read_text())["candidates"]
    assert record["outcome"] == "valid" and record["reason"] == reason


def test_a_sweep_with_no_valid_configuration_completes(tmp_path: Path) -> None:
    out = tmp_path / "none.json"
    result = cli(
        [
            "sweep",
            "--model",
            LLAMA,
            "--model-id",
            LLAMA_ID,
            "--instance",
            "inf2.xlarge",
            "--out",
            out,
            "--try-command",
            "false",
            "--batch-sizes",
            "1",
            "--seq-lens",
            "1024",
        ]
    )
    assert result.code == 0 and "0 valid configuration(s)" in result.out, result.text


USAGE = {
    "odd tp": (["--tp", "3"], "--tp [3] not allowed"),
    "unknown instance": (["--instance", "inf9.huge"], "unknown instance type 'inf9.huge'"),
    "unknown profile": (["--profile", "tensorrt"], "unknown profile 'tensorrt'"),
    "not a power of two": (["--seq-lens", "1000"], "powers of two"),
    "missing model": (["--model", "/nonexistent/config.json"], "does not exist"),
    "unsplittable command": (["--try-command", "python 'unclosed"], "cannot be split"),
    "command that does not exist": (["--try-command", "/nonexistent/try"], "cannot be run"),
}


@pytest.mark.parametrize("case", sorted(USAGE))
def test_usage_errors_exit_2(case: str, tmp_path: Path) -> None:
    extra, words = USAGE[case]
    base = {
        "--model": str(LLAMA),
        "--model-id": LLAMA_ID,
        "--instance": "inf2.xlarge",
        "--out": str(tmp_path / "o.json"),
        "--try-command": "true",
    }
    for flag, value in zip(extra[::2], extra[1::2], strict=True):
        base[flag] = value
    expect_error(cli(["sweep", *[x for kv in base.items() for x in kv]]), 2, words)


def test_an_out_file_of_another_kind_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "o.json"
    out.write_text("[1, 2]")
    argv = ["sweep", "--model", LLAMA, "--model-id", LLAMA_ID, "--instance", "inf2.xlarge", "--out", out]
    result = cli([*argv, "--try-command", "true"])
    expect_error(result, 2, "is not an inference-cache-config file")
    assert out.read_text() == "[1, 2]"


def test_to_catalog_adds_targets_the_recompile_schedule_reads(try_command: tuple[str, Path], tmp_path: Path) -> None:
    from neuronforge.farm.catalog import load_catalog

    command, _ = try_command
    catalog = tmp_path / "models.yaml"
    catalog.write_text(
        "# our catalog: comments survive\n"
        "models:\n"
        "  - source: meta-llama/Llama-3.1-8B\n"
        "    targets:\n"
        "      # kept by hand\n"
        "      - {instance_type: inf2.xlarge, tp_degree: 2, batch_size: 1, sequence_length: 4096, dtype: bf16,\n"
        "         profile: optimum-neuron}\n"
    )
    argv = [
        "sweep",
        "--model",
        LLAMA,
        "--model-id",
        LLAMA_ID,
        "--instance",
        "inf2.xlarge",
        "--out",
        tmp_path / "o.json",
        "--try-command",
        command,
        "--seq-lens",
        "4096",
        "2048",
        "1024",
        "--to-catalog",
        catalog,
    ]
    result = cli(argv)
    assert result.code == 0 and "catalog: 2 target(s) added" in result.out, result.text
    assert "catalog: already in the catalog: optimum-neuron-inf2.xlarge-tp2-b1-s4096-bf16" in result.out
    text = catalog.read_text()
    assert text.startswith("# our catalog: comments survive\n") and "# kept by hand" in text
    report = load_catalog(catalog)
    assert not report.problems
    # under the Hub id's entry: the config file's path is never written as a model source
    (entry,) = report.entries
    assert entry.source == LLAMA_ID and entry.config is None
    assert {(t.spec.batch_size, t.spec.sequence_length) for t in entry.targets} == {(1, 4096), (4, 2048), (8, 1024)}
    assert all(t.spec.profile_name == "optimum-neuron" for t in entry.targets)
    # again: nothing new, the file is unchanged
    before = catalog.read_text()
    again = cli(argv)
    assert again.code == 0 and "0 target(s) added" in again.out and catalog.read_text() == before


def test_to_catalog_of_a_config_file_writes_the_hub_id_and_the_config(
    try_command: tuple[str, Path], tmp_path: Path
) -> None:
    """A new catalog: the entry's source is --model-id, its `config:` the swept file (relative to the
    catalog), so `catalog check` plans it without the Hub."""
    command, _ = try_command
    catalog = tmp_path / "catalog" / "models.yaml"
    catalog.parent.mkdir()
    argv = ["sweep", "--model", LLAMA, "--model-id", LLAMA_ID, "--instance", "inf2.xlarge", "--seq-lens", "4096"]
    result = cli([*argv, "--out", tmp_path / "o.json", "--try-command", command, "--to-catalog", catalog])
    assert result.code == 0 and "catalog: 1 target(s) added" in result.out, result.text
    assert f"valid configuration(s) of {LLAMA_ID} on inf2.xlarge" in result.out
    assert f'  - source: "{LLAMA_ID}"\n    config: "{LLAMA.resolve()}"\n' in catalog.read_text()
    checked = cli(["catalog", "check", catalog])
    assert checked.code == 0 and checked.out.rstrip().endswith("1 model(s), 1 target(s): ok"), checked.text
    from neuronforge.farm.catalog import load_catalog

    (entry,) = load_catalog(catalog).entries
    assert entry.source == LLAMA_ID and entry.config == LLAMA.resolve()


def test_a_config_file_needs_model_id(tmp_path: Path) -> None:
    """A bare config.json says nothing of which model it is: without --model-id the sweep stops at
    once with one line (it would key the cache-config file, and the catalog, by a file path)."""
    out = tmp_path / "o.json"
    result = cli(["sweep", "--model", LLAMA, "--instance", "inf2.xlarge", "--out", out, "--try-command", "true"])
    expect_error(result, 2, f"--model {LLAMA} is a config.json file: add --model-id org/name")
    assert not out.exists() and len(result.text.strip().splitlines()) == 1
    for bad in ("./somewhere", f"{LLAMA_ID}@main"):
        result = cli(["sweep", "--model", LLAMA, "--model-id", bad, "--instance", "inf2.xlarge", "--out", out])
        expect_error(result, 2, f"--model-id {bad}")


def test_a_hub_model_with_the_hub_unreachable_fails_at_once(tmp_path: Path, monkeypatch, request) -> None:
    """The Hub refusing connections: one line within a few seconds (not the Hub client's retries),
    naming the Hub and the offline way to sweep; each of huggingface_hub's warnings at most once."""
    import time

    from tests.hubdown import closed_endpoint, hub_at

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    endpoint = hub_at(closed_endpoint(), monkeypatch, request)
    started = time.monotonic()
    result = cli(["sweep", "--model", LLAMA_ID, "--instance", "inf2.xlarge", "--out", tmp_path / "o.json"])
    assert time.monotonic() - started < 5
    expect_error(result, 1, f"cannot reach the Hugging Face Hub at {endpoint} for {LLAMA_ID}@main")
    assert f"--model config.json --model-id {LLAMA_ID}" in result.err
    lines = result.err.strip().splitlines()
    assert len(lines) == len(set(lines)) and lines[-1].startswith("error: "), result.err


def test_a_hub_model_offline_names_the_cache_and_the_way_out(tmp_path: Path, monkeypatch) -> None:
    """HF_HUB_OFFLINE (the suite's setting) and a cache without the model: one line, at once."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    result = cli(["sweep", "--model", LLAMA_ID, "--instance", "inf2.xlarge", "--out", tmp_path / "o.json"])
    expect_error(result, 2, "not in the local Hugging Face cache and HF_HUB_OFFLINE is set", "--model-id")


def test_a_sweep_for_the_vllm_neuron_plugin_on_trn2(try_command: tuple[str, Path], tmp_path: Path) -> None:
    """The vllm-neuron-native profile sweeps like the others: trn2's tp ladder (multiples of its 4 logical
    cores per chip at LNC 2 on trn2.3xlarge: only 4), and the profile's refusal of inf2."""
    command, log = try_command
    out = tmp_path / "native.json"
    argv = ["sweep", "--model", LLAMA, "--model-id", LLAMA_ID, "--profile", "vllm-neuron-native@2.32", "--out", out]
    argv += ["--try-command", command]
    result = cli([*argv, "--instance", "trn2.3xlarge", "--batch-sizes", "1", "4", "--seq-lens", "4096", "--json"])
    assert result.traceback is None and result.code == 0, result.text
    tried = [json.loads(line) for line in log.read_text().splitlines()]
    assert {c["tensor_parallel_size"] for c in tried} == {4} and {c["instance_type"] for c in tried} == {"trn2.3xlarge"}
    assert {e["instance_type"] for e in json.loads(out.read_text())[LLAMA_ID]} == {"trn2"}
    argv[argv.index(out)] = tmp_path / "native-inf2.json"
    refused = cli([*argv, "--instance", "inf2.xlarge"])
    assert refused.code != 0 and refused.traceback is None and "use profile vllm-neuron" in refused.text


def test_each_hub_warning_is_printed_once() -> None:
    """huggingface_hub's retry warnings went to its own stderr handler and, propagated, to the CLI's:
    twice each. After a Hub call through neuronforge, the application's logging prints them once."""
    import subprocess

    code = (
        "import logging\n"
        "logging.basicConfig(level=logging.WARNING)\n"
        "from huggingface_hub.utils import logging as hf_logging\n"
        "from neuronforge.pipeline.stages.resolve import hub_errors\n"
        "with hub_errors('org/model', 'main'):\n"
        "    hf_logging.get_logger('huggingface_hub.utils._http').warning('Retrying in 1s [Retry 1/5].')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stderr.count("Retrying in 1s [Retry 1/5].") == 1, done.stderr


def test_a_store_that_cannot_be_reached_stops_the_sweep_without_judging_candidates(tmp_path: Path, monkeypatch) -> None:
    """The builds' store unreachable says nothing of a candidate: the sweep stops with one line
    (exit 1) instead of recording every candidate as failed (never tried again) and reporting
    "0 valid configuration(s)" with exit 0."""
    from tests.hubdown import closed_endpoint

    monkeypatch.setenv("NEURONFORGE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("AWS_ENDPOINT_URL", closed_endpoint())
    out = tmp_path / "tiny.json"
    argv = ["sweep", "--model", "builtin:tiny-llama", "--instance", "inf2.xlarge", "--profile", "cpu"]
    argv += ["--dtype", "fp32", "--tp", "2", "--batch-sizes", "1", "--seq-lens", "64", "--out", out]
    result = cli([*argv, "--store", "s3://nf-down/store"])
    expect_error(result, 1, "cannot reach the S3 endpoint", "the sweep stopped", "run it again to resume")
    assert len(result.err.strip().splitlines()) == 1, result.err
    assert not (tmp_path / "tiny.records.json").exists()  # its one candidate: not recorded, tried again next run


def test_a_hub_model_the_cache_holds_sweeps_with_the_hub_unreachable(
    try_command: tuple[str, Path], tmp_path: Path, monkeypatch, request
) -> None:
    """The Hub down but the local Hugging Face cache holding the ref's config.json: used at once."""
    import time

    from tests.hubdown import closed_endpoint, hub_at

    sha = "a" * 40
    repo = tmp_path / "hf" / "models--meta-llama--Llama-3.1-8B"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(sha)
    (repo / "snapshots" / sha).mkdir(parents=True)
    (repo / "snapshots" / sha / "config.json").write_text(LLAMA.read_text())
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    hub_at(closed_endpoint(), monkeypatch, request)
    command, _ = try_command
    out = tmp_path / "o.json"
    argv = ["sweep", "--model", LLAMA_ID, "--instance", "inf2.xlarge", "--tp", "2", "--batch-sizes", "1"]
    started = time.monotonic()
    result = cli([*argv, "--seq-lens", "4096", "--out", out, "--try-command", command])
    assert time.monotonic() - started < 10
    assert result.code == 0 and f"1 valid configuration(s) of {LLAMA_ID}" in result.out, result.text
    assert list(json.loads(out.read_text())) == [LLAMA_ID]


@pytest.mark.parametrize(
    ("file", "model_id", "instance", "tps"),
    [
        ("openai-community--gpt2-xl", "openai-community/gpt2-xl", "trn1.2xlarge", {1}),
        ("facebook--opt-30b", "facebook/opt-30b", "trn1.32xlarge", {8}),  # tp 1 and 2 cannot hold 60 GB
        ("bigscience--bloom-560m", "bigscience/bloom-560m", "inf2.xlarge", {1, 2}),
    ],
)
def test_an_lmi_neuronx_sweep_of_the_guide_models(
    try_command: tuple[str, Path], tmp_path: Path, file: str, model_id: str, instance: str, tps: set[int]
) -> None:
    command, _log = try_command
    out = tmp_path / "out.json"
    argv = ["sweep", "--profile", "lmi-neuronx", "--model", CONFIGS / f"{file}.json", "--model-id", model_id]
    argv += ["--instance", instance, "--out", out, "--try-command", command, "--batch-sizes", "1", "4", "--json"]
    result = cli([*argv, "--dtype", "fp16"])
    assert result.traceback is None and result.code == 0, result.text
    entries = json.loads(out.read_text())[model_id]
    assert {e["tensor_parallel_size"] for e in entries} == tps
