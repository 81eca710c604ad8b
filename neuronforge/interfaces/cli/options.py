"""What several commands share: the target flags (declared once, by `TargetSpec`), the store argument and
its default, the work dir, tab completion of values, JSON output. Every command that takes a target defaults
to the same serving profile (`settings.default_profile()`: NEURONFORGE_PROFILE, else `cpu`); every command
that reads or writes a store defaults to the same store (`settings.store_uri()`: NEURONFORGE_STORE, else the
local store under NEURONFORGE_HOME)."""

from __future__ import annotations

import argparse
import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from neuronforge.common import advice, settings
from neuronforge.common.errors import InvalidInput

if TYPE_CHECKING:
    from neuronforge.stores import ArtifactStore

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
        p.add_argument(
            "store_pos", nargs="?", type=location, metavar="STORE", help=store_help("store URI, the same as --store")
        )
    p.add_argument("--store", dest="store_opt", type=location, metavar="URI", help=store_help())


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


def opened_store(uri: str | None, *, must_exist: bool = True, probe: bool = True) -> ArtifactStore:
    """The CLI's one place that opens the artifact store: `uri` is `args.store` (`resolve_store`: given,
    else NEURONFORGE_STORE, else the local store). `must_exist` for a command that only reads (reading
    never creates a store); `probe=False` for one counted in requests, whose first read says the same."""
    from neuronforge.stores import open_store

    return open_store(settings.store_uri(uri), must_exist=must_exist, probe=probe)


def _profile_help() -> str:
    return (
        f"serving profile: the stack that will load the artifact ({advice.command('profiles')} lists them; default: "
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
            kwargs["type"] = integer
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


# -- values of the commands' own options, each declared once with its rule --------------------------
TEXT_MAX_CHARS = 4096  # PATH_MAX: no name, path, key or reason an argument gives is longer


def text(raw: str) -> str:
    """The value of every argument that declares no rule of its own (`parser.Parser` gives it this one): a
    name, a path, a key, a reason. Not empty (leave the option out instead), one line — no C0 or C1
    control, DEL or Unicode line separator (`line_breaks.breaks_line`): a NUL would reach a file name, a
    newline a record or a log line — and at most TEXT_MAX_CHARS characters. Checked by argparse, before any
    work. A store's place has its own rule (`location`)."""
    from neuronforge.common.line_breaks import breaks_line

    _given(raw)
    if any(breaks_line(c) for c in raw):
        raise argparse.ArgumentTypeError(f"{raw[:60]!r} holds a line break or control character; give one line")
    return raw


def _given(raw: str) -> None:
    """What every text value is checked for (`text`, `location`): not empty, at most TEXT_MAX_CHARS."""
    if not raw.strip():
        raise argparse.ArgumentTypeError(
            f"{raw!r} is empty (an unset variable?): give a value, or leave the argument out"
        )
    if len(raw) > TEXT_MAX_CHARS:
        raise argparse.ArgumentTypeError(f"{raw[:40]!r}... is {len(raw)} characters long; at most {TEXT_MAX_CHARS}")


def location(raw: str) -> str:
    """A store's place (`--store`, STORE): a path or URI as the file system allows it. Not empty, no NUL
    (no file name holds one), at most TEXT_MAX_CHARS characters; unlike `text`, a line break or a control
    character is taken: a folder may be named so, and a serving host's store is whatever it was set up
    with. A store names itself escaped on a message's one line (`ArtifactStore.shown_uri`), every command
    a message suggests quotes it as a shell word (`common.advice`)."""
    _given(raw)
    if "\0" in raw:
        raise argparse.ArgumentTypeError(f"{raw[:60]!r} holds a NUL character, which no file name holds")
    return raw


def integer(raw: str) -> int:
    """A target flag's whole number (`--tp`, `--seq-len`, ...) in ASCII digits; its range is the field's
    own rule (`TargetSpec`), checked after. `int` would take `²` or `٣`."""
    text = raw.strip()
    if not re.fullmatch(r"[+-]?[0-9]{1,19}", text):
        raise argparse.ArgumentTypeError(f"{raw[:40]!r} is not a whole number (ASCII digits)")
    return int(text)


integer.__name__ = "whole number"


def whole(low: int, high: int, what: str = "") -> Callable[[str], int]:
    """An option's whole number in [low, high]: ASCII digits only (`int` would take `²` or `٣`, and a
    5 000-digit number it refuses only with its own error), checked before any work (argparse: exit 2)."""

    def parse(raw: str) -> int:
        try:
            value = integer(raw)
        except argparse.ArgumentTypeError:
            value = None
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{raw[:40]!r} is not a whole number from {low} to {high}{what}")
        return value

    parse.__name__ = "whole number"
    return parse


def number(low: float, high: float, what: str = "") -> Callable[[str], float]:
    """An option's finite number in (low, high] (nan, inf and 1e400 refused)."""

    def parse(raw: str) -> float:
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and low < value <= high):
            raise argparse.ArgumentTypeError(f"{raw[:40]!r} is not a number above {low:g} and at most {high:g}{what}")
        return value

    parse.__name__ = "number"
    return parse


def sdk_release(raw: str) -> str:
    """A Neuron SDK release as given on the command line (2.33 or 2.33.1), by the release records' own
    rule (`records.sdk_release.VERSION`: ASCII digits, bounded), before any work."""
    from neuronforge.records.sdk_release import VERSION

    if not VERSION.fullmatch(raw.strip()):
        raise argparse.ArgumentTypeError(f"{raw[:40]!r} is not a Neuron SDK release: give it as 2.33 or 2.33.1")
    return raw.strip()


def name_value(raw: str) -> tuple[str, str]:
    """`NAME=VALUE` (a package and its version): both parts given, each text."""
    name, eq, value = text(raw).partition("=")
    if not (eq and name.strip() and value.strip()):
        raise argparse.ArgumentTypeError(f"{raw[:40]!r} is not NAME=VALUE")
    return name.strip(), value.strip()


def json_file(raw: str) -> Any:
    """A JSON file a user gives, read as any stored JSON is (`stored_json.loads`: strict UTF-8, bounded
    size and nesting, finite numbers) when the arguments are parsed: a missing file, a folder or bad JSON
    is one usage line naming the argument."""
    from neuronforge.common import stored_json

    path = Path(text(raw)).expanduser()
    try:
        return stored_json.loads(path.read_bytes())
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"{raw[:60]!r}: {exc.strerror}") from None
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{raw[:60]!r} is no JSON file: {exc}") from None


def target_field(name: str) -> Callable[[str], Any]:
    """One value of the target field `name`, checked by the field's own rule (`TargetSpec`): what a
    sweep's lists take, item by item, so `--seq-lens 4` fails as `--seq-len 4` does."""

    def parse(raw: str) -> Any:
        from pydantic import TypeAdapter, ValidationError

        from neuronforge.spec.target import TargetSpec

        info = TargetSpec.model_fields[name]
        try:
            return TypeAdapter(Annotated[info.annotation, *info.metadata]).validate_python(raw, strict=False)
        except ValidationError as exc:
            said = exc.errors()[0]["msg"]
            raise argparse.ArgumentTypeError(f"{raw[:40]!r}: {said} ({name})") from None

    parse.__name__ = name
    return parse
