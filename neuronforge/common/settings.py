"""Every setting neuronforge reads from the environment: one validated model, read when used.

`Settings` declares each `NEURONFORGE_*` variable once (its field name is the variable without the
prefix, in lower case): type, default, bounds and meaning (`Setting`). It is a frozen dataclass checked
by hand, not a pydantic model: `neuronforge --version`, `--help` and tab completion read the settings
(the help shows the effective store and profile) and stay free of pydantic
(tests/test_cli_contract.py). `current()` builds it from the environment at call time — never at
import, so a changed environment (a test, a worker's task) is always seen — and turns a bad value into
one `InvalidInput` line naming the variable, the value and what is accepted.
Nothing else reads `NEURONFORGE_*` variables (tests/test_settings.py enforces it); `neuronforge config`
prints the effective values and where each came from, and docs/configuration.md is rendered from this
model (`python -m neuronforge.common.settings` rewrites its tables).

Variables read outside this process's Python are listed in `READ_ELSEWHERE` (the worker image's start
command; the toolchain side, `neuronforge_toolchain/`, runs with the standard library only and reads
only the worker's pid).
"""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from neuronforge.common.errors import InvalidInput
from neuronforge.common.secrets import mask_credentials

REPO_ROOT = Path(__file__).resolve().parents[2]
ENV_PREFIX = "NEURONFORGE_"

# The embedded default target (trigger form default, demo): small enough to compile in under a
# minute on 2 cores; fp32 so that the smoke test's greedy tokens match eager exactly. A value for each
# of the form's own target fields (`TargetSpec`'s inputs declared `form=True`), in their spelling; the
# form validates it against `TargetSpec` when the DAG file is parsed (neuronforge_airflow/params.py).
DEFAULT_TARGET = {
    "instance_type": "inf2.xlarge",
    "tp_degree": 1,
    "batch_size": 1,
    "sequence_length": 64,
    "max_context_length": 32,
    "dtype": "fp32",
    "quantization": "none",
}


DEFAULT_PROFILE = "cpu"  # the profile that builds and runs on this machine, no Neuron SDK needed
TOOLCHAIN_PYTHON_VAR = f"{ENV_PREFIX}TOOLCHAIN_PYTHON"
TEST_DECODE_DELAY_VAR = f"{ENV_PREFIX}TEST_DECODE_DELAY_S"  # a test hook (`test_decode_delay_s`), not a setting
# A Neuron compile of a large model takes tens of minutes; past this the child is killed.
DEFAULT_COMPILE_TIMEOUT_S = 4 * 3600.0
DEFAULT_HOME = REPO_ROOT / ".neuronforge"
DEFAULT_CATALOG = REPO_ROOT / "catalog" / "models.yaml"
RUNNERS = ("celery", "kubernetes")
QUANT_KERNELS = ("auto", "compiled", "eager")


@dataclass(frozen=True)
class Setting:
    """How one field of `Settings` is read from its variable and documented. `parse` turns the
    variable's text into the field's value and raises ValueError when it does not accept it; the
    standard library only (the CLI's start-up, tab completion and DAG parsing pay for this module)."""

    meaning: str
    accepts: str  # in words: the error line and the docs' table say it
    parse: Callable[[str], Any]
    shown: str | None = None  # the default as the docs show it, when not the value itself
    env: str | None = None  # the variable, when not NEURONFORGE_<FIELD>
    choices: tuple[str, ...] = ()


SECONDS_MAX = 7 * 24 * 3600.0  # a week: no wait, heartbeat or lease a run keeps is longer


def _seconds(raw: str) -> float:
    """A duration: finite, above 0, at most a week (1e308 would overflow a timer or a TTL it derives)."""
    value = float(raw)
    if not (math.isfinite(value) and 0 < value <= SECONDS_MAX):
        raise ValueError(raw)
    return value


VALUE_MAX_CHARS = 4096  # PATH_MAX: no path, URI or name a setting holds is longer


def _one_line(raw: str) -> str:
    """Every setting's first rule, whatever it holds: one line (no control character or line separator,
    `line_breaks.breaks_line`: `config` prints it on one, an error quotes it on one) and bounded."""
    from neuronforge.common.line_breaks import breaks_line

    if len(raw) > VALUE_MAX_CHARS or any(breaks_line(c) for c in raw):
        raise ValueError(raw[:60])
    return raw


def _count(low: int, high: int) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        value = int(raw)
        if not low <= value <= high:
            raise ValueError(raw)
        return value

    return parse


def _count_setting(default: int, low: int, high: int, meaning: str) -> Any:
    return _setting(default, meaning, _count(low, high), f"a whole number from {low} to {high}")


def _one_of(choices: tuple[str, ...]) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        if raw not in choices:
            raise ValueError(raw)
        return raw

    return parse


def _repo_id(raw: str) -> str:
    from neuronforge.common.hub_ids import is_repo_id

    if not is_repo_id(raw.strip()):
        raise ValueError(raw)
    return raw.strip()


def _names(raw: str) -> tuple[str, ...]:
    """A comma-separated list of channel names ("-": none)."""
    if raw.strip() == "-":
        return ()
    names = tuple(sorted({n.strip() for n in raw.split(",") if n.strip()}))
    if not names or not all(re.fullmatch(r"[a-z0-9][a-z0-9._-]{0,62}", n) for n in names):
        raise ValueError(raw)
    return names


def _gates(raw: str) -> tuple[tuple[str, float], ...]:
    """Comma-separated `channel=percent` pairs ("-": no channel gated), each channel once, each percent
    finite and from 0 to 1000."""
    if raw.strip() == "-":
        return ()
    gates: dict[str, float] = {}
    for part in (p.strip() for p in raw.split(",") if p.strip()):
        name, eq, pct = (x.strip() for x in part.partition("="))
        value = float(pct) if eq else math.nan
        if name in gates or not _names(name) or not (math.isfinite(value) and 0 <= value <= 1000):
            raise ValueError(raw)
        gates[name] = value
    if not gates:
        raise ValueError(raw)
    return tuple(sorted(gates.items()))


def _tolerance(raw: str) -> float:
    value = float(raw)
    if not (math.isfinite(value) and 0 <= value <= 1000):
        raise ValueError(raw)
    return value


def spelled(value: Any) -> Any:
    """A tuple setting as its variable spells it: names or `name=number` pairs, by commas ("-": none)."""
    if not isinstance(value, tuple):
        return value
    return ",".join(f"{v[0]}={v[1]:g}" if isinstance(v, tuple) else str(v) for v in value) or "-"


def _rate(raw: str) -> float:
    value = float(raw)
    if not (math.isfinite(value) and 0 <= value <= 1e6):
        raise ValueError(raw)
    return value


def _local(raw: str) -> str:
    """A path or a name on this host (a folder, a file, an interpreter): a URI (`scheme://…`) is not
    one. Taken as a path it would be a folder named after the URI — its credentials too — under the
    current directory, which `config`, `--help` and every error naming the store under it would show."""
    if re.match(r"(?i)[a-z][a-z0-9+.-]*://", raw):
        raise ValueError(raw)
    return raw


def _path(raw: str) -> Path:
    return Path(_local(raw))


def _home(raw: str) -> Path:
    return _path(raw).expanduser().resolve()


def _about(meaning: str, parse: Callable[[str], Any], accepts: str, **extra: Any) -> dict[str, Setting]:
    """A field's metadata: how it is read and documented."""
    return {"setting": Setting(meaning, accepts, parse, **extra)}


def _setting(default: Any, meaning: str, parse: Callable[[str], Any], accepts: str, **extra: Any) -> Any:
    return field(default=default, metadata=_about(meaning, parse, accepts, **extra))


def _seconds_setting(default: float, meaning: str) -> Any:
    return _setting(default, meaning, _seconds, "a number of seconds above 0, at most 604800 (a week)")


def _choice_setting(choices: tuple[str, ...], meaning: str) -> Any:
    return _setting(choices[0], meaning, _one_of(choices), "one of " + ", ".join(choices), choices=choices)


@dataclass(frozen=True)
class Settings:
    """The effective configuration of this process, every field the variable `NEURONFORGE_<FIELD>`
    (a field's `Setting.env` names another). Build it with `current()`; an empty variable is unset."""

    home: Path = field(
        default=DEFAULT_HOME,
        metadata=_about(
            "this host's work dir: downloads and builds (`<home>/work`), the local store, the demo model, the local "
            "Airflow; each worker has its own",
            _home,
            "a path",
            shown="<repo>/.neuronforge",
        ),
    )
    store: str | None = _setting(
        None,
        "the artifact store every command and task reads and writes: file:///path, a path, or s3://bucket/prefix "
        "(never with credentials in it)",
        str,
        "a URI",
        shown="file://<home>/store",
    )
    profile: str = _setting(
        DEFAULT_PROFILE,
        "the serving profile of every CLI command that takes a target (`neuronforge profiles` lists them)",
        str,
        "a profile name",
    )
    catalog: Path = field(
        default=DEFAULT_CATALOG,
        metadata=_about(
            "the model catalog YAML the catalog commands and the recompile DAG read (the DAG's `catalog` param and "
            "the Airflow Variable `neuronforge_catalog` come first)",
            _path,
            "a path",
            shown="<repo>/catalog/models.yaml",
        ),
    )
    compile_timeout_s: float = _seconds_setting(
        DEFAULT_COMPILE_TIMEOUT_S,
        "seconds a compile child (and a profile's retrace of its consumer's start-up) may run before it is killed; "
        "keep the Celery visibility timeout above it",
    )
    lease_heartbeat_s: float = _seconds_setting(
        10.0, "seconds between two renewals of a compile lease by the process building under it"
    )
    lease_ttl_s: float = _setting(
        3 * 10.0,
        "seconds a compile lease lives without a heartbeat before another worker may take the build over (on the "
        "holder's own host, a waiter takes over at once once the holder's process is gone); at least 2 heartbeats",
        _seconds,
        "a number of seconds above 0, at most 604800 (a week)",
        shown="30 (3 heartbeats)",
    )
    lease_handoff_s: float = _seconds_setting(
        600.0,
        "seconds a DAG run's compile lease stays held between two of its tasks (no process heart-beats it while "
        "the next task waits for a worker)",
    )
    lease_poll_s: float = _seconds_setting(
        10.0, "seconds between two looks at the store of a DAG target waiting for another run's build"
    )
    recompile_poll_s: float = _seconds_setting(
        60.0, "seconds between two looks at the triggered rebuilds by the recompile DAG's wait"
    )
    heartbeat_s: float = _seconds_setting(10.0, "seconds between two progress log lines of a running step")
    transfer_floor_mbs: float = _setting(
        100.0,
        "MB/s below which a transfer of 256 MiB or more (store upload or download, Hub download) logs one warning "
        "naming the likely cause (one flow, small parts, no hf_xet); 0: never",
        _rate,
        "a number of MB/s from 0 to 1000000",
    )
    hub_registry: str | None = _setting(
        None,
        "the optimum-neuron cache repository (org/name) every build of a Hub model for a profile with a Hub registry "
        "(optimum-neuron) is registered in when its run names none (rebuilds after an SDK upgrade too); a build it "
        "cannot hold (another dtype than the model's, a local model) is published unregistered, with a warning",
        _repo_id,
        "a Hub repository id, org/name",
    )
    hub_registry_conn_id: str = _setting(
        "neuronforge_hub_registry",
        "the Airflow connection a run's --hub-registry / `Register in cache repository` writes with (host: the Hub "
        "endpoint, password: a token with write access); without it the environment's HF_ENDPOINT and HF_TOKEN",
        str,
        "an Airflow connection id",
    )
    approval_channels: tuple[str, ...] = _setting(
        ("stable",),
        "the release channels that take only approved builds (`neuronforge approve KEY`); every channel refuses a "
        "rejected build or one whose smoke test did not pass",
        _names,
        "channel names separated by commas, or - for none",
        shown="stable",
    )
    smoke_repetitions: int = _count_setting(
        5,
        1,
        100,
        "the smoke test's measured repetitions of each figure (time to first token at a short and a long prompt, "
        "per-output-token latency), after its warm-up: each figure's median, p10/p90 and spread are over them",
    )
    smoke_warmup: int = _count_setting(
        1, 0, 20, "the smoke test's unrecorded warm-up rounds before its measured repetitions"
    )
    regression_gates: tuple[tuple[str, float], ...] = _setting(
        (("stable", 5.0),),
        "the release channels that refuse a promotion past a regression, each with its threshold: a build whose "
        "speed figure is worse than the build the channel serves by more than this percent and beyond either "
        "measurement's noise, or whose numerics differ, is refused unless the move accepts it "
        "(`promote --accept-regression`)",
        _gates,
        "channel=percent pairs (0 to 1000) separated by commas, or - for none",
        shown="stable=5",
    )
    numerics_tolerance: float = _setting(
        0.05,
        "the largest difference between two builds' logits of one token that is not a numerics difference (a "
        "generated token that disagrees always is one)",
        _tolerance,
        "a number from 0 to 1000",
    )
    quant_kernel: Literal["auto", "compiled", "eager"] = _choice_setting(
        QUANT_KERNELS,
        "the quantizer's kernel: compiled (TorchInductor, cached after the first time), eager, or auto (compiled "
        "once the weights to quantize repay its start-up)",
    )
    neuron_runner: Literal["celery", "kubernetes"] = _choice_setting(
        RUNNERS,
        "what runs the toolchain stages of Neuron targets: Celery workers of the Neuron queues, or Kubernetes pods "
        "of the release's worker image",
    )
    neuron_image: str = _setting(
        "neuronforge-neuron-worker:{sdk}",
        "the worker image of the pods (kubernetes runner); `{sdk}` is replaced by the SDK release",
        str,
        "an image reference",
    )
    k8s_namespace: str = _setting("airflow", "the namespace of the pods (kubernetes runner)", str, "text")
    k8s_pod_template: str | None = _setting(
        None,
        "a pod template file for the pods (kubernetes runner): service account, the work-dir volume, store credentials",
        _local,
        "a path",
    )
    toolchain_python: str | None = _setting(
        None,
        "the Python that has the Neuron SDK, for every release (what a worker image of one release sets); unset: "
        "the interpreter the profile declares for its SDK image",
        _local,
        "an interpreter's path or name",
    )
    toolchain_pythons: dict[str, str] = field(
        default_factory=dict,
        metadata=_about(
            "the Python that has the Neuron SDK of one release (dots as underscores, e.g. "
            "`NEURONFORGE_TOOLCHAIN_PYTHON_2_21_1`); before `NEURONFORGE_TOOLCHAIN_PYTHON`",
            _local,
            "an interpreter's path or name",
            env=f"{TOOLCHAIN_PYTHON_VAR}_<release>",
            shown="unset",
        ),
    )
    # the fields the environment set (the others hold their defaults)
    from_environment: frozenset[str] = field(default=frozenset(), repr=False)

    def store_uri(self) -> str:
        """The store: NEURONFORGE_STORE, else the local store under the home."""
        return self.store or f"file://{self.home / 'store'}"

    def from_env(self, name: str) -> bool:
        """Whether the field `name` was set in the environment (not its default)."""
        return name in self.from_environment

    def regression_gate(self, channel: str) -> float | None:
        """The slowdown, in percent, beyond which `channel` refuses a build (None: it is not gated)."""
        return dict(self.regression_gates).get(channel)

    def toolchain_python_for(self, release: str) -> tuple[str, str] | None:
        """(interpreter, the variable that named it) for an SDK release: the release's own variable, else
        NEURONFORGE_TOOLCHAIN_PYTHON, else None (the profile's declared interpreter)."""
        var = toolchain_python_var(release)
        if (path := self.toolchain_pythons.get(var.removeprefix(f"{TOOLCHAIN_PYTHON_VAR}_"))) is not None:
            return path, var
        if self.toolchain_python:
            return self.toolchain_python, TOOLCHAIN_PYTHON_VAR
        return None


SETTINGS: dict[str, Setting] = {f.name: f.metadata["setting"] for f in fields(Settings) if "setting" in f.metadata}
_DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(Settings) if "setting" in f.metadata}


def variable(name: str) -> str:
    """The environment variable of the field `name`."""
    return SETTINGS[name].env or f"{ENV_PREFIX}{name.upper()}"


def default(name: str) -> Any:
    """The declared default of the field `name` (a dict field's: None)."""
    value = _DEFAULTS[name]
    return None if value is MISSING else value


def toolchain_python_var(release: str) -> str:
    """The per-release setting, e.g. NEURONFORGE_TOOLCHAIN_PYTHON_2_21_1."""
    return f"{TOOLCHAIN_PYTHON_VAR}_{release.replace('.', '_').replace('-', '_')}"


def current(environ: Mapping[str, str] | None = None) -> Settings:
    """The settings as the environment has them now (cheap: no cache, so a changed environment is
    always seen). A bad value is one `InvalidInput` line: the variable, the value, what is accepted."""
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    problems: list[str] = []
    for name, spec in SETTINGS.items():
        if name != "toolchain_pythons" and (raw := env.get(variable(name), "").strip()):
            try:
                values[name] = spec.parse(_one_line(raw))
            except ValueError:
                problems.append(_problem(name, raw))
    prefix = f"{TOOLCHAIN_PYTHON_VAR}_"
    releases: dict[str, str] = {}
    for var, raw in sorted(env.items()):
        if var.startswith(prefix) and raw.strip():
            try:
                releases[var.removeprefix(prefix)] = _local(_one_line(raw.strip()))
            except ValueError:
                problems.append(_problem("toolchain_pythons", raw.strip(), var))
    if releases:
        values["toolchain_pythons"] = releases
    if not problems and (problem := _lease_timing(values)):
        problems.append(problem)
    if problems:
        raise InvalidInput("; ".join(problems))
    from_environment = frozenset(values)
    if "lease_ttl_s" not in values:  # derived: 3 heartbeats, whatever the heartbeat is
        values["lease_ttl_s"] = LEASE_TTL_HEARTBEATS * values.get("lease_heartbeat_s", default("lease_heartbeat_s"))
    values.setdefault("home", _home(str(default("home"))))  # resolved when read, as a home the env names
    return Settings(**values, from_environment=from_environment)


LEASE_TTL_HEARTBEATS = 3  # the default TTL, in heartbeats: a dead holder elsewhere is noticed within ~3 of them
LEASE_TTL_MIN_HEARTBEATS = 2  # fewer, and one late renewal (a slow store) would hand a live build to a waiter


def _lease_timing(values: Mapping[str, Any]) -> str | None:
    """A TTL shorter than 2 heartbeats, as one line (the TTL given, or the one derived from the heartbeat)."""
    heartbeat = values.get("lease_heartbeat_s", default("lease_heartbeat_s"))
    ttl = values.get("lease_ttl_s")
    if ttl is None or ttl >= LEASE_TTL_MIN_HEARTBEATS * heartbeat:
        return None
    return (
        f"{variable('lease_ttl_s')}={ttl:g} is less than {LEASE_TTL_MIN_HEARTBEATS} heartbeats of "
        f"{variable('lease_heartbeat_s')} ({heartbeat:g} s): set it to {LEASE_TTL_MIN_HEARTBEATS * heartbeat:g} or "
        f"more, or unset it ({LEASE_TTL_HEARTBEATS} heartbeats: {LEASE_TTL_HEARTBEATS * heartbeat:g})"
    )


def accepted(name: str) -> str:
    """What the field `name` accepts, in words (the error line and the docs' table say it)."""
    return SETTINGS[name].accepts


def _problem(name: str, raw: str, var: str | None = None) -> str:
    var, spec = var or variable(name), SETTINGS[name]
    if spec.choices:
        return refused(name, raw, f"use one of {', '.join(spec.choices)}")
    example = shown_default(name)
    fix = "unset it" if example == "unset" else f"unset it, or set e.g. {example}"
    return f"{var}={quoted(raw)} is not {spec.accepts}: {fix}"


def refused(name: str, raw: str, reason: str) -> str:
    """The line for a setting's value refused where it is used — a check this module cannot make (is
    NEURONFORGE_PROFILE a registered profile? the registry answers): the variable it came from, the value,
    why, and the default that unsetting it gives. A value from the environment always names its variable:
    the user did not type it in the command that failed."""
    return f"{variable(name)}={quoted(raw)}: {reason} (or unset it: {shown_default(name)})"


def quoted(raw: str) -> str:
    """A setting's value as its refusal quotes it: masked (`common.secrets`: a Hub URL with a token, a
    store URI with keys, a presigned query) before it is quoted: `repr` escapes a control character
    into a backslash, where the masking rule would stop, showing what follows."""
    shown = repr(mask_credentials(raw))
    return shown if len(shown) <= 100 else f"{shown[:80]}…({len(raw)} characters)"


def shown_default(name: str) -> str:
    """The default as the docs show it (host paths as `<repo>/…`, derived values by their rule)."""
    if SETTINGS[name].shown is not None:
        return str(SETTINGS[name].shown)
    value = default(name)
    if value is None:
        return "unset"
    return f"{value:g}" if isinstance(value, float) else str(value)


@dataclass
class Effective:
    """One line of `neuronforge config`: a variable, its effective value, and where that came from."""

    variable: str
    value: str | float | None
    source: str  # "env NEURONFORGE_<NAME>", "default", or "derived from …"


def effective(s: Settings | None = None) -> list[Effective]:
    """Every setting's effective value, in the model's order (store URIs as they are: mask before
    showing them)."""
    s = s or current()
    rows: list[Effective] = []
    for name in SETTINGS:
        var = variable(name)
        if name == "toolchain_pythons":
            if not s.toolchain_pythons:
                rows.append(Effective(var, None, "default"))
            rows += [
                Effective(f"{TOOLCHAIN_PYTHON_VAR}_{k}", v, f"env {TOOLCHAIN_PYTHON_VAR}_{k}")
                for k, v in sorted(s.toolchain_pythons.items())
            ]
            continue
        value = getattr(s, name)
        if s.from_env(name):
            source = f"env {var}"
        elif name == "store":
            value, source = s.store_uri(), f"derived from {variable('home')}"
        elif name == "lease_ttl_s":
            source = f"derived from {variable('lease_heartbeat_s')}"
        else:
            source = "default"
        value = spelled(value)  # a tuple as the variable spells it
        rows.append(Effective(var, str(value) if isinstance(value, Path) else value, source))
    return rows


# Variables that this model does not read: their reader is not neuronforge's Python. The toolchain side
# (`neuronforge_toolchain/`, the SDK image's Python, standard library only, never importing neuronforge)
# would be listed here too; it reads none today. tests/test_settings.py checks the list is complete.
READ_ELSEWHERE: dict[str, tuple[str, str]] = {
    f"{ENV_PREFIX}WORKER_ROLE": (
        "the Neuron worker image's start command (docker/neuron-worker.Dockerfile)",
        "compile (a CPU host: queue `neuron-compile-<release>`) or neuron (a Neuron host: `neuron-<release>`)",
    ),
    f"{ENV_PREFIX}STORE_URI": (
        "a release channel's launch/resolve.sh, on the serving host (neuronforge.artifacts.channel_launch)",
        "the store to resolve the channel in, instead of the one it was created in (a replica)",
    ),
    f"{ENV_PREFIX}CHANNEL_DIR": (
        "a release channel's launch/resolve.sh, on the serving host",
        "where resolved builds' files go (default: $TMPDIR/neuronforge-channels)",
    ),
    f"{ENV_PREFIX}POD_IMAGE": (
        "a release channel's launch/resolve.sh, in a pod of its k8s-init-container.yaml (which sets it)",
        "the image the pod runs: a build whose profile serves in another image is refused before it is fetched",
    ),
    f"{ENV_PREFIX}POD_FAMILY": (
        "a release channel's launch/resolve.sh, in a pod of its k8s-init-container.yaml (which sets it)",
        "the instance family the pod is placed on: a build compiled for another family is refused",
    ),
    f"{ENV_PREFIX}POD_CORES": (
        "a release channel's launch/resolve.sh, in a pod of its k8s-init-container.yaml (which sets it)",
        "the physical NeuronCores of the pod's whole Neuron devices: a build that needs more is refused",
    ),
    TEST_DECODE_DELAY_VAR: (
        "the cpu backend's smoke child (neuronforge/compilation/backends/cpu.py): a test hook, never a user setting",
        "seconds its loader sleeps in each forward pass (prefill and every decode step), so that a test can build a "
        "deliberately slower build of the same key (it is no input to the compile)",
    ),
    f"{ENV_PREFIX}PARENT_PID": (
        "a toolchain child (neuronforge_toolchain/orphan.py), set by the worker that starts it",
        "the worker's pid: the child ends with that worker, even a SIGKILLed one (Linux's parent-death signal)",
    ),
}


def test_decode_delay_s(environ: Mapping[str, str] | None = None) -> float:
    """`NEURONFORGE_TEST_DECODE_DELAY_S` (`READ_ELSEWHERE`): a test hook, not a setting — the seconds the
    cpu backend's smoke child sleeps in each forward pass; 0 unset. Read here, the one reader of
    `NEURONFORGE_*` variables, by the child only: it is no input to a compile or a cache key."""
    raw = (os.environ if environ is None else environ).get(TEST_DECODE_DELAY_VAR, "").strip()
    if not raw:
        return 0.0
    try:
        return _rate(raw)
    except ValueError:
        raise InvalidInput(
            f"{TEST_DECODE_DELAY_VAR}={quoted(raw)} is not a number of seconds, 0 or above (a test hook: unset it)"
        ) from None


def home() -> Path:
    return current().home


def store_uri(explicit: str | None = None) -> str:
    return explicit or current().store_uri()


def work_dir() -> Path:
    return home() / "work"


def default_profile() -> str:
    """The serving profile every CLI command that takes a target uses unless told otherwise."""
    return current().profile


DEFAULT_MODEL = "builtin:tiny-llama"  # the embedded default: what an empty `model` means


# docs/configuration.md: its tables are rendered from the model between these two lines.
DOCS_PAGE = REPO_ROOT / "docs" / "configuration.md"
REGENERATE = "python -m neuronforge.common.settings"
DOCS_BEGIN = f"<!-- settings tables: generated from neuronforge/common/settings.py by `{REGENERATE}` -->"
DOCS_END = "<!-- settings tables: end -->"


def docs_tables() -> str:
    """The configuration page's tables: every setting, then the variables read elsewhere."""
    lines = ["| Variable | Default | Accepts | Meaning |", "|---|---|---|---|"]
    for name, spec in SETTINGS.items():
        shown = shown_default(name)
        shown = shown if shown == "unset" else f"`{shown}`"
        lines.append(f"| `{variable(name)}` | {shown} | {spec.accepts} | {spec.meaning} |")
    lines += ["", "Read outside this model (not by neuronforge's Python):", ""]
    lines += ["| Variable | Read by | Meaning |", "|---|---|---|"]
    lines += [f"| `{var}` | {by} | {meaning} |" for var, (by, meaning) in READ_ELSEWHERE.items()]
    return "\n".join(lines) + "\n"


def render_page(page: str) -> str:
    """`page` with the text between DOCS_BEGIN and DOCS_END replaced by `docs_tables()`."""
    from neuronforge.common.docs_section import replaced

    return replaced(page, DOCS_BEGIN, DOCS_END, f"{DOCS_BEGIN}\n\n{docs_tables()}\n{DOCS_END}", DOCS_PAGE)


if __name__ == "__main__":  # python -m neuronforge.common.settings: rewrite docs/configuration.md's tables
    DOCS_PAGE.write_text(render_page(DOCS_PAGE.read_text()))
    print(f"wrote {DOCS_PAGE}", file=sys.stderr)
