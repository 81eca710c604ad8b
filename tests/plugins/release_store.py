"""A store with release channels and review decisions for the catalog's channel tests, made in well
under a second: builds published by `stages.publish.publish` over staged payloads of small fake files
(no compile; the smoke result is the one a passing smoke test records), moved and reviewed by the real
`farm.releases.run` (so the channel records, review records and farm-index rows are the ones the
release DAG and the CLI write), plus a model whose channel and review records and farm-index rows carry
hostile text, forged with the records' own writers as only a compromised writer could."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from neuronforge.artifacts import farm_index, layout
from neuronforge.artifacts.localcache import file_entries, publish_tree
from neuronforge.farm.releases import ReleaseRequest, run
from neuronforge.pipeline.stages.publish import PublishInput, publish
from neuronforge.profiles.cpu import PROFILE as CPU
from neuronforge.profiles.request import CompileRequest, cache_key
from neuronforge.records.channel import ChannelBuild, ChannelMove, ChannelRecord
from neuronforge.records.farm_index import LogRecord
from neuronforge.records.payload_manifest import PayloadManifest
from neuronforge.records.review import ReviewDecision, ReviewRecord
from neuronforge.records.smoke import SmokeRecord
from neuronforge.spec.source import ModelSource
from neuronforge.spec.target import TargetSpec
from neuronforge.spec.toolchain import Toolchain
from neuronforge.stores import ArtifactStore
from tests.conftest import TARGET

MODEL = "org/chan-model"
HOSTILE_MODEL = "org/hostile-model"
SCRIPT = "<script>window.__pwned=1</script>"
IMG = '"><img src=x onerror="window.__pwned=1">'
JS = "javascript:window.__pwned=1"
TEMPLATE = "tpl{{7*7}}end"
# a local model's name: a folder may be named anything (the channels page is asked for it by name)
ODD_MODEL = f"/srv/models/{IMG}{TEMPLATE}"


def fake_publish(
    store: ArtifactStore,
    work: Path,
    model: str,
    batch: int,
    *,
    smoke: SmokeRecord | None = None,
    compiler: str = "2.0",
) -> str:
    """Publish a cpu build of `model` (batch size `batch`) as the publish stage does; its key. `smoke`:
    its smoke result (default: a passing one without a measurement); `compiler`: its compiler's
    version (another one: another build of the same target, as a new release makes)."""
    target = TargetSpec.parse({**TARGET, "profile": CPU.ref, "batch_size": batch})
    revision = hashlib.sha1(model.encode()).hexdigest()  # a build is keyed by its model's revision
    request = CompileRequest(ModelSource.parse(model).pinned(revision), target, CPU)
    toolchain = Toolchain(CPU.backend.name, "2.0", "torch-inductor", compiler)
    key = cache_key(request, toolchain)
    payload = work / key[:12]
    (payload / "launch").mkdir(parents=True)
    (payload / "model.bin").write_bytes(b"x" * batch)
    (payload / "launch" / "load.py").write_text("print('loaded')\n")
    staged = PayloadManifest(files=file_entries(payload))
    build = publish_tree(
        store, payload, layout.build_prefix(key, hashlib.sha256(staged.to_bytes()).hexdigest()), staged
    )
    passed = {"passed": True, "reason": "tokens match", "time_to_first_token_s": 0.01, "per_token_s": 0.002}
    smoke = smoke if smoke is not None else SmokeRecord.model_validate(passed)
    publish(PublishInput(request, toolchain, key, build, smoke, {"formats": {"launch": "launch"}}), store)
    return key


@dataclass(frozen=True)
class Releases:
    a: str  # on stable, approved then rejected: the loud case
    b: str  # on candidate (pending), which held `a` before
    c: str  # published, on no channel, pending
    hostile: str  # HOSTILE_MODEL's build: rejected, its farm-index row names two channels that are markup
    odd_state: str  # HOSTILE_MODEL's other build: its farm-index row's review state is markup


def _do(store: ArtifactStore, by: str, **fields: str) -> None:
    run(store, ReleaseRequest(**fields), by=by)


def seed(store: ArtifactStore, work: Path) -> Releases:
    a, b, c = (fake_publish(store, work, MODEL, n) for n in (1, 2, 3))
    line = {"model": MODEL, "profile": "cpu"}
    _do(store, "alice@ci", action="promote", **line, channel="candidate", build=a, reason="first build")
    _do(store, "bob", action="approve", build=a, reason="smoke and evals ok")
    _do(store, "carol", action="promote", **line, channel="stable", from_channel="candidate", reason="release 1")
    _do(store, "alice@ci", action="promote", **line, channel="candidate", build=b, reason="rebuilt for SDK 2.21")
    _do(store, "dave", action="reject", build=a, reason="wrong tokenizer")
    hostile, odd_state = (fake_publish(store, work, HOSTILE_MODEL, n) for n in (1, 2))
    _seed_hostile(store, hostile, odd_state)
    farm_index.compact(store)
    return Releases(a, b, c, hostile, odd_state)


def _seed_hostile(store: ArtifactStore, key: str, odd_state: str) -> None:
    """Records whose every text field is markup: a channel of ODD_MODEL (its move's who, why, target,
    URI, earlier key and profile; a history move with a forged key), the review of `key`, and
    farm-index rows naming channels (of `key`) and a review state (of `odd_state`) that are markup."""
    build = ChannelBuild(
        key=key,
        artifact_prefix="artifacts/x",
        artifact_uri=JS,
        manifest="artifacts/x/manifest.json",
        manifest_sha256="0" * 64,
        target=SCRIPT,
        profile=IMG,
        smoke={"passed": True, "host": SCRIPT},
        toolchain={"compiler_version": IMG},
        published_at=TEMPLATE,
    )
    forged = build.model_copy(update={"key": JS + IMG})
    move = ChannelMove(action="promote", build=build, previous=JS, by=IMG, at=SCRIPT, reason=SCRIPT, review=IMG)
    earlier = ChannelMove(action="rollback", build=forged, by=SCRIPT, at=TEMPLATE, reason=f"{IMG}{TEMPLATE}")
    record = ChannelRecord(
        model=ODD_MODEL, profile_line="cpu", channel="stable", requires_approval=True, current=move, history=[earlier]
    )
    record.write(store, layout.channel_record(ModelSource.parse(ODD_MODEL), "cpu", "stable"))
    decision = ReviewDecision(state="rejected", by=IMG, at=TEMPLATE, reason=SCRIPT)
    ReviewRecord(key=key, current=decision, history=[ReviewDecision(state="approved", by=SCRIPT)]).write(
        store, layout.review_entry(key)
    )
    stamp = {"by": IMG, "at": TEMPLATE, "action": "promote", "on": True}
    farm_index.append(
        store,
        [
            LogRecord(kind="channel", key=key, channel={**stamp, "channel": SCRIPT}),
            LogRecord(kind="channel", key=key, channel={**stamp, "channel": IMG}),
            LogRecord(kind="review", key=key, review={"state": "rejected", "by": IMG, "at": "", "reason": SCRIPT}),
            LogRecord(kind="review", key=odd_state, review={"state": SCRIPT, "by": IMG, "at": "", "reason": JS}),
        ],
    )
