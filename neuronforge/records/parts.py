"""Field types shared by the records: how a part of a record is read when the store may hold anything.

A record has a core a reader cannot do without (an artifact's cache key and file list) and parts it
only shows (a smoke summary, where each stage ran). The core is strict: a wrong type there makes the
whole record unreadable (`RecordError`). A shown part is tolerant: a wrong type costs that part —
its default — never the record, the page or the command (the rule of `neuronforge.common.stored_numbers`,
applied to whole parts).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictInt, StrictStr, ValidationError, WrapValidator


def _as_text(value: Any) -> Any:
    return value if isinstance(value, str) else str(value)


# Text as the readers have always taken it from a record: what is there, as text (a forged number or
# object is shown as the text it is, never trusted as anything else).
Text = Annotated[str, BeforeValidator(_as_text)]


def or_default(default: Callable[[], Any]) -> WrapValidator:
    """A tolerant part: the value when it validates, else `default()`."""

    def validate(value: Any, handler: Callable[[Any], Any]) -> Any:
        try:
            return handler(value)
        except ValidationError:
            return default()

    return WrapValidator(validate)


# A free-form object owned by a profile, a backend or a stage (its content varies with them).
AnyObject = Annotated[dict[str, Any], or_default(dict)]


class Part(BaseModel):
    """A typed part of a record: its known fields, and whatever else the writer put there kept as is."""

    model_config = ConfigDict(frozen=True, extra="allow")


class FileEntry(BaseModel):
    """One file of a published tree as its writer listed it: a path and a sha256 that are text, a
    size that is a whole JSON number (not a boolean, not `2.0`) — what readers add up and compare with
    the store's listing. Anything else makes the record that lists it unreadable."""

    model_config = ConfigDict(frozen=True, extra="allow", strict=True)

    path: StrictStr
    size: StrictInt = Field(ge=0)
    sha256: StrictStr
