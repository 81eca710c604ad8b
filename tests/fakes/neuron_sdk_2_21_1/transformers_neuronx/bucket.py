"""FAKE transformers_neuronx.bucket (0.13.380): token, context and batch buckets as the real
bucket.py computes them (aws-neuron/transformers-neuronx 1ade6d74)."""

from transformers_neuronx import utils


def token_sizes(buckets_or_size):
    if isinstance(buckets_or_size, list):
        return sorted(buckets_or_size)
    return utils.power_of_two_bucket_sizes(128, buckets_or_size)


def context_sizes(buckets_or_size, token_buckets=None):
    if isinstance(buckets_or_size, list):
        return sorted(buckets_or_size)
    if isinstance(buckets_or_size, int):
        if buckets_or_size <= 0:
            return []
        return [buckets_or_size]
    if token_buckets is not None and buckets_or_size is None:
        return [bucket // 2 for bucket in token_buckets]
    raise NotImplementedError(f"Prompt bucket config {buckets_or_size} not supported")


def batch_sizes(batch_size):
    if isinstance(batch_size, int):
        return [batch_size]
    if isinstance(batch_size, list):
        return sorted(batch_size)
    raise TypeError("batch_size must be list of ints or int type")
