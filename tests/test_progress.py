"""Progress of long steps: rich on a terminal, heartbeat lines in logs, nothing on stdout; the stores
count the bytes they move; the CLI's `--json` and `--quiet` stay machine-clean."""

from __future__ import annotations

import io
import json
import logging
import os
import pty
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from neuronforge.common import progress
from neuronforge.common.errors import InvalidInput
from neuronforge.stores import base as store_base
from neuronforge.stores import open_store
from tests.conftest import TARGET, Compiled

REPO = Path(__file__).resolve().parents[1]


def plain(screen: str) -> str:
    """The text of a terminal's output, without its escape sequences."""
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen)


class Recording(progress.Reporter):
    """Keeps every step it is given (the real Step objects the stores advance)."""

    def __init__(self) -> None:
        self.steps: list[progress.Step] = []

    @contextmanager
    def step(self, what, total=None, unit="B", logger=None, own_bars=False) -> Iterator[progress.Step]:
        s = progress.Step(what, total, unit)
        self.steps.append(s)
        yield s


@pytest.fixture
def recording() -> Iterator[Recording]:
    rec = Recording()
    old = progress.use(rec)
    try:
        yield rec
    finally:
        progress.use(old)


def test_log_reporter_beats_with_bytes_rate_and_time_left(caplog, monkeypatch) -> None:
    monkeypatch.setenv(progress.INTERVAL_ENV, "0.05")
    caplog.set_level(logging.INFO, logger="neuronforge.common.progress")
    with progress.LogReporter().step("uploading 2 files", total=10_000_000) as s:
        for _ in range(5):
            time.sleep(0.05)
            s.advance(1_000_000)
    lines = [r.getMessage() for r in caplog.records]
    beats = [line for line in lines if "MB of 10.0 MB" in line]
    assert beats, lines
    assert "MB/s" in beats[-1] and "left" in beats[-1]
    assert lines[-1].startswith("uploading 2 files: done in ") and lines[-1].endswith(", 5.0 MB")


def test_a_step_with_nothing_to_count_says_it_is_alive(caplog, monkeypatch) -> None:
    monkeypatch.setenv(progress.INTERVAL_ENV, "0.05")
    caplog.set_level(logging.INFO, logger="neuronforge.common.progress")
    with progress.LogReporter().step("compiling graph decode"):
        time.sleep(0.2)
    lines = [r.getMessage() for r in caplog.records]
    assert any(line.startswith("compiling graph decode: still running (") for line in lines), lines
    assert lines[-1].startswith("compiling graph decode: done in 0.")


def test_a_pipe_hears_of_long_steps_only(caplog) -> None:
    """At the CLI's piped level, a step that beat ends at that level too; a short one's end is INFO
    (shown with -v), so a pipe is not told of every step that took 0.0s."""
    caplog.set_level(logging.INFO, logger="neuronforge.common.progress")
    with progress.LogReporter(every_s=0.05, level=progress.HEARTBEAT).step("compiling graph decode"):
        time.sleep(0.2)
    with progress.LogReporter(every_s=60, level=progress.HEARTBEAT).step("reading the manifest"):
        pass
    with (
        pytest.raises(KeyboardInterrupt),  # an interrupt: the CLI's one line says what stopped, not the step
        progress.LogReporter(every_s=0.05, level=progress.HEARTBEAT).step("smoke test"),
    ):
        time.sleep(0.2)
        raise KeyboardInterrupt
    levels = {r.getMessage().split(" in ")[0]: r.levelno for r in caplog.records if ": still" not in r.getMessage()}
    beats = [r for r in caplog.records if ": still running (" in r.getMessage()]
    assert beats and {r.levelno for r in beats} == {progress.HEARTBEAT}
    assert levels == {
        "compiling graph decode: done": progress.HEARTBEAT,
        "reading the manifest: done": logging.INFO,
        "smoke test: failed": logging.INFO,
    }


@pytest.mark.parametrize("raw", ["0", "-1", "soon"])
def test_a_bad_interval_is_a_one_line_error(monkeypatch, raw: str) -> None:
    monkeypatch.setenv(progress.INTERVAL_ENV, raw)
    with pytest.raises(InvalidInput, match=f"NEURONFORGE_HEARTBEAT_S='{raw}' is not a number of seconds"):
        progress.interval_s()


@pytest.fixture
def terminal_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No environment override of rich's terminal detection: only the stream decides."""
    for name in ("FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "JUPYTER_COLUMNS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")


def test_rich_on_a_terminal_log_lines_elsewhere(terminal_env) -> None:
    master, slave = pty.openpty()
    try:
        with open(slave, "w", closefd=False) as tty:
            assert isinstance(progress.choose(stream=tty), progress.RichReporter)
            assert isinstance(progress.choose(stream=tty, quiet=True), progress.LogReporter)
            json_on_a_terminal = progress.choose(stream=tty, machine=True)
            assert isinstance(json_on_a_terminal, progress.LogReporter) and json_on_a_terminal.level == logging.INFO
        for machine in (False, True):  # stderr not a terminal: heartbeats at the level the CLI shows by default
            piped = progress.choose(stream=io.StringIO(), machine=machine)
            assert isinstance(piped, progress.LogReporter) and piped.level == progress.HEARTBEAT
        quiet = progress.choose(stream=io.StringIO(), quiet=True)
        assert isinstance(quiet, progress.LogReporter) and quiet.level == logging.INFO  # hidden by -q's ERROR
    finally:
        os.close(master)
        os.close(slave)


def test_the_rich_display_shows_a_bar_with_rate_and_leaves_a_summary() -> None:
    from rich.console import Console

    screen = io.StringIO()
    reporter = progress.RichReporter(Console(file=screen, force_terminal=True, width=120))
    with reporter.step("downloading 3 files", total=20_000_000) as s:
        for _ in range(8):
            time.sleep(0.05)
            s.advance(2_000_000)
    with reporter.step("compiling graph prefill-32") as s:
        s.note("stage 2 of 3")
        time.sleep(0.15)
    text = plain(screen.getvalue())
    assert "MB/s" in text and "/20.0 MB" in text  # bytes, rate (and rich's time left) while it runs
    assert "compiling graph prefill-32: stage 2 of 3" in text
    assert "✓ downloading 3 files (" in text and ", 16.0 MB)" in text
    assert "✓ compiling graph prefill-32 (" in text


def test_file_store_trees_count_their_bytes(recording: Recording, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(store_base, "PROGRESS_MIN_BYTES", 1)
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.bin").write_bytes(b"a" * 3000)
    (src / "b.bin").write_bytes(b"b" * 5000)
    store = open_store(f"file://{tmp_path / 'store'}")
    store.put_tree(src, "x")
    store.get_tree("x", tmp_path / "back")
    up, down = recording.steps
    assert up.what == f"copying 2 files to {store.uri('x')}" and up.total == up.done == 8000
    assert down.total == down.done == 8000


def test_small_transfers_are_not_steps(recording: Recording, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "manifest.json").write_text("{}")
    open_store(f"file://{tmp_path / 'store'}").put_tree(src, "x")
    assert recording.steps == []


def test_s3_transfers_count_bytes_from_the_transfer_manager(
    recording: Recording, s3_bucket: str, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setattr(store_base, "PROGRESS_MIN_BYTES", 1)
    src = tmp_path / "src"
    src.mkdir()
    (src / "w.bin").write_bytes(os.urandom(200_000))
    (src / "t.json").write_bytes(b"{}" * 10)
    store = open_store(f"s3://{s3_bucket}/p")
    store.put_tree(src, "x")
    store.get_tree("x", tmp_path / "tree")
    store.get_files([("x/w.bin", tmp_path / "one" / "w.bin")], total_bytes=200_000)
    up, tree, files = recording.steps
    assert up.what.startswith("uploading 2 files to s3://") and up.total == up.done == 200_020
    assert tree.what.startswith("downloading 2 files from s3://") and tree.total == tree.done == 200_020
    assert files.total == files.done == 200_000


# -- the CLI ------------------------------------------------------------------------------------------
def cli(args: list[str], *, tty_stderr: bool, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """`python -m neuronforge.interfaces.cli ARGS` with stdout a pipe and stderr a pseudo-terminal (as in a
    shell, `neuronforge ... | jq`) or a pipe; returns (exit code, stdout, stderr)."""
    environ = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE")}
    environ |= {"PYTHONPATH": str(REPO), "TERM": "xterm-256color", "COLUMNS": "120", **(env or {})}
    cmd = [sys.executable, "-m", "neuronforge.interfaces.cli", *args]
    if not tty_stderr:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=environ, timeout=300)
        return proc.returncode, proc.stdout, proc.stderr
    master, slave = pty.openpty()
    screen: list[bytes] = []

    def drain() -> None:  # a pty holds a few KB: read while the display draws
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                return
            if not data:
                return
            screen.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL, env=environ)
        os.close(slave)
        out, _ = proc.communicate(timeout=300)
    finally:
        reader.join(timeout=10)
        os.close(master)
    return proc.returncode, out.decode(), b"".join(screen).decode(errors="replace")


def _quantize(tiny_llama: Path, tmp_path: Path, name: str) -> list[str]:
    store = f"file://{tmp_path / name / 'store'}"  # a fresh store: the step runs, nothing is reused
    return ["quantize", str(tiny_llama), "--dtype", "int8", "--store", store, "--work-dir", str(tmp_path / name)]


def test_cli_on_a_terminal_draws_progress_on_stderr(tiny_llama: Path, tmp_path: Path) -> None:
    code, out, screen = cli(_quantize(tiny_llama, tmp_path, "tty"), tty_stderr=True)
    assert code == 0, screen
    assert "\x1b[" in screen and "✓ quantizing " in plain(screen)  # rich, on the terminal
    assert out.startswith(f"{tiny_llama}: quantized") and "\x1b[" not in out and "✓" not in out


def test_cli_json_on_a_terminal_is_json_only(tiny_llama: Path, tmp_path: Path) -> None:
    code, out, screen = cli([*_quantize(tiny_llama, tmp_path, "json"), "--json"], tty_stderr=True)
    assert code == 0, screen
    assert json.loads(out)["tensors_quantized"] == 14
    assert "quantizing" not in screen and "✓" not in screen


def test_cli_json_with_heartbeats_keeps_them_off_stdout(tiny_llama: Path, tmp_path: Path) -> None:
    args = ["-v", *_quantize(tiny_llama, tmp_path, "verbose"), "--json"]
    code, out, err = cli(args, tty_stderr=False, env={progress.INTERVAL_ENV: "0.01"})
    assert code == 0, err
    assert json.loads(out)["quantization"] == "int8_per_tensor"  # stdout: the JSON and nothing else
    assert "neuronforge.common.progress: quantizing " in err  # heartbeats and the duration: stderr


def test_cli_quiet_prints_the_result_only(tiny_llama: Path, tmp_path: Path) -> None:
    code, out, err = cli(["--quiet", *_quantize(tiny_llama, tmp_path, "quiet")], tty_stderr=False)
    assert code == 0 and err == ""
    assert out.startswith(f"{tiny_llama}: quantized")


def _piped_run(compiled: Compiled, tmp_path: Path, *flags: str) -> tuple[int, str, str]:
    """`neuronforge [FLAGS] run` of the session's compiled model into a fresh store, stdout and stderr
    pipes (`neuronforge run ... > out.json 2> err.log`), a heartbeat every 0.2 s. The compile cache is
    seeded, so no graph is rebuilt; the smoke test's child still loads and generates for seconds."""
    import shutil

    home = tmp_path / "home"
    shutil.copytree(compiled.work_dir / "compile-cache", home / "work" / "compile-cache")
    target = ["--instance", TARGET["instance_type"], "--tp", str(TARGET["tp_degree"])]
    target += ["--seq-len", str(TARGET["sequence_length"]), "--max-context-length", str(TARGET["max_context_length"])]
    target += ["--dtype", TARGET["dtype"]]
    store = f"file://{tmp_path / 'store'}"
    args = [*flags, "run", "--model", str(compiled.checkpoint), *target, "--store", store]
    env = {"NEURONFORGE_HOME": str(home), progress.INTERVAL_ENV: "0.2"}
    return cli(args, tty_stderr=False, env=env)


def test_a_piped_run_prints_heartbeats_by_default(compiled: Compiled, tmp_path: Path) -> None:
    code, out, err = _piped_run(compiled, tmp_path)
    assert code == 0, err
    assert json.loads(out)["status"] == "published"  # stdout: the result and nothing else
    lines = err.splitlines()
    smoke = [line for line in lines if " PROGRESS " in line and ": smoke test: " in line]
    alive = [line for line in smoke if ": still running (" in line]
    assert len(alive) >= 2, err  # the smoke test lasts several intervals: a line for each
    assert re.search(r": smoke test: .*: done in \d+\.\ds$", smoke[-1]), smoke[-1]
    assert not [line for line in lines if " INFO " in line], err  # the heartbeats only, not every INFO line


def test_a_quiet_piped_run_prints_no_heartbeat(compiled: Compiled, tmp_path: Path) -> None:
    code, out, err = _piped_run(compiled, tmp_path, "-q")
    assert code == 0, err
    assert json.loads(out)["status"] == "published" and err == ""


def test_cli_refuses_a_bad_interval_before_any_work(capsys, monkeypatch, tmp_path: Path) -> None:
    from neuronforge.interfaces.cli import main

    monkeypatch.setenv(progress.INTERVAL_ENV, "soon")
    store = tmp_path / "store"
    assert main(["quantize", str(tmp_path), "--dtype", "int8", "--store", str(store)]) == 2
    assert capsys.readouterr().err == (
        "error: NEURONFORGE_HEARTBEAT_S='soon' is not a number of seconds above 0, at most 604800 (a week): "
        "unset it, or set e.g. 10\n"
    )
    assert not store.exists()  # refused before the store was opened


def test_log_lines_print_above_the_display_not_through_it() -> None:
    from rich.console import Console

    screen = io.StringIO()
    reporter = progress.RichReporter(Console(file=screen, force_terminal=True, width=100))
    logger = logging.getLogger("tests.progress.above")
    handler = progress.StderrHandler()
    logger.addHandler(handler)
    try:
        with reporter.step("compiling graph decode"):
            logger.warning("a warning while the display runs")
    finally:
        logger.removeHandler(handler)
    text = plain(screen.getvalue())
    assert "a warning while the display runs\n" in text  # into rich's console, a line of its own
    assert text.index("a warning while") < text.index("✓ compiling graph decode")


def test_a_step_that_raises_is_logged_as_failed(caplog) -> None:
    caplog.set_level(logging.INFO, logger="neuronforge.common.progress")
    with pytest.raises(RuntimeError), progress.LogReporter(every_s=60).step("compiling graph decode"):
        raise RuntimeError("boom")
    assert caplog.records[-1].getMessage().startswith("compiling graph decode: failed in 0.")
