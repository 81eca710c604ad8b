"""The `transfers` part of an artifact manifest: every byte its build moved, stage by stage.

Each entry is one measured transfer (`neuronforge.common.transfers.Transfer`, timed around the real
call) with the stage that made it: the checkpoint's download (Hub or S3) and upload into the store,
a compile-cache sync, the payload's upload, each stage's download of what an earlier stage stored.
`neuronforge show` prints one line each (`describe`). A shown part: an entry of the wrong shape reads
as absent (the manifest still reads), and a manifest written before transfers were recorded reads
with none — the manifest's schema did not change (an added shown part; older readers ignore it).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field, ValidationError

from neuronforge.common.transfers import DOWNLOAD, Transfer, size
from neuronforge.records.parts import Count, Part, Seconds, Size, Text


class TransferRecord(Part):
    """One transfer of one stage, as measured."""

    stage: Text = ""  # the pipeline stage that made it (fetch_checkpoint, compile_graphs, smoke, ...)
    direction: Text = ""  # upload | download
    where: Text = ""  # the store URI of the prefix or object, or hf://org/name@revision
    bytes: Size
    files: Count = 0
    seconds: Seconds
    mbs: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 0.0  # 10^6 bytes per second
    client: Text = ""  # s3 crt, s3 boto3, file, huggingface_hub <version> [+ hf_xet]
    concurrency: Count = 0
    part_size: Size = 0  # bytes (0: whole objects)

    @classmethod
    def of(cls, stage: str, t: Transfer) -> TransferRecord:
        return cls(
            stage=stage,
            direction=t.direction,
            where=t.where,
            bytes=t.bytes,
            files=t.files,
            seconds=round(t.seconds, 3),
            mbs=round(t.mbs, 1),
            client=t.client,
            concurrency=t.concurrency,
            part_size=t.part_size,
        )

    def line(self) -> str:
        """One line for people: stage, what, bytes, rate, client."""
        arrow = "from" if self.direction == DOWNLOAD else "to"
        files = f"{self.files} file{'s' if self.files != 1 else ''}"
        return (
            f"{self.stage or '?'}: {self.direction} {size(self.bytes)} ({files}) {arrow} {self.where}, "
            f"{self.mbs:.0f} MB/s in {self.seconds:.1f}s ({self.client or '?'})"
        )


def _entries(value: Any) -> list[TransferRecord]:
    """A list as stored, keeping the entries that read (a forged one costs itself, not the list)."""
    if not isinstance(value, list):
        return []
    out = []
    for item in value:
        try:
            out.append(TransferRecord.model_validate(item))
        except ValidationError:
            continue
    return out


# The manifest's field type: a list of transfers, each entry read on its own.
Transfers = Annotated[list[TransferRecord], BeforeValidator(_entries)]


def describe(transfers: list[TransferRecord]) -> list[str]:
    """`show`'s lines: one per transfer, then the total when there are several."""
    lines = [t.line() for t in transfers]
    if len(transfers) > 1:
        moved = sum(t.bytes for t in transfers)
        seconds = sum(t.seconds for t in transfers)
        lines.append(f"total: {size(moved)} moved in {seconds:.1f}s")
    return lines
