"""FAKE transformers_neuronx.utils (0.13.380): the two helpers whose behaviour users see
(aws-neuron/transformers-neuronx 1ade6d74, src/transformers_neuronx/utils.py)."""


def maybe_override_attributes(self, kwargs):
    """The `**kwargs` of GPT-2, GPT-J, GPT-NeoX, OPT and BLOOM end here: each must name an attribute
    the model's config class already has (`n_positions` does, `context_length_estimate` does not)."""
    for key, value in kwargs.items():
        if not hasattr(self, key):
            raise KeyError(f'Found invalid key "{key}".')
        if value is not None:
            setattr(self, key, value)


def power_of_two_bucket_sizes(min_bucket_size, max_bucket_size):
    sizes = []
    bucket_size = min_bucket_size
    while bucket_size < max_bucket_size:
        sizes.append(bucket_size)
        bucket_size *= 2
    sizes.append(max_bucket_size)
    return sizes
