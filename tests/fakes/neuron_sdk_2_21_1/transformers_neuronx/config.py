"""FAKE transformers_neuronx.config (0.13.380): NeuronConfig, QuantizationConfig and
ContinuousBatchingConfig with the real keyword names, defaults and checks (aws-neuron/transformers-neuronx
main 1ade6d74, src/transformers_neuronx/config.py): unknown NeuronConfig keywords raise
AssertionError("Unexpected NeuronConfig keyword arguments"), a `str` group_query_attention becomes
`GQA(value)` (ValueError otherwise), continuous batching forces padding_side "right", and
QuantizationConfig accepts quant_dtype s8 / f8e4m3fn and quantize_method vector_dynamic / direct_cast
only (NotImplementedError otherwise)."""

from transformers_neuronx.constants import GQA, Layout

_NEURON_CONFIG_DEFAULTS = {
    "sparse_attn": None,
    "quant": None,
    "kv_cache_quant": None,
    "continuous_batching": None,
    "attention_layout": Layout.HSB,
    "collectives_layout": Layout.HSB,
    "cache_layout": Layout.SBH,
    "padding_side": "left",
    "group_query_attention": None,
    "sequence_parallel_norm": False,
    "sequence_parallel_norm_threshold": 2048,
    "bf16_rms_norm": False,
    "on_device_embedding": False,
    "on_device_generation": None,
    "all_reduce_dtype": None,
    "cast_logits_dtype": "float32",
    "fuse_qkv": False,
    "qkv_tiling": False,
    "weight_tiling": False,
    "log_softmax_scores": False,
    "shard_over_sequence": False,
    "output_all_logits": False,
    "attn_output_transposed": False,
    "fused_rmsnorm_qkv": False,
    "fused_rmsnorm_mlp": False,
    "mlp_out_weight_transpose": False,
    "fuse_mlp": False,
    "is_eagle_target": False,
    "is_eagle_draft": False,
    "has_pre_attention_norm": True,
    "compilation_worker_count": None,
    "duplicate_q_weight_sos": False,
}


class QuantizationConfig:
    def __init__(
        self,
        quant_dtype="s8",
        dequant_dtype="f16",
        quantize_method="vector_dynamic",
        quantize_attn=True,
        no_quantize_list=None,
    ):
        if quant_dtype not in ("s8", "f8e4m3fn"):
            raise NotImplementedError(f"{quant_dtype} is not implemented. Available options are 's8' and 'f8e4m3fn'")
        if quantize_method not in ("vector_dynamic", "direct_cast"):
            raise NotImplementedError(f"{quantize_method} is not implemented")
        self.quant_dtype = quant_dtype
        self.dequant_dtype = dequant_dtype
        self.quantize_method = quantize_method
        self.quantize_attn = quantize_attn
        self.no_quantize_list = list(no_quantize_list or [])


class ContinuousBatchingConfig:
    def __init__(self, **kwargs):
        self.max_num_seqs = kwargs.pop("max_num_seqs", None) or kwargs.pop("batch_size_for_shared_caches", None)
        self.max_model_len = kwargs.pop("max_model_len", None)
        self.optimized_paged_attention = kwargs.pop("optimized_paged_attention", False)
        self.enable_chunked_prefill = kwargs.pop("enable_chunked_prefill", False)
        assert not kwargs, f"Unexpected ContinuousBatchingConfig keyword arguments: {kwargs}"

    @property
    def batch_size_for_shared_caches(self):
        return self.max_num_seqs


class NeuronConfig:
    def __init__(self, **kwargs):
        for name, default in _NEURON_CONFIG_DEFAULTS.items():
            setattr(self, name, kwargs.pop(name, default))
        assert not kwargs, f"Unexpected NeuronConfig keyword arguments: {kwargs}"
        if isinstance(self.group_query_attention, str):
            self.group_query_attention = GQA(self.group_query_attention)
        if self.padding_side not in ("left", "right"):
            raise ValueError(f"padding_side must be left or right, got {self.padding_side}")
        if self.continuous_batching is not None:
            self.padding_side = "right"
        if self.qkv_tiling:
            assert self.fuse_qkv, "qkv_tiling requires fuse_qkv"

    def to_json(self):
        """Not part of the real API: what the fake compiler hashes (every field, enums by value)."""
        out = {}
        for name in _NEURON_CONFIG_DEFAULTS:
            value = getattr(self, name)
            if isinstance(value, (QuantizationConfig, ContinuousBatchingConfig)):
                value = {k: v for k, v in vars(value).items()}
            elif hasattr(value, "value"):
                value = value.value
            out[name] = value
        return out
