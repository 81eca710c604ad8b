"""A target as the compile DAG's trigger form spells it: what a recompile run's conf holds for each
target it rebuilds, and what an upgrade's migration proposes (one spelling for both)."""

from __future__ import annotations

from typing import Any

from neuronforge.spec.target import TargetSpec


def form_target(spec: TargetSpec) -> dict[str, Any]:
    """A target as the compile DAG's trigger form spells it (its `targets` items). The profile is
    given as written in `spec`: `find_stale` passes it resolved to `name@version`, so a rebuild
    builds the version the target was found stale for even if another is registered meanwhile."""
    q = spec.quantization
    out: dict[str, Any] = {
        "instance_type": spec.instance_type,
        "tp_degree": spec.tp_degree,
        "batch_size": spec.batch_size,
        "sequence_length": spec.sequence_length,
        "dtype": spec.dtype,
        "quantization": f"{q.dtype}:{q.method}" if q.enabled else "none",
        "profile": spec.profile,
    }
    optional = {
        "modules_to_not_convert": [m for m in q.modules_to_not_convert if m != "lm_head"] or None,
        "max_context_length": spec.max_context_length,
        "logical_nc_config": spec.logical_nc_config,
        "context_encoding_buckets": list(spec.context_encoding_buckets or ()) or None,
        "token_generation_buckets": list(spec.token_generation_buckets or ()) or None,
        "backend_options": dict(spec.backend_options) or None,
    }
    return {**out, **{k: v for k, v in optional.items() if v is not None}}
