"""The release channel: `channels/<org>/<name>/<profile line>/<channel>/channel.json`, a named, movable
pointer to one published build (`neuronforge.artifacts.channels`).

A channel is what a deployment names instead of a cache key: `meta-llama/Llama-3.1-8B` · `vllm-neuron`
· `stable`. The record holds the move that put the current build there (who, when, why, and the
evidence that allowed it: the smoke result and host, the toolchain) and the earlier moves, newest
first: the builds a rollback can go back to. A history entry is trusted for nothing but the key it
names (anyone who can write the store can edit this file): a rollback checks that build as a promote
does and records it as read then (`neuronforge.artifacts.channels`). It is rewritten whole by compare-and-swap on
its store version (S3: `If-Match` on the ETag, `If-None-Match: *` to create): of two concurrent
promoters exactly one writes, and a move never loses an earlier one.

Consumers read it as plain JSON (`jq -r .current.build.artifact_uri channel.json`), so the names of
`current`, `build` and `artifact_uri` are part of the contract.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr

from neuronforge.records.base import StoredRecord
from neuronforge.records.parts import AnyObject, Text, WrittenPart, or_default

# How many moves a channel keeps besides the current one (the issue asks for at least 20); gc keeps
# every build they point to, so a rollback never finds its build deleted.
HISTORY_KEPT = 30


class ChannelSmoke(WrittenPart):
    """What the build's smoke test said when it was moved (its manifest holds the whole result)."""

    passed: Annotated[bool, or_default(lambda: False)] = False
    reason: Text = ""
    host: Text = ""  # the host the smoke test ran on (hostname)
    time_to_first_token_s: Annotated[float | None, or_default(lambda: None)] = None


class ChannelBuild(BaseModel):
    """The build a move pointed the channel at, with the evidence the move checked."""

    model_config = ConfigDict(frozen=True, extra="allow")

    key: StrictStr  # the full cache key
    artifact_prefix: StrictStr  # the artifact's folder, relative to the store root
    artifact_uri: Text = ""  # the same folder as a URI of the store it was promoted in
    manifest: StrictStr  # the manifest's key, relative to the store root
    manifest_sha256: StrictStr  # of the manifest's bytes: hosts and a rollback compare the manifest with it
    target: Text = ""  # the target slug
    profile: Text = ""  # the profile ref it was built for (name@version)
    smoke: Annotated[ChannelSmoke, or_default(ChannelSmoke)] = Field(default_factory=ChannelSmoke)
    toolchain: AnyObject = Field(default_factory=dict)  # compiler, compiler_version, backend, ...
    published_at: Text = ""
    sdk_release: Text = ""  # the Neuron SDK release it was built on (its profile's; "" before it was recorded)


class ChannelMove(BaseModel):
    """One move of the pointer."""

    model_config = ConfigDict(frozen=True, extra="allow")

    action: Literal["promote", "rollback"]
    build: ChannelBuild
    previous: Text = ""  # the key the channel pointed to before ("" for the first move)
    by: Text = ""  # who moved it (user@host, or the Airflow user and run)
    at: Text = ""  # UTC, ISO 8601
    reason: Text = ""
    review: Text = ""  # the build's review state when it was moved (pending, approved)
    # a promote to a gated channel: the build against the one the channel served (`Comparison.summary()`:
    # the verdict and its numbers, or why the two could not be compared); "" when nothing was compared
    comparison: Text = ""
    accepted_regression: Text = ""  # the reason given to promote past a regression ("" when none was)


class ChannelRecord(StoredRecord):
    KIND: ClassVar[str] = "release channel"
    SCHEMA: ClassVar[int] = 1

    model: StrictStr  # the model's name as every record shows it (`ModelSource.name`)
    profile_line: StrictStr  # the serving profile's name, without its version (`vllm-neuron`)
    channel: StrictStr
    requires_approval: bool = False  # what the channel required when it was last moved
    # The Neuron SDK release the channel's fleet runs: a move takes only a build built on it or attested
    # for it (`records.attestation`); "" requires none. Set by `neuronforge require-release`.
    requires_release: Text = ""
    current: ChannelMove
    history: list[ChannelMove] = Field(default_factory=list)  # earlier moves, newest first

    @property
    def moves(self) -> list[ChannelMove]:
        """Every kept move, newest (the current one) first."""
        return [self.current, *self.history]

    def moved(self, move: ChannelMove, requires_approval: bool) -> ChannelRecord:
        """This channel after `move`: the current move joins the history, which keeps HISTORY_KEPT."""
        return self.model_copy(
            update={
                "current": move,
                "history": [self.current, *self.history][:HISTORY_KEPT],
                "requires_approval": requires_approval,
            }
        )
