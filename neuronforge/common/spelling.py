"""A misspelt name gets the name it was probably meant to be: one rule for every place that refuses a
key it does not know (a DAG's conf keys, a target's fields wherever a target is written: the form's
`targets` JSON, a catalog, a request), so `instnace` is answered with `instance_type` everywhere."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

CUTOFF = 0.6  # difflib's default: `target` -> `targets`, `dryrun` -> `dry_run`, `instnace` -> `instance_type`
LONGEST = 64  # characters of an unknown name compared (a 1 MiB key costs no more than a short one)


def closest(name: str, known: Iterable[str]) -> str | None:
    """The known name `name` most likely misspells, or None when none is close."""
    found = difflib.get_close_matches(str(name)[:LONGEST], sorted(known), n=1, cutoff=CUTOFF)
    return found[0] if found else None


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """` (did you mean 'x'?)` to append to a refusal of `name`, or "" when no known name is close."""
    found = closest(name, known)
    return f" (did you mean '{found}'?)" if found else ""
