"""FAKE transformers_neuronx.constants (0.13.380): the module's names as in aws-neuron/transformers-neuronx
1ade6d74 src/transformers_neuronx/constants.py (CODE) — the plain constants (lines 17-32) and the enums whose
values users and LMI pass as strings.

LMI imports `LAYOUT_BSH` and `LAYOUT_HSB` at module level (djl-serving afece25d, and the 0.33.0-dlc branch
8b3b685b the 0.33.0-pytorch-inf2 image was built from, engines/python/setup/djl_python/
transformers_neuronx_scheduler/optimum_modeling.py:27), so without them the handler does not import.
They are plain `str`, not `Layout` members."""

import enum

TILE_SIZE = 128  # weight-transformation tile
FUSED_QKV_TP_FACTOR = 3
KV_SHARD_PAD = 128  # flash-decoding KV sharding pad
TRN1_WORLD_SIZE = 32

LAYOUT_BSH = "BSH"
LAYOUT_HSB = "HSB"
LAYOUT_SBH = "SBH"


class FpBounds:
    """fp8 bounds (constants.py:36-38)."""

    min = -240.0
    max = 240.0


class GQA(enum.Enum):
    # values as in transformers-neuronx 0.13 (constants.py); NeuronConfig converts a str with GQA(value)
    SHARD_OVER_HEADS = "shard-over-heads"
    SHARD_OVER_BATCH = "shard-over-batch"
    REPLICATED_HEADS = "replicated-heads"
    ALL_GATHER_HEADS = "all-gather-heads"


class Layout(enum.Enum):
    HSB = "HSB"
    BSH = "BSH"
    SBH = "SBH"
