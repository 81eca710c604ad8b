"""The one rule for text that a store keeps or a page shows: it can always be encoded as UTF-8.

A folder name that is not UTF-8 reaches Python as a lone surrogate (`os.fsdecode(b"caf\\xe9")` is
`"caf\\udce9"`); stored as it is, every page and JSON answer that shows it fails to encode (issue
39). Writers store names through `storable`, readers show stored text through it, and `original`
gives the name back:

- a byte that was not UTF-8 (U+DC80..U+DCFF, what `surrogateescape` makes of it) is written `\\xNN`
  (lower-case hex), any other lone surrogate `\\udNNN`, a NUL `\\x00`: what a person sees is the
  byte, escaped, and no record a writer stores holds a NUL (one that does was not written by one:
  `StoredRecord.from_bytes` refuses it as damaged);
- a backslash that a reader could take for the start of such an escape (one followed by a
  backslash, a lone surrogate, a NUL, `x00`, `xNN` with NN from 80 to ff, or `udNNN`) is doubled,
  so the escaped form is unambiguous and `original(storable(s)) == s` for every `s`;
- everything else is kept as it is: text without a backslash or a lone surrogate (nearly all text)
  is returned unchanged, so this is a no-op on what stores held before.

`os.fsencode(original(name))` is the name's bytes on disk.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable
from typing import Any

_LONE = re.compile(r"[\ud800-\udfff\x00]")  # lone surrogates, and NUL
# A backslash that `original` would read as the start of an escape, as it stands in the original text.
_AMBIGUOUS = re.compile(r"\\(?=[\\\ud800-\udfff\x00]|x(?:[89a-f][0-9a-f]|00)|ud[89a-f][0-9a-f]{2})")
_ESCAPE = re.compile(r"\\(\\|x(?:[89a-f][0-9a-f]|00)|ud[89a-f][0-9a-f]{2})")


def _escaped(m: re.Match[str]) -> str:
    code = ord(m[0])
    if code == 0:
        return "\\x00"
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def storable(text: str) -> str:
    """`text` as it can be stored and shown: lone surrogates and NUL escaped (see the module docstring)."""
    if "\\" not in text and not _LONE.search(text):
        return text
    return _LONE.sub(_escaped, _AMBIGUOUS.sub(r"\\\\", text))


def _unescaped(m: re.Match[str]) -> str:
    body = m[1]
    if body == "\\":
        return "\\"
    if body == "x00":
        return "\x00"
    if body[0] == "x":
        return chr(0xDC00 + int(body[1:], 16))
    return chr(int(body[1:], 16))


def original(text: str) -> str:
    """The text `storable` was given (a name's surrogate-escaped form: `os.fsencode` gives its bytes)."""
    return _ESCAPE.sub(_unescaped, text) if "\\" in text else text


def _mapped(value: Any, text: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return text(value)
    if isinstance(value, dict):
        return {text(k) if isinstance(k, str) else k: _mapped(v, text) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_mapped(v, text) for v in value]
    return value


def storable_json(value: Any) -> Any:
    """`value` (JSON about to be written) with every string, keys included, `storable`."""
    return _mapped(value, storable)


def original_json(value: Any) -> Any:
    """`value` (JSON as read from a store) with every string, keys included, `original`."""
    return _mapped(value, original)


# -- showing ---------------------------------------------------------------------------------------
def shown(text: str) -> str:
    """Stored (untrusted) text as a page, a JSON answer or a terminal shows it: lone surrogates as
    their `\\xNN` escape, NUL as `\\x00`, the rest as it is (already escaped text is not escaped
    again). Never fails: whatever a record holds, the page renders."""
    return _LONE.sub(_escaped, text) if _LONE.search(text) else text


def shown_json(value: Any) -> Any:
    """`value` with every string, keys included, `shown`."""
    return _mapped(value, shown)


def _shown_error(exc: UnicodeError) -> tuple[str, int]:
    """A codec error handler (`SHOWN`): what cannot be encoded becomes `shown`'s escape (a lone
    surrogate: the byte it stands for), and a character the stream's encoding lacks (`·` or `é` on an
    ASCII terminal, `LC_ALL=C`) its `\\xNN`/`\\uNNNN` escape — never an error."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    part = shown(exc.object[exc.start : exc.end])
    return part.encode("ascii", "backslashreplace").decode("ascii"), exc.end


SHOWN = "neuronforge-shown"  # `text.encode("utf-8", SHOWN)`, `stream.reconfigure(errors=SHOWN)`
codecs.register_error(SHOWN, _shown_error)


def nul_in(value: Any, where: str = "") -> str | None:
    """Where the first NUL character of `value` (parsed JSON) is, e.g. "model", else None: no writer of
    the pipeline stores one (no name or message holds it), so a record that does is damaged."""
    if isinstance(value, str):
        return where or "(text)" if "\x00" in value else None
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    else:
        return None
    for k, v in items:
        name = f"{where}.{k}" if where else str(k)
        if isinstance(k, str) and "\x00" in k:
            return name
        found = nul_in(v, name)
        if found is not None:
            return found
    return None
