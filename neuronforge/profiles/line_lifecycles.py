"""Each serving line's lifecycle per instance family, reconciled from AWS's statements (the profile
modules attach them to their profiles: `ServingProfile.lifecycle`).

The reconciliation the NxD Inference line needs, statement by statement:
- The NxD Inference 2.29.0 release notes: "NxD Inference models are now only supported on Trn2 and
  newer hardware" (its kernels moved to NKI 0.3.0, which does not run on Trn1/Inf2); Inf2/Trn1
  customers "should pin to release 2.28". So 2.28 is the last release that serves inf2/trn1.
- The maintenance announcements: NxD Inference is in maintenance from 2.30 (the 2.32.0 component
  notes say 2.32; the announcement is the statement of policy and says 2.30), and 0.10.18399 in
  2.31.0 is its last release ("No new releases are planned"); 2.32 drops it from the DLCs.
- The end-of-support announcement (2026-10-16): support ends on Trn2/Trn3 from 2.34, while "On Inf2
  and Trn1 instances [it] remain[s] in maintenance mode at Neuron SDK 2.31". Read with the 2.29
  notes, that keeps Inf2/Trn1 users in maintenance (fixes, no end date) on the release that still
  serves them — it does not make 2.29–2.31 serve Inf2/Trn1 models again. So inf2/trn1 are frozen
  at 2.28 (not ended), trn2/trn3 end at 2.34 and move to the vLLM Neuron plugin.
"""

from __future__ import annotations

from neuronforge.profiles.lifecycle import FamilyLifecycle, Lifecycle, LineRelease, Phase, Source, Status
from neuronforge.profiles.sdk_releases import (
    LMI_REMOVED,
    NXDI_2_27,
    NXDI_2_29,
    NXDI_2_31,
    NXDI_2_32_DLC,
    NXDI_EOS,
    NXDI_MAINTENANCE,
    OPTIMUM_0_4_5,
    TNX_EOS,
    VLLM_NEURON_2_32,
    VLLM_NEURON_BETA,
)

A, M, F, E, N = Status.ACTIVE, Status.MAINTENANCE, Status.FROZEN, Status.END_OF_SUPPORT, Status.NOT_SERVED

PLUGIN_0_2_0 = Source(
    "vllm-project/vllm-neuron 0.2.0 README (a9671254): AWS Neuron SDK 2.26.1 on Inf2, Trn1, Trn1n, Trn2",
    "https://gh.072103.xyz/vllm-project/vllm-neuron/blob/a9671254/README.md",
)
_DLC = "https://gh.072103.xyz/aws-neuron/deep-learning-containers/blob"


def _dlc(tag: str, vllm: str) -> Source:
    return Source(
        f"aws-neuron/deep-learning-containers {tag}: vllm/inference/{vllm}/Dockerfile.neuronx",
        f"{_DLC}/{tag}/vllm/inference/{vllm}/Dockerfile.neuronx",
    )


_NXDI_FROZEN_NOTE = (
    "NxD Inference 0.9+ builds its kernels with NKI 0.3.0, which does not run on Inf2/Trn1; the end-of-support "
    "announcement keeps Inf2/Trn1 in maintenance (fixes only) without adding a release that serves them"
)
_NXDI_TRN = (
    Phase("2.30", M, NXDI_MAINTENANCE),
    Phase("2.31", M, NXDI_2_31, "0.10.18399 is the last NxD Inference release"),
    Phase("2.32", F, NXDI_2_32_DLC),
    Phase("2.34", E, NXDI_EOS, "announced; migrate to the vLLM Neuron plugin"),
)

VLLM_NEURON = Lifecycle(
    line="vllm-neuron",
    summary="vLLM on NxD Inference: the last release for inf2/trn1 is SDK 2.28, for trn2/trn3 SDK 2.31 "
    "(end of support on Trn2/Trn3 from 2.34)",
    families=(
        FamilyLifecycle(
            ("inf2",), (Phase("2.26", A, PLUGIN_0_2_0), Phase("2.29", F, NXDI_2_29, _NXDI_FROZEN_NOTE)), "2.28"
        ),
        FamilyLifecycle(
            ("trn1", "trn1n"), (Phase("2.26", A, PLUGIN_0_2_0), Phase("2.29", F, NXDI_2_29, _NXDI_FROZEN_NOTE)), "2.28"
        ),
        FamilyLifecycle(("trn2",), (Phase("2.26", A, PLUGIN_0_2_0), *_NXDI_TRN), "2.31", moves_to="vllm-neuron-native"),
        FamilyLifecycle(("trn3",), (Phase("2.27", A, NXDI_2_27), *_NXDI_TRN), "2.31", moves_to="vllm-neuron-native"),
    ),
    releases=(
        LineRelease("2.26.1", "2025-10-29", "NxD Inference 0.6.10598, vllm-neuron 0.2.0, vLLM 0.11.0", PLUGIN_0_2_0),
        LineRelease(
            "2.27.0", "2025-12-19", "NxD Inference 0.7.14366, plugin 0.2.1-lts, vLLM 0.11.0", _dlc("2.27.0", "0.11.0")
        ),
        LineRelease(
            "2.27.1", "2026-01-14", "NxD Inference 0.7.15063, plugin 0.3.0, vLLM 0.13.0", _dlc("2.27.1", "0.13.0")
        ),
        LineRelease(
            "2.28.0", "2026-02-26", "NxD Inference 0.8.16251, plugin 0.4.1, vLLM 0.13.0", _dlc("2.28.0", "0.13.0")
        ),
        LineRelease(
            "2.29.0", "2026-04-09", "NxD Inference 0.9.17334, plugin 0.5.0, vLLM 0.16.0", _dlc("2.29.0", "0.16.0")
        ),
        LineRelease(
            "2.30.0", "2026-05-21", "NxD Inference 0.10.17970, plugin 0.5.1, vLLM 0.16.0", _dlc("2.30.0", "0.16.0")
        ),
        LineRelease("2.31.1", "", "NxD Inference 0.10.18399, plugin 0.5.3, vLLM 0.16.0", _dlc("2.31.1", "0.16.0")),
    ),
)

_NATIVE_SERVES = (Phase("2.31", A, VLLM_NEURON_BETA, "Beta, from 2.31.1"),)
_NATIVE_NOT = (Phase("2.31", N, VLLM_NEURON_2_32, "Trn2/Trn3 only: use vllm-neuron@2.28 on inf2/trn1"),)
VLLM_NEURON_NATIVE = Lifecycle(
    line="vllm-neuron-native",
    summary="the vLLM Neuron plugin without NxD Inference: Trn2/Trn3 only, from SDK 2.31.1 (Beta)",
    families=(
        FamilyLifecycle(("trn2",), _NATIVE_SERVES),
        FamilyLifecycle(("trn3",), _NATIVE_SERVES),
        FamilyLifecycle(("inf2",), _NATIVE_NOT),
        FamilyLifecycle(("trn1", "trn1n"), _NATIVE_NOT),
    ),
    releases=(
        LineRelease("2.31.1", "", "vLLM Neuron 0.21.0.1.0.0 (vLLM 0.21.0)", VLLM_NEURON_BETA),
        LineRelease("2.32.0", "2026-08-17", "vLLM Neuron 0.24.0.1.1.0 (vLLM 0.24.0)", VLLM_NEURON_2_32),
        LineRelease(
            "2.33.0",
            "2026-10-19",
            "vLLM Neuron 0.29.0.1.2.0 (vLLM 0.29.0)",
            Source(
                "Neuron 2.33.0 component release notes index",
                "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/release-notes/components/index.html",
            ),
        ),
    ),
)

_OPTIMUM = Phase("2.26", A, OPTIMUM_0_4_5, "no optimum-neuron release for a newer SDK has shipped yet")
_OPTIMUM_MODELBUILDER = Phase(
    "2.34",
    E,
    NXDI_EOS,
    "announced: the NxD Core inference APIs (ModelBuilder), which optimum-neuron's LLM export is built on, end on "
    "Trn2/Trn3",
)
OPTIMUM_NEURON = Lifecycle(
    line="optimum-neuron",
    summary="optimum-neuron 0.4.5 (SDK 2.26.1) is its latest release; on Trn2/Trn3 the APIs it builds on end in 2.34",
    families=(
        FamilyLifecycle(("inf2",), (_OPTIMUM,)),
        FamilyLifecycle(("trn1", "trn1n"), (_OPTIMUM,)),
        FamilyLifecycle(("trn2",), (_OPTIMUM, _OPTIMUM_MODELBUILDER), moves_to="vllm-neuron-native"),
    ),
    releases=(LineRelease("2.26.1", "2025-10-29", "optimum-neuron 0.4.5", OPTIMUM_0_4_5),),
)

_LMI = (
    Phase("2.21", A, LMI_REMOVED),
    Phase("2.22", F, LMI_REMOVED, "no LMI Neuron image after SDK 2.21.1"),
    Phase("2.26", E, TNX_EOS, "transformers-neuronx, which LMI's Neuron images load with, is no longer supported"),
)
LMI_NEURONX = Lifecycle(
    line="lmi-neuronx",
    summary="LMI's last Neuron image (SDK 2.21.1); transformers-neuronx support ended in 2025",
    families=(
        FamilyLifecycle(("inf2",), _LMI, "2.21", moves_to="vllm-neuron"),
        FamilyLifecycle(("trn1", "trn1n"), _LMI, "2.21", moves_to="vllm-neuron"),
    ),
    releases=(
        LineRelease("2.21.1", "", "transformers-neuronx 0.13.380, LMI 0.33.0 (djl-serving 1132e3ab~1)", LMI_REMOVED),
    ),
)
