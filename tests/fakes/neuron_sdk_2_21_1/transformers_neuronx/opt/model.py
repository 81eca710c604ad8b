"""FAKE transformers_neuronx.opt.model.OPTForSampling (0.13.380; 1ade6d74 opt/model.py:
`class OPTForSampling(base.NeuronModelBase)`, positional constructor with `n_positions` and
`context_length_estimate`, `amp=None` meaning the checkpoint's torch_dtype, `**kwargs` into OPTConfig;
n_positions above the position embeddings is a ValueError; behaviour in _fake.py)."""

from transformers_neuronx import _fake, base, bucket
from transformers_neuronx.opt.config import OPTConfig

_TO_AMP = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}  # dtypes.to_amp


class OPTForSampling(base.NeuronModelBase):
    def __init__(
        self,
        config,
        batch_size=1,
        amp=None,
        tp_degree=2,
        n_positions=2048,
        unroll=None,
        context_length_estimate=None,
        context_unroll=1,
        neuron_config=None,
        **kwargs,
    ):
        if amp is None:
            amp = _TO_AMP[str(config.torch_dtype).removeprefix("torch.")]
        opt = OPTConfig(config, n_positions, batch_size, amp, tp_degree, **kwargs)
        super().__init__(None, config)
        self.neuron_config = neuron_config
        max_bucket = max(n_positions) if isinstance(n_positions, (list, tuple)) else n_positions
        if max_bucket > opt.max_position_embeddings:
            raise ValueError(
                f"Sequence length ({max_bucket}) cannot be larger than position embedding's context size "
                f"({opt.max_position_embeddings})!"
            )
        self.batch_sizes = bucket.batch_sizes(batch_size)
        if context_length_estimate is None:
            context_length_estimate = bucket.context_sizes(None, bucket.token_sizes(n_positions))
        _fake.decoder(
            self,
            config,
            n_positions=n_positions,
            batch_size=batch_size,
            amp=amp,
            tp_degree=tp_degree,
            context_length_estimate=context_length_estimate,
            neuron_config=neuron_config,
        )

    def sample(self, input_ids, sequence_length, start_ids=None, top_k=50, streamer=None):
        return _fake.sample(self, input_ids, sequence_length, top_k)
