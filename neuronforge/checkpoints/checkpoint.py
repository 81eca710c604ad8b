"""Checkpoint verification: run before anything else touches a fetched checkpoint.

Checks, each failing with a `CheckpointError` that names the file and the fix:
- `config.json` exists and names an architecture neuronforge knows;
- every `*.safetensors` header parses, its tensors' byte ranges match dtype × shape, tile the data
  section without gaps or overlaps, and end exactly at the end of the file (a truncated or padded
  file fails), and the safetensors library itself opens the file;
- `model.safetensors.index.json`, when present, names only files that exist, and maps every tensor
  found in the shards to the shard that holds it;
- tensor shapes agree with the config (embeddings, attention and MLP projections, layer count);
- pickle weights (`*.bin`, `*.pt`) are refused unless explicitly allowed, and then converted to
  safetensors with `torch.load(weights_only=True)` (no code execution).
"""

from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass, field
from math import prod
from pathlib import Path
from typing import Any

from neuronforge.common.errors import CheckpointError, InvalidInput
from neuronforge.spec.modelconfig import ModelArch, load_config
from neuronforge.spec.source import is_pickle_file, select_checkpoint_files

# bytes per element, per the safetensors spec
SAFETENSORS_DTYPES: dict[str, float] = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "I16": 2, "U16": 2, "F16": 2,
    "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8,
}  # fmt: skip
FLOAT_DTYPES = {"F16": "float16", "BF16": "bfloat16", "F32": "float32", "F64": "float64"}
INDEX = "model.safetensors.index.json"
MAX_HEADER = 100 * 1024 * 1024


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str
    shape: tuple[int, ...]
    file: str

    @property
    def numel(self) -> int:
        return prod(self.shape)


@dataclass
class VerifiedCheckpoint:
    folder: Path
    config: dict[str, Any]
    arch: ModelArch
    tensors: dict[str, TensorInfo]
    warnings: list[str] = field(default_factory=list)


def read_safetensors_header(path: Path) -> dict[str, TensorInfo]:
    """Parse and check a safetensors header against the file (format: u64 LE header length,
    JSON header, data section)."""
    name = path.name
    size = path.stat().st_size
    if size < 8:
        raise CheckpointError(f"{name}: {size} bytes is too short to be a safetensors file")
    with open(path, "rb") as f:
        (hlen,) = struct.unpack("<Q", f.read(8))
        if hlen > MAX_HEADER or 8 + hlen > size:
            raise CheckpointError(
                f"{name}: header length {hlen} exceeds the file ({size} bytes): truncated or not safetensors"
            )
        raw = f.read(hlen)
    try:
        header = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{name}: header is not valid JSON ({exc})") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{name}: header is not a JSON object")
    header.pop("__metadata__", None)
    data_len = size - 8 - hlen
    tensors: dict[str, TensorInfo] = {}
    ranges = []
    for tname, meta in header.items():
        try:
            dtype, shape, (start, end) = meta["dtype"], tuple(meta["shape"]), meta["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise CheckpointError(f"{name}: tensor {tname!r} has a malformed header entry") from None
        if dtype not in SAFETENSORS_DTYPES:
            raise CheckpointError(f"{name}: tensor {tname!r} has unknown dtype {dtype!r}")
        expected = int(prod(shape) * SAFETENSORS_DTYPES[dtype])
        if end - start != expected:
            raise CheckpointError(
                f"{name}: tensor {tname!r} claims {end - start} bytes but {dtype}{list(shape)} needs "
                f"{expected}: the header lies about sizes"
            )
        ranges.append((start, end, tname))
        tensors[tname] = TensorInfo(tname, dtype, shape, name)
    pos = 0
    for start, end, tname in sorted(ranges):
        if start != pos:
            raise CheckpointError(f"{name}: tensor {tname!r} starts at byte {start}, expected {pos} (gap or overlap)")
        pos = end
    if pos != data_len:
        what = "truncated" if pos > data_len else "has trailing bytes"
        raise CheckpointError(
            f"{name}: header describes {pos} data bytes but the file holds {data_len}: the file is {what}; "
            "fetch it again"
        )
    _library_opens(path)
    return tensors


def _library_opens(path: Path) -> None:
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            f.keys()
    except Exception as exc:  # SafetensorError is not importable under a stable name
        raise CheckpointError(f"{path.name}: the safetensors library refuses it: {exc}") from None


def _check_index(folder: Path, tensors: dict[str, TensorInfo], shards: set[str]) -> None:
    index_path = folder / INDEX
    if not index_path.exists():
        if len(shards) > 1:
            raise CheckpointError(f"{len(shards)} safetensors shards but no {INDEX} mapping tensors to them")
        return
    try:
        weight_map = json.loads(index_path.read_text(encoding="utf-8"))["weight_map"]
    except (json.JSONDecodeError, KeyError, TypeError):
        raise CheckpointError(f"{INDEX} is not valid JSON with a 'weight_map' object") from None
    missing_files = sorted({f for f in weight_map.values() if not (folder / f).is_file()})
    if missing_files:
        raise CheckpointError(f"{INDEX} names files that do not exist: {', '.join(missing_files)}")
    unmapped = sorted(t for t in tensors if t not in weight_map)
    if unmapped:
        raise CheckpointError(f"{INDEX} does not cover every tensor: {len(unmapped)} unmapped, e.g. {unmapped[:3]}")
    wrong = sorted(t for t, f in weight_map.items() if t not in tensors or tensors[t].file != f)
    if wrong:
        t = wrong[0]
        actual = tensors[t].file if t in tensors else "no shard"
        raise CheckpointError(f"{INDEX} maps {t!r} to {weight_map[t]!r} but it is in {actual}")


def _check_shapes(arch: ModelArch, tensors: dict[str, TensorInfo], warnings: list[str]) -> None:
    rules = arch.expected_shapes()
    for t in tensors.values():
        for pattern, shape in rules:
            if pattern.match(t.name):
                if t.shape != shape:
                    raise CheckpointError(
                        f"{t.file}: tensor {t.name!r} has shape {list(t.shape)} but config.json implies "
                        f"{list(shape)}: config and weights do not belong together"
                    )
                break
    layer = arch.layer_pattern
    layers = {int(m.group(1)) for n in tensors if (m := layer.match(n))}
    if layers and layers != set(range(arch.num_layers)):
        raise CheckpointError(
            f"weights hold decoder layers {min(layers)}..{max(layers)} ({len(layers)} layers) but "
            f"config.json says num_hidden_layers={arch.num_layers}"
        )
    if not any(name in tensors for name in arch.embedding_names):
        raise CheckpointError(f"weights lack {arch.embedding_names[0]}: not a complete {arch.architecture} checkpoint")
    if not arch.tie_word_embeddings and arch.lm_head_name not in tensors:
        raise CheckpointError(f"weights lack {arch.lm_head_name} and config.json does not tie word embeddings")
    float_dtypes = {FLOAT_DTYPES[t.dtype] for t in tensors.values() if t.dtype in FLOAT_DTYPES}
    if arch.torch_dtype and float_dtypes and float_dtypes != {arch.torch_dtype}:
        warnings.append(
            f"config.json says torch_dtype={arch.torch_dtype} but the weights are stored as "
            f"{sorted(float_dtypes)}; they are cast to the target dtype at compile time"
        )


def convert_pickle_to_safetensors(folder: Path) -> list[str]:
    """Convert `*.bin` / `*.pt` weights to safetensors in place (pickle files removed). Uses
    `torch.load(weights_only=True)`, which refuses anything but tensors and plain containers."""
    import torch
    from safetensors.torch import save_file

    converted = []
    pickles = sorted(p for p in folder.iterdir() if p.is_file() and is_pickle_file(p.name))
    rename: dict[str, str] = {}
    for p in pickles:
        try:
            state = torch.load(p, map_location="cpu", weights_only=True, mmap=True)
        except Exception as exc:
            raise CheckpointError(f"{p.name}: refused by torch.load(weights_only=True): {exc}") from None
        if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
            state = state["state_dict"]
        if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
            raise CheckpointError(f"{p.name}: not a flat state dict of tensors")
        out_name = re.sub(r"^pytorch_model", "model", p.stem) + ".safetensors"
        # safetensors refuses shared storage: give every tensor its own contiguous copy
        save_file({k: v.detach().clone().contiguous() for k, v in state.items()}, folder / out_name)
        rename[p.name] = out_name
        converted.append(out_name)
        p.unlink()
    old_index = folder / "pytorch_model.bin.index.json"
    if old_index.exists():
        data = json.loads(old_index.read_text(encoding="utf-8"))
        data["weight_map"] = {k: rename.get(v, v) for k, v in data.get("weight_map", {}).items()}
        (folder / INDEX).write_text(json.dumps(data, indent=2), encoding="utf-8")
        old_index.unlink()
    return converted


def verify_checkpoint(folder: Path, allow_pickle: bool = False) -> VerifiedCheckpoint:
    """Verify a local checkpoint folder (see the module docstring); with `allow_pickle`, pickle
    weights are converted to safetensors first."""
    config = load_config(folder)
    try:
        arch = ModelArch.from_config(config, where=f"{folder.name}/config.json")
    except InvalidInput as exc:
        raise CheckpointError(str(exc)) from None
    pickles = sorted(p.name for p in folder.iterdir() if p.is_file() and is_pickle_file(p.name))
    shards = sorted(p.name for p in folder.glob("*.safetensors"))
    warnings: list[str] = []
    if pickles and not shards:
        select_checkpoint_files(pickles, allow_pickle)  # raises the refusal unless allowed
        convert_pickle_to_safetensors(folder)
        warnings.append(f"converted pickle weights {pickles} to safetensors")
        shards = sorted(p.name for p in folder.glob("*.safetensors"))
    elif pickles:
        for name in pickles:  # safetensors present: the pickle copies are not needed, never loaded
            (folder / name).unlink()
    if not shards:
        raise CheckpointError(f"no weights in {folder}: expected *.safetensors files")
    tensors: dict[str, TensorInfo] = {}
    for shard in shards:
        for name, info in read_safetensors_header(folder / shard).items():
            if name in tensors:
                raise CheckpointError(f"tensor {name!r} appears in both {tensors[name].file} and {shard}")
            tensors[name] = info
    _check_index(folder, tensors, set(shards))
    _check_shapes(arch, tensors, warnings)
    return VerifiedCheckpoint(folder, config, arch, tensors, warnings)
