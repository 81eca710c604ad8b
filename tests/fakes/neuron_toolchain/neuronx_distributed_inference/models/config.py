"""FAKE `neuronx_distributed_inference.models.config` imitating NxD Inference 0.6.10598 (tests/fakes/README.md),
and 0.8.16251 / 0.10.18399 where they differ (`_FIELDS_0_8`, `_FIELDS_0_9`; the release is the dist-info's,
`neuronx_distributed_inference._release`).

What it reproduces of the real module (aws-neuron/neuronx-distributed-inference v0.6.10598, commit
e07f0567, src/neuronx_distributed_inference/models/config.py), because neuronforge and the vLLM
profile's preflight depend on it:
- `NeuronConfig(**kwargs)` keeps every field with the real default and derivation (ctx/tkg/kv-cache
  batch sizes and `pa_num_blocks` default to `batch_size`, `pa_block_size` to `seq_len`, …); a
  `dict` `on_device_sampling_config` becomes an `OnDeviceSamplingConfig`; a keyword it does not know
  is NOT refused: it is logged ("NeuronConfig init: Unexpected keyword arguments: …") and dropped,
  so it never reaches `neuron_config.json`.
- `InferenceConfig.save(dir)` writes `dir/neuron_config.json` as `to_json_string()`:
  `json.dumps(to_dict(config), indent=2, sort_keys=True)` + newline, where `to_dict` walks `__dict__`
  recursively and writes a torch dtype as its bare name (`"bfloat16"`). The file is the whole
  InferenceConfig: `neuron_config` (a nested object), the HF config's fields at the top level (put
  there by `load_pretrained_config`), `fused_spec_config`, `metadata`, derived fields.
- `InferenceConfig.load(dir)` / `from_json_string` rebuild it from that file.
Not reproduced: MoE's `blockwise_matmul_config` (an object of neuronx-distributed holding an enum)
is written as the keyword dict it was given; kernels, speculation and multimodal validation.
"""

from __future__ import annotations

import inspect
import json
import logging
import os

from neuronx_distributed_inference._release import at_least

CONFIG_FILE = "neuron_config.json"

_DTYPES = ("float32", "float16", "bfloat16")


def to_torch_dtype(dtype_str):
    import torch

    assert dtype_str in _DTYPES, f"Unsupported dtype: {dtype_str}"
    return getattr(torch, dtype_str)


def to_dict(obj):
    """The real `to_dict`: dicts and lists recursively, classes as module/name, objects by their
    `__dict__`, torch dtypes as their bare name."""
    import torch

    if type(obj) is dict:
        return {k: to_dict(v) for k, v in obj.items()}
    if type(obj) is list:
        return [to_dict(v) for v in obj]
    if inspect.isclass(obj):
        return {"__module__": obj.__module__, "__name__": obj.__name__}
    if hasattr(obj, "__dict__"):
        return {k: to_dict(v) for k, v in obj.__dict__.items()}
    if type(obj) is torch.dtype:
        return str(obj).split(".")[1]
    return obj


class OnDeviceSamplingConfig:
    """Real fields and defaults; unknown keywords are ignored silently (the real one pops only its own)."""

    def __init__(self, **kwargs):
        self.do_sample = kwargs.pop("do_sample", False)
        self.top_k = kwargs.pop("top_k", 1)
        self.top_p = kwargs.pop("top_p", 1.0)
        self.temperature = kwargs.pop("temperature", 1.0)
        self.dynamic = kwargs.pop("dynamic", False)
        self.deterministic = kwargs.pop("deterministic", False)
        self.global_topk = kwargs.pop("global_topk", 256)
        self.on_device_sampling_config = kwargs.pop("on_device_sampling_config", True)
        self.top_k_kernel_enabled = kwargs.pop("top_k_kernel_enabled", False)


class ChunkedPrefillConfig:
    def __init__(self, **kwargs):
        self.max_num_seqs = kwargs.pop("max_num_seqs", 0)
        self.tkg_model_enabled = kwargs.pop("tkg_model_enabled", True)
        self.kernel_q_tile_size = kwargs.pop("kernel_q_tile_size", 128)
        self.kernel_kv_tile_size = kwargs.pop("kernel_kv_tile_size", 1024)


# Plain fields in the order 0.6.10598 sets them, with their defaults (derived ones are set in
# __init__). A name mapped to `None` defaults to None.
_PLAIN_FIELDS: tuple[tuple[str, object], ...] = (
    ("allow_input_truncation", False),
    ("on_cpu", False),
    ("output_logits", False),
    ("cast_type", "config"),
    ("vocab_parallel", False),
    ("enable_cte_modular_flow", False),
    ("layer_boundary_markers", False),
    ("fused_qkv", False),
    ("sequence_parallel_enabled", False),
    ("weight_gather_seq_len_threshold", 32768),
    ("attn_cls", "NeuronLlamaAttention"),
    ("is_continuous_batching", False),
    ("kv_cache_padding_size", 0),
    ("async_mode", False),
    ("enable_bucketing", False),
    ("bucket_n_active_tokens", False),
    ("prefix_buckets", None),
    ("quantized", False),
    ("quantized_checkpoints_path", None),
    ("quantization_type", "per_tensor_symmetric"),
    ("quantization_dtype", "int8"),
    ("modules_to_not_convert", None),
    ("draft_model_modules_to_not_convert", None),
    ("kv_cache_quant", False),
    ("speculation_length", 0),
    ("enable_fused_speculation", False),
    ("enable_eagle_speculation", False),
    ("is_eagle_draft", False),
    ("enable_eagle_draft_input_norm", False),
    ("token_tree_config", None),
    ("is_medusa", False),
    ("medusa_speculation_length", 0),
    ("num_medusa_heads", 0),
    ("medusa_tree", None),
    ("is_block_kv_layout", False),
    ("is_prefix_caching", False),
    ("lora_config", None),
    ("tp_degree", 1),
    ("cp_degree", 1),
    ("attention_dp_degree", 1),
    ("pp_degree", 1),
    ("ep_degree", 1),
    ("save_sharded_checkpoint", False),
    ("skip_sharding", False),
    ("qk_layernorm", False),
    ("start_rank_id", 0),
    ("flash_decoding_enabled", False),
    ("disable_kv_cache_tiling", False),
    ("k_cache_transposed", False),
    ("attn_kernel_enabled", None),
    ("strided_context_parallel_kernel_enabled", False),
    ("qkv_kernel_enabled", False),
    ("qkv_kernel_nbsd_layout", False),
    ("mlp_kernel_enabled", False),
    ("fused_rmsnorm_skip_gamma", False),
    ("mlp_kernel_fuse_residual_add", False),
    ("qkv_kernel_fuse_residual_add", False),
    ("quantized_mlp_kernel_enabled", False),
    ("activation_quantization_type", None),
    ("attn_tkg_nki_kernel_enabled", False),
    ("attn_tkg_builtin_kernel_enabled", False),
    ("attn_block_tkg_nki_kernel_enabled", False),
    ("attn_block_cte_nki_kernel_enabled", False),
    ("attn_block_tkg_nki_kernel_cache_update", False),
    ("attn_block_tkg_nki_kernel_cascaded_attention", False),
    ("rmsnorm_quantize_kernel_enabled", False),
    ("quantize_clamp_bound", float("inf")),
    ("moe_fused_nki_kernel_enabled", None),
    ("router_topk_nki_kernel_enabled", None),
    ("expert_mlp_nki_kernel_enabled", None),
    ("shared_mlp_nki_kernel_enabled", None),
)
# Fields NxD Inference 0.8 (cd3abf30, SDK 2.28.0) added to NeuronConfig.__init__, with their defaults
# (`kwargs.pop(name, default)` in models/config.py): 0.6.10598 drops them with the warning, 0.8 keeps
# them. Not reproduced: their validations (e.g. qkv_cte_nki_kernel_fuse_rope needing the qkv kernels) and
# the dict -> object conversions of kv_quant_config / tensor_capture_config / tensor_replacement_config.
_FIELDS_0_8: tuple[tuple[str, object], ...] = (
    ("disable_argmax_kernel", False),
    ("token_generation_batches", None),
    ("quantization_block_size", None),
    ("quantization_block_axis", None),
    ("quantization_scale_dtype", "f32"),
    ("is_mxfp4_compute", False),
    ("is_full_model_shuffled", False),
    ("eagle_rolling_buffer_kernel_enabled", False),
    ("is_eagle3", False),
    ("windowed_context_encoding_size", None),
    ("kv_quant_config", None),
    ("tensor_replacement_config", None),
    ("tensor_capture_config", None),
    ("mlp_cp_degree", 1),
    ("pre_rope_rmsnorm", False),
    ("qkv_nki_kernel_enabled", False),
    ("qkv_cte_nki_kernel_fuse_rope", False),
    ("mlp_tkg_nki_kernel_enabled", False),
    ("out_proj_kernel_enabled", False),
    ("attn_block_tkg_nki_kernel_use_online_softmax", True),
    ("attn_block_tkg_nki_kernel_disable_gpsimd_sb2sb", False),
    ("dma_order_config", None),
    ("padded_hidden_size", None),
    ("padded_intermediate_size", None),
    ("disable_numeric_cc_token", False),
    ("switch_cc", False),
    ("ep_dispatch_cc_option", "AR_AG"),
)
# ... and 0.9 (ef2731ef) one more; 0.10.18399 (SDK 2.31.1, no published source) is taken to keep 0.9's.
_FIELDS_0_9: tuple[tuple[str, object], ...] = (("enable_ve_data_parallel", False),)
# Popped only after the "Unexpected keyword arguments" warning in 0.6.10598: accepted, but named
# in the warning when given.
_LATE_FIELDS: tuple[tuple[str, object], ...] = (
    ("apply_seq_ids_mask", False),
    ("skip_warmup", False),
    ("enable_output_completion_notifications", False),
)


class NeuronConfig:
    """The fields of NxD Inference 0.6.10598's NeuronConfig, with its defaults and derivations."""

    def __init__(self, **kwargs) -> None:
        self.batch_size = kwargs.pop("batch_size", 1)
        self.padding_side = kwargs.pop("padding_side", "right")
        self.seq_len = kwargs.pop("seq_len", 128)
        self.n_active_tokens = kwargs.pop("n_active_tokens", self.seq_len)
        self.n_positions = kwargs.pop("n_positions", self.seq_len)
        self.is_prefill_stage = None
        if "torch_dtype" in kwargs:
            self.torch_dtype = kwargs.pop("torch_dtype")
            if isinstance(self.torch_dtype, str):
                self.torch_dtype = to_torch_dtype(self.torch_dtype)
            self.overrides_torch_dtype = kwargs.pop("overrides_torch_dtype", True)
        else:
            self.torch_dtype = to_torch_dtype("bfloat16")
            self.overrides_torch_dtype = False
        for name in ("rpl_reduce_dtype", "attention_dtype"):
            value = kwargs.pop(name, None)
            setattr(self, name, to_torch_dtype(value) if isinstance(value, str) else value)
        self.max_context_length = kwargs.pop("max_context_length", self.seq_len)
        self.max_new_tokens = kwargs.pop("max_new_tokens", self.seq_len - self.max_context_length) or None
        self.max_length = kwargs.pop("max_length", self.seq_len)
        assert self.max_context_length <= self.max_length, "max_context_length cannot be more than max_length"

        for name, default in _PLAIN_FIELDS:
            setattr(self, name, kwargs.pop(name, default))
        if at_least(0, 8):
            for name, default in _FIELDS_0_8 + (_FIELDS_0_9 if at_least(0, 9) else ()):
                setattr(self, name, kwargs.pop(name, default))
            # derived in 0.8: the shuffles follow mxfp4; the kernel KV update is off unless enabled by kernels
            self.is_hidden_dim_shuffled = self.is_mxfp4_compute
            self.is_intermediate_dim_shuffled = self.is_mxfp4_compute
            self.kv_cache_update_with_kernel = False
        if self.cast_type not in ("config", "as-declared"):
            raise ValueError("cast_type must be one of config, as-declared")
        # Derived from batch_size / seq_len when not given.
        self.ctx_batch_size = kwargs.pop("ctx_batch_size", self.batch_size)
        self.tkg_batch_size = kwargs.pop("tkg_batch_size", self.batch_size)
        self.max_batch_size = kwargs.pop("max_batch_size", self.batch_size)
        self.kv_cache_batch_size = kwargs.pop("kv_cache_batch_size", self.batch_size)
        self.spec_batch_size = kwargs.pop("spec_batch_size", self.batch_size)
        self.pa_num_blocks = kwargs.pop("pa_num_blocks", self.batch_size)
        self.pa_block_size = kwargs.pop("pa_block_size", self.seq_len)
        self.buckets = kwargs.pop("buckets", [self.seq_len])
        self.context_encoding_buckets = kwargs.pop("context_encoding_buckets", None)
        self.token_generation_buckets = kwargs.pop("token_generation_buckets", None)
        if self.context_encoding_buckets is not None:
            self.context_encoding_buckets.sort()
            assert self.context_encoding_buckets[-1] <= self.max_context_length, (
                f"Context bucket {self.context_encoding_buckets[-1]} should be <= {self.max_context_length}"
            )
        if self.token_generation_buckets is not None:
            self.token_generation_buckets.sort()
            assert self.token_generation_buckets[-1] <= self.max_length, (
                f"Token generation bucket {self.token_generation_buckets[-1]} should be <= {self.max_length}"
            )
        if self.quantized is True:
            assert self.quantized_checkpoints_path is not None, "quantized_checkpoints_path is required"

        self.on_device_sampling_config = kwargs.pop("on_device_sampling_config", None)
        if type(self.on_device_sampling_config) is dict:
            self.on_device_sampling_config = OnDeviceSamplingConfig(**self.on_device_sampling_config)
        self.chunked_prefill_config = kwargs.pop("chunked_prefill_config", None)
        if type(self.chunked_prefill_config) is dict:
            self.chunked_prefill_config = ChunkedPrefillConfig(**self.chunked_prefill_config)
        self.is_chunked_prefill = self.chunked_prefill_config is not None
        if self.is_chunked_prefill:
            assert self.is_block_kv_layout, "is_block_kv_layout has to be true for chunked prefill"
        self.enable_token_tree = self.token_tree_config is not None
        if self.enable_eagle_speculation:
            self.enable_fused_speculation = True

        self.world_size = kwargs.pop("world_size", None) or self.tp_degree * self.pp_degree * self.ep_degree
        self.local_ranks_size = kwargs.pop("local_ranks_size", None) or self.world_size
        self.kv_cache_tiling = False
        self.logical_nc_config = self._get_lnc(kwargs)
        self.lm_head_pad = kwargs.pop("lm_head_pad", self.logical_nc_config > 1)
        self.lm_head_pad_alignment_size = kwargs.pop("lm_head_pad_alignment_size", 1)
        self.cc_pipeline_tiling_factor = kwargs.pop("cc_pipeline_tiling_factor", 2)
        self.seq_len_threshold_for_cc_tiling = kwargs.pop("seq_len_threshold_for_cc_tiling", 16384)
        self.tile_cc = self.cc_pipeline_tiling_factor > 1 and (
            self.mlp_kernel_enabled or self.quantized_mlp_kernel_enabled
        )
        self.target = kwargs.pop("target", None)
        self.enable_spill_reload_dge = kwargs.pop("enable_spill_reload_dge", False)
        self.weights_to_skip_layout_optimization = []

        if kwargs:
            logging.warning(f"NeuronConfig init: Unexpected keyword arguments: {kwargs}")
        for name, default in _LATE_FIELDS:
            setattr(self, name, kwargs.pop(name, default))
        self.scratchpad_page_size = 1024 if self.max_context_length >= 32 * 1024 else None
        self.enable_long_context_mode = self.max_context_length >= 32 * 1024
        page = kwargs.pop("scratchpad_page_size", self.scratchpad_page_size)
        self.scratchpad_page_size = int(page) if page else page

    def _get_lnc(self, kwargs) -> int:
        """NEURON_LOGICAL_NC_CONFIG > the keyword > the platform's (1 here: the fake is no trn2)."""
        env = int(os.environ.get("NEURON_LOGICAL_NC_CONFIG", -1))
        given = int(kwargs.pop("logical_nc_config", -1))
        return env if env != -1 else given if given != -1 else 1


class MoENeuronConfig(NeuronConfig):
    def __init__(self, capacity_factor=None, glu_mlp=True, **kwargs) -> None:
        self.capacity_factor = float(capacity_factor) if capacity_factor is not None else None
        self.glu_mlp = glu_mlp
        self.glu_type = kwargs.pop("glu_type", "glu")
        self.hidden_act_scaling_factor = kwargs.pop("hidden_act_scaling_factor", 1.0)
        self.hidden_act_bias = kwargs.pop("hidden_act_bias", 0.0)
        self.early_expert_affinity_modulation = kwargs.pop("early_expert_affinity_modulation", False)
        self.normalize_top_k_affinities = not kwargs.pop("disable_normalize_top_k_affinities", False)
        self.fused_shared_experts = kwargs.pop("fused_shared_experts", False)
        self.shared_experts_sequence_parallel_enabled = kwargs.pop("shared_experts_sequence_parallel_enabled", False)
        self.return_expert_index = kwargs.pop("return_expert_index", False)
        self.hybrid_sharding_config = kwargs.pop("hybrid_sharding_config", None)
        self.moe_tp_degree = kwargs.pop("moe_tp_degree", 1)
        self.moe_ep_degree = kwargs.pop("moe_ep_degree", 1)
        self.transpose_shared_experts_weights = kwargs.pop("transpose_shared_experts_weights", False)
        self.blockwise_matmul_config = kwargs.pop("blockwise_matmul_config", {})
        # neuronx-distributed v2.26.0 RouterConfig.from_kwargs: router_act_fn / router_dtype
        self.router_config = {
            "act_fn": kwargs.get("router_act_fn", "softmax"),
            "dtype": kwargs.get("router_dtype", "float32"),
        }
        super().__init__(**kwargs)


class InferenceConfig:
    """`neuron_config` + the HF config's fields (via `load_config`) + kwargs, saved whole."""

    def __init__(self, neuron_config, fused_spec_config=None, load_config=None, metadata=None, **kwargs):
        self.neuron_config = neuron_config
        self.fused_spec_config = fused_spec_config
        if load_config is not None:
            load_config(self)
        self.metadata = metadata
        for key, value in kwargs.items():
            setattr(self, key, value)
        self.add_derived_config()

    def add_derived_config(self) -> None:
        self.num_cores_per_group = 1

    def save(self, model_path) -> None:
        os.makedirs(model_path, exist_ok=True)
        with open(os.path.join(model_path, CONFIG_FILE), "w", encoding="utf-8") as f:
            f.write(self.to_json_string() + "\n")

    def to_json_string(self) -> str:
        return json.dumps(to_dict(self), indent=2, sort_keys=True)

    @classmethod
    def load(cls, model_path, **kwargs):
        with open(os.path.join(model_path, CONFIG_FILE), encoding="utf-8") as f:
            return cls.from_json_string(f.read(), **kwargs)

    @classmethod
    def from_json_string(cls, json_string: str, **kwargs):
        merged = json.loads(json_string)
        merged.update(kwargs)
        if isinstance(merged.get("neuron_config"), dict):
            merged["neuron_config"] = cls.get_neuron_config_cls()(**merged["neuron_config"])
        return cls(**merged)

    @classmethod
    def get_neuron_config_cls(cls):
        return NeuronConfig
