"""Runs, as users start them: impossible smoke-test limits refused before any work (CLI and DAG
alike, at `BuildState`), several runs racing to generate the embedded default model in a fresh
home, and the leftovers of uploads killed midway, which `gc` removes once they are old."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from neuronforge.common.errors import InvalidInput
from neuronforge.farm.gc import TMP_GRACE_S, collect_tmp_objects
from neuronforge.pipeline.buildstate import BuildState
from neuronforge.spec.target import TargetSpec
from neuronforge.stores.file import FileStore
from tests.reliability.harness import cli, expect_error, snapshot

EXIT_OK, EXIT_USAGE = 0, 2
TARGET = ["--instance", "inf2.xlarge", "--tp", "1", "--seq-len", "64"]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("NEURONFORGE_HOME", str(home))
    monkeypatch.delenv("NEURONFORGE_STORE", raising=False)
    return home


# -- smoke-test limits --------------------------------------------------------------------------
RUN_CASES: dict[str, tuple[list[str], list[str]]] = {
    "zero new tokens": (["--max-new-tokens", "0"], ["max_new_tokens=0 is out of range", "use 1 to 256"]),
    "negative new tokens": (["--max-new-tokens", "-5"], ["max_new_tokens=-5 is out of range"]),
    "absurd new tokens": (["--max-new-tokens", str(10**12)], [f"max_new_tokens={10**12} is out of range"]),
    "no room for a prompt": (
        ["--max-new-tokens", "64"],
        ["max_new_tokens=64 leaves no room for a prompt in sequence_length=64", "use at most 63"],
    ),
    # the CLI's one rule for text (`cli.options.text`) refuses these first; the build's own rule says the same
    "empty prompt": (["--prompt", "Hello", "--prompt", ""], ["--prompt", "'' is empty"]),
    "blank prompt": (["--prompt", "   "], ["--prompt", "'   ' is empty"]),
    "huge prompt": (["--prompt", "x" * 5000], ["--prompt", "5000 characters long", "at most 4096"]),
    "too many prompts": ([a for _ in range(33) for a in ("--prompt", "hi")], ["33 smoke-test prompts", "at most 32"]),
    "text new tokens (argparse)": (["--max-new-tokens", "eight"], ["--max-new-tokens", "invalid int value"]),
}


@pytest.mark.parametrize("case", sorted(RUN_CASES))
def test_run_refuses_impossible_smoke_limits_before_any_work(case: str, home: Path, tmp_path: Path) -> None:
    args, words = RUN_CASES[case]
    store = tmp_path / "store"
    outcome = cli(["run", *TARGET, "--store", f"file://{store}", *args])
    expect_error(outcome, EXIT_USAGE, *words)
    assert snapshot(store) == {}  # no lease, no checkpoint, nothing
    assert not (home / "demo").exists()  # the default model was not even generated
    assert not (home / "work").exists()


def _state(**changes: Any) -> BuildState:
    target = TargetSpec.parse({"instance_type": "inf2.xlarge", "tp_degree": 1, "sequence_length": 64})
    return BuildState(model="builtin:tiny-llama", target=target, store_uri="file:///nowhere", **changes)


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"max_new_tokens": True}, ["max_new_tokens must be a whole number of tokens, got True"]),
        ({"max_new_tokens": 8.5}, ["got 8.5"]),
        ({"max_new_tokens": "8"}, ["got '8'"]),
        ({"max_new_tokens": 257}, ["max_new_tokens=257 is out of range"]),
        ({"prompts": "Hello"}, ["prompts must be a list of strings, got 'Hello'"]),
        ({"prompts": ["ok", 3]}, ["prompt 2 is 3"]),
    ],
)
def test_the_build_state_refuses_what_the_dag_could_pass(changes: dict[str, Any], words: list[str]) -> None:
    """The DAG builds its states from the form's params: the same check, an InvalidInput naming the value."""
    with pytest.raises(InvalidInput) as err:
        _state(**changes)
    for word in words:
        assert word in str(err.value), (word, str(err.value))


def test_the_dag_refuses_new_tokens_beyond_the_sequence_before_any_work(tmp_path: Path) -> None:
    from neuronforge_airflow.operators.compile_publish import expand_targets

    store = tmp_path / "store"
    params = {
        "model": None,
        "targets": [{"instance_type": "inf2.xlarge", "tp_degree": 2, "sequence_length": 64}],
        "profile": "cpu",
        "store": f"file://{store}",
        "prompts": [],
        "max_new_tokens": 100,
    }
    with pytest.raises(InvalidInput, match="max_new_tokens=100 leaves no room for a prompt in sequence_length=64"):
        expand_targets.function(params)
    assert snapshot(store) == {}


def test_good_limits_and_a_state_read_back_pass() -> None:
    state = _state(prompts=["Hello"], max_new_tokens=63)
    assert BuildState.model_validate(state.model_dump(mode="json")) == state


# -- a fresh home, several runs at once --------------------------------------------------------
GENERATE = "from neuronforge.spec import builtin; print(builtin.builtin_model('tiny-llama'))"


def _digest(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_concurrent_runs_in_a_fresh_home_all_get_the_same_default_model(tmp_path: Path) -> None:
    home = tmp_path / "fresh-home"
    env = {**os.environ, "NEURONFORGE_HOME": str(home)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", GENERATE], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    results = [(*p.communicate(timeout=600), p.returncode) for p in procs]
    for _, err, code in results:
        assert code == 0 and "Traceback" not in err, err
    folders = {out.strip() for out, _, _ in results}
    assert len(folders) == 1
    folder = Path(folders.pop())
    files = _digest(folder)
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(files)
    # nothing half-written left beside it, and a later run sees exactly the same files
    assert [p.name for p in folder.parent.iterdir() if p.name.startswith(".tiny-llama.") and p.is_dir()] == []
    done = subprocess.run([sys.executable, "-c", GENERATE], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == str(folder) and _digest(folder) == files


# -- leftovers of killed uploads ----------------------------------------------------------------
def _leftover(store: Path, rel: str, age_s: float) -> Path:
    path = store / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"half an upload")
    then = time.time() - age_s
    os.utime(path, (then, then))
    return path


def test_gc_removes_only_old_upload_leftovers_and_reports_them(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = FileStore(root)
    store.put_bytes(b'{"ok": true}', "checkpoints/local/m/rev/MANIFEST.json")
    old = _leftover(root, "checkpoints/local/m/rev/.nf-tmp-0123abcd-model.safetensors", 2 * TMP_GRACE_S)
    fresh = _leftover(root, "checkpoints/local/m/rev/.nf-tmp-4567cdef-config.json", 60)
    lock = _leftover(root, "leases/.nf-tmp-cas-key.json", 10 * TMP_GRACE_S)  # a CAS lock file: kept

    dry = cli(["gc", store.root_uri, "--keep-compilers", "1", "--dry-run", "--json"])
    assert dry.traceback is None and dry.code == EXIT_OK, dry.text
    assert [t["key"] for t in json.loads(dry.out)["tmp_deleted"]] == [old.relative_to(root).as_posix()]
    assert old.exists()
    text = cli(["gc", store.root_uri, "--keep-compilers", "1", "--dry-run"])
    assert f"would delete upload leftover {old.relative_to(root).as_posix()} (14 bytes, 2.0 h old)" in text.out
    assert fresh.name not in text.out and lock.name not in text.out

    outcome = cli(["gc", store.root_uri, "--keep-compilers", "1", "--json"])
    assert outcome.traceback is None and outcome.code == EXIT_OK, outcome.text
    report = json.loads(outcome.out)
    assert [t["key"] for t in report["tmp_deleted"]] == ["checkpoints/local/m/rev/.nf-tmp-0123abcd-model.safetensors"]
    assert report["tmp_deleted"][0]["age_hours"] >= 2
    assert not old.exists() and fresh.exists() and lock.exists()
    assert store.exists("checkpoints/local/m/rev/MANIFEST.json")
    assert collect_tmp_objects(store) == []  # re-running is safe
