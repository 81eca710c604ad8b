"""What a reader takes from a stored record's number fields (`neuronforge.common.stored_numbers`)."""

from __future__ import annotations

import pytest

from neuronforge.common.stored_numbers import finite, whole


@pytest.mark.parametrize(
    ("value", "minimum", "taken"),
    [
        (3, None, 3.0),
        (2.5, None, 2.5),
        (-1.5, None, -1.5),
        (-1.5, 0, None),
        (0, 0, 0.0),
        (float("nan"), None, None),
        (float("inf"), None, None),
        (True, None, None),
        ("12", None, None),
        (None, None, None),
        ([1], None, None),
    ],
)
def test_finite(value: object, minimum: float | None, taken: float | None) -> None:
    assert finite(value, minimum) == taken


@pytest.mark.parametrize(
    ("value", "taken"),
    [(0, 0), (368302, 368302), (-1, None), (2.0, None), (True, None), ("10", None), (None, None)],
)
def test_whole(value: object, taken: int | None) -> None:
    assert whole(value) == taken
