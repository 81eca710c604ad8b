"""The bounds of stored JSON (`neuronforge.common.stored_json`): what `json` alone lets through — a
nesting that overflows its recursion, NaN, a float that overflows to infinity, a number `int` refuses,
UTF-16 — is refused as `Unreadable` with the reason, before anything recurses."""

from __future__ import annotations

import json
import time

import pytest

from neuronforge.common import stored_json
from neuronforge.common.stored_json import NotText, Unreadable, loads, too_deep


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "nests lists or objects more than 32 deep (at offset 32)"),
        (b'{"a": ' * 33 + b"1" + b"}" * 33, "more than 32 deep"),
        (b'{"t": NaN}', "holds NaN"),
        (b'{"t": -Infinity}', "holds -Infinity"),
        (b'{"t": 1e400}', "the number 1e400, which is not finite"),
        (b'{"pid": 1000000000000000000000000000000}', "100000000000…(31 digits), beyond the 64-bit"),
        (b'{"n": 9223372036854775808}', "beyond the 64-bit range"),
        (b'{"n": -9223372036854775809}', "beyond the 64-bit range"),
        (b'{"n": ' + b"7" * 5000 + b"}", "(5000 digits), beyond the 64-bit range"),
        (b"\xef\xbb\xbf{}", "byte-order mark"),
        ('{"a": 1}'.encode("utf-16"), "not UTF-8 (byte \\xff at offset 0)"),
        ('{"a": 1}'.encode("utf-32"), "not UTF-8 (byte \\xff at offset 0)"),
        (b'{"name": "caf\xe9"}', "not UTF-8 (byte \\xe9 at offset 13)"),
    ],
)
def test_outside_the_bounds_is_refused_with_the_reason(raw: bytes, words: str) -> None:
    with pytest.raises(Unreadable) as exc:
        loads(raw)
    assert words in str(exc.value)
    assert isinstance(exc.value, NotText) == ("UTF-8" in words or "byte-order" in words)


def test_within_the_bounds_it_is_json_as_written() -> None:
    value = {
        "deep": json.loads("[" * 31 + "]" * 31),
        "text": '[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[ \\" {{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{',
        "edges": [9223372036854775807, -9223372036854775808, 1.5e308, -0.0],
        "name": "café",
    }
    assert loads(json.dumps(value).encode()) == value


def test_a_size_cap_counts_bytes() -> None:
    raw = json.dumps({"x": "a" * 100}).encode()
    assert loads(raw, max_bytes=len(raw)) == {"x": "a" * 100}
    with pytest.raises(Unreadable, match="larger than the 100 bytes it may hold"):
        loads(raw, max_bytes=100)


def test_syntax_errors_stay_json_errors() -> None:
    with pytest.raises(json.JSONDecodeError):
        loads(b'{"a": ')


def test_the_nesting_scan_reads_strings_and_escapes_as_json_does() -> None:
    assert too_deep('["' + "[" * 100 + '"]') is None  # brackets inside a string
    assert too_deep('["\\\\", ' + "[" * 40 + "]" * 40 + "]") == 38  # the string "\\\\" ends where JSON ends it
    assert too_deep('["\\"' + "[" * 40 + '"]') is None  # an escaped quote does not end the string
    assert too_deep("[" * 5, max_depth=4) == 4


def test_the_scan_is_linear_on_hostile_text() -> None:
    hostile = ('"\\' * 1_000_000).encode()  # every quote escaped: one string that never ends
    started = time.monotonic()
    with pytest.raises(ValueError):
        loads(hostile, max_bytes=len(hostile))
    assert time.monotonic() - started < 2


def test_sizes_are_said_as_people_say_them() -> None:
    assert [stored_json.size(n) for n in (64 * 1024, 1 << 20, 1500)] == ["64 KiB", "1 MiB", "1500 bytes"]
