"""A store whose model has several builds of one target across compiler releases, measured by hand
(`tests.releases.measured.smoke`) until builds measure themselves: one published before the protocol (no
measurement), one measured, one synthetic, one slower per token beyond the noise; a second target with one
measured build; `stable` on the measured build, `candidate` on the slower one. Published by the real
publish stage (`release_store.fake_publish`) and moved by `farm.releases.run`, in well under a second."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from neuronforge.artifacts import farm_index
from neuronforge.farm.releases import ReleaseRequest, run
from neuronforge.stores import ArtifactStore
from tests.plugins.release_store import fake_publish
from tests.releases.measured import smoke

MODEL = "org/speed-model"


@dataclass(frozen=True)
class Speed:
    old: str  # published before the protocol: no measurement
    fast: str  # measured, on stable
    synthetic: str  # a fake consumer's numbers
    slow: str  # 25 % slower per token than `fast`, on candidate
    other: str  # the model's other target (batch 2), measured


def seed(store: ArtifactStore, work: Path) -> Speed:
    real = time.gmtime
    builds = []
    plan = [
        (1, "2.0", None),
        (1, "2.1", smoke(0.010, ttft=0.020)),
        (1, "2.2", smoke(0.011, ttft=0.021, synthetic=True)),
        (1, "2.3", smoke(0.0125, ttft=0.0202)),
        (2, "2.1", smoke(0.015, ttft=0.030)),
    ]
    with pytest.MonkeyPatch.context() as mp:
        for n, (batch, compiler, measured) in enumerate(plan):  # published a minute apart, in this order
            mp.setattr(time, "gmtime", lambda t=None, n=n: real(1_790_000_000 + 60 * n))
            builds.append(fake_publish(store, work, MODEL, batch, smoke=measured, compiler=compiler))
    s = Speed(*builds)
    line = {"model": MODEL, "profile": "cpu"}
    for key in (s.fast, s.slow):
        run(store, ReleaseRequest(action="approve", build=key, reason="evals pass"), by="erin")
    run(store, ReleaseRequest(action="promote", **line, channel="stable", build=s.fast, reason="r1"), by="carol")
    run(store, ReleaseRequest(action="promote", **line, channel="candidate", build=s.slow, reason="2.3"), by="ci")
    farm_index.compact(store)
    return s
