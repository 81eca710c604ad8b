"""Field types shared by the records: how a part of a record is read when the store may hold anything.

A record has a core a reader cannot do without (an artifact's cache key and file list) and parts it
only shows (a smoke summary, where each stage ran). The core is strict: a wrong type there makes the
whole record unreadable (`RecordError`). A shown part is tolerant: a wrong type costs that part —
its default — never the record, the page or the command (the rule of `neuronforge.common.stored_numbers`,
applied to whole parts).

Numbers a reader computes with are bounded per field (`Timestamp`, `Expiry`, `Pid`, `Size`, `Seconds`,
`Count`): a JSON number (not a boolean, not text), finite, in the range the field can hold on any host.
Out of it, the record is damaged: a lease whose `started` is 1e300 would overflow `time.gmtime`, one
whose `pid` is -1 would make `kill -1` signal every process of the user.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StrictStr,
    ValidationError,
    WrapValidator,
    model_serializer,
)

from neuronforge.common.stored_json import INT_LIMIT


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


# -- bounded numbers -------------------------------------------------------------------------------
TIMESTAMP_MIN = 946_684_800.0  # 2000-01-01T00:00:00Z: before neuronforge, no clock of a host it ran on
TIMESTAMP_MAX = 4_102_444_800.0  # 2100-01-01T00:00:00Z: `time.gmtime` and every page render it
# The kernel's own limit on a PID (PID_MAX_LIMIT, 2**22 on 64-bit Linux: include/linux/threads.h); a
# host's /proc/sys/kernel/pid_max is at most this. A record may come from another host, so it is held
# to the limit of any host; advice that names a PID of this host checks this host's (`leases.pid_max`).
PID_LIMIT = 4_194_304
SECONDS_MAX = 1e9  # ~31 years: no duration a build records (a compile, a transfer, a heartbeat) comes near


def _number(value: Any) -> Any:
    """A JSON number as stored: an int or a float, never a boolean (an int to Python) or text."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"not a number ({type(value).__name__})")
    return value


def _epoch(value: float) -> float:
    if value != 0.0 and not TIMESTAMP_MIN <= value <= TIMESTAMP_MAX:
        raise ValueError(f"{value!r} is not 0 nor a time between 2000 and 2100 (epoch seconds)")
    return value


# Epoch seconds of a moment neuronforge saw (a lease taken, renewed): finite, 2000..2100.
Timestamp = Annotated[float, BeforeValidator(_number), Field(ge=TIMESTAMP_MIN, le=TIMESTAMP_MAX, allow_inf_nan=False)]
# A lease's expiry: a `Timestamp`, or 0.0 once released.
Expiry = Annotated[float, BeforeValidator(_number), Field(allow_inf_nan=False), AfterValidator(_epoch)]
# A process id as the kernel gives it: 1..PID_LIMIT (never 0 or -1, which `kill` reads as groups).
Pid = Annotated[int, Field(ge=1, le=PID_LIMIT, strict=True)]
# A size in bytes, a count, clock ticks: a whole number, 0 or more, within 64 bits.
Size = Annotated[int, Field(ge=0, lt=INT_LIMIT, strict=True)]
Count = Size
# A duration in seconds: finite, 0..SECONDS_MAX.
Seconds = Annotated[float, BeforeValidator(_number), Field(ge=0, le=SECONDS_MAX, allow_inf_nan=False)]


# A free-form object owned by a profile, a backend or a stage (its content varies with them).
AnyObject = Annotated[dict[str, Any], or_default(dict)]


class Part(BaseModel):
    """A typed part of a record: its known fields, and whatever else the writer put there kept as is."""

    model_config = ConfigDict(frozen=True, extra="allow")


class WrittenPart(Part):
    """A part written key for key as it was read or built: the fields given (and whatever else the
    writer put there), never defaults for the ones it lacked — a record of an older writer round-trips."""

    @model_serializer(mode="wrap")
    def _as_given(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out = handler(self)
        given = self.model_fields_set | set(self.model_extra or {})
        return {k: v for k, v in out.items() if k in given}


class FileEntry(BaseModel):
    """One file of a published tree as its writer listed it: a path and a sha256 that are text, a
    size that is a whole JSON number (not a boolean, not `2.0`) — what readers add up and compare with
    the store's listing. Anything else makes the record that lists it unreadable."""

    model_config = ConfigDict(frozen=True, extra="allow", strict=True)

    path: StrictStr
    size: Size
    sha256: StrictStr
