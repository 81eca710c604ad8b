"""`TargetSpec`: what to compile a model for (instance, parallelism, shapes, dtype, quantization, and
the serving profile: the stack that will load it, which fixes the backend and the toolchain).

Validation here rejects values that are impossible whatever the model (a zero batch size, a
logical-core config the instance does not have, buckets longer than the sequence). Whether a
*model* fits the target is the planner's job (`neuronforge.planner`), which needs the model config.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from neuronforge.errors import InvalidInput
from neuronforge.instances import INSTANCES, get_instance

DType = Literal["bf16", "fp16", "fp32"]
DTYPE_BYTES: dict[str, int] = {"bf16": 2, "fp16": 2, "fp32": 4}
TORCH_DTYPE_NAMES: dict[str, str] = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}

QuantDType = Literal["none", "int8", "f8e4m3", "f8e5m2"]
QuantMethod = Literal["per_tensor_symmetric", "per_channel_symmetric"]
PROFILE_SPELLING = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(@[0-9A-Za-z][0-9A-Za-z.+_-]*)?")
# The `backend` field of earlier releases, and the profile that now says the same and more.
LEGACY_BACKENDS = {"cpu": "cpu", "optimum": "optimum-neuron", "nxdi": "vllm-neuron"}

_METHOD_ALIASES = {
    "per_tensor": "per_tensor_symmetric",
    "per_channel": "per_channel_symmetric",
    "per_tensor_symmetric": "per_tensor_symmetric",
    "per_channel_symmetric": "per_channel_symmetric",
}


class Quantization(BaseModel):
    """Weight quantization as NxD Inference names it (quantization_dtype × quantization_type)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dtype: QuantDType = "none"
    method: QuantMethod | None = None
    # Modules kept in the checkpoint dtype. `lm_head` always is (our quantizer never converts it),
    # and NxD Inference must be told every one of them (NeuronConfig.modules_to_not_convert), else
    # it builds quantized layers for them and fails on the missing scales.
    modules_to_not_convert: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _method_matches_dtype(self) -> Quantization:
        if self.dtype == "none" and self.method is not None:
            raise ValueError(f"quantization method {self.method!r} given without a quantization dtype")
        if self.dtype == "none" and self.modules_to_not_convert:
            raise ValueError("modules_to_not_convert given without a quantization dtype")
        if self.dtype != "none" and self.method is None:
            object.__setattr__(self, "method", "per_tensor_symmetric")
        if self.dtype != "none":
            bad = [
                m
                for m in self.modules_to_not_convert
                if not m or not all(p.isidentifier() or p.isdigit() for p in m.split("."))
            ]
            if bad:
                raise ValueError(
                    f"modules_to_not_convert: {bad} are not module names (e.g. lm_head, model.layers.0.mlp)"
                )
            kept = tuple(sorted({"lm_head", *self.modules_to_not_convert}))
            object.__setattr__(self, "modules_to_not_convert", kept)
        return self

    @property
    def enabled(self) -> bool:
        return self.dtype != "none"

    @property
    def slug(self) -> str:
        if not self.enabled:
            return "none"
        return f"{self.dtype}_{self.method.removesuffix('_symmetric')}"

    @classmethod
    def parse(cls, text: str | None) -> Quantization:
        """Parse the CLI spelling: `none`, `int8`, `int8:per_channel`, `f8e4m3:per_tensor_symmetric`."""
        if text is None or text.strip().lower() in ("", "none"):
            return cls()
        dtype, _, method = text.strip().partition(":")
        if method and method not in _METHOD_ALIASES:
            raise InvalidInput(
                f"quantization: unknown method {method!r}; use one of per_tensor, per_channel "
                "(or the *_symmetric spellings)"
            )
        if dtype not in ("int8", "f8e4m3", "f8e5m2"):
            raise InvalidInput(f"quantization: unknown dtype {dtype!r}; use none, int8, f8e4m3 or f8e5m2")
        return cls(dtype=dtype, method=_METHOD_ALIASES[method] if method else None)


class TargetSpec(BaseModel):
    """One compile target. Defaults are resolved by `normalized()` so that spelling a default out
    yields the same cache key as leaving it implicit."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    instance_type: str
    tp_degree: int = Field(ge=1, le=128)
    batch_size: int = Field(default=1, ge=1, le=1024)
    sequence_length: int = Field(ge=1, le=1_048_576)
    max_context_length: int | None = Field(default=None, ge=1)
    logical_nc_config: int | None = None
    context_encoding_buckets: tuple[int, ...] | None = None
    token_generation_buckets: tuple[int, ...] | None = None
    dtype: DType = "bf16"
    quantization: Quantization = Quantization()
    profile: str = "cpu"  # a registered serving profile: `name` (newest version) or `name@version`
    backend_options: dict[str, str | int | float | bool] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _modules_to_not_convert(cls, data: Any) -> Any:
        """The form and the CLI spell `modules_to_not_convert` beside `quantization`; it belongs to it."""
        if isinstance(data, dict) and "modules_to_not_convert" in data:
            data = dict(data)
            modules = tuple(data.pop("modules_to_not_convert") or ())
            q = data.get("quantization")
            q = Quantization.parse(q) if isinstance(q, str) or q is None else Quantization.model_validate(q)
            data["quantization"] = {**q.model_dump(), "modules_to_not_convert": modules + q.modules_to_not_convert}
        return data

    @model_validator(mode="before")
    @classmethod
    def _no_backend_field(cls, data: Any) -> Any:
        if isinstance(data, dict) and "backend" in data:
            suggestion = LEGACY_BACKENDS.get(str(data["backend"]))
            hint = f"; for backend {data['backend']!r} use profile {suggestion!r}" if suggestion else ""
            raise ValueError(
                "`backend` was replaced by `profile` (the serving stack decides the backend and toolchain)"
                + hint
                + " — `neuronforge profiles` lists them"
            )
        return data

    @field_validator("instance_type")
    @classmethod
    def _known_instance(cls, v: str) -> str:
        if v not in INSTANCES:
            raise ValueError(f"unknown instance type {v!r}; known: {', '.join(INSTANCES)}")
        return v

    @field_validator("profile")
    @classmethod
    def _profile_spelling(cls, v: str) -> str:
        """Only the spelling: whether the profile exists is the registry's answer, asked once at the
        edge (`neuronforge.profiles.pin`), so that this value type resolves nothing."""
        v = v.strip()
        if not PROFILE_SPELLING.fullmatch(v):
            raise ValueError(f"{v!r} is not a profile name (name or name@version, e.g. vllm-neuron@2.26.1)")
        return v

    @field_validator("quantization", mode="before")
    @classmethod
    def _parse_quant(cls, v: Any) -> Any:
        return Quantization.parse(v) if isinstance(v, str) or v is None else v

    @field_validator("context_encoding_buckets", "token_generation_buckets")
    @classmethod
    def _buckets_sorted(cls, v: tuple[int, ...] | None) -> tuple[int, ...] | None:
        if v is None:
            return v
        if not v:
            raise ValueError("an empty bucket list; omit it to let the backend choose buckets")
        if any(b < 1 for b in v) or list(v) != sorted(set(v)):
            raise ValueError(f"buckets must be positive, strictly increasing lengths (got {list(v)})")
        return v

    @model_validator(mode="after")
    def _cross_field(self) -> TargetSpec:
        inst = INSTANCES[self.instance_type]
        if self.logical_nc_config is not None and self.logical_nc_config not in inst.lnc_options:
            raise ValueError(
                f"logical_nc_config={self.logical_nc_config} is not available on {self.instance_type}; "
                f"use one of {list(inst.lnc_options)}"
            )
        if self.max_context_length is not None and self.max_context_length > self.sequence_length:
            raise ValueError(
                f"max_context_length={self.max_context_length} exceeds sequence_length="
                f"{self.sequence_length}; the prompt must leave room in the sequence"
            )
        for name in ("context_encoding_buckets", "token_generation_buckets"):
            buckets = getattr(self, name)
            if buckets and buckets[-1] > self.sequence_length:
                raise ValueError(
                    f"{name} has {buckets[-1]} > sequence_length={self.sequence_length}; "
                    "drop the longer buckets or raise sequence_length"
                )
        return self

    # -- derived values -------------------------------------------------------------------------
    @property
    def instance(self):  # -> InstanceType
        return get_instance(self.instance_type)

    @property
    def lnc(self) -> int:
        return self.logical_nc_config or self.instance.default_lnc

    @property
    def context_length(self) -> int:
        return self.max_context_length or self.sequence_length

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def profile_name(self) -> str:
        """The profile's name without its version (`vllm-neuron` of `vllm-neuron@2.26.1`)."""
        return self.profile.partition("@")[0]

    @property
    def pinned(self) -> bool:
        """Whether the profile is spelled `name@version`, as the edge pins it (`profiles.pin`)."""
        return "@" in self.profile

    def normalized(self) -> TargetSpec:
        """Spell every default out, so equal targets compare (and hash) equal. The profile is left
        as given: the edge pins it to `name@version` (`neuronforge.profiles.pin`) before anything
        keys, plans or builds a target."""
        return self.model_copy(
            update={
                "max_context_length": self.context_length,
                "logical_nc_config": self.lnc,
                "backend_options": dict(sorted(self.backend_options.items())),
            }
        )

    @classmethod
    def from_key_material(cls, material: dict[str, Any]) -> TargetSpec:
        """The target a cache key's material (`request.cache_key_material`) was computed for."""
        data = dict(material["target"])
        data.update(
            quantization=material["quantization"],
            profile=f"{material['profile']['name']}@{material['profile']['version']}",
            backend_options=material.get("backend_options", {}),
        )
        return cls.parse(data)

    @property
    def slug(self) -> str:
        """A readable, path-safe name for this target: every field of it that enters the cache key,
        the fields at their default left out (so a default target keeps its short, stable name) —
        two targets of one profile never share a slug unless they share the key. The profile's
        version is the one part left to the profile ref shown beside it (`cpu@local`): a rebuild
        for a new SDK release is the same target, published beside the old one under its own key."""
        parts = [
            self.profile_name,
            self.instance_type,
            f"tp{self.tp_degree}",
            f"b{self.batch_size}",
            f"s{self.sequence_length}",
            self.dtype,
        ]
        if self.quantization.enabled:
            parts.append(self.quantization.slug)
            kept = tuple(m for m in self.quantization.modules_to_not_convert if m != "lm_head")
            if kept:
                parts.append("keep" + _short(".".join(kept), 24))
        if self.lnc != self.instance.default_lnc:
            parts.append(f"lnc{self.lnc}")
        if self.context_length != self.sequence_length:
            parts.append(f"ctx{self.context_length}")
        if self.context_encoding_buckets:
            parts.append("cte" + _short(".".join(map(str, self.context_encoding_buckets)), 20))
        if self.token_generation_buckets:
            parts.append("tkg" + _short(".".join(map(str, self.token_generation_buckets)), 20))
        if self.backend_options:
            options = json.dumps(dict(sorted(self.backend_options.items())), sort_keys=True, separators=(",", ":"))
            parts.append("opt" + hashlib.sha256(options.encode()).hexdigest()[:8])
        return "-".join(parts)

    @classmethod
    def parse(cls, data: dict[str, Any]) -> TargetSpec:
        """Validate a plain dict (form, YAML, JSON) into a TargetSpec or raise `InvalidInput`
        naming each bad field."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise InvalidInput(format_validation_error(exc, prefix="target")) from None


def _short(text: str, limit: int) -> str:
    """`text` when it is path-safe and at most `limit` long, else 8 hex digits of its sha256 (a slug
    part stays short and path-safe whatever the value)."""
    if len(text) <= limit and re.fullmatch(r"[A-Za-z0-9._]*", text):
        return text
    return "h" + hashlib.sha256(text.encode()).hexdigest()[:8]


def format_validation_error(exc: ValidationError, prefix: str) -> str:
    """Turn pydantic's error list into one line per field: `target.tp_degree: must be >= 1 (got 0)`."""
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in (prefix, *err["loc"]))
        msg = err["msg"].removeprefix("Value error, ")
        if "input" in err and err["type"] != "value_error" and not isinstance(err["input"], dict):
            msg += f" (got {err['input']!r})"
        lines.append(f"{loc}: {msg}")
    return "; ".join(lines)
