"""Write HF-style sharded safetensors tensor by tensor, with bounded memory.

`safetensors.torch.save_file` takes a whole state dict: writing a 10 GB shard that way holds
10 GB. Here the layout of every shard (names, dtypes, shapes, byte offsets) is planned first from
shapes alone, each file's header is written up front, and tensor data is then appended chunk by
chunk in the planned order, hashed (sha256) as it is written. The result is ordinary safetensors
(8-byte little-endian header size, JSON header padded to 8 bytes, one contiguous byte buffer) that
`safetensors.safe_open` reads; tests check it does.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import struct
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from math import prod
from pathlib import Path

import torch

from neuronforge.common.errors import InvalidInput

DTYPE_NAMES: dict[torch.dtype, str] = {
    torch.float32: "F32",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.int8: "I8",
    torch.float8_e4m3fn: "F8_E4M3",
    torch.float8_e5m2: "F8_E5M2",
}
INDEX = "model.safetensors.index.json"


@dataclass
class PlannedTensor:
    name: str
    dtype: torch.dtype
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return prod(self.shape) * self.dtype.itemsize


@dataclass
class Shard:
    file: str
    tensors: list[PlannedTensor] = field(default_factory=list)

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in self.tensors)


def plan_shards(tensors: Iterable[PlannedTensor], max_shard_bytes: int) -> list[Shard]:
    """Tensors in order into shards of at most `max_shard_bytes` (a bigger tensor gets its own)."""
    shards: list[Shard] = []
    for t in tensors:
        if not shards or (shards[-1].tensors and shards[-1].nbytes + t.nbytes > max_shard_bytes):
            shards.append(Shard(""))
        shards[-1].tensors.append(t)
    for i, shard in enumerate(shards, 1):
        shard.file = "model.safetensors" if len(shards) == 1 else f"model-{i:05d}-of-{len(shards):05d}.safetensors"
    return shards


def header_bytes(shard: Shard) -> bytes:
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for t in shard.tensors:
        header[t.name] = {
            "dtype": DTYPE_NAMES[t.dtype],
            "shape": list(t.shape),
            "data_offsets": [offset, offset + t.nbytes],
        }
        offset += t.nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw


class ShardWriter:
    """Appends the planned tensors of one shard, in order, checking each tensor's byte count."""

    def __init__(self, folder: Path, shard: Shard, depth: int = 2) -> None:
        self.shard = shard
        self.path = folder / shard.file
        self._f = open(self.path, "wb")  # noqa: SIM115 - closed in close()
        self.sha256 = hashlib.sha256()
        # Writing and hashing run on a thread (both release the GIL) while the caller computes the
        # next chunk; `depth` chunks at most wait in between, which bounds the memory it adds.
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()
        self._write(header_bytes(shard))
        self._next = 0
        self._written = 0

    def _drain(self) -> None:
        while (data := self._queue.get()) is not None:
            try:
                if self._error is None:
                    self._f.write(data)
                    self.sha256.update(data)
            except BaseException as exc:  # reported by the caller's next write or close
                self._error = exc
            finally:
                self._queue.task_done()
        self._queue.task_done()

    def _write(self, data) -> None:
        if self._error is not None:
            raise self._error
        self._queue.put(data)

    def begin(self, name: str) -> PlannedTensor:
        planned = self.shard.tensors[self._next]
        if planned.name != name:
            raise InvalidInput(f"{self.shard.file}: expected tensor {planned.name!r} next, got {name!r}")
        self._written = 0
        return planned

    def write(self, chunk: torch.Tensor) -> None:
        """Append a chunk (rows of the current tensor, in the planned dtype)."""
        planned = self.shard.tensors[self._next]
        if chunk.dtype != planned.dtype:
            raise InvalidInput(f"{planned.name}: chunk dtype {chunk.dtype} != planned {planned.dtype}")
        data = chunk.contiguous().reshape(-1).view(torch.uint8).numpy()
        self._write(data)
        self._written += data.nbytes

    def end(self) -> None:
        planned = self.shard.tensors[self._next]
        if self._written != planned.nbytes:
            raise InvalidInput(f"{planned.name}: wrote {self._written} bytes, planned {planned.nbytes}")
        self._next += 1

    def _stop(self) -> None:
        if not self._f.closed:
            self._queue.put(None)
            self._thread.join()
            self._f.close()

    def abort(self) -> None:
        """Stop the writer thread and close the file (after an error elsewhere); idempotent."""
        self._stop()

    def close(self) -> str:
        """Close the file; returns its sha256. Every planned tensor must have been written."""
        self._stop()
        if self._error is not None:
            raise self._error
        if self._next != len(self.shard.tensors):
            raise InvalidInput(f"{self.shard.file}: {len(self.shard.tensors) - self._next} tensors never written")
        return self.sha256.hexdigest()


def write_index(folder: Path, shards: list[Shard]) -> None:
    """`model.safetensors.index.json` as transformers writes it (only when there are several shards)."""
    if len(shards) < 2:
        return
    index = {
        "metadata": {"total_size": sum(s.nbytes for s in shards)},
        "weight_map": {t.name: s.file for s in shards for t in s.tensors},
    }
    (folder / INDEX).write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")


TORCH_DTYPES = {name: dtype for dtype, name in DTYPE_NAMES.items()}


@dataclass(frozen=True)
class StoredTensor:
    name: str
    dtype: torch.dtype
    shape: tuple[int, ...]
    start: int  # absolute byte offset in the file
    end: int


def read_layout(path: Path) -> dict[str, StoredTensor]:
    """Every tensor's dtype, shape and absolute byte range in a safetensors file (header only)."""
    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
    header.pop("__metadata__", None)
    base = 8 + size
    out = {}
    for name, h in header.items():
        if h["dtype"] not in TORCH_DTYPES:
            raise InvalidInput(f"{path.name}: tensor {name} has dtype {h['dtype']}, which neuronforge does not stream")
        begin, end = h["data_offsets"]
        out[name] = StoredTensor(name, TORCH_DTYPES[h["dtype"]], tuple(h["shape"]), base + begin, base + end)
    return out


def read_rows(f, t: StoredTensor, r0: int, r1: int) -> torch.Tensor:
    """Rows [r0, r1) of a stored tensor, read with plain file reads into fresh memory: no mmap, so
    the process's resident memory holds only this chunk, never the file's pages."""
    if not t.shape:
        r0, r1, row_bytes = 0, 1, t.end - t.start
    else:
        row_bytes = (t.end - t.start) // max(1, t.shape[0])
    buf = bytearray((r1 - r0) * row_bytes)
    offset, view = t.start + r0 * row_bytes, memoryview(buf)
    while view:
        n = os.preadv(f.fileno(), [view], offset)  # positioned read: no seek, no userspace buffer
        if not n:
            raise InvalidInput(f"{t.name}: the file ended inside the tensor (truncated shard)")
        view, offset = view[n:], offset + n
    flat = torch.frombuffer(buf, dtype=torch.uint8).view(t.dtype) if buf else torch.empty(0, dtype=t.dtype)
    return flat.reshape((r1 - r0, *t.shape[1:]) if t.shape else ())
