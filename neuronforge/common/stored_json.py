"""The one rule for turning stored bytes into JSON: what a store holds may be anything, so it is read
under bounds before a parser sees it, and anything outside them is refused in one line.

A store is written by neuronforge, but anyone who can write the bucket (or a disk error) can put
anything there, and every host that reads it — a serving host resolving a channel, the catalog page,
the scrub — must survive it. Python's `json` does not: 100 000 nested `[` raise `RecursionError` in
its C parser, `NaN` and `Infinity` parse (and `1e400` becomes `inf`), a 5000-digit number raises
`ValueError` from `int`, and bytes are decoded as UTF-16 or UTF-32 when they look like it. So, in order:

- **size**: at most the caller's `max_bytes` (each record kind says its own, `StoredRecord.MAX_BYTES`;
  a store read asks for no more than that, `ArtifactStore.read_capped`);
- **encoding**: strict UTF-8 (no byte-order mark, no UTF-16/32 guessing); the first byte that is not
  UTF-8 is named as its `\\xNN` escape, as `stored_text` shows a name that is not UTF-8;
- **nesting**: at most `max_depth` lists and objects inside each other (the web surface refuses a
  body nested deeper than 32 too), checked by a scan of the text that does not recurse, before
  `json.loads` (which does);
- **numbers**: finite (`NaN`, `Infinity`, `-Infinity` and a float that overflows to infinity are
  refused) and whole numbers within 64 bits (`INT_LIMIT`): no field of any record holds more, and a
  bound per field (a timestamp, a PID, a size) is the record's own (`records.parts`).

`Unreadable` (a `ValueError`) says which bound, with the value; the readers turn it into their
damaged-record error (`records.base.RecordError`, a farm-index page's unreadable row).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

MAX_DEPTH = 32  # lists and objects inside each other; the deepest record written is 7
DEFAULT_MAX_BYTES = 1024 * 1024  # a record of a kind that says nothing else (`StoredRecord.MAX_BYTES`)
INT_LIMIT = 2**63  # whole numbers are in [-INT_LIMIT, INT_LIMIT): a size, a count, a PID, a sequence number
_INT_DIGITS = len(str(INT_LIMIT))  # longer than this: out of range without converting it (`int` refuses 4300+)


class Unreadable(ValueError):
    """Stored bytes outside the bounds of stored JSON (see the module docstring): the reason, in words."""


class NotText(Unreadable):
    """Stored bytes that are not UTF-8 text (so not JSON at all, RFC 8259 section 8.1)."""


# What the scan looks at: a quote, a backslash (inside a string it escapes the next character) and the
# brackets; everything else is skipped by the regex engine, not a Python loop.
_SIGNIFICANT = re.compile(r'["\\\[\]{}]')


def too_deep(text: str, max_depth: int = MAX_DEPTH) -> int | None:
    """The offset where `text` (JSON, or not) opens its `max_depth + 1`-th nested list or object,
    outside strings; None when it never nests that deep. Iterative and linear in the text."""
    if text.count("[") + text.count("{") <= max_depth:  # nearly every record: nothing to scan
        return None
    depth = 0
    in_string = False
    skip_to = 0  # an escaped character inside a string: its position is not significant
    for m in _SIGNIFICANT.finditer(text):
        at = m.start()
        if at < skip_to:
            continue
        c = m[0]
        if in_string:
            if c == "\\":
                skip_to = at + 2
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "[{":
            depth += 1
            if depth > max_depth:
                return at
        elif c in "]}":
            depth = max(depth - 1, 0)
    return None


def _no_constant(name: str) -> Any:
    raise Unreadable(f"it holds {name}, which is not a number JSON allows")


def _whole(text: str) -> int:
    digits = text.lstrip("-")
    value = int(text) if len(digits) <= _INT_DIGITS else None
    if value is None or not -INT_LIMIT <= value < INT_LIMIT:
        shown = text if len(text) <= 24 else f"{text[:12]}…({len(digits)} digits)"
        raise Unreadable(f"it holds the number {shown}, beyond the 64-bit range any field of it takes")
    return value


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise Unreadable(f"it holds the number {text[:24]}, which is not finite")
    return value


def not_utf8(raw: bytes) -> str | None:
    """Why `raw` is not strict UTF-8 text without a byte-order mark, naming the first bad byte, or None."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"it is not UTF-8 (byte \\x{raw[exc.start]:02x} at offset {exc.start})"
    if raw.startswith(b"\xef\xbb\xbf"):
        return "it starts with a byte-order mark (neuronforge writes plain UTF-8)"
    return None


def loads(raw: bytes, max_bytes: int = DEFAULT_MAX_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    """`raw` parsed as stored JSON within the bounds (module docstring); `Unreadable` says which it
    breaks. Syntax errors stay `json.JSONDecodeError` (a `ValueError` too): callers catch `ValueError`."""
    if len(raw) > max_bytes:
        raise Unreadable(f"it is larger than the {size(max_bytes)} it may hold")
    reason = not_utf8(raw)
    if reason is not None:
        raise NotText(reason)
    text = raw.decode("utf-8")
    at = too_deep(text, max_depth)
    if at is not None:
        raise Unreadable(f"it nests lists or objects more than {max_depth} deep (at offset {at})")
    return json.loads(text, parse_constant=_no_constant, parse_int=_whole, parse_float=_finite)


def size(n: int) -> str:
    """A byte count as the bounds are said: 1 MiB, 64 KiB, 1500 bytes."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} bytes"
