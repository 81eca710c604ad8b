"""The one rule for text a person gives that is shown on one line — a reason, a name given with
`--by`: in a channel's history, a review, a release decision, a page, a log line. It may not hold a
character that breaks the line or steers a terminal: the C0 controls (a newline, ESC), DEL, the C1
controls (U+0080–U+009F: U+0085 is a line break, U+009B the 8-bit ESC[ that starts a terminal
sequence) and Unicode's line and paragraph separators (U+2028, U+2029), nor be longer than a line.
"""

from __future__ import annotations

from neuronforge.common.errors import InvalidInput
from neuronforge.common.line_breaks import breaks_line

__all__ = ["MAX_CHARS", "breaks_line", "one_line"]

MAX_CHARS = 500


def one_line(what: str, text: str, max_chars: int = MAX_CHARS) -> str:
    """`text` when it is one line of at most `max_chars` characters; InvalidInput naming `what` otherwise."""
    if len(text) > max_chars:
        raise InvalidInput(f"{what} is {len(text)} characters long; keep it under {max_chars}")
    if any(breaks_line(c) for c in text):  # `repr` shows each such character as its escape
        raise InvalidInput(f"{what} {text[:60]!r} holds a line break or control character; give one line of text")
    return text
