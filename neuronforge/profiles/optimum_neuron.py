"""Profile `optimum-neuron`: optimum-neuron 0.4.5 on Neuron SDK 2.26.1 (inf2, trn1, trn1n, trn2).

The consumer is optimum-neuron itself: `NeuronModelForCausalLM.from_pretrained(<folder>)` in Python,
or `optimum-cli neuron serve --model <folder>` (its vLLM 0.11 platform plugin, entry point
`vllm.platform_plugins: optimum_neuron`). Both read the export directory exactly as
`NeuronModelForCausalLM.export(...).save_pretrained(out)` writes it, so that is what we publish,
unchanged, under `optimum-neuron/`.

Every rule below was read in huggingface/optimum-neuron at tag v0.4.5 (the installed 0.4.5 wheel
holds the same files); each preflight problem names the file and function it comes from:
- `optimum/neuron/configuration_utils.py` `NeuronConfig.from_dict`: `neuron_config.json` must carry
  `optimum_neuron_version`, `_serialized_key` and `neuronxcc_version`; the first must equal the
  installed optimum-neuron and the last `neuronxcc.__version__` — the FULL compiler version with its
  local label (`2.21.33363.0+82129205` for SDK 2.26.1), not the pip version.
- `optimum/neuron/models/inference/backend/pretrained_model.py` `NxDPreTrainedModel._from_pretrained`:
  `neuron_config.target` must equal the host's normalised instance type (`inf2`/`trn1n` -> `trn1`,
  `utils/instance.py`), the host must expose at least `tp_degree` NeuronCores, `model.pt` is
  `torch.jit.load`ed, and `load_weights` reads `checkpoint/weights/tp{rank}_sharded_checkpoint.safetensors`
  for ranks `start_rank_id .. start_rank_id + local_ranks_size - 1`.
- `optimum/commands/neuron/serve.py` `ServeCommand.run`: `--batch_size`, `--sequence_length` and
  `--tensor_parallel_size` must equal the export's, or it refuses to start; they become vLLM's
  `--max-num-seqs`, `--max-model-len`, `--tensor-parallel-size`, and `--dtype` is read from
  `config.json`.
- `optimum/neuron/models/inference/auto_models.py`: the model types registered for text-generation.

The consumer does not read `s3://`: the launch files download the folder first (`aws s3 sync`).
TGI's Neuron backend is not a consumer of this profile: its image pins optimum-neuron 0.3.0 and
would refuse a 0.4.5 export by the same version gate.
"""

from __future__ import annotations

import contextlib
import io
import os
import shlex
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neuronforge.artifacts import launch_script
from neuronforge.compilation.backends.optimum import BACKEND, unsupported
from neuronforge.profiles.base import (
    SHELL_VAR,
    Artifact,
    LaunchContext,
    Pins,
    ServingProfile,
    read_env_file,
    read_json,
    tokenizer_problems,
)
from neuronforge.profiles.line_lifecycles import OPTIMUM_NEURON
from neuronforge.profiles.optimum_registry import OptimumRegistry
from neuronforge.profiles.release_table import profile_releases
from neuronforge.spec.target import TORCH_DTYPE_NAMES

if TYPE_CHECKING:
    from neuronforge.spec.target import TargetSpec

# The one registered release of the line (the release table: neuronforge/profiles/releases/).
(_RELEASE,) = profile_releases("optimum-neuron")
SDK_RELEASE = _RELEASE.sdk
OPTIMUM_NEURON_VERSION = _RELEASE.version("optimum-neuron")
COMPILER_VERSION = _RELEASE.version("neuronx-cc")  # as `neuronxcc.__version__` reports it (local label included)
# The Python of the SDK 2.26.1 deep-learning container, which has the SDK (docker/neuron-sdk/images.json).
DLC_PYTHON = "/opt/conda/bin/python"
# What `pip install "optimum-neuron[neuronx]==0.4.5"` pins (its wheel's Requires-Dist, extra `neuronx`),
# and `[vllm]` for `optimum-cli neuron serve`, at the release's versions. The loader checks only the two
# versions above; these are what the serving host installs, so the launch files name them.
SDK_PACKAGES = {
    name: _RELEASE.packages[name].version
    for name in ("neuronx-cc", "torch-neuronx", "neuronx-distributed", "libneuronxla", "vllm")
}
# optimum-neuron 0.4.5's wheel: `Requires-Dist: transformers~=4.57.1` (METADATA; setup.py INSTALL_REQUIRES).
# A registry entry's folder is a digest over the config as that transformers serialises it.
TRANSFORMERS_SPEC = "~=4.57.1"

_SRC = "optimum-neuron v0.4.5"
RULE_VERSIONS = f"{_SRC} optimum/neuron/configuration_utils.py NeuronConfig.from_dict"
RULE_LOAD = f"{_SRC} optimum/neuron/models/inference/backend/pretrained_model.py NxDPreTrainedModel._from_pretrained"
RULE_WEIGHTS = f"{_SRC} optimum/neuron/models/inference/backend/pretrained_model.py NxDPreTrainedModel.load_weights"
RULE_SERVE = f"{_SRC} optimum/commands/neuron/serve.py ServeCommand.run"
RULE_MODELS = f"{_SRC} optimum/neuron/models/inference/auto_models.py"
RULE_TOKENIZER = f"vllm {SDK_PACKAGES['vllm']}: the tokenizer is loaded from --model when --tokenizer is not given"

NEURON_CONFIG = "neuron_config.json"  # configuration_utils.NEURON_CONFIG_NAME
MODEL_FILE = "model.pt"  # NxDPreTrainedModel.COMPILED_MODEL_FILE_NAME
SHARD = "checkpoint/weights/tp{rank}_sharded_checkpoint.safetensors"  # CHECKPOINT_DIR + get_shards_path
ENV_FILE = "optimum-neuron.env"
SERVE_FILE = "serve.sh"
LOAD_FILE = "load.py"
MANDATORY_KEYS = ("optimum_neuron_version", "_serialized_key", "neuronxcc_version")


class OptimumNeuronProfile(ServingProfile):
    name = "optimum-neuron"
    title = (
        f"optimum-neuron {OPTIMUM_NEURON_VERSION}: NeuronModelForCausalLM.from_pretrained / optimum-cli neuron serve"
    )
    pins = Pins(
        sdk_release=SDK_RELEASE, compiler_version=COMPILER_VERSION, packages={"optimum-neuron": OPTIMUM_NEURON_VERSION}
    )
    backend = BACKEND
    toolchain_python = DLC_PYTHON
    # optimum/neuron/utils/instance.py SUPPORTED_INSTANCE_TYPES
    instance_families = frozenset({"inf2", "trn1", "trn1n", "trn2"})
    lifecycle = OPTIMUM_NEURON
    hub_registry = OptimumRegistry(OPTIMUM_NEURON_VERSION, COMPILER_VERSION, TRANSFORMERS_SPEC)
    folder = "optimum-neuron"
    publishes = (
        "optimum-neuron/: the export as optimum writes it (config.json, neuron_config.json, model.pt, "
        "checkpoint/weights/tp{r}_sharded_checkpoint.safetensors, tokenizer); launch/: optimum-neuron.env, "
        "serve.sh (optimum-cli neuron serve), load.py (NeuronModelForCausalLM.from_pretrained)"
    )

    def problems(self, target: TargetSpec, model_type: str | None = None) -> list[str]:
        """The instance families and architectures, plus what 0.4.5's export API cannot express."""
        return super().problems(target, model_type) + unsupported(target)

    def compile_settings(
        self,
        target: TargetSpec,
        model_type: str,
        quantized_dir: Path | None = None,
        model_config: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Nothing beyond the target: the backend derives `get_neuron_config`'s arguments from it
        (`export_kwargs`), and 0.4.5 takes no other export option for decoders."""
        return {}

    # -- launch spec ------------------------------------------------------------------------------
    def launch_spec(self, ctx: LaunchContext) -> dict[str, str]:
        """`optimum-neuron.env` (where the folder is, where it goes, the versions the host needs),
        `serve.sh` (download, then `optimum-cli neuron serve` with the export's exact shape) and
        `load.py` (`NeuronModelForCausalLM.from_pretrained`)."""
        t = ctx.target
        uri = ctx.model_uri(self.folder)
        env = {
            "MODEL_URI": uri,
            "MODEL_DIR": ctx.host_dir(self.folder),
            "PORT": "8080",
            "OPTIMUM_NEURON_VERSION": OPTIMUM_NEURON_VERSION,
            "NEURONXCC_VERSION": COMPILER_VERSION,
            "NEURON_SDK_RELEASE": SDK_RELEASE,
            "NEURON_TARGET": t.instance.compile_target,
            "TENSOR_PARALLEL_SIZE": str(t.tp_degree),
            "BATCH_SIZE": str(t.batch_size),
            "SEQUENCE_LENGTH": str(t.sequence_length),
            "DTYPE": TORCH_DTYPE_NAMES[t.dtype],
        }
        pip = "".join(f"#   {p}=={v}\n" for p, v in SDK_PACKAGES.items())
        families = ", ".join(f for f in sorted(self.instance_families) if _target_of(f) == t.instance.compile_target)
        env_text = (
            f"# {ctx.model_type or 'model'} compiled by neuronforge for {t.slug} ({self.ref}).\n"
            f"# Runs on {families} instances (compiled for {t.instance.compile_target}) with at least\n"
            f"# {t.tp_degree} NeuronCores, Neuron SDK {SDK_RELEASE}:\n"
            f'#   pip install "optimum-neuron[neuronx,vllm]=={OPTIMUM_NEURON_VERSION}", which pins\n'
            f"{pip}"
            "# optimum-neuron refuses the export unless neuronxcc.__version__ is exactly NEURONXCC_VERSION\n"
            "# and optimum-neuron is OPTIMUM_NEURON_VERSION (optimum/neuron/configuration_utils.py).\n"
            "# MODEL_URI is the folder holding neuron_config.json; optimum-neuron does not read s3://,\n"
            "# so serve.sh / load.py copy it to MODEL_DIR first. The shape values are the export's:\n"
            "# `optimum-cli neuron serve` refuses any other (optimum/commands/neuron/serve.py).\n"
            "# Plain KEY=VALUE lines: usable as `docker run --env-file` and by `set -a; . file`.\n"
        ) + "".join(f"{k}={v}\n" for k, v in env.items())
        return {ENV_FILE: env_text, SERVE_FILE: self._serve_sh(t), LOAD_FILE: self._load_py(t, uri)}

    def _serve_sh(self, t: TargetSpec) -> str:
        """`launch_templates/optimum-neuron-serve.sh`: download, then serve with the export's shape."""
        return launch_script.render(
            "optimum-neuron-serve.sh",
            VERSION=OPTIMUM_NEURON_VERSION,
            ENV_FILE=ENV_FILE,
            TP=t.tp_degree,
            BATCH=t.batch_size,
            SEQ=t.sequence_length,
        )

    def _load_py(self, t: TargetSpec, uri: str) -> str:
        return (
            '"""Load the export with NeuronModelForCausalLM.from_pretrained and generate\n'
            f"(optimum-neuron {OPTIMUM_NEURON_VERSION}, Neuron SDK {SDK_RELEASE}, a {t.instance.compile_target} host "
            f"with >= {t.tp_degree} NeuronCores).\n\n"
            "Usage: python load.py [LOCAL_DIR]. from_pretrained reads a local folder (or a Hub id), not s3://,\n"
            'so an s3:// artifact is synced to LOCAL_DIR first (default: ./optimum-neuron)."""\n\n'
            "import subprocess\n"
            "import sys\n"
            "from pathlib import Path\n\n"
            f"MODEL_URI = {uri!r}\n"
            f'model_dir = Path(sys.argv[1] if len(sys.argv) > 1 else "{self.folder}")\n'
            'if MODEL_URI.startswith("s3://"):\n'
            '    subprocess.run(["aws", "s3", "sync", "--only-show-errors", MODEL_URI, str(model_dir)], check=True)\n'
            'elif MODEL_URI.startswith("file://") and len(sys.argv) == 1:\n'
            '    model_dir = Path(MODEL_URI.removeprefix("file://"))\n\n'
            "from optimum.neuron import NeuronModelForCausalLM  # noqa: E402\n"
            "from transformers import AutoTokenizer  # noqa: E402\n\n"
            "model = NeuronModelForCausalLM.from_pretrained(str(model_dir))\n"
            "tokenizer = AutoTokenizer.from_pretrained(model_dir)\n"
            "if tokenizer.pad_token is None:\n"
            "    tokenizer.pad_token = tokenizer.eos_token\n"
            f'inputs = tokenizer(["Hello, my name is"] * {t.batch_size}, return_tensors="pt", padding=True)\n'
            "outputs = model.generate(**inputs, max_new_tokens=16, do_sample=False)\n"
            "print(tokenizer.batch_decode(outputs, skip_special_tokens=True)[0])\n"
        )

    # -- preflight --------------------------------------------------------------------------------
    def preflight(self, artifact: Artifact) -> list[str]:
        """What optimum-neuron 0.4.5 checks when it loads the folder and when `optimum-cli neuron
        serve` starts on it, checked offline. The versions are compared with the pins (the serving
        host runs the pinned SDK); `neuron_config.json` is then parsed by the REAL installed reader."""
        folder = artifact.root / self.folder
        if not (folder / NEURON_CONFIG).is_file():
            return [
                f"{self.folder}/{NEURON_CONFIG}: missing (NeuronConfig.from_pretrained reads it first; {RULE_VERSIONS})"
            ]
        problems = self._required_files(folder)
        raw = read_json(folder / NEURON_CONFIG)
        if not isinstance(raw, dict):
            return [*problems, f"{self.folder}/{NEURON_CONFIG}: not a JSON object ({RULE_VERSIONS})"]
        gates = self._version_gates(raw)
        problems += gates
        nc = None
        if not gates:
            nc, error = read_neuron_config(folder)
            if error:
                problems.append(f"{self.folder}/{NEURON_CONFIG}: the real reader refuses it: {error} ({RULE_VERSIONS})")
        if nc is not None:
            problems += self._target_fields(nc, artifact.target)
            problems += self._shards(folder, nc)
            problems += self._model_config(folder, nc)
            problems += self._launch(artifact.root, nc)
        return problems

    def _required_files(self, folder: Path) -> list[str]:
        out = []
        if not (folder / "config.json").is_file():
            out.append(f"{self.folder}/config.json: missing (from_pretrained starts with AutoConfig; {RULE_LOAD})")
        if not (folder / MODEL_FILE).is_file():
            out.append(f"{self.folder}/{MODEL_FILE}: missing (torch.jit.load of the compiled model; {RULE_LOAD})")
        return out + tokenizer_problems(folder, self.folder, RULE_TOKENIZER)

    def _version_gates(self, raw: dict[str, Any]) -> list[str]:
        """`from_dict`'s gates, with the pinned versions standing for the serving host's."""
        where = f"{self.folder}/{NEURON_CONFIG}"
        missing = [k for k in MANDATORY_KEYS if k not in raw]
        if missing:
            return [f"{where}: missing mandatory {', '.join(missing)} ({RULE_VERSIONS})"]
        out = []
        if raw["optimum_neuron_version"] != OPTIMUM_NEURON_VERSION:
            out.append(
                f"{where}: optimum_neuron_version={raw['optimum_neuron_version']!r}, but the serving host runs "
                f"optimum-neuron {OPTIMUM_NEURON_VERSION} and loads only its own exports ({RULE_VERSIONS})"
            )
        if raw["neuronxcc_version"] != COMPILER_VERSION:
            out.append(
                f"{where}: neuronxcc_version={raw['neuronxcc_version']!r}, but SDK {SDK_RELEASE}'s "
                f"neuronxcc.__version__ is {COMPILER_VERSION!r} (full version with its local label) ({RULE_VERSIONS})"
            )
        if raw["_serialized_key"] != "NxDNeuronConfig":
            out.append(
                f"{where}: _serialized_key={raw['_serialized_key']!r}; decoders load it as NxDNeuronConfig "
                f"({RULE_VERSIONS})"
            )
        return out

    def _target_fields(self, nc: Any, target: TargetSpec) -> list[str]:
        where = f"{self.folder}/{NEURON_CONFIG}"
        t = target.normalized()
        want_dtype = TORCH_DTYPE_NAMES[t.dtype]
        got_dtype = str(nc.torch_dtype).removeprefix("torch.")
        out = []
        if nc.target != t.instance.compile_target:
            out.append(
                f"{where}: target={nc.target!r}, but {t.instance_type} is a {t.instance.compile_target!r} host and "
                f"from_pretrained / serve refuse a model compiled for another instance type ({RULE_LOAD}; {RULE_SERVE})"
            )
        cores = t.instance.cores()
        if nc.tp_degree > cores:
            out.append(
                f"{where}: tp_degree={nc.tp_degree} needs {nc.tp_degree} NeuronCores; {t.instance_type} has {cores} "
                f"({RULE_LOAD})"
            )
        for field, got, want, rule in (
            ("tp_degree", nc.tp_degree, t.tp_degree, RULE_SERVE),
            ("batch_size", nc.batch_size, t.batch_size, RULE_SERVE),
            ("sequence_length", nc.sequence_length, t.sequence_length, RULE_SERVE),
            ("max_context_length", nc.max_context_length, t.context_length, RULE_SERVE),
            ("torch_dtype", got_dtype, want_dtype, RULE_SERVE),
        ):
            if got != want:
                out.append(
                    f"{where}: {field}={got!r}, the target says {want!r} (the launch spec serves the target; {rule})"
                )
        return out

    def _shards(self, folder: Path, nc: Any) -> list[str]:
        ranks = range(nc.start_rank_id, nc.start_rank_id + nc.local_ranks_size)
        missing = [SHARD.format(rank=r) for r in ranks if not (folder / SHARD.format(rank=r)).is_file()]
        if not missing:
            return []
        return [
            f"{self.folder}/{missing[0]}: missing ({len(missing)} of {len(ranks)} rank shards; load_weights reads one "
            f"per rank and the export has no checkpoint_id to fall back on) ({RULE_WEIGHTS})"
        ]

    def _model_config(self, folder: Path, nc: Any) -> list[str]:
        config = read_json(folder / "config.json")
        if config is None:
            return []  # reported as missing already
        out = []
        model_type = config.get("model_type")
        if model_type not in BACKEND.architectures:
            out.append(
                f"{self.folder}/config.json: model_type={model_type!r} has no text-generation model in "
                f"optimum-neuron {OPTIMUM_NEURON_VERSION} ({RULE_MODELS})"
            )
        dtype = config.get("dtype", config.get("torch_dtype"))
        want = str(nc.torch_dtype).removeprefix("torch.")
        if dtype != want:
            out.append(
                f"{self.folder}/config.json: dtype={dtype!r} but neuron_config.json says {want!r}; serve passes "
                f"config.json's dtype to vLLM as --dtype ({RULE_SERVE})"
            )
        return out

    def _launch(self, root: Path, nc: Any) -> list[str]:
        """The launch files must start the consumer on this folder with the export's values."""
        from neuronforge.profiles.base import LAUNCH_DIR

        launch = root / LAUNCH_DIR
        out = [f"{LAUNCH_DIR}/{n}: missing" for n in (ENV_FILE, SERVE_FILE, LOAD_FILE) if not (launch / n).is_file()]
        if out:
            return out
        env = read_env_file(launch / ENV_FILE)
        if not env.get("MODEL_URI", "").rstrip("/").endswith(f"/{self.folder}"):
            out.append(
                f"{LAUNCH_DIR}/{ENV_FILE}: MODEL_URI={env.get('MODEL_URI')!r} is not the {self.folder}/ folder; "
                f"serve loads a NeuronConfig only from the folder holding {NEURON_CONFIG}, else it exports "
                f"the model again ({RULE_SERVE})"
            )
        for key, want in (("OPTIMUM_NEURON_VERSION", OPTIMUM_NEURON_VERSION), ("NEURONXCC_VERSION", COMPILER_VERSION)):
            if env.get(key) != want:
                out.append(
                    f"{LAUNCH_DIR}/{ENV_FILE}: {key}={env.get(key)!r}, the export needs {want!r} ({RULE_VERSIONS})"
                )
        args, error = parse_serve_command((launch / SERVE_FILE).read_text(encoding="utf-8"), env)
        if error:
            return [*out, f"{LAUNCH_DIR}/{SERVE_FILE}: {error} ({RULE_SERVE})"]
        if args.model != env.get("MODEL_DIR"):
            out.append(
                f"{LAUNCH_DIR}/{SERVE_FILE}: --model {args.model!r} is not MODEL_DIR, where the folder is synced"
            )
        for flag, got, want in (
            ("--batch_size", args.batch_size, nc.batch_size),
            ("--sequence_length", args.sequence_length, nc.sequence_length),
            ("--tensor_parallel_size", args.tensor_parallel_size, nc.tp_degree),
        ):
            if got != want:
                out.append(
                    f"{LAUNCH_DIR}/{SERVE_FILE}: {flag} {got}, but the export has {want}; serve refuses to start "
                    f"({RULE_SERVE})"
                )
        return out


def _target_of(family: str) -> str:
    from neuronforge.spec.instances import INSTANCES

    return next(i.compile_target for i in INSTANCES.values() if i.family == family)


# -- the real optimum-neuron, in this process --------------------------------------------------------
_READER_LOCK = threading.Lock()


@contextlib.contextmanager
def _optimum_imported() -> Iterator[None]:
    """Importing `optimum.neuron` on a host without Neuron devices sets NEURON_PLATFORM_TARGET_OVERRIDE
    to trn1 in os.environ (optimum/neuron/__init__.py); put it back so no later compile child in this
    process inherits a target it did not ask for."""
    before = os.environ.get("NEURON_PLATFORM_TARGET_OVERRIDE")
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("NEURON_PLATFORM_TARGET_OVERRIDE", None)
        else:
            os.environ["NEURON_PLATFORM_TARGET_OVERRIDE"] = before


def read_neuron_config(folder: Path) -> tuple[Any | None, str | None]:
    """`NxDNeuronConfig.from_pretrained(folder)` of the installed optimum-neuron, with the compiler
    version it compares against being the pinned one: there is no `neuronxcc` outside the worker
    image, and the serving host's is the pin. Returns (config, None) or (None, why it refused)."""
    from neuronforge.compilation.detect import installed_version

    found = installed_version("optimum-neuron")
    if found != OPTIMUM_NEURON_VERSION:
        return None, (
            f"preflight reads with optimum-neuron {OPTIMUM_NEURON_VERSION}, this host has {found or 'none'} "
            "(pip install -r requirements-runtime.txt)"
        )
    from unittest import mock

    with _READER_LOCK, _optimum_imported():
        from optimum.neuron import configuration_utils
        from optimum.neuron.models.inference.backend.config import NxDNeuronConfig

        with mock.patch.object(configuration_utils, "get_neuronxcc_version", lambda: COMPILER_VERSION):
            try:
                return NxDNeuronConfig.from_pretrained(str(folder)), None
            except Exception as exc:  # the reader's own refusals: ValueError, RuntimeError, TypeError, ...
                return None, f"{type(exc).__name__}: {exc}"


def serve_parser() -> Any:
    """The argument parser `optimum-cli neuron serve` builds (ServeCommand.parse_args)."""
    from argparse import ArgumentParser

    with _optimum_imported():
        from optimum.commands.neuron.serve import ServeCommand

    parser = ArgumentParser(prog="optimum-cli neuron serve")
    ServeCommand.parse_args(parser)
    return parser


def parse_serve_command(script: str, env: dict[str, str]) -> tuple[Any | None, str | None]:
    """The arguments serve.sh's `optimum-cli neuron serve` line passes, parsed by the real CLI's
    parser with the env file's variables substituted. Returns (namespace, None) or (None, why)."""
    joined = script.replace("\\\n", " ")
    lines = [
        ln.strip() for ln in joined.splitlines() if "optimum-cli neuron serve" in ln and not ln.strip().startswith("#")
    ]
    if len(lines) != 1:
        return None, f"expected one `optimum-cli neuron serve` command line, found {len(lines)}"
    tokens = shlex.split(lines[0])
    start = tokens.index("optimum-cli") + 3
    argv = []
    for token in tokens[start:]:
        if token == "$@":
            continue
        unknown = [n for m in SHELL_VAR.finditer(token) if (n := m.group(1) or m.group(2)) not in env]
        if unknown:
            return None, f"{token!r} uses {', '.join(unknown)}, which {ENV_FILE} does not set"
        argv.append(SHELL_VAR.sub(lambda m: env[m.group(1) or m.group(2)], token))
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            args, _vllm_args = serve_parser().parse_known_args(argv, None)
    except SystemExit:
        return None, f"optimum-cli neuron serve rejects {shlex.join(argv)}: {stderr.getvalue().strip()}"
    return args, None


PROFILE = OptimumNeuronProfile()
