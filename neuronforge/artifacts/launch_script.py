"""The scripts a serving host runs are files of this package (`launch_templates/`), so `shellcheck` reads
them (`make lint`), and one function renders them: `render(template, **values)`.

A template names each value it takes as a placeholder, `@@NAME@@` or `@@NAME:kind@@`:

    @@NAME@@           one shell word: the value `shlex.quote`d (a store path, a channel's name, a
                       number), so whatever it holds reaches the shell as data — only ever where a word
                       goes (an assignment's value, an argument), never inside quotes. A value holding
                       a control character (a newline) or a byte that is not UTF-8 (a folder's name,
                       kept as `os.fsdecode` keeps it) is bash's `$'...'` instead: the script stays one
                       line per value and UTF-8 text (a ConfigMap holds it), and bash reads the bytes
    @@NAME:comment@@   text inside a `#` comment: a control character (a newline would end the comment and
                       start a command) is shown as its escape
    @@NAME:args@@      a command's words, one line per group (`Words`): each word quoted like the above,
                       unless it is `Shell` text the package itself wrote (`"$PORT"`, `"$@"`)

There is no kind that pastes a value into shell text: a script uses a value through the variable it is
assigned to (`store_uri=@@STORE@@`, then `"$store_uri"`), and its Python passes values as arguments.

A line `@@include FILE@@` puts another file of the package in its place: a shared part of the scripts
(`transfer.sh`, `env.sh`: templates too, their placeholders filled from the same values) or the fetcher's
source (`../launch_fetch.py`: text, which must hold no `@@`). A placeholder the caller does not give, and
a value the template does not use, are errors (a renamed placeholder cannot leave one unfilled or drop one
silently).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from functools import cache
from pathlib import Path

HERE = Path(__file__).parent
TEMPLATES = HERE / "launch_templates"
_PLACEHOLDER = re.compile(r"@@([A-Z][A-Z0-9_]*)(?::([a-z]+))?@@")
_INCLUDE = re.compile(r"^@@include ([A-Za-z0-9_./-]+)@@\n", re.MULTILINE)
KINDS = ("word", "comment", "args")
CONTINUED = " \\\n  "  # a command's lines: one group of words each


class Shell(str):
    """Shell text the package wrote (`"$PORT"`, `"$@"`): a word of a command put there as it is."""


Words = Sequence[Sequence[str]]


class TemplateError(ValueError):
    """A template and its values do not match: a programming error, never a user's."""


@cache
def _text(name: str) -> str:
    """The template (or included file) `name`, with its includes in place."""
    path = (TEMPLATES / name).resolve()
    if not path.is_relative_to(HERE) or not path.is_file():
        raise TemplateError(f"no launch template {name!r} in {TEMPLATES}")
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".sh":
        if "@@" in text:
            raise TemplateError(f"{name} is included as text and must hold no @@ (it would read as a placeholder)")
        return text
    return _INCLUDE.sub(lambda m: _text(m.group(1)), text)


def placeholders(template: str) -> dict[str, set[str]]:
    """Each placeholder of `template` (includes in place) -> the kinds it is used as."""
    used: dict[str, set[str]] = {}
    for m in _PLACEHOLDER.finditer(_text(template)):
        used.setdefault(m.group(1), set()).add(m.group(2) or "word")
    return used


def render(template: str, **values: object) -> str:
    """`template` (a script of `launch_templates/`) with every placeholder replaced by its value, as its
    kind says."""
    if "/" in template or not (TEMPLATES / template).is_file():
        raise TemplateError(f"no launch template {template!r} in {TEMPLATES}")
    used = placeholders(template)
    missing, unused = sorted(set(used) - set(values)), sorted(set(values) - set(used))
    if missing or unused:
        raise TemplateError(f"{template}: values not given {missing}, values it does not use {unused}")
    for name, kinds in used.items():
        if not kinds <= set(KINDS):
            raise TemplateError(f"{template}: @@{name}@@ is used as {sorted(kinds)}; the kinds are {KINDS}")
    return _PLACEHOLDER.sub(
        lambda m: _value(template, m.group(1), m.group(2) or "word", values[m.group(1)]), _text(template)
    )


def _value(template: str, name: str, kind: str, value: object) -> str:
    if kind == "args":
        if isinstance(value, str) or not all(
            isinstance(line, Sequence) and not isinstance(line, str) for line in value
        ):
            raise TemplateError(f"{template}: @@{name}:args@@ takes lines of words, not {value!r}")
        return command(value)
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise TemplateError(f"{template}: @@{name}@@ takes a string or an int, not {type(value).__name__}")
    text = str(value)
    if kind == "comment":
        return comment(text)
    return word(text)


def word(text: str) -> str:
    """`text` as one bash word that means exactly it (`shlex.quote`, or `$'...'` when it must be)."""
    if text.isprintable():
        return shlex.quote(text)
    return "$'" + "".join(_ansi_c(c) for c in text) + "'"


def _ansi_c(c: str) -> str:
    """One character inside bash's `$'...'`: a byte `os.fsdecode` kept as a surrogate is that byte again."""
    if "\udc80" <= c <= "\udcff":
        return f"\\x{ord(c) - 0xDC00:02x}"
    if c in "\\'":
        return "\\" + c
    return c if c.isprintable() else "".join(f"\\x{b:02x}" for b in c.encode())  # a byte, in any locale


def command(lines: Words) -> str:
    """A command's words, a line per group (`CONTINUED`): each quoted unless it is `Shell`."""
    return CONTINUED.join(" ".join(w if isinstance(w, Shell) else word(w) for w in line) for line in lines)


def comment(text: str) -> str:
    """`text` as it may stand in a `#` comment: every control character as its escape."""
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in text)
