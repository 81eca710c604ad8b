"""What several commands share: the target flags (declared once, by `TargetSpec`), the store argument and
its default, the work dir, tab completion of values, JSON output. Every command that takes a target defaults
to the same serving profile (`settings.default_profile()`: NEURONFORGE_PROFILE, else `cpu`); every command
that reads or writes a store defaults to the same store (`settings.store_uri()`: NEURONFORGE_STORE, else the
local store under NEURONFORGE_HOME)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from neuronforge.common import settings
from neuronforge.common.errors import InvalidInput

JSON_HELP = "print JSON instead of text"
WORK_DIR_HELP = "local work dir for downloads and builds (default: $NEURONFORGE_HOME/work)"


def default_work_dir() -> Path:
    """The one default work dir, the same the DAG's tasks use (`settings.work_dir()`)."""
    return settings.work_dir()


def in_help(value: str) -> str:
    """A setting's value as a help text shows it: argparse expands `%(default)s` in help with `%`, so a
    `%` of the value (a URI's `%2F`) is doubled, or `--help` fails."""
    return value.replace("%", "%%")


def store_help(what: str = "store URI: file:///path, a path, or s3://bucket/prefix") -> str:
    store = in_help(settings.store_uri())
    return f"{what} (default: $NEURONFORGE_STORE, else the local store $NEURONFORGE_HOME/store: {store})"


def add_store_args(p: argparse.ArgumentParser, *, positional: bool = False) -> None:
    """`--store URI` (and, where the store was a positional argument, an optional positional STORE);
    `resolve_store` turns them into `args.store`, the default store when neither is given."""
    if positional:
        p.add_argument("store_pos", nargs="?", metavar="STORE", help=store_help("store URI, the same as --store"))
    p.add_argument("--store", dest="store_opt", metavar="URI", help=store_help())


def resolve_store(args: argparse.Namespace) -> None:
    """`args.store`: the store a command reads or writes (given, else NEURONFORGE_STORE, else local)."""
    if not hasattr(args, "store_opt"):
        return
    pos = getattr(args, "store_pos", None)
    if pos and args.store_opt:
        if getattr(args, "prefix", "") is None:  # `store ls --store URI PREFIX`: the one positional is the prefix
            args.prefix, pos = pos, None
        elif pos != args.store_opt:
            raise InvalidInput(f"two stores given ({pos} and --store {args.store_opt}): give one")
    args.store = settings.store_uri(args.store_opt or pos)


def _profile_help() -> str:
    return (
        "serving profile: the stack that will load the artifact (`neuronforge profiles` lists them; default: "
        f"$NEURONFORGE_PROFILE, else {settings.DEFAULT_PROFILE}: {in_help(settings.default_profile())}). `plan` checks "
        "the Neuron instance's limits for every profile, cpu included: the same checks `run` applies"
    )


def completes(action: argparse.Action, completer: Any) -> None:
    """Tab completion of the option's values (argcomplete reads `action.completer`)."""
    action.completer = completer  # type: ignore[attr-defined]


def complete_profiles(**_: Any) -> list[str]:
    from neuronforge.profiles.registry import profile_names

    return profile_names()


def complete_instances(**_: Any) -> list[str]:
    from neuronforge.spec.instances import INSTANCES

    return list(INSTANCES)


def add_target_args(p: argparse.ArgumentParser, spec: Any = None) -> None:
    """A flag for each target input `TargetSpec` (or `spec`) declares one for (`Declared.flag`), in its
    order, with its help; required when the field is. `--profile` defaults to the CLI's one default profile."""
    from neuronforge.spec.target import target_inputs

    for inp in target_inputs(spec).values():
        if inp.declared.flag is None:
            continue
        kwargs: dict[str, Any] = {"help": inp.declared.help}
        if inp.schema["type"] in ("integer", ["null", "integer"]):
            kwargs["type"] = int
        if "array" in inp.schema["type"]:
            kwargs.update(nargs="+", metavar=inp.declared.metavar)
        if inp.required:
            kwargs["required"] = True
        elif inp.name == "profile":
            kwargs.update(default=settings.default_profile(), help=_profile_help())
        elif isinstance(inp.default, int | str) and inp.declared.form_spelling is None:
            kwargs.update(default=inp.default, help=f"{inp.declared.help} (default {inp.default})")
        action = p.add_argument(inp.declared.flag, **kwargs)
        if inp.name == "profile":
            completes(action, complete_profiles)
        elif inp.declared.choices is not None:
            completes(action, _choices_completer(inp.declared.choices))


def _choices_completer(choices: Any) -> Any:
    """Tab completion of a declared input's choices (the instance types, the quantizations, ...)."""
    return lambda **_: [str(c) for c in choices() if c is not None]


def target_values(args: argparse.Namespace, spec: Any = None) -> dict[str, Any]:
    """What the target flags gave, under their fields' names (a flag left out: the field's default)."""
    from neuronforge.spec.target import target_inputs

    given = {inp.name: getattr(args, inp.dest) for inp in target_inputs(spec).values() if inp.dest}
    return {name: value for name, value in given.items() if value is not None}


def target_from_args(args: argparse.Namespace):
    """The target the flags give, validated and its profile pinned. A profile NEURONFORGE_PROFILE gave
    (the default of `--profile`) that the registry does not know is refused naming the variable
    (`settings.refused`): the command line the user typed does not say it."""
    from neuronforge.profiles import get_profile, parse_target

    values = target_values(args)
    current = settings.current()
    if current.from_env("profile") and values.get("profile") == current.profile:
        try:
            get_profile(current.profile)
        except InvalidInput as exc:
            raise InvalidInput(settings.refused("profile", current.profile, str(exc))) from None
    return parse_target(values)


def print_json(obj: Any) -> None:
    """`obj` as JSON on stdout; text a store held that cannot be encoded (a name that is not UTF-8) as
    its visible `\\xNN` escape (`stored_text.shown`), not a `\\udcNN` a reader would decode back."""
    from neuronforge.common.stored_text import shown_json

    print(json.dumps(shown_json(obj), indent=2, sort_keys=False))
