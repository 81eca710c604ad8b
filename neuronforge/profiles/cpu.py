"""Profile `cpu`: the embedded default. AOTInductor graphs for this machine's CPU, loaded by
`neuronforge.compilation.backends.cpu.CpuModel` (torch + safetensors only). Published under `cpu-aoti/`: it is
a CPU artifact and says so (`compiled.json` names its format); it is no Optimum export and carries
no `neuron_config.json` that a Neuron loader could mistake for one."""

from __future__ import annotations

from neuronforge.compilation.backends.cpu import BACKEND, COMPILED_JSON, FORMAT, FORMAT_VERSION
from neuronforge.profiles.base import Artifact, LaunchContext, Pins, ServingProfile, read_json


class CpuProfile(ServingProfile):
    name = "cpu"
    title = "neuronforge's CPU loader (CpuModel: PyTorch AOTInductor packages + safetensors)"
    pins = Pins(sdk_release="none")  # torch and transformers as installed (recorded in the key)
    backend = BACKEND
    folder = "cpu-aoti"
    publishes = "cpu-aoti/: AOTInductor .pt2 graphs, weights.safetensors, compiled.json, config + tokenizer"

    @property
    def version(self) -> str:
        return "local"

    def launch_spec(self, ctx: LaunchContext) -> dict[str, str]:
        uri = ctx.model_uri(self.folder)
        return {
            "load.py": (
                "# Load the compiled CPU artifact (download the folder first: aws s3 sync / cp -r).\n"
                f"# artifact: {uri}\n"
                "import sys\n"
                "from pathlib import Path\n\n"
                "from neuronforge.compilation.backends.cpu import CpuModel\n\n"
                f"model = CpuModel(Path(sys.argv[1] if len(sys.argv) > 1 else {self.folder!r}))\n"
                "print(model.generate([1, 2, 3], 8)['tokens'])\n"
            )
        }

    def preflight(self, artifact: Artifact) -> list[str]:
        """`CpuModel` refuses a folder whose compiled.json names another format, and needs every
        graph it lists and the weights file."""
        folder = artifact.root / self.folder
        meta = read_json(folder / COMPILED_JSON)
        if meta is None:
            return [f"{self.folder}/{COMPILED_JSON}: missing or not JSON (CpuModel reads it first)"]
        problems = []
        if meta.get("format") != FORMAT or meta.get("format_version") != FORMAT_VERSION:
            problems.append(
                f"{self.folder}/{COMPILED_JSON}: format {meta.get('format')!r} v{meta.get('format_version')}, "
                f"CpuModel loads {FORMAT!r} v{FORMAT_VERSION}"
            )
        for name, graph in (meta.get("graphs") or {}).items():
            if not (folder / graph["file"]).is_file():
                problems.append(f"{self.folder}/{graph['file']}: graph {name} missing")
        if not (folder / str(meta.get("weights"))).is_file():
            problems.append(f"{self.folder}/{meta.get('weights')}: weights missing")
        t = artifact.target
        for field, want in (("batch_size", t.batch_size), ("sequence_length", t.sequence_length), ("dtype", t.dtype)):
            if meta.get(field) != want:
                problems.append(f"{self.folder}/{COMPILED_JSON}: {field}={meta.get(field)!r}, the target says {want!r}")
        return problems


PROFILE = CpuProfile()
