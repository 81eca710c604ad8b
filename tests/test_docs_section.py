"""The generated sections of the docs pages (configuration tables, error table): found and replaced
between their marker lines, and refused in one line when a page lost its markers."""

from __future__ import annotations

import pytest

from neuronforge.common.docs_section import replaced, section
from neuronforge.common.errors import InvalidInput

PAGE = "intro\n<!-- b -->\nold table\n<!-- e -->\noutro <!-- b --> mentioned again\n"


def test_the_section_is_the_first_begin_to_the_end_after_it() -> None:
    assert section(PAGE, "<!-- b -->", "<!-- e -->") == "<!-- b -->\nold table\n<!-- e -->"
    assert section("<!-- e --> before <!-- b -->", "<!-- b -->", "<!-- e -->") == ""  # an end only before it
    assert section("no markers", "<!-- b -->", "<!-- e -->") == ""


def test_replacing_keeps_everything_around_the_section() -> None:
    new = replaced(PAGE, "<!-- b -->", "<!-- e -->", "<!-- b -->\nnew\n<!-- e -->")
    assert new == "intro\n<!-- b -->\nnew\n<!-- e -->\noutro <!-- b --> mentioned again\n"


def test_a_page_without_its_markers_is_one_line_naming_the_page_and_the_markers() -> None:
    with pytest.raises(InvalidInput, match=r"^docs/x\.md: no lines '<!-- b -->' … '<!-- e -->' to write"):
        replaced("intro only\n", "<!-- b -->", "<!-- e -->", "x", "docs/x.md")
