"""FAKE transformers_neuronx.constants (0.13.380): the enums whose values users and LMI pass as strings."""

import enum


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
