"""Numbers as records read back from the store hold them. A reader takes a value only when it is what
the writer writes — a JSON number, finite, in range — because a damaged or forged record may hold a
string, a boolean (an `int` to Python), NaN or a negative there, and one such value must cost the
reader that value, not the page or the command."""

from __future__ import annotations

import math
from typing import Any


def finite(value: Any, minimum: float | None = None) -> float | None:
    """`value` as a float when it is a finite JSON number (at least `minimum`), else None."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        return None
    return float(value) if minimum is None or value >= minimum else None


def whole(value: Any, minimum: int = 0) -> int | None:
    """`value` when it is a whole JSON number (not a boolean, not `2.0`) of at least `minimum`, else None."""
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        return None
    return value
