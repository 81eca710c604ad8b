"""Which characters break a line or steer a terminal, and how a message shows them: the one rule that
`one_line` (text a person gives), the argument and setting checks and every error's line read.

The characters: the C0 controls (a newline, a tab, ESC), DEL, the C1 controls (U+0080–U+009F: U+0085
is a line break, U+009B the 8-bit ESC[ that starts a terminal sequence) and Unicode's line and paragraph
separators (U+2028, U+2029). Imports nothing of ours: `errors` renders its lines with it.
"""

from __future__ import annotations

SEPARATORS = frozenset({"\u2028", "\u2029"})


def breaks_line(c: str) -> bool:
    n = ord(c)
    return n < 0x20 or 0x7F <= n <= 0x9F or c in SEPARATORS


def escaped(text: str) -> str:
    """`text` on one line: each character that breaks it shown as its escape (`\\n`, `\\x1b`,
    `\\u2028`), as `repr` would, the rest as it is. A value a message names — a folder whose name holds
    a newline, which a file system allows — then stays in the message's one line and cannot steer the
    terminal that shows it."""
    if not any(breaks_line(c) for c in text):
        return text
    return "".join(repr(c)[1:-1] if breaks_line(c) else c for c in text)
