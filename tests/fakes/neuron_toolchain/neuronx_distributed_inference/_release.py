"""Which NxD Inference release this FAKE imitates (tests/fakes/README.md): the version of the
`neuronx-distributed-inference` dist-info first on the path, as the real wheel reports its own. The
package is one fake for three releases — 0.6.10598 (SDK 2.26.1, the dist-info beside it), 0.8.16251
(SDK 2.28.0) and 0.10.18399 (SDK 2.31.1), whose dist-infos the release folders put first — and the
facts that differ between them (`MODEL_TYPES`, the NeuronConfig fields) are chosen here."""

from importlib import metadata

VERSION = metadata.version("neuronx-distributed-inference")
MINOR = tuple(int(part) for part in VERSION.split("+", 1)[0].split(".")[:2])


def at_least(major: int, minor: int) -> bool:
    return (major, minor) <= MINOR
