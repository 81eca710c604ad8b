"""No setting's value is ever printed with its secret (issue 51): every `NEURONFORGE_*` setting, set
in turn to a value carrying a credential — a Hub URL with a token in its userinfo, a presigned query,
an S3 key pair without `@`, a bare Hugging Face token — and a command of each group that reads the
settings run with it: whatever it answers (the value refused, a store that is no store, a profile
that does not exist, or its ordinary output), the secret is in no line it prints, on stdout or
stderr, nor in any log record, and nothing ends in a traceback.

The settings are enumerated from the model (`settings.SETTINGS` and each one's variable), never
listed here: a setting added tomorrow is covered by this test the day it is added. The masking
itself is the one rule, `common.secrets`, run where each surface prints (see its docstring).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from neuronforge.common import settings
from neuronforge.common.errors import InvalidInput
from neuronforge.interfaces.cli import main
from tests.test_planner import CONFIGS

MARK = "S3CR3T"  # in every secret below, and in nothing neuronforge would print on its own
TOKEN = f"hf_{MARK}abcdefghijklmnopqrstuvwxyz0"  # a Hugging Face token's shape: hf_ and 34 characters
HOSTILE = {
    "userinfo": f"https://user:{MARK}x/y@huggingface.co/org/cache",
    "presigned": f"https://b.s3.amazonaws.com/k?X-Amz-Credential=AKIA%2F{MARK}&X-Amz-Signature={MARK}f0&token={MARK}",
    "no-at": f"s3://AKIAEXAMPLE:{MARK}/K7MDENG/bucket",
    "token": TOKEN,
}
LLAMA = str(CONFIGS / "meta-llama--Llama-3.1-8B.json")
KEY = "a" * 12
# A command of each group that reads the settings (build, store, releases, catalog, recompile, cache,
# sweep, environment, leases), and the help that shows the effective store and profile.
COMMANDS = [
    ["--help"],
    ["plan", "--model", LLAMA, "--instance", "inf2.xlarge", "--tp", "2", "--seq-len", "4096"],
    ["ls"],
    ["show", KEY],
    ["promote", KEY, "--channel", "stable"],
    ["catalog", "check"],
    ["recompile", "--dry-run"],
    ["cache", "ls"],
    ["sweep", "--help"],
    ["config"],
    ["profiles"],
    ["lease", "ls"],
]


def _variables() -> list[str]:
    """Every setting's variable, from the model; the per-release family as one of its members."""
    release = settings.toolchain_python_var("2.21.1")
    return [release if name == "toolchain_pythons" else settings.variable(name) for name in settings.SETTINGS]


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No NEURONFORGE_* variable of the caller's; a home holding an (empty) store, so that store
    commands get past opening it."""
    for var in [v for v in os.environ if v.startswith(settings.ENV_PREFIX)]:
        monkeypatch.delenv(var)
    home = tmp_path / "home"
    (home / "store").mkdir(parents=True)
    monkeypatch.setenv("NEURONFORGE_HOME", str(home))
    return home


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int | str, str]:
    try:
        code: int | str = main(argv)
    except SystemExit as exc:  # --help, and argparse's own refusals
        code = f"exit {exc.code}"
    out, err = capsys.readouterr()
    return code, out + err


def test_every_setting_is_enumerated() -> None:
    """The list the test below runs over is the model's: one variable per field, the per-release family included."""
    variables = _variables()
    assert len(variables) == len(settings.SETTINGS) >= 19
    assert {"NEURONFORGE_HUB_REGISTRY", "NEURONFORGE_STORE", "NEURONFORGE_HOME"} <= set(variables)
    assert "NEURONFORGE_TOOLCHAIN_PYTHON_2_21_1" in variables


@pytest.mark.parametrize("var", _variables())
def test_no_command_prints_a_secret_a_setting_holds(
    var: str,
    clean_env: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    for kind in ("userinfo", "presigned", "token"):  # the S3 form without `@` is the refusal test's below
        value = HOSTILE[kind]
        with monkeypatch.context() as env:
            env.setenv(var, value)
            for argv in COMMANDS:
                code, text = _run(argv, capsys)
                said = f"{var}={kind}: neuronforge {' '.join(argv[:2])} (exit {code})"
                assert MARK not in text, f"{said} printed the secret:\n{text[-2000:]}"
                assert "Traceback" not in text, f"{said}:\n{text[-2000:]}"
                assert MARK not in caplog.text, f"{said} logged the secret:\n{caplog.text[-2000:]}"
                caplog.clear()


def test_a_refused_setting_names_itself_and_never_its_secret(clean_env: Path) -> None:
    """Each refusal is one line naming the variable; the value it quotes is quoted masked. A value the
    setting takes as text (a profile name, an image) is refused later, where it is used (the test
    above); every other setting refuses each of these values."""
    refused: set[str] = set()
    for var in _variables():
        for kind, value in HOSTILE.items():
            try:
                settings.current({**os.environ, var: value})
            except InvalidInput as exc:
                assert str(exc).startswith(f"{var}=") and "\n" not in str(exc), (kind, str(exc))
                assert MARK not in str(exc), (kind, str(exc))
                refused.add(var)
    as_text = {"NEURONFORGE_STORE", "NEURONFORGE_PROFILE", "NEURONFORGE_HUB_REGISTRY_CONN_ID"}
    as_text |= {"NEURONFORGE_NEURON_IMAGE", "NEURONFORGE_K8S_NAMESPACE"}
    assert refused == set(_variables()) - as_text


def test_a_setting_that_is_a_path_refuses_a_uri(clean_env: Path) -> None:
    """NEURONFORGE_HOME=https://user:SECRET@host/x was a folder named after the URI under the
    current directory, shown (unmasked: a path's `//` collapses to `/`) by `config` and every error
    naming the store under it; it is refused, masked."""
    with pytest.raises(InvalidInput) as refused:
        settings.current({**os.environ, "NEURONFORGE_HOME": HOSTILE["userinfo"]})
    assert str(refused.value) == (
        "NEURONFORGE_HOME='https://***@huggingface.co/org/cache' is not a path: unset it, or set e.g. "
        "<repo>/.neuronforge"
    )


def test_a_refusal_quotes_the_value_masked_before_escaping_it(clean_env: Path) -> None:
    """`repr` escapes a control character into `\\x1b`, and the masking rule stops a URI at a
    backslash: the value is masked first, so the part of the secret after it is not shown either."""
    value = f"https://user:{MARK}\x1b{MARK}@host/x"
    with pytest.raises(InvalidInput) as refused:
        settings.current({**os.environ, "NEURONFORGE_HEARTBEAT_S": value})
    assert MARK not in str(refused.value) and "NEURONFORGE_HEARTBEAT_S='https://***" in str(refused.value)


def test_the_airflow_layer_masks_every_log_line_of_its_process(tmp_path: Path) -> None:
    """A task's log is written by Airflow's handlers; importing `neuronforge_airflow` (every DAG file,
    task, trigger and policy of ours does) masks each record where it is made, whatever logger made
    it and whatever handler shows it — its exception's traceback too."""
    code = """
import logging, sys
logging.basicConfig(stream=sys.stdout, format="%(name)s %(message)s")
import neuronforge_airflow
logging.getLogger("botocore").warning("GET %s failed", sys.argv[1])
try:
    raise OSError("could not reach " + sys.argv[1])
except OSError:
    logging.getLogger("neuronforge.x").exception("a step failed")
"""
    out = subprocess.run(
        [sys.executable, "-c", code, HOSTILE["userinfo"]],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[1],
    ).stdout
    assert "botocore GET https://***@huggingface.co/org/cache failed" in out, out
    assert "OSError: could not reach https://***@huggingface.co/org/cache" in out, out
    assert MARK not in out, out
