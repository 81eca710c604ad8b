"""What a serving host runs is what `tests/data/launch-scripts/` holds, byte for byte: every launch script
and the Kubernetes manifests that carry them, as the profiles and a release channel render them
(`tests/launch_scripts.py`). A change to a script is a change to those files, reviewed as a diff. And
`launch_script.render`, the one function that renders them, puts every value in as data."""

from __future__ import annotations

import os
import subprocess

import pytest

from neuronforge.artifacts import launch_script
from neuronforge.artifacts.launch_script import Shell, TemplateError, render
from tests.launch_scripts import FIXTURES, HOSTILE, rendered, shellcheck, shellcheck_tool


def test_every_launch_script_renders_exactly_its_fixture() -> None:
    now = rendered()
    files = (p for p in FIXTURES.rglob("*") if p.is_file() and p.name != "README.md")
    kept = {p.relative_to(FIXTURES).as_posix(): p.read_text() for p in files}
    assert sorted(now) == sorted(kept), "regenerate: python -m tests.launch_scripts write"
    differ = [rel for rel in now if now[rel] != kept[rel]]
    assert not differ, f"{differ} render otherwise than their fixtures (python -m tests.launch_scripts write)"


def test_shellcheck_finds_nothing_in_any_launch_script(capsys: pytest.CaptureFixture[str]) -> None:
    """What `make lint` runs: every script as rendered, and as rendered from hostile values."""
    assert shellcheck() == 0, capsys.readouterr().out
    assert "no finding" in capsys.readouterr().out


def test_shellcheck_would_find_a_value_pasted_unquoted(tmp_path) -> None:
    """The check can fail: a script that pastes a value into shell text is a finding."""
    script = tmp_path / "pasted.sh"
    script.write_text("#!/usr/bin/env bash\nstore=$1\nls $store\n")
    done = subprocess.run([shellcheck_tool(), str(script)], capture_output=True, text=True)
    assert done.returncode == 1 and "SC2086" in done.stdout


@pytest.mark.parametrize(
    "value",
    ["plain", "a b", HOSTILE, "x'y\"z", "", "·", "-n", "a\nb", "tab\there", os.fsdecode(b"not \xffUTF-8")],
)
def test_a_value_reaches_bash_as_exactly_its_bytes(value: str) -> None:
    """A word (`@@NAME@@`) is the value's bytes to bash, whatever it holds; the text stays one line of
    UTF-8 (what a ConfigMap holds)."""
    word = launch_script.word(value)
    assert "\n" not in word and word.encode()  # one line, valid UTF-8
    done = subprocess.run(["bash", "-c", f"v={word}; printf '%s' \"$v\""], capture_output=True, env={"LC_ALL": "C"})
    assert done.stdout == os.fsencode(value), word


def test_a_command_quotes_its_words_but_not_the_scripts_own_shell_text() -> None:
    lines = [["vllm", "serve", Shell('"$MODEL_DIR"')], ["--dtype", "bf16; rm -rf /"], ["--port", Shell('"$PORT"')]]
    assert launch_script.command(lines) == (
        'vllm serve "$MODEL_DIR" \\\n  --dtype \'bf16; rm -rf /\' \\\n  --port "$PORT"'
    )


def test_a_comment_stays_one_comment_line() -> None:
    assert launch_script.comment("a\nrm -rf /\t" + os.fsdecode(b"\xff")) == "a\\nrm -rf /\\t\\udcff"


def test_a_placeholder_not_given_and_a_value_not_used_are_refused() -> None:
    values = {"SCRIPT": "serve.sh", "NAME": "n", "RESOLVE": "resolve.sh"}
    assert "script=serve.sh\n" in render("channel-shim.sh", **values)
    with pytest.raises(TemplateError, match=r"values not given \['RESOLVE'\]"):
        render("channel-shim.sh", SCRIPT="serve.sh", NAME="n")
    with pytest.raises(TemplateError, match=r"values it does not use \['EXTRA'\]"):
        render("channel-shim.sh", **values, EXTRA="x")
    with pytest.raises(TemplateError, match="takes a string or an int"):
        render("channel-shim.sh", **{**values, "SCRIPT": ["serve.sh"]})
    with pytest.raises(TemplateError, match="no launch template"):
        render("../channel_launch.py")


def test_an_included_file_holding_a_placeholder_is_refused(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """launch_fetch.py is included as text: an @@ in it would read as a placeholder."""
    (tmp_path / "t.sh").write_text("#!/usr/bin/env bash\n@@include x.py@@\n")
    (tmp_path / "x.py").write_text("print('@@X@@')\n")
    monkeypatch.setattr(launch_script, "TEMPLATES", tmp_path)
    monkeypatch.setattr(launch_script, "HERE", tmp_path)
    launch_script._text.cache_clear()
    try:
        with pytest.raises(TemplateError, match="must hold no @@"):
            render("t.sh")
    finally:
        launch_script._text.cache_clear()
