"""FAKE transformers_neuronx.config (0.13.380): NeuronConfig, QuantizationConfig,
ContinuousBatchingConfig and GenerationConfig with the real keyword names, defaults and checks
(aws-neuron/transformers-neuronx main 1ade6d74, src/transformers_neuronx/config.py): unknown NeuronConfig
keywords raise AssertionError("Unexpected NeuronConfig keyword arguments"), a `str` group_query_attention
becomes `GQA(value)` (ValueError otherwise), continuous batching forces padding_side "right", and
QuantizationConfig accepts quant_dtype s8 / f8e4m3fn and quantize_method vector_dynamic / direct_cast
only (NotImplementedError otherwise). GenerationConfig is the on-device sampling configuration
(`NeuronConfig(on_device_generation=...)`); LMI imports it at module level as `NeuronGenerationConfig`
(djl-serving afece25d / 0.33.0-dlc 8b3b685b, engines/python/setup/djl_python/neuron_utils/model_loader.py:25-26)."""

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


class GenerationConfig:
    """config.py:106-139 (CODE): keyword-only, these defaults; `top_p` and `temperature` become floats
    (element-wise when a list: one value per batch line under `per_batch_line`); equal when every
    attribute is. Sampling on the device is not reproduced: the fake only records it (NeuronConfig
    hashes it into the graphs, as the real on-device sampling changes the HLO)."""

    def __init__(
        self,
        *,
        max_length=None,
        do_sample=False,
        top_k=50,
        top_p=1.0,
        top_p_min_tokens=1,
        global_top_k=None,
        eos_token_id=None,
        temperature=1.0,
        dynamic=False,
        deterministic=False,
        per_batch_line=False,
    ):
        self.max_length = max_length
        self.do_sample = do_sample
        self.per_batch_line = per_batch_line
        self.top_k = top_k
        self.top_p = self._convert_list_to_float(top_p) if isinstance(top_p, list) else float(top_p)
        self.temperature = (
            self._convert_list_to_float(temperature) if isinstance(temperature, list) else float(temperature)
        )
        self.top_p_min_tokens = top_p_min_tokens
        self.global_top_k = global_top_k
        self.eos_token_id = eos_token_id
        self.dynamic = dynamic
        self.deterministic = deterministic

    def __eq__(self, value: object) -> bool:
        return isinstance(value, GenerationConfig) and self.__dict__ == value.__dict__

    def _convert_list_to_float(self, params):
        return [float(p) for p in params]


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
        """What the fake compiler hashes: every field, enums by value, config objects by their attributes
        (the real to_json, config.py:452-471, also renders an object by its `__dict__`)."""
        out = {}
        for name in _NEURON_CONFIG_DEFAULTS:
            value = getattr(self, name)
            if isinstance(value, (QuantizationConfig, ContinuousBatchingConfig, GenerationConfig)):
                value = {k: v for k, v in vars(value).items()}
            elif hasattr(value, "value"):
                value = value.value
            out[name] = value
        return out
