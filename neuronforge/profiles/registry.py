"""The one place serving profiles are registered. The form's enum, the CLI, the planner, the DAGs'
routing and the catalog read this module; adding a profile is one module plus one line here."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from neuronforge.common.errors import InvalidInput
from neuronforge.profiles.base import RefusedStack, ServingProfile
from neuronforge.profiles.lifecycle import Lifecycle, release_key

if TYPE_CHECKING:
    from neuronforge.profiles.request import CompileRequest
    from neuronforge.spec.modelconfig import ModelArch
    from neuronforge.spec.source import ModelSource
    from neuronforge.spec.target import TargetSpec
    from neuronforge.spec.toolchain import Toolchain


@cache
def all_profiles() -> tuple[ServingProfile, ...]:
    """Every registered profile version (imported on first use: profiles import the backends)."""
    from neuronforge.profiles import cpu, lmi_neuronx, optimum_neuron, vllm_native, vllm_neuron

    return (
        cpu.PROFILE,
        optimum_neuron.PROFILE,
        *vllm_neuron.PROFILES,
        *vllm_native.PROFILES,
        lmi_neuronx.PROFILE,
    )


@cache
def refused_stacks() -> tuple[RefusedStack, ...]:
    from neuronforge.profiles.unsupported import STACKS

    return STACKS


def profile_names() -> list[str]:
    """Names users type, in registry order (each resolves to its newest version)."""
    return list(dict.fromkeys(p.name for p in all_profiles()))


def get_profile(spec: str, family: str | None = None, release: str | None = None) -> ServingProfile:
    """`name@version` exactly, or `name` alone: its newest version — the newest that serves instance
    `family` when one is given (an SDK upgrade takes each family to the last release of the line
    that still serves it, not past it), no newer than SDK `release` when one is given. A refused
    stack or an unknown name raises `InvalidInput` with the reason and what to use instead."""
    name, _, version = spec.strip().partition("@")
    versions = [p for p in all_profiles() if p.name == name]
    if not versions:
        refused = next((s for s in refused_stacks() if s.name == name), None)
        if refused is not None:
            raise InvalidInput(refused.message())
        raise InvalidInput(f"unknown profile {spec!r}; known profiles: {', '.join(profile_names())}")
    if not version:
        found = newest(versions, family, release) or newest(versions, None, release)
        return found or max(versions, key=lambda p: _version_key(p.version))
    for p in versions:
        if p.version == version:
            return p
    # `2.32` names release 2.32.0 (the newest 2.32.x registered), as SDK releases are spoken of.
    series = [p for p in versions if p.version.startswith(f"{version}.")]
    if series:
        return max(series, key=lambda p: _version_key(p.version))
    raise InvalidInput(f"profile {name!r} has no version {version!r}; registered: {', '.join(p.ref for p in versions)}")


def newest(versions: list[ServingProfile], family: str | None, release: str | None = None) -> ServingProfile | None:
    """The newest of `versions` that serves `family` (any, without one) and is no newer than SDK
    `release` (any, without one); None when none does."""
    fit = [
        p
        for p in versions
        if (family is None or not p.instance_families or family in p.instance_families)
        and (release is None or release_key(p.version) <= release_key(release))
    ]
    return max(fit, key=lambda p: _version_key(p.version)) if fit else None


def versions_of(name: str) -> list[ServingProfile]:
    """The registered versions of profile line `name`, oldest first."""
    return sorted((p for p in all_profiles() if p.name == name), key=lambda p: _version_key(p.version))


def lifecycles() -> dict[str, Lifecycle]:
    """Each registered line's lifecycle (the profile modules declare them), in registry order."""
    out: dict[str, Lifecycle] = {}
    for p in all_profiles():
        if p.lifecycle is not None:
            out.setdefault(p.name, p.lifecycle)
    return out


def lifecycle_of(name: str) -> Lifecycle | None:
    return lifecycles().get(name)


def profile_of(target: TargetSpec) -> ServingProfile:
    """The profile a target names: an exact `name@version` lookup once `pin` pinned it at the edge; a
    bare name, the newest version that serves the target's instance family (as `pin` would)."""
    return get_profile(target.profile, target.instance.family)


def pin(target: TargetSpec, release: str | None = None) -> TargetSpec:
    """The edge's one resolution: the target with its profile spelled `name@version` (a bare name
    means the newest registered version that serves the target's instance family, no newer than SDK
    `release` when one is given), or `InvalidInput` naming the field when no registered profile
    answers to it. Everything downstream (keys, plans, builds, routing) reads the pinned target, so a
    registry that gains a version later never changes what a running build means."""
    try:
        ref = get_profile(target.profile, target.instance.family, release).ref
    except InvalidInput as exc:
        raise InvalidInput(f"target.profile: {exc}") from None
    return target if ref == target.profile else target.model_copy(update={"profile": ref})


def parse_target(data: dict[str, Any]) -> TargetSpec:
    """`TargetSpec.parse` then `pin`: what every entry point (CLI, form, catalog, sweep) calls on a
    target a user wrote."""
    from neuronforge.spec.target import TargetSpec

    return pin(TargetSpec.parse(data))


def compile_request(source: ModelSource, target: TargetSpec) -> CompileRequest:
    """The request for `target` of a pinned `source`: the target pinned and its profile resolved,
    once, here (the stages and the cache key read `request.profile`)."""
    from neuronforge.profiles.request import CompileRequest

    target = pin(target)
    return CompileRequest(source, target, get_profile(target.profile))


def detect_toolchain(spec: str, compiler_flags: str | tuple[str, ...] = ()) -> Toolchain:
    """The toolchain this worker has for serving profile `spec` (`name` or `name@version`)."""
    return get_profile(spec).detect_toolchain(compiler_flags)


def target_problems(
    profile: ServingProfile, target: TargetSpec, model_type: str | None = None, arch: ModelArch | None = None
) -> list[str]:
    """Why `profile` cannot build `target` (for `model_type` / `arch` when known), each with its fix:
    the profile's own rules, and an architecture it does not serve named with the profiles that do."""
    out = profile.problems(target, model_type)
    own = profile.architecture_problems(model_type, target.instance.family) if model_type is not None else None
    if own is not None:
        out += own
    elif model_type is not None and model_type not in profile.architectures:
        out.append(
            f"profile {profile.name!r} does not support {model_type}; {serving_advice(model_type, profile, target)}"
        )
    if arch is not None:
        out += profile.arch_problems(target, arch)
    return out


def serving_advice(model_type: str, profile: ServingProfile, target: TargetSpec) -> str:
    """Which profile to use instead, naming only what serves `model_type` on the target's instance
    family today: for a Neuron target a Neuron line whose status for the family at the newest SDK
    release is active or maintenance (a frozen line: its last version that serves the family, pinned);
    a line past its end of support for the family is named as such, never recommended."""
    from neuronforge.profiles.lifecycle import Status
    from neuronforge.profiles.sdk_releases import latest_release

    family = target.instance.family if profile.neuron else None
    today = latest_release().version
    use, ended = [], []
    for name in dict.fromkeys(p.name for p in profiles_for(model_type) if p.name != profile.name):
        versions = [p for p in versions_of(name) if model_type in p.architectures]
        if family is None:
            use.append(name)
            continue
        best = newest(versions, family)
        if best is None or not best.neuron:
            continue  # the cpu profile is no Neuron server; a line that never served the family
        status = best.lifecycle.status(family, today) if best.lifecycle is not None else Status.ACTIVE
        if status in (Status.ACTIVE, Status.MAINTENANCE):
            use.append(name)
        elif status is Status.FROZEN:
            use.append(best.ref)
        elif status is Status.END_OF_SUPPORT:
            ended.append(f"{name} is end-of-support for {family}")
    if use:
        return f"use profile {' or '.join(use)}"
    where = f" on {family}" if family else ""
    return f"no profile serves {model_type}{where} today" + (f" ({'; '.join(ended)})" if ended else "")


def profiles_for(model_type: str) -> list[ServingProfile]:
    return [p for p in all_profiles() if model_type in p.architectures]


def neuron_queues() -> list[str]:
    """The Celery queues where the Neuron profiles' toolchains are (toolchain detection and
    compiling): `neuron-compile-<release>`, or `neuron-<release>` where compiling needs a device."""
    return sorted({p.queue for p in all_profiles() if p.queue})


def device_queues() -> list[str]:
    """The Celery queues of Neuron hosts (`neuron-<release>`, one per SDK release a Neuron profile is
    registered for: a worker image exists for it): where a published build is smoked at a release."""
    return sorted({p.device_queue for p in all_profiles() if p.device_queue})


WORKER_ROLES = ("compile", "neuron")


def worker_queues(release: str, role: str) -> list[str]:
    """The queues a worker of SDK `release`'s image consumes in its role: `compile` (a CPU host:
    the stages that need the toolchain but no device) or `neuron` (a Neuron host: the stages that
    need NeuronCores). What `docker/neuron-worker.Dockerfile` starts; InvalidInput when the role has
    nothing to do for that release."""
    if role not in WORKER_ROLES:
        raise InvalidInput(f"worker role {role!r}; use one of {', '.join(WORKER_ROLES)}")
    profiles = [p for p in all_profiles() if p.neuron and p.version == release]
    if not profiles:
        known = sorted({p.version for p in all_profiles() if p.neuron})
        raise InvalidInput(f"no registered profile pins Neuron SDK {release!r}; registered: {', '.join(known)}")
    # The Neuron host consumes the device queue; a CPU host the toolchain queue, where that is not
    # the device queue (a toolchain that compiles where it loads needs no CPU worker at all).
    queues = {str(p.device_queue) if role == "neuron" else str(p.queue) for p in profiles}
    if role == "compile":
        queues -= {str(p.device_queue) for p in profiles}
    if not queues:
        why = "; ".join(sorted({p.device_compile_reason for p in profiles if p.device_compile_reason}))
        raise InvalidInput(
            f"SDK {release}'s profiles ({', '.join(p.ref for p in profiles)}) run no stage on a {role} worker: "
            f"they compile where they load ({why or 'their toolchain needs a device'}); start this image with "
            "NEURONFORGE_WORKER_ROLE=neuron on Neuron hosts"
        )
    return sorted(queues)


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(x) if x.isdigit() else -1 for x in version.split("."))


def lifecycle_warning(profile: ServingProfile, family: str) -> str | None:
    """Why a target of `profile` on instance `family` should plan its move, or None: the line is
    frozen for the family at the newest SDK release the data knows, or its end for the family is
    announced. Names the newest version of the line that still serves the family, and the line to
    move to with its newest version for the family, each with the statement's source."""
    from neuronforge.profiles.lifecycle import Status
    from neuronforge.profiles.sdk_releases import latest_release

    lc = profile.lifecycle
    fam = lc.of(family) if lc else None
    if lc is None or fam is None:
        return None
    latest = latest_release().version
    now = fam.phase(latest)
    ending = next(
        (p for p in fam.phases if p.status is Status.END_OF_SUPPORT and release_key(p.since) > release_key(latest)),
        None,
    )
    if now is None or (now.status not in (Status.FROZEN, Status.END_OF_SUPPORT) and ending is None):
        return None
    parts = []
    mine = fam.phase(profile.version)
    if mine is not None and mine.disputed_serving:
        others = "; ".join(f"{d.note} [{d.source.url}]" for d in mine.disputed)
        quote = f'"{mine.source.quote}" ' if mine.source.quote else ""
        best = newest(versions_of(lc.line), family)
        parts.append(
            f"AWS's statements disagree on whether {lc.line}@{profile.version} serves {family}: {quote}"
            f"[{mine.source.url}] against: {others}; allowed with this warning, recommended: "
            f"{best.ref if best else lc.line}"
        )
    if now.status in (Status.FROZEN, Status.END_OF_SUPPORT):
        last = f" (its last release for {family}: SDK {fam.last_release})" if fam.last_release else ""
        parts.append(f"{lc.line} is {now.status.value} for {family} from SDK {now.since}{last} [{now.source.url}]")
    if ending is not None:
        note = f" ({ending.note})" if ending.note else ""
        parts.append(f"its end of support for {family} is announced for SDK {ending.since}{note} [{ending.source.url}]")
    newest_here = newest(versions_of(lc.line), family)
    if newest_here is not None and newest_here.ref != profile.ref:
        parts.append(f"the newest release that serves {family} is {newest_here.ref}")
    if fam.moves_to:
        to = newest(versions_of(fam.moves_to), family)
        parts.append(f"move to profile {to.ref if to else fam.moves_to}")
    elif now.status in (Status.FROZEN, Status.END_OF_SUPPORT):
        parts.append(f"keep it pinned: no newer release of {lc.line} will serve {family}")
    return "; ".join(parts)
