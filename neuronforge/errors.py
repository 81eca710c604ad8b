"""Error types that carry a message meant for the person who gave the input.

Every error raised for bad input says what was wrong (with the value) and what to do instead,
so that the CLI and the Airflow tasks can show it as is.
"""


class NeuronforgeError(Exception):
    """Base class: a problem neuronforge can explain."""


class InvalidInput(NeuronforgeError, ValueError):
    """A user-supplied value is malformed or impossible (usage error)."""


class CheckpointError(NeuronforgeError):
    """A checkpoint failed verification; nothing derived from it is published."""


class StoreError(NeuronforgeError):
    """A store operation failed or a store URI cannot be used."""


class ServiceUnreachable(NeuronforgeError):
    """A service neuronforge depends on (the Hugging Face Hub) cannot be reached or answers an
    error: nothing about the input, so callers that judge inputs (a sweep's trial) must not."""
