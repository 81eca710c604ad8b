"""The artifact's payload: everything a published artifact holds but its smoke result and manifest.

It is assembled on the compile host, right after the compile (the profile's layout: the model folder
named for what it holds and `launch/`, rendered for the artifact's final URIs), together with the
smoke test's reference (`smoke/expected.json`, computed there on the CPU), checked by the profile's
preflight (its consumer's load-time rules) and staged in the store as `builds/<key>/<digest>/`
(`layout.build_prefix`). The smoke test then loads exactly these bytes on a host that did not
compile, and publishing copies them inside the store, adding `smoke.json` and the manifest last:
what the smoke test proved is, byte for byte (sha256 in both manifests), what is published.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from neuronforge.artifacts import layout
from neuronforge.common.errors import NeuronforgeError
from neuronforge.profiles.request import CompileRequest
from neuronforge.spec.toolchain import Toolchain
from neuronforge.stores import ArtifactStore


class PreflightFailed(NeuronforgeError):
    """The assembled artifact breaks a rule its consumer checks at load time; nothing was published."""


@dataclass
class PayloadInput:
    request: CompileRequest
    toolchain: Toolchain
    key: str
    build_dir: Path  # the backend's output
    work_dir: Path
    reference_dir: Path  # the weights the artifact must reproduce (dequantized when quantized)
    checkpoint_dir: Path | None = None  # the verified checkpoint, for profiles that publish it (`needs_checkpoint`)
    unquantized_dir: Path | None = None  # quantized targets: the original weights (agreement is reported)
    prompts: tuple[str, ...] = ()
    max_new_tokens: int = 8


def assemble_payload(inp: PayloadInput, store: ArtifactStore) -> tuple[Path, dict[str, str]]:
    """The payload in a fresh local folder, and its outputs (name -> path relative to the artifact
    root, the manifest's `formats`). Raises PreflightFailed when its consumer would not load it."""
    from neuronforge.pipeline.stages.smoke import DEFAULT_PROMPTS, write_expected
    from neuronforge.profiles.base import Artifact, AssembleJob, LaunchContext

    target = inp.request.target
    profile = inp.request.profile
    stage = inp.work_dir / "payload" / inp.key[:12]
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    config = json.loads((inp.build_dir / "config.json").read_text(encoding="utf-8"))
    launch = LaunchContext(
        target=target.normalized(),
        toolchain=inp.toolchain,
        artifact_uri=store.uri(layout.artifact_prefix(inp.request.source, target, inp.key)),
        cache_uri=store.uri(layout.NEURON_CACHE),
        model_type=config.get("model_type", ""),
        model_config=config,
        build_dir=inp.build_dir,
    )
    outputs = profile.assemble(AssembleJob(inp.build_dir, inp.checkpoint_dir, stage, launch))
    model_dir = stage / profile.smoke_load(stage).model_dir
    write_expected(
        stage,
        reference_dir=inp.reference_dir,
        tokenizer_dir=model_dir if (model_dir / "tokenizer.json").exists() else inp.reference_dir,
        dtype=target.dtype,
        prompts=list(inp.prompts or DEFAULT_PROMPTS),
        max_new_tokens=inp.max_new_tokens,
        unquantized_dir=inp.unquantized_dir,
        with_logits=profile.backend.returns_logits,
    )
    problems = profile.preflight(Artifact(stage, launch.target, inp.toolchain))
    if problems:
        raise PreflightFailed(
            f"refusing to publish {inp.key[:12]}: {profile.ref}'s consumer would not load it: " + "; ".join(problems)
        )
    return stage, outputs


def launch_texts(stage: Path) -> dict[str, str]:
    """The text of each launch file of the staged payload `stage` (`launch/<name>`), as its manifest
    records it for publish (`PayloadManifest.launch`): one larger than `LAUNCH_TEXT_LIMIT` or not UTF-8
    is left out (the catalog links it instead of showing it)."""
    from neuronforge.profiles.base import LAUNCH_DIR
    from neuronforge.records.artifact_manifest import LAUNCH_TEXT_LIMIT

    folder = stage / LAUNCH_DIR
    out = {}
    for path in sorted(folder.iterdir()) if folder.is_dir() else ():
        if not path.is_file() or path.stat().st_size > LAUNCH_TEXT_LIMIT:
            continue
        try:
            out[path.name] = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            continue
    return out
