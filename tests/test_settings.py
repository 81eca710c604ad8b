"""One settings object: every `NEURONFORGE_*` variable is a field of `settings.Settings`, read when used
(never at import), refused in one line when bad, printed by `neuronforge config`, and documented by a
page rendered from the model."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from neuronforge.common import settings
from neuronforge.common.errors import InvalidInput
from neuronforge.interfaces.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
CODE = ("neuronforge", "neuronforge_airflow", "plugins", "dags")  # neuronforge's own Python: reads go through settings
NAME = re.compile(r"NEURONFORGE_TOOLCHAIN_PYTHON_<release>|NEURONFORGE_[A-Z0-9_]*[A-Z0-9]")
# Named in the docs, read by the test suite only (the browser tests' screenshot folder): not a setting.
TEST_ONLY = {"NEURONFORGE_TEST_ARTIFACTS"}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No NEURONFORGE_* variable of the caller's shell leaks into these tests."""
    for var in [v for v in os.environ if v.startswith(settings.ENV_PREFIX)]:
        monkeypatch.delenv(var)


def _variables() -> set[str]:
    return {settings.variable(name) for name in settings.SETTINGS}


def _is_setting(var: str) -> bool:
    family = re.fullmatch(rf"{settings.TOOLCHAIN_PYTHON_VAR}_[0-9][0-9_]*", var)
    return var in _variables() or var in settings.READ_ELSEWHERE or family is not None


# ---- the model -------------------------------------------------------------------------------------


def test_every_field_declares_its_variable_type_default_and_meaning() -> None:
    import dataclasses

    declared = {f.name: f.type for f in dataclasses.fields(settings.Settings)}
    assert set(settings.SETTINGS) == set(declared) - {"from_environment"}  # every field is a setting
    assert len(_variables()) == len(settings.SETTINGS)  # one variable per field
    for name, spec in settings.SETTINGS.items():
        assert len(spec.meaning) > 20 and spec.accepts and settings.shown_default(name), name
    seconds = [n for n, t in declared.items() if t == "float" and n.endswith("_s")]
    assert [n for n, t in declared.items() if t == "float" and not n.endswith("_s")] == [
        "transfer_floor_mbs",
        "numerics_tolerance",
    ]
    assert settings.SETTINGS["transfer_floor_mbs"].accepts == "a number of MB/s from 0 to 1000000"
    assert seconds == [
        "compile_timeout_s",
        "lease_heartbeat_s",
        "lease_ttl_s",
        "lease_handoff_s",
        "lease_poll_s",
        "recompile_poll_s",
        "heartbeat_s",
    ]
    assert all(settings.SETTINGS[n].accepts.startswith("a number of seconds above 0") for n in seconds)
    assert settings.SETTINGS["neuron_runner"].choices == ("celery", "kubernetes") == settings.RUNNERS


def test_the_environment_is_read_when_used_not_at_import(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert settings.current().lease_ttl_s == 30 and settings.current().profile == "cpu"
    monkeypatch.setenv("NEURONFORGE_LEASE_TTL_S", "45")
    monkeypatch.setenv("NEURONFORGE_PROFILE", "optimum-neuron")
    monkeypatch.setenv("NEURONFORGE_HOME", str(tmp_path / "h"))
    s = settings.current()
    assert (s.lease_ttl_s, s.profile, s.home) == (45.0, "optimum-neuron", tmp_path / "h")
    assert settings.store_uri() == f"file://{tmp_path / 'h' / 'store'}" and settings.work_dir() == tmp_path / "h/work"
    assert s.from_env("home") and not s.from_env("store")
    monkeypatch.setenv("NEURONFORGE_LEASE_TTL_S", "  ")  # empty: unset
    assert settings.current().lease_ttl_s == 30


def test_the_lease_ttl_is_three_heartbeats_unless_set_and_never_under_two(monkeypatch: pytest.MonkeyPatch) -> None:
    """A dead holder on another host is noticed within ~3 heartbeats, not 10 minutes; a TTL under two
    heartbeats (one slow renewal would hand a live build away) is one line naming both variables."""
    assert (settings.current().lease_heartbeat_s, settings.current().lease_ttl_s) == (10, 30)
    monkeypatch.setenv("NEURONFORGE_LEASE_HEARTBEAT_S", "4")
    assert settings.current().lease_ttl_s == 12
    assert next(e for e in settings.effective() if e.variable == "NEURONFORGE_LEASE_TTL_S").source == (
        "derived from NEURONFORGE_LEASE_HEARTBEAT_S"
    )
    monkeypatch.setenv("NEURONFORGE_LEASE_TTL_S", "7")
    with pytest.raises(InvalidInput) as exc:
        settings.current()
    assert str(exc.value) == (
        "NEURONFORGE_LEASE_TTL_S=7 is less than 2 heartbeats of NEURONFORGE_LEASE_HEARTBEAT_S (4 s): set it to 8 "
        "or more, or unset it (3 heartbeats: 12)"
    )
    monkeypatch.setenv("NEURONFORGE_LEASE_TTL_S", "8")
    assert settings.current().lease_ttl_s == 8


def test_a_lease_lives_as_long_as_the_environment_says_when_it_is_taken(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from neuronforge.artifacts import leases
    from neuronforge.stores import open_store

    monkeypatch.setenv("NEURONFORGE_LEASE_TTL_S", "30")
    lease = leases.try_acquire(open_store(str(tmp_path / "store")), "k" * 64, "me")
    assert lease is not None and lease.expires - lease.started == pytest.approx(30)


def test_nothing_reads_a_setting_at_import() -> None:
    """A bad value no longer breaks an import (DAG parsing, `--version`): it is refused when read."""
    code = (
        "import neuronforge.artifacts.leases, neuronforge.common.progress, neuronforge.pipeline.stages.compile, "
        "neuronforge.farm.catalog, neuronforge_airflow.operators.kubernetes, "
        "neuronforge_airflow.operators.build_claim, neuronforge_airflow.operators.recompile, "
        "neuronforge.compilation.backends.interpreter"
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    bad = {v: "abc" for v in ("NEURONFORGE_LEASE_TTL_S", "NEURONFORGE_COMPILE_TIMEOUT_S", "NEURONFORGE_NEURON_RUNNER")}
    done = subprocess.run([sys.executable, "-c", code], env=env | bad, capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("var", "value", "message"),
    [
        ("NEURONFORGE_LEASE_TTL_S", "abc", "NEURONFORGE_LEASE_TTL_S='abc' is not a number of seconds above 0, at most"),
        ("NEURONFORGE_COMPILE_TIMEOUT_S", "-1", "NEURONFORGE_COMPILE_TIMEOUT_S='-1' is not a number of seconds"),
        ("NEURONFORGE_HEARTBEAT_S", "inf", "NEURONFORGE_HEARTBEAT_S='inf' is not a number of seconds above 0"),
        (
            "NEURONFORGE_HEARTBEAT_S",
            "1e308",
            "NEURONFORGE_HEARTBEAT_S='1e308' is not a number of seconds above 0, at most",
        ),
        ("NEURONFORGE_LEASE_HEARTBEAT_S", "1e308", "NEURONFORGE_LEASE_HEARTBEAT_S='1e308' is not a number of"),
        ("NEURONFORGE_TRANSFER_FLOOR_MBS", "1e300", "NEURONFORGE_TRANSFER_FLOOR_MBS='1e300' is not a number of MB/s"),
        ("NEURONFORGE_LEASE_POLL_S", "0", "NEURONFORGE_LEASE_POLL_S='0' is not a number"),
        ("NEURONFORGE_RECOMPILE_POLL_S", "soon", "NEURONFORGE_RECOMPILE_POLL_S='soon' is not"),
        ("NEURONFORGE_NEURON_RUNNER", "slurm", "NEURONFORGE_NEURON_RUNNER='slurm': use one of celery, kubernetes"),
        ("NEURONFORGE_QUANT_KERNEL", "fast", "NEURONFORGE_QUANT_KERNEL='fast': use one of auto, compiled, eager"),
        ("NEURONFORGE_REGRESSION_GATES", "stable=5,stable=6", "NEURONFORGE_REGRESSION_GATES='stable=5,stable=6' is"),
        ("NEURONFORGE_REGRESSION_GATES", "stable=inf", "NEURONFORGE_REGRESSION_GATES='stable=inf' is not channel="),
        ("NEURONFORGE_NUMERICS_TOLERANCE", "-0.1", "NEURONFORGE_NUMERICS_TOLERANCE='-0.1' is not a number from 0"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_variable_the_value_and_what_is_accepted(
    monkeypatch: pytest.MonkeyPatch, var: str, value: str, message: str
) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(InvalidInput) as caught:
        settings.current()
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


def test_every_command_refuses_a_bad_value_in_one_line_before_any_work(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (subparsers,) = [a for a in build_parser()._actions if a.dest == "command"]
    monkeypatch.setenv("NEURONFORGE_LEASE_TTL_S", "abc")
    for command in subparsers.choices:
        assert main([command]) == 2, command
        assert capsys.readouterr().err == (
            "error: NEURONFORGE_LEASE_TTL_S='abc' is not a number of seconds above 0, at most 604800 (a week): "
            "unset it, or set e.g. 30 (3 heartbeats)\n"
        ), command


@pytest.mark.parametrize("command", ["plan", "cache-key", "run"])
def test_a_profile_from_the_environment_that_does_not_exist_names_its_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str
) -> None:
    """NEURONFORGE_PROFILE is checked where it is used (only the registry knows the profiles): refused in one
    line that names the variable, as `current()` does for what it can check, not as if the command line had
    said `--profile nope`; an explicit `--profile` wins over the variable."""
    from tests.test_cli import LLAMA

    monkeypatch.setenv("NEURONFORGE_PROFILE", "nope")
    argv = [command, "--model", str(LLAMA), "--instance", "inf2.xlarge", "--tp", "2", "--seq-len", "4096"]
    argv += ["--work-dir", str(tmp_path / "w")] if command == "cache-key" else []
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: NEURONFORGE_PROFILE='nope': unknown profile 'nope'; known profiles: cpu"), err
    assert err.endswith("(or unset it: cpu)\n") and err.count("\n") == 1
    if command == "plan":
        assert main([*argv, "--profile", "cpu"]) == 0


def test_a_release_s_own_interpreter_comes_before_the_global_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from neuronforge.compilation.backends.interpreter import ToolchainPython

    monkeypatch.setenv("NEURONFORGE_TOOLCHAIN_PYTHON", "/opt/any/python")
    monkeypatch.setenv("NEURONFORGE_TOOLCHAIN_PYTHON_2_21_1", "/opt/sdk-2.21.1/python")
    assert ToolchainPython.resolve("2.21.1", "/declared").path == "/opt/sdk-2.21.1/python"
    assert ToolchainPython.resolve("2.21.1", "/declared").source == "NEURONFORGE_TOOLCHAIN_PYTHON_2_21_1"
    assert ToolchainPython.resolve("2.26.1", "/declared").source == "NEURONFORGE_TOOLCHAIN_PYTHON"
    monkeypatch.delenv("NEURONFORGE_TOOLCHAIN_PYTHON")
    assert ToolchainPython.resolve("2.26.1", "/declared").path == "/declared"


def test_pods_get_the_scheduler_s_home_else_their_own(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from neuronforge_airflow.operators.kubernetes import POD_HOME, pod_settings

    assert pod_settings("g", "2.26.1", False)["env_vars"] == {"NEURONFORGE_HOME": POD_HOME}
    assert "pod_template_file" not in pod_settings("g", "2.26.1", False)
    monkeypatch.setenv("NEURONFORGE_HOME", str(tmp_path))
    monkeypatch.setenv("NEURONFORGE_K8S_POD_TEMPLATE", "/etc/nf/pod.yaml")
    monkeypatch.setenv("NEURONFORGE_K8S_NAMESPACE", "neuron")
    pod = pod_settings("g", "2.26.1", False)
    assert pod["env_vars"] == {"NEURONFORGE_HOME": str(tmp_path)}
    assert (pod["pod_template_file"], pod["namespace"]) == ("/etc/nf/pod.yaml", "neuron")


# ---- one reader ------------------------------------------------------------------------------------


def _env_reads(source: str) -> list[tuple[int, str]]:
    """(line, variable) of every read of a NEURONFORGE_* variable from the process environment:
    `os.environ.get(X)`, `os.environ[X]`, `os.getenv(X)`, `X in os.environ`, with X a literal, an
    f-string, or a module-level name bound to one."""
    tree = ast.parse(source)
    constants = {
        t.id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
        for t in node.targets
        if isinstance(t, ast.Name)
    }

    def named(arg: ast.expr) -> str | None:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            text = arg.value
        elif isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
            text = str(arg.values[0].value)
        elif isinstance(arg, ast.Name):
            text = constants.get(arg.id, "")
        else:
            return None
        return text if text.startswith(settings.ENV_PREFIX) else None

    def is_environ(node: ast.expr) -> bool:
        return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
            isinstance(node, ast.Name) and node.id == "environ"
        )

    reads = []
    for node in ast.walk(tree):
        arg = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            if (node.func.attr == "get" and is_environ(node.func.value)) or node.func.attr == "getenv":
                arg = node.args[0]
        elif isinstance(node, ast.Subscript) and is_environ(node.value) and isinstance(node.ctx, ast.Load):
            arg = node.slice
        elif isinstance(node, ast.Compare) and any(is_environ(c) for c in node.comparators):
            arg = node.left
        if arg is not None and (var := named(arg)):
            reads.append((node.lineno, var))
    return reads


def test_the_read_detector_finds_every_form() -> None:
    source = (
        "import os\nVAR = 'NEURONFORGE_X'\nos.environ.get('NEURONFORGE_A')\nos.environ['NEURONFORGE_B']\n"
        "os.getenv(VAR)\nif 'NEURONFORGE_C' in os.environ: pass\nos.environ.get(f'NEURONFORGE_D_{1}')\n"
        "os.environ['NEURONFORGE_E'] = '1'\nos.environ.get('HF_TOKEN')\n"
    )
    reads = sorted(v for _, v in _env_reads(source))  # not the write of NEURONFORGE_E, not HF_TOKEN
    assert reads == ["NEURONFORGE_A", "NEURONFORGE_B", "NEURONFORGE_C", "NEURONFORGE_D_", "NEURONFORGE_X"]


def test_nothing_but_settings_reads_a_neuronforge_variable() -> None:
    reads = []
    for folder in CODE:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == ROOT / "neuronforge" / "common" / "settings.py":
                continue
            reads += [f"{path.relative_to(ROOT)}:{line}: {var}" for line, var in _env_reads(path.read_text())]
    where = "neuronforge.common.settings.current()"
    assert not reads, f"read these through {where} (a field of Settings):\n" + "\n".join(reads)


def test_every_neuronforge_variable_the_code_and_docs_name_is_a_setting() -> None:
    """A variable mentioned anywhere (code, images, docs) that no setting declares is a typo or a reader
    that bypasses the model."""
    places = [p for folder in (*CODE, "neuronforge_toolchain") for p in (ROOT / folder).rglob("*.py")]
    places += [*(ROOT / "docker").rglob("*"), *(ROOT / "docs").rglob("*.md"), ROOT / "README.md"]
    unknown = sorted(
        {
            f"{path.relative_to(ROOT)}: {var}"
            for path in places
            if path.is_file() and path.suffix not in (".png", ".jpg")
            for var in NAME.findall(path.read_text(errors="replace"))
            if not _is_setting(var) and var not in TEST_ONLY and var != "NEURONFORGE_TOOLCHAIN_PYTHON_<release>"
        }
    )
    assert not unknown, "declare these in neuronforge/common/settings.py (or READ_ELSEWHERE):\n" + "\n".join(unknown)


def test_the_toolchain_side_reads_only_what_the_docs_list_as_read_elsewhere() -> None:
    """neuronforge_toolchain/ (the SDK image's Python, standard library only) cannot import the model:
    every variable it names is in READ_ELSEWHERE, and it never imports neuronforge."""
    for path in (ROOT / "neuronforge_toolchain").rglob("*.py"):
        text = path.read_text()
        assert not re.search(r"^\s*(from|import) neuronforge\b(?!_toolchain)", text, re.M), path
        for var in NAME.findall(text):
            assert var in settings.READ_ELSEWHERE, f"{path.relative_to(ROOT)}: {var}"


# ---- neuronforge config ----------------------------------------------------------------------------


def test_config_prints_every_setting_and_where_it_came_from(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setenv("NEURONFORGE_HOME", str(tmp_path))
    monkeypatch.setenv("NEURONFORGE_HEARTBEAT_S", "2.5")
    monkeypatch.setenv("NEURONFORGE_TOOLCHAIN_PYTHON_2_21_1", "/opt/py")
    assert main(["config"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line.split(maxsplit=1)[1] for line in lines}
    assert set(rows) == (_variables() - {"NEURONFORGE_TOOLCHAIN_PYTHON_<release>"}) | {
        "NEURONFORGE_TOOLCHAIN_PYTHON_2_21_1"
    }
    assert rows["NEURONFORGE_HOME"].split() == [str(tmp_path), "env", "NEURONFORGE_HOME"]
    assert rows["NEURONFORGE_STORE"].split() == [f"file://{tmp_path}/store", "derived", "from", "NEURONFORGE_HOME"]
    assert rows["NEURONFORGE_HEARTBEAT_S"].split() == ["2.5", "env", "NEURONFORGE_HEARTBEAT_S"]
    assert rows["NEURONFORGE_LEASE_TTL_S"].split() == ["30", "derived", "from", "NEURONFORGE_LEASE_HEARTBEAT_S"]
    # an aligned table: each column starts at the same place on every line
    assert len({re.match(r"\S+ +", line).end() for line in lines}) == 1
    assert len({re.match(r"\S+ +\S+ +", line).end() for line in lines}) == 1

    assert main(["config", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["NEURONFORGE_HEARTBEAT_S"] == {"value": 2.5, "source": "env NEURONFORGE_HEARTBEAT_S"}
    assert data["NEURONFORGE_K8S_POD_TEMPLATE"] == {"value": None, "source": "default"}


def test_config_never_shows_a_secret(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("NEURONFORGE_STORE", "s3://AKIAEXAMPLE:s3cr3t@bucket/farm")
    for argv in (["config"], ["config", "--json"]):
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert "s3cr3t" not in out and "AKIAEXAMPLE" not in out and "s3://***@bucket/farm" in out


# ---- the docs page ---------------------------------------------------------------------------------


def test_the_configuration_page_is_rendered_from_the_model() -> None:
    page = settings.DOCS_PAGE.read_text()
    assert settings.render_page(page) == page, (
        f"docs/configuration.md's tables differ from neuronforge/common/settings.py: run `{settings.REGENERATE}`"
    )
    for name in settings.SETTINGS:
        assert f"| `{settings.variable(name)}` |" in page
    assert "configuration.md" in (ROOT / "mkdocs.yml").read_text()


def test_a_changed_model_makes_the_page_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    page = settings.DOCS_PAGE.read_text()
    import dataclasses

    changed = dataclasses.replace(settings.SETTINGS["lease_ttl_s"], meaning="another meaning")
    monkeypatch.setitem(settings.SETTINGS, "lease_ttl_s", changed)
    assert settings.render_page(page) != page
    with pytest.raises(InvalidInput, match="no lines"):
        settings.render_page("# a page without the markers\n")
