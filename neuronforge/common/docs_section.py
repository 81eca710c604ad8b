"""A generated section of a docs page: the text between two marker lines, rewritten from the code
that owns the facts (the settings model's tables, the error classes' table) and checked by a test
that renders it again. One way to find and replace it, for every page that has one."""

from __future__ import annotations

from pathlib import Path

from neuronforge.common.errors import InvalidInput


def section(text: str, begin: str, end: str) -> str:
    """The section of `text` from `begin` to `end`, markers included ("" if either is missing)."""
    start = text.find(begin)
    stop = text.find(end, start + len(begin)) if start >= 0 else -1
    return "" if stop < 0 else text[start : stop + len(end)]


def replaced(text: str, begin: str, end: str, block: str, where: object = "the page") -> str:
    """`text` with its section replaced by `block` (the new section, markers included)."""
    old = section(text, begin, end)
    if not old:
        raise InvalidInput(f"{where}: no lines {begin!r} … {end!r} to write the generated section between")
    return text.replace(old, block, 1)


def rewrite(page: Path, begin: str, end: str, block: str) -> bool:
    """Replace `page`'s section by `block` on disk; True if the page changed (InvalidInput when the
    markers are missing, naming the page)."""
    text = page.read_text()
    new = replaced(text, begin, end, block, page)
    page.write_text(new)
    return new != text
