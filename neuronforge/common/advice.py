"""The one way a message suggests a command: `command("rollback", model, profile=line, channel="stable")`.

A suggested command is a promise that following it, in the state the message describes, does what the
message says. Built here from that state rather than typed into an f-string:
- every value is shell-quoted (`shlex.join`): a model id, a path or a reason with a space or a quote
  stays one argument when pasted, and nothing in it runs;
- `--store URI` is added when the store the message is about is not the one the command would find by
  itself (NEURONFORGE_STORE, else the local store): advice read from a run on `--store s3://…` and pasted
  into another shell would otherwise look in the wrong store, and find nothing;
- the URI is masked as every line is (`common.secrets`): a store URI holding keys is never printed.

Tests run what they are told: each call site of `command` is named in a scenario that builds the state,
takes the suggestion from the message and runs it (`tests/advice/test_*.py`, listed and checked against
the call sites by `tests/advice/test_sites.py`). `recent()` is how a scenario sees which call site
produced a suggestion.
"""

from __future__ import annotations

import shlex
import sys
from collections import deque
from pathlib import Path

from neuronforge.common import settings
from neuronforge.common.errors import InvalidInput
from neuronforge.common.secrets import mask_credentials

PROGRAM = "neuronforge"

# (call site, command) of the last suggestions built in this process: bounded, so a long-lived worker
# that builds advice all day holds a few lines, not a history.
_RECENT: deque[tuple[str, str]] = deque(maxlen=32)


def command(verb: str, *args: object, store: str | None = None, **options: object) -> str:
    """The command, backticked for a message: `neuronforge VERB ARGS --option value …`.

    `verb` may be two words ("lease break"). An option's name is its flag with `-` as `_` (a trailing
    `_` dropped: `from_` is `--from`); None or False leaves it out, True gives the bare flag. `store`:
    the store the suggestion acts on; named only when it is not the default one."""
    parts = [PROGRAM, *verb.split(), *(str(a) for a in args)]
    for name, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + name.rstrip("_").replace("_", "-")
        parts += [flag] if value is True else [flag, str(value)]
    if store is not None and _same_place(store) != _same_place(_default_store()):
        parts += ["--store", mask_credentials(store)]
    text = shlex.join(parts)
    caller = sys._getframe(1)
    _RECENT.append((f"{caller.f_globals.get('__name__')}:{caller.f_code.co_qualname}", text))
    return f"`{text}`"


def recent() -> list[tuple[str, str]]:
    """(module:function that built it, command) of this process's last suggestions, oldest first."""
    return list(_RECENT)


def _same_place(uri: str) -> str:
    """`uri` as the store it opens: a path and its `file://` URI are one folder, resolved as the file store
    resolves it (`file:///tmp/x`, `/tmp/x/` and a symlink to it are the default store alike), so a message
    about the default store never names it; any other scheme as written, without a trailing `/`."""
    if "://" in uri and not uri.startswith("file://"):
        return uri.rstrip("/")
    try:
        return f"file://{Path(uri.removeprefix('file://')).expanduser().resolve()}"
    except (OSError, RuntimeError, ValueError):  # a NUL, a symlink loop: compared as written
        return uri.rstrip("/")


def _default_store() -> str:
    try:
        return settings.current().store_uri()
    except InvalidInput:  # a bad setting is refused where it is used; advice never adds a failure of its own
        return ""
