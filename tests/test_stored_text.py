"""The one rule for stored text (`common.stored_text`): what writers store always encodes, gives the
original back exactly, and leaves ordinary text as it was; what readers show never fails to encode."""

from __future__ import annotations

import os

import hypothesis.strategies as st
from hypothesis import given

from neuronforge.common.stored_text import SHOWN, original, shown, storable

# text rich in what the escapes are made of: backslashes, x/u/d, hex digits, lone surrogates, NUL
TRICKY = st.text(
    alphabet=st.sampled_from(["\\", "x", "u", "d", "8", "9", "a", "f", "0", "\udce9", "\ud812", "\x00", "é"])
)


@given(st.one_of(st.text(), TRICKY))
def test_storable_encodes_and_original_gives_the_text_back(text: str) -> None:
    stored = storable(text)
    stored.encode("utf-8")
    assert "\x00" not in stored
    assert original(stored) == text


@given(st.one_of(st.text(), TRICKY))
def test_shown_always_encodes_and_is_stable(text: str) -> None:
    shown(text).encode("utf-8")
    assert shown(shown(text)) == shown(text)
    assert text.encode("utf-8", SHOWN) == shown(text).encode("utf-8") or "\x00" in text


def test_a_name_that_is_not_utf8_is_shown_as_its_byte_and_its_bytes_come_back() -> None:
    name = os.fsdecode(b"/srv/models/caf\xe9")
    assert storable(name) == shown(name) == "/srv/models/caf\\xe9"
    assert os.fsencode(original(storable(name))) == b"/srv/models/caf\xe9"


def test_ordinary_text_is_stored_as_it_is() -> None:
    for text in ("org/model", "C:\\Users\\me", "a\\nb", "tpl{{7*7}}", "é ü 漢字"):
        assert storable(text) == text == original(text)
