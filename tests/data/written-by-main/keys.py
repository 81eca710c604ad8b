"""Write `keys.json`: the cache key, and the material it hashes, of every registered serving profile ×
a few targets it serves, under a fixed toolchain per profile (its own pinned packages). Run at a commit,
the file is what that commit's code computes; `tests/test_keys_before_52.py` holds later code to it, so
that what a store of that commit published is still found (a key that moved would rebuild the whole
catalog on an upgrade that changed nothing the compiler sees).

    PYTHONPATH=$PWD .venv/bin/python tests/data/written-by-main/keys.py > tests/data/written-by-main/keys.json
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from neuronforge.profiles.registry import all_profiles, compile_request, target_problems  # noqa: E402
from neuronforge.profiles.request import cache_key, cache_key_material  # noqa: E402
from neuronforge.spec.source import ModelSource  # noqa: E402
from neuronforge.spec.target import TargetSpec  # noqa: E402
from neuronforge.spec.toolchain import Toolchain  # noqa: E402

INSTANCES = {"inf2": "inf2.xlarge", "trn1": "trn1.2xlarge", "trn2": "trn2.3xlarge", "trn3": "trn3.3xlarge"}
VARIANTS = (
    {"tp_degree": 2, "batch_size": 1, "sequence_length": 128, "dtype": "bf16"},
    {"tp_degree": 2, "batch_size": 4, "sequence_length": 2048, "dtype": "bf16"},
    {"tp_degree": 2, "batch_size": 1, "sequence_length": 128, "dtype": "bf16", "quantization": "int8"},
)


def rows() -> list[dict]:
    source = ModelSource("hub", "org/model", resolved_revision="0123456789abcdef0123456789abcdef01234567")
    out = []
    for profile in all_profiles():
        families = sorted(profile.instance_families) or ["inf2"]
        compiler = "torch-inductor" if not profile.neuron else "neuronx-cc"
        toolchain = Toolchain(
            profile.backend.name, "1.0", compiler, profile.pins.compiler_version or "2.0", dict(profile.pins.packages)
        )
        for family in families:
            instance = INSTANCES.get(family)
            if instance is None:
                continue
            for variant in VARIANTS:
                data = {"instance_type": instance, **variant, "profile": profile.ref}
                try:
                    target = TargetSpec.parse(data)
                    if target_problems(profile, target, "llama"):
                        continue
                    request = compile_request(source, target)
                except Exception:  # a combination this profile refuses: not a row
                    continue
                out.append(
                    {
                        "target": data,
                        "toolchain": toolchain.to_json(),
                        "material": cache_key_material(request, toolchain),
                        "key": cache_key(request, toolchain),
                    }
                )
    return out


if __name__ == "__main__":
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    json.dump(
        {"commit": commit, "source": "org/model@0123456789abcdef0123456789abcdef01234567", "rows": rows()},
        sys.stdout,
        indent=1,
        sort_keys=True,
    )
    print()
