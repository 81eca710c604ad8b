"""LMI (DJL Serving) Neuron container configuration: `serving.properties` and its `lmi.env` twin.

Every value comes from the target and the published URIs, never typed by hand:
- `option.model_id` = the split model (HF config + safetensors) and `option.load_split_model=true`;
- `option.compiled_graph_path` = the store's compile-cache prefix for the compiler version; LMI
  exports it as `NEURON_COMPILE_CACHE_URL`, so it must be in the Neuron persistent-cache layout
  and compiled by the container's compiler version (shared/reference/NEURON.md, "LMI");
- `option.tensor_parallel_degree`, `option.n_positions` (= sequence length),
  `option.max_rolling_batch_size` (= batch size), `option.rolling_batch`, `option.entryPoint`,
  `option.model_loader` (matching the backend) and `option.quantize=static_int8` for int8 weights.
`lmi.env` holds the same settings as the `OPTION_*` environment variables the container reads.
"""

from __future__ import annotations

from neuronforge.errors import InvalidInput
from neuronforge.target import TargetSpec

ENTRY_POINT = "djl_python.transformers_neuronx"
MODEL_LOADERS = {"optimum": "optimum", "nxdi": "nxdi"}
DTYPES = {"bf16": "bf16", "fp16": "fp16", "fp32": "fp32"}


def serving_options(target: TargetSpec, split_model_uri: str, neff_cache_uri: str) -> dict[str, str]:
    if target.backend not in MODEL_LOADERS:
        raise InvalidInput(f"LMI serves Neuron backends ({', '.join(MODEL_LOADERS)}), not {target.backend!r}")
    options = {
        "engine": "Python",
        "option.entryPoint": ENTRY_POINT,
        "option.model_id": split_model_uri,
        "option.load_split_model": "true",
        "option.compiled_graph_path": neff_cache_uri,
        "option.model_loader": MODEL_LOADERS[target.backend],
        "option.tensor_parallel_degree": str(target.tp_degree),
        "option.n_positions": str(target.sequence_length),
        "option.max_rolling_batch_size": str(target.batch_size),
        "option.rolling_batch": "auto" if target.batch_size > 1 else "disable",
        "option.dtype": DTYPES[target.dtype],
    }
    if target.quantization.dtype == "int8":
        options["option.quantize"] = "static_int8"
    return options


def render_properties(options: dict[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in options.items())


def render_env(options: dict[str, str]) -> str:
    """The container maps `OPTION_<NAME>` environment variables to `option.<name>`
    (`OPTION_TENSOR_PARALLEL_DEGREE` -> `option.tensor_parallel_degree`); the engine is its default."""
    lines = []
    for key, value in options.items():
        if key.startswith("option."):
            name = key.removeprefix("option.")
            env = "OPTION_ENTRYPOINT" if name == "entryPoint" else "OPTION_" + name.upper()
            lines.append(f"{env}={value}\n")
    return "".join(lines)
