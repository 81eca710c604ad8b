"""The CLI's contract as a whole: one default profile and store, help on every option, one exit-code
table, `--version`, shell completion, option values that start with `-`."""

from __future__ import annotations

import argparse
import ast
import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

from neuronforge.common import settings
from neuronforge.interfaces import cli
from neuronforge.interfaces.cli import EXIT_CODES, ExitCode, build_parser, exit_codes, main
from neuronforge.interfaces.cli.parser import join_dash_values
from neuronforge.stores import open_store

EXE = Path(sys.executable).parent / "neuronforge"


def _parsers(parser: argparse.ArgumentParser, path: str = "neuronforge"):
    """(command path, parser, its subcommands' help by name) for the parser and every subparser."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{path} {name}")


def _commands() -> dict[str, argparse.ArgumentParser]:
    return dict(_parsers(build_parser()))


def test_every_option_and_subcommand_has_help() -> None:
    from neuronforge.interfaces.cli.spellings import renamed_in

    missing = []
    for path, parser in _commands().items():
        hidden = {r.hidden for r in renamed_in(parser)}  # an old spelling, kept a release: out of the help
        for action in parser._actions:
            name = "/".join(action.option_strings) or action.metavar or action.dest
            if action.dest in hidden:
                continue
            if not action.help or action.help == argparse.SUPPRESS:
                missing.append(f"{path} {name}")
            if isinstance(action, argparse._SubParsersAction):
                helped = {a.dest for a in action._choices_actions if a.help}
                missing += [f"{path} {n} (subcommand)" for n in action.choices if n not in helped]
    assert not missing, missing
    assert len(_commands()) >= 20  # the walk reached the nested subcommands (cache ls, index rebuild, ...)


def _default(path: str, dest: str) -> object:
    (action,) = [a for a in _commands()[path]._actions if a.dest == dest]
    return action.default


def test_one_default_profile_for_every_command_with_a_target(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NEURONFORGE_PROFILE", raising=False)
    with_target = [p for p, parser in _commands().items() if any(a.dest == "seq_len" for a in parser._actions)]
    assert sorted(with_target) == ["neuronforge cache-key", "neuronforge plan", "neuronforge run"]
    assert {_default(p, "profile") for p in with_target} == {"cpu"}
    for p in with_target:
        (profile,) = [a for a in _commands()[p]._actions if a.dest == "profile"]
        assert "NEURONFORGE_PROFILE" in profile.help and "cpu" in profile.help
    monkeypatch.setenv("NEURONFORGE_PROFILE", "vllm-neuron")
    assert {_default(p, "profile") for p in with_target} == {"vllm-neuron"}
    # a sweep searches what loads on a Neuron device: its own default, said in its help
    (sweep_profile,) = [a for a in _commands()["neuronforge sweep"]._actions if a.dest == "profile"]
    assert sweep_profile.default == "optimum-neuron" and "default optimum-neuron" in sweep_profile.help


def test_plan_without_profile_checks_the_default_one(capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.test_cli import LLAMA

    argv = ["plan", "--model", str(LLAMA), "--instance", "inf2.xlarge", "--tp", "2", "--seq-len", "4096", "--json"]
    monkeypatch.delenv("NEURONFORGE_PROFILE", raising=False)
    assert main(argv) == ExitCode.OK
    checks = {c["name"]: c["message"] for c in json.loads(capsys.readouterr().out)["checks"]}
    assert checks["profile"].startswith("profile cpu@")
    monkeypatch.setenv("NEURONFORGE_PROFILE", "vllm-neuron")
    assert main(argv) == ExitCode.OK
    checks = {c["name"]: c["message"] for c in json.loads(capsys.readouterr().out)["checks"]}
    assert checks["profile"].startswith("profile vllm-neuron@")


def test_every_store_command_takes_an_optional_store() -> None:
    """Every command that reads or writes a store has `--store`, none requires it."""
    for path in ("fetch", "quantize", "run", "show", "ls", "verify", "gc", "cache ls", "cache stats", "cache prune",
                 "catalog stale", "index rebuild", "sweep", "store ls"):  # fmt: skip
        (store,) = [a for a in _commands()[f"neuronforge {path}"]._actions if "--store" in a.option_strings]
        assert not store.required and store.default is None and "NEURONFORGE_STORE" in store.help, path


def _cache_store(root: Path):
    store = open_store(f"file://{root}")
    store.put_bytes(b"neff", "neuron-cache/neuronxcc-2.21.33363.0+82129205/MODULE_aaaa+d41d8cd9/model.neff")
    store.put_bytes(b"", "neuron-cache/neuronxcc-2.21.33363.0+82129205/MODULE_aaaa+d41d8cd9/model.done")
    return store


def test_the_default_store_is_neuronforge_store_else_the_local_one(
    capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NEURONFORGE_STORE", raising=False)
    monkeypatch.setenv("NEURONFORGE_HOME", str(tmp_path / "home"))
    _cache_store(tmp_path / "home" / "store")  # the local default: what `run` publishes into
    assert main(["cache", "ls", "--json"]) == ExitCode.OK
    assert [e["name"] for e in json.loads(capsys.readouterr().out)] == ["MODULE_aaaa+d41d8cd9"]
    env_store = _cache_store(tmp_path / "env")
    env_store.put_bytes(b"", "neuron-cache/neuronxcc-2.21.33363.0+82129205/MODULE_bbbb+d41d8cd9/model.done")
    monkeypatch.setenv("NEURONFORGE_STORE", env_store.root_uri)
    assert main(["cache", "stats", "--json"]) == ExitCode.OK
    assert json.loads(capsys.readouterr().out)["neuronxcc-2.21.33363.0+82129205"]["entries"] == 2
    # the positional STORE and --store are the same argument; given, they beat the environment
    local = str(tmp_path / "home" / "store")
    for argv in (["store", "ls", local], ["store", "ls", "--store", local]):
        assert main([*argv, "--json"]) == ExitCode.OK
        assert "MODULE_bbbb" not in capsys.readouterr().out
    # `store ls --store URI PREFIX`: the one positional is the prefix
    entry = "neuron-cache/neuronxcc-2.21.33363.0+82129205/MODULE_bbbb+d41d8cd9"
    assert main(["store", "ls", "--store", env_store.root_uri, entry, "--json"]) == ExitCode.OK
    assert [o["key"] for o in json.loads(capsys.readouterr().out)] == [f"{entry}/model.done"]
    assert main(["cache", "ls", str(tmp_path / "a"), "--store", str(tmp_path / "b")]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "two stores given" in err


def test_exit_code_table_is_in_help_and_the_module_docstring_points_at_it(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for code, text in EXIT_CODES.items():
        assert f"  {int(code)}  {text[:40]}" in out
    assert set(EXIT_CODES) == set(ExitCode)
    assert "NEURONFORGE_PROFILE, else cpu" in out and "NEURONFORGE_STORE" in out
    assert 'eval "$(register-python-argcomplete neuronforge)"' in out
    assert "EXIT_CODES" in cli.__doc__


def _returned(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.IfExp):
        return _returned(node.body) + _returned(node.orelse)
    return [node]


def _own_returns(fn: ast.FunctionDef) -> list[ast.Return]:
    """The function's own `return`s: not those of a function defined inside it (a callback's value is
    not the command's exit code)."""
    found, todo = [], list(ast.iter_child_nodes(fn))
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        if isinstance(node, ast.Return):
            found.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return found


def _cli_modules() -> dict[str, Path]:
    """Every module of the `cli` package by its dotted name: where the commands and `main` are."""
    return {f"{cli.__name__}.{m.name}": Path(m.module_finder.path) / f"{m.name}.py"
            for m in pkgutil.iter_modules(cli.__path__)} | {cli.__name__: Path(cli.__file__)}  # fmt: skip


def test_every_command_handler_is_read_by_the_exit_code_check() -> None:
    """Each command's handler is a `cmd_` function of a module of the package: the static check below
    reads all of those, so no command's returns escape it."""
    modules = _cli_modules()
    handlers = {(p.get_default("func").__module__, p.get_default("func").__name__)
                for p in _commands().values() if p.get_default("func")}  # fmt: skip
    assert len(handlers) >= 20
    for module, name in handlers:
        assert module in modules and name.startswith("cmd_"), (module, name)


def test_every_code_a_command_returns_is_in_the_table() -> None:
    """Static: each `return` of a command (and of `main`), in every module of the package, is an
    `ExitCode` member, an alias of one, an error outcome's `exit_code`, or another command's result;
    a bare number or an unknown name fails here."""
    aliases = {
        name for name in dir(exit_codes) if name.startswith("EXIT_") and isinstance(getattr(exit_codes, name), ExitCode)
    }
    checked, bad = 0, []
    for path in _cli_modules().values():
        for fn in ast.parse(path.read_text()).body:
            if not isinstance(fn, ast.FunctionDef) or not (fn.name.startswith("cmd_") or fn.name == "main"):
                continue
            for ret in _own_returns(fn):
                for value in _returned(ret.value) if ret.value else [ret.value]:
                    checked += 1
                    if not _declared_exit_code(value, aliases):
                        bad.append(
                            f"{path.name}:{fn.name}:{ret.lineno}: return {ast.unparse(value) if value else None}"
                        )
    assert checked > 30 and not bad, bad


def _declared_exit_code(value: ast.expr | None, aliases: set[str]) -> bool:
    """Whether a returned expression is one of the table's codes (by an alias or `ExitCode.X`), an error
    outcome's `exit_code`, or what another command returns."""
    if isinstance(value, ast.Name) and value.id in aliases:
        return True
    if (
        isinstance(value, ast.Attribute)
        and isinstance(value.value, ast.Name)
        and value.value.id == "ExitCode"
        and value.attr in ExitCode.__members__
    ):
        return True
    if isinstance(value, ast.Attribute) and value.attr == "exit_code":
        return True  # an error's `errors.outcome`: typed ExitCode (test_error_outcomes checks each class's)
    if isinstance(value, ast.Call):
        callee = value.func.id if isinstance(value.func, ast.Name) else ast.unparse(value.func)
        return callee.startswith("cmd_") or callee == "args.func"
    return False


def test_the_exit_code_check_fails_on_an_undeclared_code() -> None:
    """The check above is not vacuous: a bare number, an unknown name, a call of anything but a command."""
    aliases = {"EXIT_OK"}
    for source in ("return 2", "return EXIT_SOMETHING", "return helper(args)", "return"):
        (ret,) = ast.parse(source).body
        assert not _declared_exit_code(ret.value, aliases), source
    for source in ("return EXIT_OK", "return ExitCode.STALE", "return found.exit_code", "return cmd_x(args)"):
        (ret,) = ast.parse(source).body
        assert _declared_exit_code(ret.value, aliases), source


def test_version_imports_nothing_heavy() -> None:
    from importlib.metadata import version

    probe = (
        "import sys\nfrom neuronforge.interfaces.cli import main\n"
        "try:\n    main(['--version'])\nexcept SystemExit as e:\n"
        "    assert e.code == 0\nheavy = ('torch', 'boto3', 'botocore', 'transformers', 'pydantic', 'yaml', 'numpy')\n"
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout == f"neuronforge {version('neuronforge')}\n[]\n"
    done = subprocess.run([str(EXE), "--version"], capture_output=True, text=True, check=True)
    assert done.stdout == f"neuronforge {version('neuronforge')}\n"


def _complete(line: str, tmp_path: Path) -> list[str]:
    out = tmp_path / "completions"
    env = {**os.environ, "_ARGCOMPLETE": "1", "COMP_LINE": line, "COMP_POINT": str(len(line)),
           "_ARGCOMPLETE_STDOUT_FILENAME": str(out), "_ARGCOMPLETE_IFS": "\n"}  # fmt: skip
    done = subprocess.run([str(EXE)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [c.strip() for c in out.read_text().splitlines()]


def test_shell_completion_of_commands_options_and_values(tmp_path: Path) -> None:
    assert {"cache", "cache-key", "catalog"} <= set(_complete("neuronforge ca", tmp_path))
    assert set(_complete("neuronforge cache ", tmp_path)) - {"-h", "--help"} == {"ls", "stats", "prune"}
    assert "--compiler-flags" in _complete("neuronforge cache-key --comp", tmp_path)
    assert "vllm-neuron" in _complete("neuronforge plan --profile vl", tmp_path)
    assert "inf2.xlarge" in _complete("neuronforge ls --instance inf2.x", tmp_path)
    # the documented hook exists and names the command
    hook = subprocess.run(
        [str(EXE.parent / "register-python-argcomplete"), "neuronforge"], capture_output=True, text=True, check=True
    )
    assert "neuronforge" in hook.stdout and "complete" in hook.stdout


def test_option_values_may_start_with_a_dash(capsys, tiny_llama: Path, tmp_path: Path) -> None:
    base = ["cache-key", "--model", str(tiny_llama), "--instance", "inf2.xlarge", "--tp", "1", "--seq-len", "64",
            "--work-dir", str(tmp_path / "w"), "--explain"]  # fmt: skip
    assert main([*base, "--compiler-flags", "-O1"]) == ExitCode.OK
    spaced = json.loads(capsys.readouterr().out)
    assert spaced["material"]["toolchain"]["compiler_flags"] == ["-O1"]
    assert main([*base, "--compiler-flags=-O1"]) == ExitCode.OK
    assert json.loads(capsys.readouterr().out)["cache_key"] == spaced["cache_key"]
    assert main([*base, "--compiler-flags", "--model-type transformer -O2"]) == ExitCode.OK
    flags = json.loads(capsys.readouterr().out)["material"]["toolchain"]["compiler_flags"]
    assert flags == ["--model-type transformer", "-O2"]
    # only the declared options: a value after `--` and other options are argparse's as before
    assert join_dash_values(["run", "--prompt", "-x", "--", "--prompt", "-y"]) == [
        "run", "--prompt=-x", "--", "--prompt", "-y"
    ]  # fmt: skip


def test_the_default_profile_needs_no_neuron_sdk(capsys, tiny_llama: Path, tmp_path: Path, monkeypatch) -> None:
    """`cache-key` (like `run`) with no --profile works on a machine without the Neuron SDK."""
    monkeypatch.delenv("NEURONFORGE_PROFILE", raising=False)
    argv = ["cache-key", "--model", str(tiny_llama), "--instance", "inf2.xlarge", "--tp", "1", "--seq-len", "64",
            "--work-dir", str(tmp_path / "w"), "--explain"]  # fmt: skip
    assert main(argv) == ExitCode.OK
    material = json.loads(capsys.readouterr().out)["material"]
    assert material["toolchain"]["compiler"] == "torch-inductor" and settings.default_profile() == "cpu"
