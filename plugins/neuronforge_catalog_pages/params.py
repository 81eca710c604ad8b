"""The catalog's query and path parameters, checked before the store is touched: each one taken as
text (FastAPI checks no type, so a bad value gets our sentence, not pydantic's) and refused with an
`InvalidInput` that names the parameter and what it takes (400, by the error policy)."""

from __future__ import annotations

import json
import re
from typing import Annotated

from fastapi import Depends, Query

from neuronforge.common import advice
from neuronforge.common.errors import InvalidInput
from neuronforge.farm.rows import KEY_MAX, KEY_MIN, FarmQuery, is_key
from neuronforge.spec.source import ModelSource

PER_PAGE, MAX_PER_PAGE = 50, 500  # rows per page view
API_LIMIT, MAX_API_LIMIT = 100, 1000  # rows per JSON answer
TEXT_LIMIT = 256  # characters of a filter (model substring, profile, instance, status) or a number
REASON_LIMIT = 500  # characters of a release action's reason (`common.one_line.MAX_CHARS`)


def shown_value(value: str) -> str:
    """A refused value as the sentence quotes it: at most 80 characters, in JSON quotes."""
    return json.dumps(value[:80] + ("..." if len(value) > 80 else ""))


def text(name: str, value: str | None, limit: int = TEXT_LIMIT) -> str | None:
    """A text query parameter of at most `limit` characters (absent or empty: None)."""
    if value is None or value == "":
        return None
    if len(value) > limit:
        raise InvalidInput(f"{name} is {len(value)} characters long; give at most {limit}.")
    return value


def whole(name: str, value: str | None, default: int, lo: int, hi: int | None = None) -> int:
    """A whole-number query parameter (absent or empty: `default`)."""
    value = text(name, value)
    if value is None or value.strip() == "":
        return default
    try:
        n: int | None = int(value.strip())
    except ValueError:
        n = None
    if n is None or n < lo or (hi is not None and n > hi):
        shown = value.strip() if value.strip().lstrip("-").isdigit() else shown_value(value)
        span = f"from {lo} to {hi}" if hi is not None else f"from {lo} up"
        raise InvalidInput(f"{name} = {shown} is not allowed; use a whole number {span}.")
    return n


def cache_key(key: str) -> str:
    """A cache key or a prefix of one (lower-cased), checked before the store is touched by the rule
    `farm.resolve_key` applies (`farm.is_key`). Nothing else reaches a store path."""
    lowered = key.lower()
    if not is_key(lowered):
        raise InvalidInput(
            f"key {shown_value(key)} is not a cache key: give {KEY_MIN} to {KEY_MAX} hex characters "
            f"of one ({advice.command('ls')} prints 12)."
        )
    return lowered


def is_hex(key: str) -> bool:
    return re.fullmatch(r"[0-9a-f]{1,64}", key) is not None


def after_key(value: str | None) -> str:
    """`start_after`: a cache key or a start of one (lower-cased hex, up to 64)."""
    value = text("start_after", value, 64)
    if value is None:
        return ""
    lowered = value.lower()
    if not is_hex(lowered):
        raise InvalidInput(f"start_after = {shown_value(value)} is not a cache key: give the previous page's last key.")
    return lowered


def farm_query(
    model: str | None = Query(None, description="the model (org/name), as the matrix names it"),
    profile: str | None = Query(None, description="a serving profile line"),
    instance: str | None = Query(None, description="an instance type"),
    status: str | None = Query(None, description="published, failed, building, deleted or damaged"),
) -> FarmQuery:
    """The filters every listing takes, as a `FarmQuery` (empty values: no filter); too long or an unknown
    status: refused. Declared once: a route takes them as `query: Filters`."""
    texts = {n: text(n, v) for n, v in (("model", model), ("profile", profile), ("instance", instance))}
    return FarmQuery(**texts, status=text("status", status))


Filters = Annotated[FarmQuery, Depends(farm_query)]  # a listing route's `query: Filters`


def model_param(model: str | None) -> str:
    """The `model` parameter as the one name records use (`ModelSource.name`)."""
    given = text("model", model)
    if given is None:
        raise InvalidInput("give the model: channels?model=org/name (the catalog's matrix links each model to it).")
    return ModelSource.parse(given).name
