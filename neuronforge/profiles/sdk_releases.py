"""The Neuron SDK releases neuronforge's profile data knows, and the pages their facts come from.

An upgrade aims at an SDK release; one not listed here is reported as unknown with what is known
of it (an announced release: the announcements), never guessed at. The compiler versions are the
public ones of the release manifest (aws-neuron/aws-neuron-sdk `src/helperscripts/n2-manifest.json`
at 81ce03ae, manifest_version 2.32.0) and, for 2.33.0, its component release-notes index.
"""

from __future__ import annotations

from neuronforge.profiles.lifecycle import SdkRelease, Source, release_key, series

DOCS = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest"
SDK_REPO = "aws-neuron/aws-neuron-sdk@81ce03ae"

# -- the statements the lifecycles cite -----------------------------------------------------------
NXDI_2_29 = Source(
    "NxD Inference release notes, 0.9.17334 + vLLM Neuron Plugin 0.5.0 (Neuron 2.29.0), Breaking changes",
    "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.29.1/release-notes/components/nxd-inference.html",
    "NxD Inference models are now only supported on Trn2 and newer hardware. Customers who require NxD "
    "Inference kernel support on Trn1 or Inf2 instances should pin to release 2.28.",
)
NXDI_2_28 = Source(
    "NxD Inference release notes, 0.8.16251 + vLLM Neuron Plugin 0.4.1 (Neuron 2.28.0)",
    "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.28.1/_sources/release-notes/components/nxd-inference.rst",
    "This version of the vLLM Neuron Plugin is pinned to vLLM version v0.13.0 and requires PyTorch 2.9.",
)
NXDI_2_27 = Source(
    "NxD Inference release notes (Neuron 2.27.0)",
    f"{DOCS}/release-notes/components/nxd-inference.html",
    "Added support for running NxD Inference on Trn3 instances.",
)
NXDI_MAINTENANCE = Source(
    "Announcing maintenance mode for NxD Inference and NxD Core inference APIs (May 20, 2026)",
    f"{DOCS}/about-neuron/announcements/neuron2.x/announce-maintenance-nxdi-nxd-core-inference.html",
    "Starting with Neuron Release 2.30.0, NxD Inference library and NxD Core Inference APIs are in maintenance "
    "mode. Future releases will address critical security issues only and we will gradually end support.",
)
NXDI_2_31 = Source(
    "NxD Inference and NxD Core maintenance support with Neuron SDK 2.31 (August 12, 2026)",
    f"{DOCS}/about-neuron/announcements/neuron2.x/announce-nxdi-maintenance-support-2-31.html",
    "NxD Inference 0.10.18399 and NxD Core 0.19.28492 (in Neuron SDK 2.31.0) will continue to be supported with "
    "critical bug fixes and security patches. No new releases are planned.",
)
NXDI_2_32_DLC = Source(
    "What's New, Neuron 2.32.0 (August 17, 2026), Software lifecycle updates",
    f"{DOCS}/about-neuron/whats-new.html",
    "NxD Inference and NxD Core — no longer included in Neuron DLCs; the pytorch-inference-neuronx DLC and the "
    "legacy vLLM 0.16 pytorch-inference-vllm-neuronx DLC are no longer published. Use a 2.31.0 or earlier image "
    "if required",
)
NXDI_EOS = Source(
    "Announcing end of support for the NxD Inference library and NxD Core Inference APIs on Trn2 and Trn3 "
    "starting in Neuron 2.34 (October 16, 2026)",
    f"{DOCS}/about-neuron/announcements/neuron2.x/announce-eos-nxdi-nxd-core-inference.html",
    "Starting with Neuron Release 2.34, Neuron will end support for the NxD Inference library and the NxD Core "
    "Inference APIs on Trn2 and Trn3 instances. [...] On Inf2 and Trn1 instances, the NxD Inference library and "
    "NxD Core Inference APIs remain in maintenance mode at Neuron SDK 2.31",
)
NEURON_LS_JSON = Source(
    "Announcing end of support for the neuron-ls JSON output format starting with Neuron 2.34 (October 16, 2026)",
    f"{DOCS}/about-neuron/announcements/neuron2.x/announce-intent-eos-neuron-ls-json.html",
    "Starting with the Neuron 2.34 release, neuron-ls no longer supports its current JSON output (--json-output, "
    "-j). Neuron 2.34 replaces it with an updated JSON output that you select with --output-format json",
)
VLLM_NEURON_BETA = Source(
    "What's New: vLLM Neuron Beta (July 20, 2026)",
    f"{DOCS}/about-neuron/whats-new.html#whats-new-2026-07-20-vllm-neuron-beta",
    "We are releasing vLLM Neuron Beta (v0.21.0.1.0.0) — an enhanced vLLM plugin for serving models on Trn2 and "
    "Trn3. vLLM Neuron implements models directly within the plugin with no dependency on NxD Inference.",
)
VLLM_NEURON_2_32 = Source(
    "Neuron 2.32.0 release notes, component cards",
    "https://gh.072103.xyz/aws-neuron/aws-neuron-sdk/blob/a3247f5b/release-notes/2.32.0.rst",
    "vLLM Neuron (Beta) 2.32.0 release notes ... Supports: Trn2, Trn3",
)
COMPONENTS_2_33 = Source(
    "Neuron 2.33.0 component release notes index",
    "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/release-notes/components/index.html",
    "vLLM Neuron (Beta) 2.33.0 0.29.0.1.2.0 [...] Neuron Compiler 2.33.0 2.28.7631.0 (no NxD Inference row)",
)
OPTIMUM_0_4_5 = Source(
    "optimum-neuron v0.4.5, its latest release: the [neuronx] extra pins Neuron SDK 2.26.1 (neuronx-cc 2.21.33363.0)",
    "https://gh.072103.xyz/huggingface/optimum-neuron/blob/v0.4.5/setup.py",
)
LMI_REMOVED = Source(
    "djl-serving commit 1132e3ab (PR #2939, 2025-11-03) removes all Neuron support; the last LMI Neuron image "
    "(serving/docker/pytorch-inf2.Dockerfile at 1132e3ab~1) pins SDK 2.21.1",
    "https://gh.072103.xyz/deepjavalibrary/djl-serving/pull/2939",
)
TNX_MAINTENANCE = Source(
    "Announcing maintenance mode for Transformers NeuronX library starting next release",
    f"{DOCS}/about-neuron/announcements/neuron2.x/announce-intent-maintenance-tnx.html",
    "Starting from Neuron release 2.24, Transformers NeuronX library is entering maintenance mode.",
)
TNX_EOS = Source(
    "Transformers NeuronX documentation (Neuron 2.28.1)",
    "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.28.1/_sources/libraries/transformers-neuronx/index.rst",
    "As of 9/16/2025, support has ended for the Transformers NeuronX library and the corresponding documentation "
    "has been archived.",
)
MANIFEST = Source(
    "Neuron SDK release manifest (n2-manifest.json, manifest_version 2.32.0)",
    "https://gh.072103.xyz/aws-neuron/aws-neuron-sdk/blob/81ce03ae/src/helperscripts/n2-manifest.json",
)

RELEASES: tuple[SdkRelease, ...] = (
    SdkRelease("2.21.1", "", "2.16.372.0", sources=(MANIFEST,)),
    SdkRelease("2.26.0", "", "2.21.18209.0", sources=(MANIFEST,)),
    SdkRelease("2.26.1", "2025-10-29", "2.21.33363.0", sources=(MANIFEST,)),
    SdkRelease(
        "2.27.0", "2025-12-19", "2.22.12471.0", notes=("NxD Inference adds Trn3",), sources=(MANIFEST, NXDI_2_27)
    ),
    SdkRelease("2.27.1", "2026-01-14", "2.22.12471.0", sources=(MANIFEST,)),
    SdkRelease(
        "2.28.0",
        "2026-02-26",
        "2.23.6484.0",
        notes=("the last NxD Inference release for Inf2/Trn1 (plugin 0.4.1, vLLM 0.13.0)",),
        sources=(MANIFEST, NXDI_2_28),
    ),
    SdkRelease("2.28.1", "", "2.23.6484.0", sources=(MANIFEST,)),
    SdkRelease(
        "2.29.0",
        "2026-04-09",
        "2.24.5133.0",
        notes=("NxD Inference serves Trn2 and newer only",),
        sources=(MANIFEST, NXDI_2_29),
    ),
    SdkRelease("2.29.1", "", "2.24.8799.0", sources=(MANIFEST,)),
    SdkRelease(
        "2.30.0",
        "2026-05-21",
        "2.25.3371.0",
        notes=("NxD Inference in maintenance",),
        sources=(MANIFEST, NXDI_MAINTENANCE),
    ),
    SdkRelease(
        "2.31.0",
        "2026-07-07",
        "2.26.6360.0",
        notes=("the last NxD Inference release (0.10.18399)",),
        sources=(MANIFEST, NXDI_2_31),
    ),
    SdkRelease(
        "2.31.1",
        "",
        "2.26.6360.0",
        notes=("vLLM Neuron Beta 0.21.0.1.0.0 (Trn2/Trn3, no NxD Inference)",),
        sources=(MANIFEST, VLLM_NEURON_BETA),
    ),
    SdkRelease(
        "2.32.0",
        "2026-08-17",
        "2.27.5334.0",
        notes=("NxD Inference out of the DLCs and DLAMIs; vLLM Neuron 0.24.0.1.1.0",),
        sources=(MANIFEST, NXDI_2_32_DLC),
    ),
    SdkRelease("2.33.0", "2026-10-19", "2.28.7631.0", notes=("vLLM Neuron 0.29.0.1.2.0",), sources=(COMPONENTS_2_33,)),
    SdkRelease(
        "2.34",
        "",
        released=False,
        notes=(
            "announced: NxD Inference and the NxD Core inference APIs (ModelBuilder, which optimum-neuron's LLM path "
            "uses) end support on Trn2/Trn3",
            "announced: neuron-ls --json-output/-j is replaced by --output-format json",
        ),
        sources=(NXDI_EOS, NEURON_LS_JSON),
    ),
)


def known_release(version: str) -> SdkRelease | None:
    """The released SDK `version` names (`2.31` names its newest patch, 2.31.1, as releases are
    spoken of), or None when the data does not know it as released."""
    if version.count(".") == 1:
        in_series = [r for r in RELEASES if r.released and series(r.version) == version]
        if in_series:
            return max(in_series, key=lambda r: release_key(r.version))
    return next((r for r in RELEASES if r.released and release_key(r.version) == release_key(version)), None)


def announced(version: str) -> SdkRelease | None:
    """An SDK release only announced so far (what is known of it), or None."""
    return next(
        (r for r in RELEASES if not r.released and release_key(r.version) == release_key(version)),
        None,
    )


def latest_release() -> SdkRelease:
    return max((r for r in RELEASES if r.released), key=lambda r: release_key(r.version))
