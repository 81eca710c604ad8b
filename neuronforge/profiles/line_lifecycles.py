"""Each serving line's lifecycle per instance family, derived from the release table (the profile
modules attach them to their profiles: `ServingProfile.lifecycle`).

The facts are the releases' statuses per family, each with its source
(`neuronforge/profiles/releases/<version>.toml`, `lines.<line>.status`); how AWS's statements were
reconciled is written beside them there. For the NxD Inference line:
- the NxD Inference 2.29.0 release notes: "NxD Inference models are now only supported on Trn2 and
  newer hardware"; Inf2/Trn1 customers "should pin to release 2.28" — so inf2/trn1 are frozen at 2.28.
  Other AWS pages read otherwise (the DLC README lists the 2.29.0–2.31.1 NxD Inference images for inf2
  and trn1; the manifest's NxD Inference 0.10.18399 lists them in `supported_instances`): the table
  records both readings on that status (`disputed`), with their sources;
- the maintenance announcements: maintenance from 2.30, 0.10.18399 (SDK 2.31) the last release;
- What's New 2.32.0: NxD Inference out of the DLCs; the end-of-support announcement: it ends on
  Trn2/Trn3 from 2.34, the families moving to the vLLM Neuron plugin.
"""

from __future__ import annotations

from neuronforge.profiles.release_table import lifecycle

VLLM_NEURON = lifecycle("vllm-neuron")
VLLM_NEURON_NATIVE = lifecycle("vllm-neuron-native")
OPTIMUM_NEURON = lifecycle("optimum-neuron")
LMI_NEURONX = lifecycle("lmi-neuronx")
