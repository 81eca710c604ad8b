"""What one target's build knows after each stage: a typed record that travels between stages.

The CLI passes it from stage to stage in one process; the DAG passes it between tasks as XCom
(JSON) — tasks that may run on different hosts. So it holds only store references (`TreeRef`:
prefix + manifest sha256) and small results, never a local path: each task materializes what it
needs from the store on its own host (`neuronforge.artifacts.localcache`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from neuronforge.artifacts.leases import Lease
from neuronforge.artifacts.localcache import TreeRef
from neuronforge.artifacts.published import Published
from neuronforge.common.errors import InvalidInput
from neuronforge.common.hosts import StageRun
from neuronforge.profiles.request import CompileRequest
from neuronforge.records.hub_registry import HubRegistration
from neuronforge.records.smoke import SmokeRecord
from neuronforge.records.transfers import TransferRecord
from neuronforge.spec.source import ModelSource
from neuronforge.spec.target import TargetSpec
from neuronforge.spec.toolchain import Toolchain

# The smoke test's limits (the DAG form's `max_new_tokens` Param has the same maximum).
MAX_NEW_TOKENS = 256
MAX_PROMPTS = 32
MAX_PROMPT_CHARS = 4096


def check_smoke_request(prompts: Any, max_new_tokens: Any, sequence_length: int | None = None) -> None:
    """Refuse smoke-test limits that could never run (InvalidInput naming the value), so that a
    build fails before any lease, download or compile rather than in its smoke stage."""
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int):
        raise InvalidInput(
            f"max_new_tokens must be a whole number of tokens, got {max_new_tokens!r}; "
            f"use 1 to {MAX_NEW_TOKENS} (default 8)"
        )
    if not 1 <= max_new_tokens <= MAX_NEW_TOKENS:
        raise InvalidInput(f"max_new_tokens={max_new_tokens} is out of range; use 1 to {MAX_NEW_TOKENS} (default 8)")
    if sequence_length is not None and max_new_tokens >= sequence_length:
        raise InvalidInput(
            f"max_new_tokens={max_new_tokens} leaves no room for a prompt in sequence_length={sequence_length}; "
            f"use at most {sequence_length - 1}, or a longer sequence length"
        )
    if prompts is None:
        return
    if not isinstance(prompts, (list, tuple)):
        raise InvalidInput(f"prompts must be a list of strings, got {prompts!r}")
    if len(prompts) > MAX_PROMPTS:
        raise InvalidInput(f"{len(prompts)} smoke-test prompts given; use at most {MAX_PROMPTS}")
    for i, prompt in enumerate(prompts):
        if not isinstance(prompt, str) or not prompt.strip():
            raise InvalidInput(f"prompt {i + 1} is {prompt!r}; every smoke-test prompt must be non-empty text")
        if len(prompt) > MAX_PROMPT_CHARS:
            raise InvalidInput(
                f"prompt {i + 1} has {len(prompt)} characters; a smoke-test prompt may have at most "
                f"{MAX_PROMPT_CHARS} (a few words are enough)"
            )


class SourcePin(BaseModel):
    kind: str
    location: str
    revision: str | None = None
    resolved_revision: str

    @classmethod
    def of(cls, s: ModelSource) -> SourcePin:
        return cls(kind=s.kind, location=s.location, revision=s.revision, resolved_revision=s.resolved_revision or "")

    def source(self) -> ModelSource:
        return ModelSource(self.kind, self.location, self.revision, self.resolved_revision)


class PublishedRef(BaseModel):
    manifest_uri: str
    prefix: str
    uris: dict[str, str] = Field(default_factory=dict)

    @classmethod
    def of(cls, published: Published) -> PublishedRef:
        return cls(manifest_uri=published.manifest_uri, prefix=published.prefix, uris=published.uris)


class LeaseRef(BaseModel):
    key: str
    holder: str
    started: float
    heartbeat: float
    expires: float
    version: str = ""

    @classmethod
    def of(cls, lease: Lease) -> LeaseRef:
        return cls(**lease.__dict__)

    def lease(self) -> Lease:
        return Lease(**self.model_dump())


class QuantizedRef(BaseModel):
    checkpoint: TreeRef
    info: dict[str, Any] = Field(default_factory=dict)  # for the manifest: uri, reused, max_rel_error…


class CompiledRef(BaseModel):
    build: TreeRef  # the artifact's payload (model folder, launch, smoke reference), staged for smoke and publish
    record: dict[str, Any] = Field(default_factory=dict)  # graphs, invocations, seconds, cache_sync, formats…


def check_hub_registry(repo_id: str, model: str, profile: Any) -> str:
    """A run's cache repository (`--hub-registry`), refused in one line before any work when its
    builds could never be found there: a profile whose consumer has no Hub registry, a model that is
    no Hub model (optimum's lookup finds builds by Hub model id and reads the model's config.json
    from the Hub). "" (none asked) passes."""
    from neuronforge.artifacts.hub_registry import check_repo_id

    if repo_id.strip() in ("", "-"):  # "-": explicitly none, whatever the workers' default
        return ""
    repo_id = check_repo_id(repo_id)
    if profile.hub_registry is None:
        raise InvalidInput(
            f"--hub-registry {repo_id}: profile {profile.ref}'s consumer has no Hub cache registry (only "
            "optimum-neuron's `cache lookup` and `serve` read one); leave it out, or build with profile optimum-neuron"
        )
    source = ModelSource.parse(model)
    if source.kind != "hf":
        raise InvalidInput(
            f"--hub-registry {repo_id}: {source.name} is not a Hugging Face model; optimum-neuron's lookup finds "
            "builds by Hub model id (org/name) and reads its config.json from the Hub: register builds of Hub models "
            "only, or deploy this one's exported folder"
        )
    return repo_id


def default_hub_registry(model: str, profile: Any) -> str | None:
    """The workers' NEURONFORGE_HUB_REGISTRY for a build it can hold (a Hub model, a profile with a Hub
    registry), else None: a default never refuses a build, it only registers the ones it can."""
    from neuronforge.common import settings

    repo = settings.current().hub_registry
    if not repo or profile.hub_registry is None:
        return None
    try:
        return check_hub_registry(repo, model, profile) or None
    except InvalidInput:
        return None


class BuildState(BaseModel):
    """One target's build: the request, what was pinned, and one field per stage result."""

    model_config = ConfigDict(extra="forbid")

    # The request (from the CLI flags or the DAG's conf).
    model: str
    target: TargetSpec
    store_uri: str
    prompts: list[str] = Field(default_factory=list)
    max_new_tokens: int = 8
    allow_pickle: bool = False
    # the optimum-neuron cache repository (org/name) to register the build in, when the run asks (or the
    # workers' NEURONFORGE_HUB_REGISTRY names one: `hub_registry_default`, dropped where it cannot apply)
    hub_registry: str | None = None
    hub_registry_default: bool = False
    # prepare
    source: SourcePin | None = None
    toolchain: dict[str, Any] | None = None
    key: str | None = None
    neuron_devices: int = 0
    hit: PublishedRef | None = None  # already published: every later stage passes it through
    # claim
    lease: LeaseRef | None = None
    # fetch_checkpoint, plan_target, quantize_weights, compile_graphs, smoke, publish_artifact
    checkpoint: TreeRef | None = None
    plan: list[str] | None = None
    quantized: QuantizedRef | None = None
    compiled: CompiledRef | None = None
    smoke: SmokeRecord | None = None
    registered: HubRegistration | None = None  # register_hub_cache: the entry and optimum's lookup of it
    published: PublishedRef | None = None
    # every stage that ran: its seconds and the kind of host (`neuronforge.common.hosts`)
    hosts: list[StageRun] = Field(default_factory=list)
    # every transfer a stage made, as measured (`neuronforge.common.transfers`): the manifest's `transfers`
    transfers: list[TransferRecord] = Field(default_factory=list)

    def __init__(self, **data: Any) -> None:
        """A new request (CLI and DAG alike) is checked here, before any stage runs; a state read
        back from XCom (`model_validate`) was checked when it was created."""
        check_smoke_request(data.get("prompts"), data.get("max_new_tokens", 8))
        from neuronforge.stores.base import refuse_credentials

        # a secret in a URI would be kept in XCom, task logs and the manifest: refused here
        refuse_credentials(str(data.get("store_uri", "")), "store URI")
        refuse_credentials(str(data.get("model", "")), "model source")
        from neuronforge.profiles.registry import pin

        # the edge: the target's profile pinned to `name@version` once, for every stage after
        target = data.get("target")
        data["target"] = pin(target if isinstance(target, TargetSpec) else TargetSpec.parse(target or {}))
        super().__init__(**data)
        check_smoke_request(self.prompts, self.max_new_tokens, self.target.sequence_length)
        if self.hub_registry is not None:
            self.hub_registry = check_hub_registry(self.hub_registry, self.model, self.profile) or None
        elif not self.hub_registry_default:
            self.hub_registry = default_hub_registry(self.model, self.profile)
            self.hub_registry_default = self.hub_registry is not None

    # -- typed views -----------------------------------------------------------------------------
    def request(self) -> CompileRequest:
        return CompileRequest(self.pinned_source(), self.target, self.profile)

    @property
    def profile(self):  # -> ServingProfile
        """The target's serving profile: the exact `name@version` the edge pinned it to (a state is
        created from a pinned target), looked up, never re-chosen."""
        from neuronforge.profiles.registry import get_profile

        if not self.target.pinned:
            raise RuntimeError(f"{self.target.slug}: the target's profile was not pinned at the edge")
        return get_profile(self.target.profile)

    def pinned_source(self) -> ModelSource:
        if self.source is None:
            raise RuntimeError("the source is pinned by the prepare stage, which has not run")
        return self.source.source()

    def pinned_toolchain(self) -> Toolchain:
        if self.toolchain is None:
            raise RuntimeError("the toolchain is detected by the prepare stage, which has not run")
        return Toolchain.from_json(self.toolchain)

    def need(self, field: str) -> Any:
        value = getattr(self, field)
        if value is None:
            raise RuntimeError(f"{self.target.slug}: no {field} yet; the stage producing it has not run")
        return value

    @property
    def artifact(self) -> PublishedRef | None:
        """What the build ended with: published now, or already published (a hit)."""
        return self.published or self.hit

    def summary(self) -> str:
        """One log line: what the state says now (never the whole record)."""
        parts = [self.target.slug]
        if self.key:
            parts.append(f"key {self.key[:12]}")
        if self.hit:
            parts.append(f"hit {self.hit.manifest_uri}")
        for name in ("checkpoint", "quantized", "compiled"):
            if getattr(self, name) is not None:
                parts.append(name)
        if self.smoke is not None:
            parts.append("smoke passed" if self.smoke.passed else "smoke failed")
        if self.published:
            parts.append(f"published {self.published.manifest_uri}")
        return ", ".join(parts)
