"""`TargetSpec`: what to compile a model for (instance, parallelism, shapes, dtype, quantization, and
the serving profile: the stack that will load it, which fixes the backend and the toolchain).

Validation here rejects values that are impossible whatever the model (a zero batch size, a
logical-core config the instance does not have, buckets longer than the sequence). Whether a
*model* fits the target is the planner's job (`neuronforge.pipeline.planner`), which needs the model config.

`TargetSpec` is the one declaration of a target. Each field is written once, as
`Annotated[type, Field(bounds...), Declared(help, flag=..., title=..., form=...)]` with its default:
its type and bounds (pydantic's), its help text, its CLI flag (`--seq-len`) and its trigger-form title
("Sequence length"). Every surface is generated from that: `target_json_schema()` (the REST conf
check and the form's `targets` items), the form's own fields and the CLI's target flags
(`target_inputs()`, read by `neuronforge_airflow/params.py` and `cli.options.add_target_args`), and the
words a fix is given in (`spoken`: `--seq-len 2048` in the CLI, "Sequence length: 2048" in the form).
Adding a field is one edit here (plus its line in the docs); `tests/test_target_surfaces.py` proves
every surface picks it up and accepts exactly the values `TargetSpec` accepts.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo

from neuronforge.common import advice
from neuronforge.common.errors import InvalidInput
from neuronforge.common.spelling import closest, did_you_mean
from neuronforge.spec.instances import INSTANCES, get_instance

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
    def spelled(self) -> str:
        """The trigger form's spelling (one of `QUANTIZATION_CHOICES`): `none`, `int8:per_channel_symmetric`."""
        return f"{self.dtype}:{self.method}" if self.enabled else "none"

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


# The form's quantization choices: `none` and every dtype:method (the CLI also takes `int8`, `int8:per_channel`).
QUANTIZATION_CHOICES = ["none"] + [f"{d}:{m}" for d in get_args(QuantDType)[1:] for m in get_args(QuantMethod)]


@dataclass(frozen=True)
class Declared:
    """How a user gives one target field, declared once beside its type, bounds and default (see the
    module docstring). A field without `flag` is not a CLI option, one without `form` is not one of
    the compile form's own fields (it is still a key of the form's `targets` JSON)."""

    help: str  # the CLI option's help and the form field's description
    flag: str | None = None  # the CLI option (`--seq-len`); its argparse dest follows (`seq_len`)
    title: str | None = None  # how the trigger form labels it ("Sequence length"), and names it in a fix
    form: bool = False  # one of the compile form's own target fields (their defaults: settings.DEFAULT_TARGET)
    choices: Callable[[], list[Any]] | None = None  # the values a schema enumerates (validators check them)
    form_spelling: Callable[[Any], Any] | None = None  # a value as the form's choices spell it
    metavar: str | None = None  # the CLI's name for a list item


def _instance_names() -> list[str]:
    return list(INSTANCES)


def _lnc_choices() -> list[int]:
    return sorted({n for inst in INSTANCES.values() for n in inst.lnc_options})


def _quantization_spelling(value: Any) -> str:
    return (Quantization.parse(value) if isinstance(value, str) or value is None else value).spelled


PositiveLength = Annotated[int, Field(ge=1)]
# The bounds of the numbers: one rule for every surface (`tests/test_target_surfaces.py`). A sequence is at
# least 8 tokens, the rule the trigger form and the REST check always applied (room for a prompt and the
# tokens generated after it); the CLI, the catalog and YAML, which took 1 to 7, now apply it too.
TP_MAX, BATCH_MAX, SEQUENCE_MIN, SEQUENCE_MAX = 128, 1024, 8, 1_048_576


class TargetSpec(BaseModel):
    """One compile target. Defaults are resolved by `normalized()` so that spelling a default out
    yields the same cache key as leaving it implicit. Each field's `Declared` says how users give it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    instance_type: Annotated[
        str,
        Declared(
            "the Inferentia/Trainium instance the artifact is built for, e.g. inf2.xlarge",
            flag="--instance",
            title="Instance type",
            form=True,
            choices=_instance_names,
        ),
    ]
    tp_degree: Annotated[
        int,
        Field(ge=1, le=TP_MAX),
        Declared(
            "tensor-parallel degree: NeuronCores the model is sharded over, one the instance supports "
            "(inf2.xlarge: 1 or 2)",
            flag="--tp",
            title="Tensor parallel degree",
            form=True,
        ),
    ]
    batch_size: Annotated[
        int,
        Field(ge=1, le=BATCH_MAX),
        Declared(
            "sequences served at once: the compiled graphs' batch dimension",
            flag="--batch-size",
            title="Batch size",
            form=True,
        ),
    ] = 1
    sequence_length: Annotated[
        int,
        Field(ge=SEQUENCE_MIN, le=SEQUENCE_MAX),
        Declared(
            "sequence length: prompt + generated tokens, at most the model's max_position_embeddings",
            flag="--seq-len",
            title="Sequence length",
            form=True,
        ),
    ]
    max_context_length: Annotated[
        int | None,
        Field(ge=1),  # and at most sequence_length (`_cross_field`: a rule across fields, not a bound)
        Declared(
            "longest prompt (context encoding); default: the sequence length",
            flag="--max-context-length",
            title="Max prompt length",
            form=True,
        ),
    ] = None
    logical_nc_config: Annotated[
        int | None,
        Declared(
            "logical NeuronCore config (trn2: 1 or 2); default: the instance's",
            flag="--lnc",
            title="Logical NeuronCore config",
            choices=_lnc_choices,
        ),
    ] = None
    context_encoding_buckets: Annotated[
        tuple[PositiveLength, ...] | None,
        Declared(
            "prompt lengths the context encoding is compiled for (strictly increasing, at most the sequence "
            "length); default: the backend's",
            title="Context encoding buckets",
        ),
    ] = None
    token_generation_buckets: Annotated[
        tuple[PositiveLength, ...] | None,
        Declared(
            "sequence lengths token generation is compiled for (strictly increasing, at most the sequence "
            "length); default: the backend's",
            title="Token generation buckets",
        ),
    ] = None
    dtype: Annotated[
        DType,
        Declared("dtype of the weights and activations: bf16, fp16 or fp32", flag="--dtype", title="dtype", form=True),
    ] = "bf16"
    quantization: Annotated[
        Quantization,
        Declared(
            "weight quantization (none, int8 or fp8; per tensor or per channel), e.g. int8:per_channel_symmetric "
            "(int8:per_channel for short; int8 alone: per tensor)",
            flag="--quant",
            title="Quantization",
            form=True,
            choices=lambda: QUANTIZATION_CHOICES,
            form_spelling=_quantization_spelling,
        ),
    ] = Quantization()
    # a registered serving profile: `name` (newest version) or `name@version`; its choices are the
    # registry's, given where a schema is built (`target_json_schema(choices=...)`)
    profile: Annotated[
        str,
        Declared(
            "the stack that will serve the model: it fixes the SDK, the backend, what is published and the "
            f"launch spec ({advice.command('profiles')} lists them)",
            flag="--profile",
            title="Serving profile",
        ),
    ] = "cpu"
    backend_options: Annotated[
        dict[str, str | int | float | bool],
        Field(default_factory=dict),
        Declared("backend-specific options passed through to the backend", title="Backend options"),
    ]

    # Inputs that are not fields: given beside a field and folded into it by a validator (`before`).
    INPUTS: ClassVar[dict[str, tuple[Any, Declared]]] = {
        "modules_to_not_convert": (
            list[Annotated[str, Field(min_length=1)]] | None,
            Declared(
                "modules kept unquantized besides lm_head, as NxD Inference names them (substrings of its "
                "module paths: layers.0.mlp, layers.3.self_attn, expert_mlps); passed to "
                "NeuronConfig.modules_to_not_convert",
                flag="--modules-to-not-convert",
                title="Modules kept unquantized",
                metavar="MODULE",
            ),
        ),
    }
    INPUT_BESIDE: ClassVar[dict[str, str]] = {"modules_to_not_convert": "quantization"}  # listed after it

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
                + f" — {advice.command('profiles')} lists them"
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
            raise InvalidInput(format_validation_error(exc, prefix="target", model=cls)) from None


# -- the surfaces generated from the declaration ------------------------------------------------------
Surface = Literal["cli", "form"]  # the CLI's words, and the trigger form's (also the Airflow tasks')
_JSON_TYPES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
_BOUNDS = {annotated_types.Ge: ("minimum", "ge"), annotated_types.Le: ("maximum", "le")}


@dataclass(frozen=True)
class TargetInput:
    """One input of a target as every surface asks for it: a `TargetSpec` field or one of its `INPUTS`."""

    name: str
    declared: Declared
    schema: dict[str, Any]  # the JSON schema of its value: type, bounds, choices (None among them if optional)
    required: bool
    default: Any  # as JSON (the form's spelling); None when required

    @property
    def dest(self) -> str | None:
        """The argparse attribute its CLI flag fills (`--seq-len` -> `seq_len`)."""
        return self.declared.flag.lstrip("-").replace("-", "_") if self.declared.flag else None


def _value_schema(annotation: Any, metadata: list[Any], choices: Callable[[], list[Any]] | None) -> dict[str, Any]:
    """The JSON schema of a value of `annotation` with its pydantic bounds (`metadata`) and choices.
    Covers the types a target is made of; another type is refused here, when the declaration is read."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        inner = [m for a in args[1:] for m in (a.metadata if isinstance(a, FieldInfo) else [a])]
        return _value_schema(args[0], [*metadata, *inner], choices)
    if origin in (Union, types.UnionType):
        kinds = [a for a in args if a is not type(None)]
        if len(kinds) == 1:
            schema = _value_schema(kinds[0], metadata, choices)
        else:
            schema = {"type": [_value_schema(k, [], None)["type"] for k in kinds]}
        if len(kinds) < len(args):  # optional: empty (None) is a value too
            kind = schema["type"]
            schema["type"] = ["null", *([kind] if isinstance(kind, str) else kind)]
            if "enum" in schema:
                schema["enum"] = [*schema["enum"], None]
        return schema
    if origin is Literal:
        schema: dict[str, Any] = {"type": "string", "enum": list(args)}
    elif origin in (tuple, list):
        schema = {"type": "array", "items": _value_schema(args[0], [], None)}
    elif origin is dict:
        schema = {"type": "object", "additionalProperties": _value_schema(args[1], [], None)}
    elif annotation in _JSON_TYPES:
        schema = {"type": _JSON_TYPES[annotation]}
    elif isinstance(annotation, type) and issubclass(annotation, BaseModel) and choices is not None:
        schema = {"type": "string"}  # a model given by its spelling (Quantization: `int8:per_channel_symmetric`)
    else:
        raise TypeError(f"a target input of type {annotation!r} has no JSON schema; declare its choices")
    for m in metadata:
        for bound, (key, attr) in _BOUNDS.items():
            if isinstance(m, bound):
                schema[key] = getattr(m, attr)
        if isinstance(m, annotated_types.MinLen):
            schema["minLength"] = m.min_length
    if choices is not None:
        schema["enum"] = list(choices())
    return schema


def _json_default(info: FieldInfo, declared: Declared) -> Any:
    if info.is_required():
        return None
    value = info.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return declared.form_spelling(value) if declared.form_spelling else None
    return list(value) if isinstance(value, tuple) else value


@functools.cache
def target_inputs(spec: type[TargetSpec] | None = None) -> dict[str, TargetInput]:
    """Every input of `spec` (default `TargetSpec`) in declaration order, each read from its one
    declaration: what the CLI flags, the form's fields and the JSON schema are generated from."""
    spec = spec or TargetSpec
    out: dict[str, TargetInput] = {}
    for name, info in spec.model_fields.items():
        declared = next((m for m in info.metadata if isinstance(m, Declared)), None)
        if declared is None:
            raise TypeError(f"{spec.__name__}.{name} has no Declared(...): say how users give it")
        schema = _value_schema(info.annotation, list(info.metadata), declared.choices)
        out[name] = TargetInput(name, declared, schema, info.is_required(), _json_default(info, declared))
        for extra, (annotation, extra_declared) in spec.INPUTS.items():
            if spec.INPUT_BESIDE.get(extra) == name:
                schema = _value_schema(annotation, [], extra_declared.choices)
                out[extra] = TargetInput(extra, extra_declared, schema, False, None)
    return out


def target_json_schema(
    spec: type[TargetSpec] | None = None, choices: Mapping[str, list[Any]] | None = None
) -> dict[str, Any]:
    """The JSON schema of one target (the form's `targets` items, the REST conf check): each input's
    type, bounds and choices; `choices` gives those only the edge knows (the registry's profiles)."""
    inputs = target_inputs(spec or TargetSpec)
    properties = {}
    for name, inp in inputs.items():
        schema = dict(inp.schema) | {"description": inp.declared.help}
        if choices and name in choices:
            schema["enum"] = list(choices[name]) + ([None] if "null" in schema["type"] else [])
        properties[name] = schema
    return {
        "type": "object",
        "additionalProperties": False,
        "required": [name for name, inp in inputs.items() if inp.required],
        "properties": properties,
    }


def spoken(name: str, value: Any, surface: Surface, spec: type[TargetSpec] | None = None) -> str:
    """`name` set to `value` in a surface's words: `--seq-len 2048` (CLI), `Sequence length: 2048` (form)."""
    declared = target_inputs(spec or TargetSpec)[name].declared
    if surface == "cli" and declared.flag:
        return f"{declared.flag} {value}"
    if surface == "form" and declared.title:
        return f"{declared.title}: {declared.form_spelling(value) if declared.form_spelling else value}"
    return f"{name}={value}"


def _short(text: str, limit: int) -> str:
    """`text` when it is path-safe and at most `limit` long, else 8 hex digits of its sha256 (a slug
    part stays short and path-safe whatever the value)."""
    if len(text) <= limit and re.fullmatch(r"[A-Za-z0-9._]*", text):
        return text
    return "h" + hashlib.sha256(text.encode()).hexdigest()[:8]


def format_validation_error(exc: ValidationError, prefix: str, model: type[BaseModel] | None = None) -> str:
    """Turn pydantic's error list into one line per field: `target.tp_degree: must be >= 1 (got 0)`; a key
    `model` has no field for: `target.instnace: unknown field (did you mean 'instance_type'?)`."""
    lines = []
    errors = exc.errors()
    # a required field that an unknown key is taken for is not reported missing as well
    meant = {
        (*e["loc"][:-1], closest(str(e["loc"][-1]), field_names(model, e["loc"][:-1])))
        for e in errors
        if e["type"] == "extra_forbidden" and model is not None
    }
    for err in errors:
        loc = ".".join(str(p) for p in (prefix, *err["loc"]))
        if err["type"] == "missing" and tuple(err["loc"]) in meant:
            continue
        if err["type"] == "extra_forbidden":
            known = field_names(model, err["loc"][:-1]) if model is not None else []
            hint = did_you_mean(str(err["loc"][-1]), known)
            lines.append(f"{loc}: unknown field{hint or ('; the fields are ' + ', '.join(known) if known else '')}")
            continue
        msg = err["msg"].removeprefix("Value error, ")
        if "input" in err and err["type"] != "value_error" and not isinstance(err["input"], dict):
            msg += f" (got {err['input']!r})"
        lines.append(f"{loc}: {msg}")
    return "; ".join(lines)


def field_names(model: type[BaseModel], path: tuple[Any, ...] = ()) -> list[str]:
    """The keys a user may write where `path` (field names from `model`) leads: the fields of the model
    found there and its declared `INPUTS` (a target's `modules_to_not_convert`); [] past a non-model."""
    for part in path:
        info = model.model_fields.get(str(part))
        if info is None:
            return []
        nested = [a for a in (info.annotation, *get_args(info.annotation)) if isinstance(a, type)]
        found = next((a for a in nested if issubclass(a, BaseModel)), None)
        if found is None:
            return []
        model = found
    return sorted({*model.model_fields, *getattr(model, "INPUTS", {})})
