"""What one target's build knows after each stage: a typed record that travels between stages.

The CLI passes it from stage to stage in one process; the DAG passes it between tasks as XCom
(JSON) — tasks that may run on different hosts. So it holds only store references (`TreeRef`:
prefix + manifest sha256) and small results, never a local path: each task materializes what it
needs from the store on its own host (`neuronforge.localcache`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from neuronforge.leases import Lease
from neuronforge.localcache import TreeRef
from neuronforge.request import CompileRequest, Toolchain
from neuronforge.source import ModelSource
from neuronforge.stages.publish import Published
from neuronforge.target import TargetSpec


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
    build: TreeRef  # the compiled artifact, staged in the store for smoke and publish
    record: dict[str, Any] = Field(default_factory=dict)  # graphs, invocations, seconds, cache_sync…


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
    smoke: dict[str, Any] | None = None
    published: PublishedRef | None = None

    # -- typed views -----------------------------------------------------------------------------
    def request(self) -> CompileRequest:
        return CompileRequest(self.pinned_source(), self.target)

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
            parts.append("smoke passed" if self.smoke.get("passed") else "smoke failed")
        if self.published:
            parts.append(f"published {self.published.manifest_uri}")
        return ", ".join(parts)
