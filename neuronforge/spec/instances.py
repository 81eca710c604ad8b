"""The Neuron instance table: NeuronCores, HBM per core and the tensor-parallel degrees each supports.

Sources: AWS's Neuron architecture pages (DOCS/latest/general/arch/index.html, DOCS =
https://awsdocs-neuron.readthedocs-hosted.com/en; each instance family's page gives its chips): an
Inferentia2 and a Trainium chip each hold two NeuronCore-v2 and 32 GiB of HBM
(DOCS/latest/general/arch/neuron-hardware/inferentia2.html, …/trainium.html), a Trainium2 chip eight
NeuronCore-v3 (DOCS/v2.29.0/_sources/about-neuron/arch/neuron-hardware/trainium2.rst). The tp degrees
were taken from the NxD Inference features guide
(DOCS/latest/libraries/nxd-inference/developer_guides/feature-guide.html) when the table was written.
trn2 exposes logical NeuronCores (DOCS/latest/general/arch/neuron-features/logical-neuroncore-config.html):
with the default logical NeuronCore config (LNC) of 2, two physical cores (12 GiB each) act as one core
with 24 GiB.
"""

from __future__ import annotations

from dataclasses import dataclass

from neuronforge.common.errors import InvalidInput

GIB = 1024**3


@dataclass(frozen=True)
class InstanceType:
    name: str
    family: str  # inf2 | trn1 | trn1n | trn2
    physical_cores: int
    hbm_per_physical_core: int  # bytes
    tp_degrees: tuple[int, ...]  # supported at the default LNC
    default_lnc: int = 1
    lnc_options: tuple[int, ...] = (1,)

    def cores(self, lnc: int | None = None) -> int:
        """Number of (logical) NeuronCores a model can be sharded over."""
        return self.physical_cores // (lnc or self.default_lnc)

    def hbm_per_core(self, lnc: int | None = None) -> int:
        return self.hbm_per_physical_core * (lnc or self.default_lnc)

    def supported_tp(self, lnc: int | None = None) -> tuple[int, ...]:
        lnc = lnc or self.default_lnc
        if lnc == self.default_lnc:
            return self.tp_degrees
        # Other LNC settings: the same power-of-two ladder up to the core count.
        cores = self.cores(lnc)
        return tuple(d for d in (1, 2, 4, 8, 16, 32, 64, 128) if d <= cores)

    @property
    def compile_target(self) -> str:
        """The compiler target family (optimum-neuron maps inf2 and trn1n to trn1)."""
        return {"inf2": "trn1", "trn1": "trn1", "trn1n": "trn1", "trn2": "trn2", "trn3": "trn3"}[self.family]


_T = (1, 2)
INSTANCES: dict[str, InstanceType] = {
    i.name: i
    for i in [
        InstanceType("inf2.xlarge", "inf2", 2, 16 * GIB, _T),
        InstanceType("inf2.8xlarge", "inf2", 2, 16 * GIB, _T),
        InstanceType("inf2.24xlarge", "inf2", 12, 16 * GIB, (1, 2, 4, 8, 12)),
        InstanceType("inf2.48xlarge", "inf2", 24, 16 * GIB, (1, 2, 4, 8, 24)),
        InstanceType("trn1.2xlarge", "trn1", 2, 16 * GIB, _T),
        InstanceType("trn1.32xlarge", "trn1", 32, 16 * GIB, (1, 2, 8, 16, 32)),
        InstanceType("trn1n.32xlarge", "trn1n", 32, 16 * GIB, (1, 2, 8, 16, 32)),
        # One Trainium2 chip (8 physical cores, 96 GiB): the instance of a third party's published
        # Qwen3-8B start-up times of the plugin (tp 4 at LNC 2: foxl-ai/kiln@f5a7faf3
        # bench/results/2026-10-07-precompile-start.md).
        InstanceType("trn2.3xlarge", "trn2", 8, 12 * GIB, (1, 2, 4), default_lnc=2, lnc_options=(1, 2)),
        InstanceType(
            "trn2.48xlarge",
            "trn2",
            128,
            12 * GIB,
            (1, 2, 4, 8, 16, 32, 64),
            default_lnc=2,
            lnc_options=(1, 2),
        ),
    ]
}


def get_instance(name: str) -> InstanceType:
    """Look an instance up by name, with a message listing the known ones."""
    try:
        return INSTANCES[name]
    except KeyError:
        known = ", ".join(INSTANCES)
        raise InvalidInput(f"unknown instance type {name!r}; known instance types: {known}") from None
