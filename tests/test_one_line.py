"""One rule for one-line text (`common.one_line`): C0, DEL, C1 (U+0085, the 8-bit ESC[ U+009B) and
Unicode's line and paragraph separators are refused everywhere a reason or a name is taken."""

from __future__ import annotations

import pytest

from neuronforge.common.errors import InvalidInput
from neuronforge.common.one_line import one_line
from neuronforge.farm.releases import ReleaseRequest

BREAKING = ["\n", "\r", "\x1b[31m", "\x7f", "\x85", "\x9b31m", "\u2028", "\u2029", "\x00"]


@pytest.mark.parametrize("bad", BREAKING, ids=[f"U+{ord(b[0]):04X}" for b in BREAKING])
def test_a_line_breaking_or_terminal_character_is_refused_in_one_line(bad: str) -> None:
    with pytest.raises(InvalidInput, match="holds a line break or control character") as caught:
        one_line("reason", f"ok{bad}forged")
    assert "\n" not in str(caught.value) and "\x1b" not in str(caught.value) and "\x9b" not in str(caught.value)
    request = ReleaseRequest(action="approve", build="a" * 12, reason=f"fine{bad}")
    with pytest.raises(InvalidInput, match="reason"):
        request.check()


def test_plain_text_of_any_script_passes_and_length_is_bounded() -> None:
    assert one_line("reason", "déjà vu · 数值 — ok") == "déjà vu · 数值 — ok"
    with pytest.raises(InvalidInput, match="501 characters long"):
        one_line("reason", "x" * 501)
