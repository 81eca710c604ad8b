"""The pre-compile planner: will this model run on this target, and if not, what would?

Memory model, per NeuronCore (all numbers in bytes):

    per_core = ceil((weights + kv_cache + activations) / tp) + RUNTIME_RESERVE

- weights: from the safetensors headers when available (exact), else from the config; counted in
  the target dtype, or for quantized targets as 1-byte weights + fp32 scales for the decoder's
  linear layers (embeddings, norms and LM head stay in the target dtype). MoE experts all count:
  every expert lives in HBM.
- kv_cache = 2 × layers × kv_heads_effective × head_dim × sequence_length × batch × dtype bytes.
  kv_heads_effective: kv heads when tp divides them (sharded over heads); tp when kv heads divide
  tp (each kv head replicated up to tp); otherwise all attention heads (GQA converted to MHA), the
  strategies NxD Inference uses.
- activations: the context-encoding working set of one layer at a time, batch × context length ×
  (4 × hidden + 2 × intermediate) × dtype bytes, plus fp32 logits of batch × vocab.
- RUNTIME_RESERVE (2 GiB per core): Neuron runtime, NEFF instructions and DMA rings, collectives
  buffers and I/O tensors. Chosen so that the documented data points come out as observed (a
  Mistral-7B bf16 at 4096 tokens that did not fit one 16 GiB core; Llama-3.1-8B bf16 served on 2
  cores); the estimate errs on the safe side so that a "fits" is trustworthy.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from neuronforge.checkpoints.checkpoint import SAFETENSORS_DTYPES, TensorInfo
from neuronforge.checkpoints.quantized_names import QUANTIZABLE
from neuronforge.common.errors import ExitCode, InvalidInput
from neuronforge.compilation.backends.tnx_classes import class_problems, guide_tps
from neuronforge.profiles.registry import lifecycle_warning, profile_of, target_problems
from neuronforge.spec.instances import GIB, INSTANCES, InstanceType
from neuronforge.spec.modelconfig import TRANSPOSED_LINEAR, ModelArch, gqa_strategy
from neuronforge.spec.target import DTYPE_BYTES, Quantization, Surface, TargetSpec, spoken

RUNTIME_RESERVE = 2 * GIB
FP32 = 4
BATCH_LADDER = (1, 2, 4, 8, 16, 32, 64, 128)
SEQ_LADDER = (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)


def gib(n: float) -> str:
    return f"{n / GIB:.1f} GiB"


@dataclass(frozen=True)
class Fix:
    """A change to the target that passes a check: its input `field` set to `value`, `why` ending the
    sentence ("or less", "at tp=2"). Each surface says it in its own words (`said`): the CLI
    `use --seq-len 2048 or less`, the form and the Airflow tasks `use Sequence length: 2048 or less`."""

    field: str  # a `TargetSpec` input
    value: Any
    why: str = ""
    sentence: str = "use {change}"  # where the change goes in the sentence

    def said(self, surface: Surface = "cli") -> str:
        text = self.sentence.format(change=spoken(self.field, self.value, surface))
        return f"{text} {self.why}" if self.why else text


@dataclass
class Check:
    """One check of a plan: `text` says what was found; a failed check's `fix`, when it is a change of
    one field, is kept structured and said after it in each surface's words (`said`, `message`)."""

    name: str
    ok: bool
    text: str
    fix: Fix | None = None
    warn: bool = False  # passed, but says something to act on (e.g. the line ends for the family)

    def said(self, surface: Surface = "cli") -> str:
        return self.text if self.fix is None else f"{self.text}; {self.fix.said(surface)}"

    @property
    def message(self) -> str:
        """The check in the CLI's words (what `plan` prints and its JSON carries)."""
        return self.said("cli")


@dataclass
class Suggestion:
    tp: int
    batch_size: int
    seq_len: int
    per_core_bytes: int


@dataclass
class Plan:
    fits: bool
    per_core_bytes: int
    hbm_per_core_bytes: int
    weight_bytes: int
    kv_cache_bytes: int
    activation_bytes: int
    runtime_reserve_bytes: int
    parameter_count: int
    gqa_strategy: str
    checks: list[Check] = field(default_factory=list)
    suggestions: list[Suggestion] | None = None

    @property
    def ok(self) -> bool:
        """Valid and fits: every check passed."""
        return all(c.ok for c in self.checks)

    @property
    def problems(self) -> list[str]:
        return [c.message for c in self.checks if not c.ok]

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    def to_json(self) -> dict[str, Any]:
        out = {
            "fits": self.fits,
            "per_core_bytes": self.per_core_bytes,
            "hbm_per_core_bytes": self.hbm_per_core_bytes,
            "weight_bytes": self.weight_bytes,
            "kv_cache_bytes": self.kv_cache_bytes,
            "activation_bytes": self.activation_bytes,
            "runtime_reserve_bytes": self.runtime_reserve_bytes,
            "parameter_count": self.parameter_count,
            "checks": [
                {"name": c.name, "ok": c.ok, "message": c.message, **({"warn": True} if c.warn else {})}
                for c in self.checks
            ],
            "gqa_strategy": self.gqa_strategy,
        }
        if self.suggestions is not None:
            out["suggestions"] = [asdict(s) for s in self.suggestions]
        return out


# -- memory arithmetic ----------------------------------------------------------------------------
def _tensor_bytes(name: str, shape: tuple[int, ...], dtype_bytes: int, quant: Quantization) -> int:
    numel = math.prod(shape)
    if quant.enabled and QUANTIZABLE.match(name) and len(shape) == 2:  # what the quantizer converts
        out_channels = shape[1] if TRANSPOSED_LINEAR.match(name) else shape[0]
        scales = out_channels if quant.method == "per_channel_symmetric" else 1
        return numel * 1 + scales * FP32
    return numel * dtype_bytes


def _config_tensors(arch: ModelArch) -> list[tuple[int, str, tuple[int, ...]]]:
    """A synthetic tensor list from the config, for weight bytes without headers (`ModelArch.tensors`:
    each family's own names, so that the quantization patterns apply)."""
    return arch.tensors()


def weight_bytes(
    arch: ModelArch, dtype: str, quant: Quantization, tensors: dict[str, TensorInfo] | None = None
) -> tuple[int, int]:
    """(parameter count, bytes in HBM) for the whole model."""
    dtype_bytes = DTYPE_BYTES[dtype]
    if tensors:
        items = [(1, t.name, t.shape) for t in tensors.values() if t.dtype in SAFETENSORS_DTYPES]
    else:
        items = _config_tensors(arch)
    params = sum(k * math.prod(s) for k, _, s in items)
    return params, sum(k * _tensor_bytes(n, s, dtype_bytes, quant) for k, n, s in items)


def kv_cache_bytes(arch: ModelArch, tp: int, batch: int, seq_len: int, dtype: str) -> int:
    _, kv_eff = gqa_strategy(arch, tp)
    return 2 * arch.num_layers * kv_eff * arch.head_dim * seq_len * batch * DTYPE_BYTES[dtype]


def activation_bytes(arch: ModelArch, batch: int, context_len: int, dtype: str) -> int:
    inter = arch.expert_intermediate_size if arch.is_moe else arch.intermediate_size
    per_token = (4 * arch.hidden_size + 2 * inter) * DTYPE_BYTES[dtype]
    return batch * context_len * per_token + batch * arch.vocab_size * FP32


def per_core_bytes(weights: int, kv: int, activations: int, tp: int) -> int:
    return math.ceil((weights + kv + activations) / tp) + RUNTIME_RESERVE


def per_core_text(need: int, hbm: int) -> str:
    """What a core needs against what it has, the one way `plan` says it (its header and its memory check):
    the need counts the runtime reserve, the capacity is the core's whole HBM."""
    return f"{gib(need)} per core of {gib(hbm)}"


# -- the plan -------------------------------------------------------------------------------------
STRUCTURAL_CHECKS = ("tp_degree", "heads_divisible", "sequence_length", "profile", "family")


def static_checks(arch: ModelArch | None, target: TargetSpec) -> list[Check]:
    """The failed checks that make `target` invalid whatever the weights: tp vs the instance, heads vs
    tp, sequence length vs the model (with its config), the serving profile. Checked before any lease
    or download; memory is judged later on the fetched checkpoint's exact tensor sizes."""
    if arch is None:
        inst, tp = target.instance, target.tp_degree
        supported = inst.supported_tp(target.lnc)
        failed = [Check("profile", False, p) for p in target_problems(profile_of(target), target)]
        if tp not in supported or tp > inst.cores(target.lnc):
            failed.insert(
                0,
                Check(
                    "tp_degree",
                    False,
                    f"tp={tp} is not supported on {inst.name} ({inst.cores(target.lnc)} cores); "
                    f"use tp in {list(supported)}",
                ),
            )
        return failed
    return [c for c in plan(arch, target).failed if c.name in STRUCTURAL_CHECKS]


def static_problems(arch: ModelArch | None, target: TargetSpec) -> list[str]:
    """`static_checks` in the CLI's words."""
    return [c.message for c in static_checks(arch, target)]


def plan(
    arch: ModelArch,
    target: TargetSpec,
    tensors: dict[str, TensorInfo] | None = None,
    with_suggestions: bool = False,
) -> Plan:
    inst = target.instance
    tp, lnc = target.tp_degree, target.lnc
    cores, hbm = inst.cores(lnc), inst.hbm_per_core(lnc)
    params, w_bytes = weight_bytes(arch, target.dtype, target.quantization, tensors)
    strategy, kv_eff = gqa_strategy(arch, tp)
    kv = kv_cache_bytes(arch, tp, target.batch_size, target.sequence_length, target.dtype)
    act = activation_bytes(arch, target.batch_size, target.context_length, target.dtype)
    need = per_core_bytes(w_bytes, kv, act, tp)
    fits = need <= hbm
    checks: list[Check] = []

    supported = inst.supported_tp(lnc)
    if tp in supported and tp <= cores:
        checks.append(Check("tp_degree", True, f"tp={tp} is supported on {inst.name} ({cores} cores)"))
    else:
        bigger = [i.name for i in INSTANCES.values() if i.family == inst.family and tp in i.supported_tp()]
        fix = f"use tp in {list(supported)}"
        if bigger:
            fix += f", or an instance that supports tp={tp}: {', '.join(bigger)}"
        checks.append(Check("tp_degree", False, f"tp={tp} is not supported on {inst.name} ({cores} cores); {fix}"))

    if arch.num_heads % tp == 0:
        checks.append(Check("heads_divisible", True, f"{arch.num_heads} attention heads split evenly over tp={tp}"))
    else:
        checks.append(Check("heads_divisible", False, _heads_fix(arch, target, tensors)))

    gqa_text = {
        "shard-over-heads": f"{arch.num_kv_heads} kv heads sharded over tp={tp}",
        "replicate-to-tp": f"{arch.num_kv_heads} kv heads replicated up to tp={tp} (kv cache grows to {kv_eff} heads)",
        "convert-to-mha": (
            f"{arch.num_kv_heads} kv heads neither divide nor are divided by tp={tp}: converted to MHA "
            f"({kv_eff} kv heads, a larger kv cache); a tp that divides or is divided by "
            f"{arch.num_kv_heads} avoids that"
        ),
    }[strategy]
    if arch.num_kv_heads == arch.num_heads:  # GPT-2, OPT, BLOOM, GPT-J, GPT-NeoX, MHA Llamas: nothing to lay out
        gqa_text = f"multi-head attention: {arch.num_kv_heads} kv heads, one per attention head"
    checks.append(Check("gqa", True, gqa_text))

    if arch.max_position_embeddings is None:
        checks.append(
            Check(
                "sequence_length",
                True,
                f"sequence length {target.sequence_length}: {arch.position_embedding} positions "
                "(no limit from the config)",
            )
        )
    elif target.sequence_length <= arch.max_position_embeddings:
        checks.append(
            Check(
                "sequence_length",
                True,
                f"sequence length {target.sequence_length} <= {arch.position_field} {arch.max_position_embeddings}",
            )
        )
    else:
        checks.append(
            Check(
                "sequence_length",
                False,
                f"sequence length {target.sequence_length} exceeds the model's {arch.position_field} "
                f"{arch.max_position_embeddings}",
                Fix("sequence_length", arch.max_position_embeddings, "or less"),
            )
        )

    profile = profile_of(target)
    problems = target_problems(profile, target, arch.model_type, arch)
    checks += [Check("profile", False, p) for p in problems] or [
        Check("profile", True, f"profile {profile.ref} serves {arch.model_type} on {inst.family}")
    ]
    warning = lifecycle_warning(profile, inst.family)
    if warning:
        checks.append(Check("lifecycle", True, warning, warn=True))
    if profile.backend.name == "tnx":  # the family's transformers-neuronx class and its own limits
        checks += [Check("family", False, p) for p in class_problems(arch, target)]

    detail = f"weights {gib(w_bytes / tp)} + KV cache {gib(kv / tp)} + activations {gib(act / tp)} at tp={tp}"
    needs = f"needs {per_core_text(need, hbm)} ({detail} + {gib(RUNTIME_RESERVE)} runtime reserve)"
    if fits:
        checks.append(Check("memory", True, f"fits: {needs} on a NeuronCore of {inst.name}"))
    else:
        found = f"does not fit: {needs} on a NeuronCore of {inst.name}"
        fix = memory_fix(arch, target, tensors)
        checks.append(
            Check("memory", False, found, fix) if isinstance(fix, Fix) else Check("memory", False, f"{found}; {fix}")
        )

    result = Plan(
        fits=fits,
        per_core_bytes=need,
        hbm_per_core_bytes=hbm,
        weight_bytes=w_bytes,
        kv_cache_bytes=kv,
        activation_bytes=act,
        runtime_reserve_bytes=RUNTIME_RESERVE,
        parameter_count=params,
        gqa_strategy=strategy,
        checks=checks,
    )
    if with_suggestions:
        result.suggestions = suggest(arch, inst, target, tensors)
    return result


def _fits(arch: ModelArch, target: TargetSpec, tensors, tp: int, batch: int, seq: int, ctx: int) -> int | None:
    _, w = weight_bytes(arch, target.dtype, target.quantization, tensors)
    need = per_core_bytes(
        w,
        kv_cache_bytes(arch, tp, batch, seq, target.dtype),
        activation_bytes(arch, batch, min(ctx, seq), target.dtype),
        tp,
    )
    return need if need <= target.instance.hbm_per_core(target.lnc) else None


def _valid_tps(arch: ModelArch, inst: InstanceType, lnc: int, target: TargetSpec | None = None) -> list[int]:
    """The tps that divide the heads on `inst`; for a transformers-neuronx profile, only the guide's degrees."""
    out = [d for d in inst.supported_tp(lnc) if d <= inst.cores(lnc) and arch.num_heads % d == 0]
    if target is not None and profile_of(target).backend.name == "tnx":
        guide = guide_tps(inst.family, inst.cores(lnc))
        out = [d for d in out if guide is None or d in guide]
    return out


def _heads_fix(arch: ModelArch, target: TargetSpec, tensors) -> str:
    """The guide's sizing rule: heads divisible by tp; names the tps that divide the heads on this
    instance and, of those, the smallest whose memory fits."""
    inst, tp = target.instance, target.tp_degree
    good = _valid_tps(arch, inst, target.lnc, target)
    b, s, ctx = target.batch_size, target.sequence_length, target.context_length
    fitting = [d for d in good if _fits(arch, target, tensors, d, b, s, ctx)]
    text = f"{arch.num_heads} attention heads are not divisible by tp={tp}; "
    if fitting:
        return text + f"use tp={fitting[0]} (tps that divide the heads on {inst.name}: {good})"
    return text + f"use tp in {good} on {inst.name}"


def memory_fix(arch: ModelArch, target: TargetSpec, tensors) -> Fix | str:
    """The first concrete change that makes the target fit, in order of least disruption: a `Fix` when
    it is a change of one field the surfaces name (batch size, sequence length, quantization), else
    the sentence (a tp, tp=N being every surface's word for it, or another instance)."""
    inst, b, s, ctx = target.instance, target.batch_size, target.sequence_length, target.context_length
    for tp in _valid_tps(arch, inst, target.lnc, target):
        if tp > target.tp_degree and _fits(arch, target, tensors, tp, b, s, ctx):
            return f"use tp={tp} ({inst.name} has {inst.cores(target.lnc)} cores)"
    tp = target.tp_degree
    for batch in sorted((x for x in BATCH_LADDER if x < b), reverse=True):
        if _fits(arch, target, tensors, tp, batch, s, ctx):
            return Fix("batch_size", batch, f"at tp={tp}")
    for seq in sorted((x for x in SEQ_LADDER if x < s), reverse=True):
        if _fits(arch, target, tensors, tp, b, seq, ctx):
            return Fix("sequence_length", seq, f"at tp={tp}")
    if not target.quantization.enabled:
        int8 = target.model_copy(update={"quantization": Quantization(dtype="int8")})
        if _fits(arch, int8, tensors, tp, b, s, ctx):
            return Fix("quantization", "int8:per_channel", f"at tp={tp}", sentence="quantize the weights ({change})")
    for other in INSTANCES.values():
        if other.family != inst.family or other.cores() <= inst.cores(target.lnc):
            continue
        t2 = target.model_copy(update={"instance_type": other.name, "logical_nc_config": None})
        for tp2 in _valid_tps(arch, other, other.default_lnc, target):
            if _fits(arch, t2, tensors, tp2, b, s, ctx):
                return f"use {other.name} with tp={tp2} ({other.cores()} cores)"
    return "no tp, batch size, sequence length or instance of this family makes it fit"


def suggest(
    arch: ModelArch, inst: InstanceType, target: TargetSpec, tensors: dict[str, TensorInfo] | None = None
) -> list[Suggestion]:
    """Feasible (tp, batch size, sequence length) on `inst`, smallest tp first: for every valid tp
    and every sequence length (a power-of-two ladder plus the requested one, up to the model's
    limit) the largest batch size that fits (ladder plus the requested one)."""
    t = target.model_copy(update={"instance_type": inst.name})
    limit = arch.max_position_embeddings
    seqs = sorted({s for s in (*SEQ_LADDER, target.sequence_length) if limit is None or s <= limit})
    batches = sorted({*BATCH_LADDER, target.batch_size}, reverse=True)
    out = []
    for tp in _valid_tps(arch, inst, t.lnc, t):
        for seq in seqs:
            for batch in batches:
                ctx = seq if t.max_context_length is None else min(t.max_context_length, seq)
                need = _fits(arch, t, tensors, tp, batch, seq, ctx)
                if need is not None:
                    out.append(Suggestion(tp, batch, seq, need))
                    break
    return out


class PlanRejected(InvalidInput):
    """The planner found the target invalid or too big; nothing was compiled or published. Raised
    with its failed checks (`of`), it says their fixes in each surface's words (`said`); its message
    is the CLI's."""

    checks: tuple[Check, ...] = ()
    slug: str = ""

    @classmethod
    def of(cls, slug: str, checks: list[Check]) -> PlanRejected:
        exc = cls(f"{slug}: " + "; ".join(c.message for c in checks))
        exc.slug, exc.checks = slug, tuple(checks)
        return exc

    def said(self, surface: Surface) -> str:
        """The rejection in a surface's words: the form's and the Airflow tasks' ("Sequence length: 2048")."""
        if not self.checks:
            return str(self)
        return f"{self.slug}: " + "; ".join(c.said(surface) for c in self.checks)

    exit_code = ExitCode.REJECTED  # `run`: the configuration is refused, not the command line
