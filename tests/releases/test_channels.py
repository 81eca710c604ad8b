"""Release channels: what a move checks, compare-and-swap under concurrent promoters (file store and a
real S3 endpoint), rollback, the kept history, the farm-index rows, the records' versions."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from neuronforge.artifacts import channels, layout, reviews
from neuronforge.artifacts.farm_index import FarmIndex, rebuild
from neuronforge.common.errors import InvalidInput
from neuronforge.records.base import RecordTooNew
from neuronforge.records.channel import HISTORY_KEPT, ChannelRecord
from neuronforge.stores import open_store
from tests.releases.builds import MODEL, publish


@pytest.fixture
def store(tmp_path: Path):
    return open_store(f"file://{tmp_path / 'store'}")


def ref(channel: str = "stable", profile: str = "cpu"):
    return channels.ChannelRef.parse(MODEL, profile, channel)


def approve(store, key: str) -> None:
    reviews.decide(store, key, "approved", "reviewer@test", "ok", channels.now())


def test_stable_requires_approval_and_candidate_does_not(store) -> None:
    key = publish(store, 1)
    with pytest.raises(channels.PromotionRefused, match=r"channel stable requires an approved build and .* pending"):
        channels.promote(store, ref("stable"), build=key[:12])
    assert not store.exists(ref("stable").record_key)  # nothing written
    assert channels.promote(store, ref("candidate"), build=key[:12], by="ci").created
    approve(store, key)
    result = channels.promote(store, ref("stable"), from_channel="candidate", by="alice@host", reason="soak passed")
    move = result.record.current
    assert (move.action, move.build.key, move.by, move.reason, move.review) == (
        "promote", key, "alice@host", "soak passed", "approved"
    )  # fmt: skip
    # the evidence that allowed it: the smoke result and host, the toolchain, the manifest's digest
    assert move.build.smoke.passed is True and move.build.smoke.host == "smoke-host"
    assert move.build.toolchain["compiler"] == "torch-inductor"
    manifest = store.get_bytes(move.build.manifest)
    assert move.build.manifest_sha256 == __import__("hashlib").sha256(manifest).hexdigest()
    assert result.record.requires_approval


def test_the_approval_channels_are_a_setting(store, monkeypatch: pytest.MonkeyPatch) -> None:
    key = publish(store, 1)
    monkeypatch.setenv("NEURONFORGE_APPROVAL_CHANNELS", "prod")
    assert channels.promote(store, ref("stable"), build=key).changed  # stable no longer requires it
    with pytest.raises(channels.PromotionRefused, match="channel prod requires an approved build"):
        channels.promote(store, ref("prod"), build=key)


@pytest.mark.parametrize(
    ("build", "why"),
    [
        (dict(smoke_passed=False), r"smoke test did not pass \(tokens differ\)"),
        (dict(model="other-model"), "is of builtin:other-model, not builtin:tiny-llama"),
        (dict(profile="vllm-neuron"), "built for profile line vllm-neuron, channel .* serves cpu"),
    ],
)
def test_every_channel_refuses_a_build_it_cannot_serve(store, build: dict, why: str) -> None:
    key = publish(store, 1, **build)
    with pytest.raises(channels.PromotionRefused, match=why):
        channels.promote(store, ref("candidate"), build=key)
    assert store.list("channels") == []


def test_a_build_whose_manifest_does_not_verify_is_refused(store) -> None:
    key = publish(store, 1)
    prefix = json.loads(store.get_bytes(layout.index_entry(key)))["prefix"]
    store.put_bytes(b"truncated", f"{prefix}/model/weights.bin")
    with pytest.raises(channels.PromotionRefused, match=r"is damaged \(1 of 2 file\(s\) missing .* model/weights.bin"):
        channels.promote(store, ref("candidate"), build=key)
    with pytest.raises(InvalidInput, match=r"no artifact .* cache key starting with abcdef"):
        channels.promote(store, ref("candidate"), build="abcdef123456")


def test_a_rejected_build_goes_to_no_channel_and_is_named_where_it_is_served(store) -> None:
    from neuronforge.farm.releases import ReleaseRequest, run

    key = publish(store, 1)
    channels.promote(store, ref("candidate"), build=key)
    outcome = run(store, ReleaseRequest(action="reject", build=key[:12], reason="garbled output"), by="bob")
    assert "WARNING: builtin:tiny-llama · cpu · candidate still points to it: promote another build (it held no " \
        "other build to roll back to): `neuronforge promote builtin:tiny-llama --profile cpu --channel candidate " \
        "--build KEY" in outcome.line  # fmt: skip
    with pytest.raises(channels.PromotionRefused, match=r"is rejected \(garbled output\); no channel takes"):
        channels.promote(store, ref("beta"), build=key)
    with pytest.raises(InvalidInput, match="reject: give the reason"):
        ReleaseRequest.from_json({"action": "reject", "build": key})


def test_promoting_the_current_build_writes_nothing(store) -> None:
    key = publish(store, 1)
    channels.promote(store, ref("candidate"), build=key)
    _, version = store.read_versioned(ref("candidate").record_key)
    again = channels.promote(store, ref("candidate"), build=key)
    assert not again.changed and store.read_versioned(ref("candidate").record_key)[1] == version


def test_rollback_steps_and_to(store) -> None:
    keys = [publish(store, n) for n in (1, 2, 3)]
    for key in keys:
        channels.promote(store, ref("candidate"), build=key)
    back = channels.rollback(store, ref("candidate"), by="oncall", reason="latency")
    assert (back.record.current.action, back.record.current.build.key) == ("rollback", keys[1])
    assert back.record.current.previous == keys[2]
    # distinct earlier builds, newest first: 3 (rolled back from), then 1
    assert channels.rollback(store, ref("candidate"), steps=2).record.current.build.key == keys[0]
    assert channels.rollback(store, ref("candidate"), to=keys[2][:12]).record.current.build.key == keys[2]
    with pytest.raises(InvalidInput, match="goes further back"):
        channels.rollback(store, ref("candidate"), steps=5)
    with pytest.raises(InvalidInput, match=r"not in the history of .* \(builds it held: "):
        channels.rollback(store, ref("candidate"), to="0123456789ab")
    with pytest.raises(InvalidInput, match="nothing to roll back"):
        channels.rollback(store, ref("never-moved"))


def test_rollback_refuses_a_build_rejected_since(store) -> None:
    first, second = publish(store, 1), publish(store, 2)
    for key in (first, second):
        channels.promote(store, ref("candidate"), build=key)
    reviews.decide(store, first, "rejected", "bob", "wrong tokenizer", channels.now())
    with pytest.raises(channels.PromotionRefused, match="is rejected"):
        channels.rollback(store, ref("candidate"))
    assert channels.get(store, ref("candidate")).current.build.key == second
    reviews.decide(store, first, "approved", "bob", "tokenizer was fine", channels.now())
    assert channels.rollback(store, ref("candidate")).record.current.build.key == first


def test_the_history_keeps_the_last_moves(store) -> None:
    a, b = publish(store, 1), publish(store, 2)
    for i in range(HISTORY_KEPT + 5):
        channels.promote(store, ref("candidate"), build=(a, b)[i % 2])
    record = channels.get(store, ref("candidate"))
    assert len(record.moves) == HISTORY_KEPT + 1 and HISTORY_KEPT >= 20
    assert [m.build.key for m in record.moves[:3]] == [a, b, a]


@pytest.mark.parametrize("where", ["file", "s3"])
def test_of_concurrent_promoters_exactly_one_writes(
    where: str, store, request: pytest.FixtureRequest, monkeypatch
) -> None:
    """Every promoter reads the channel before any writes (a barrier after the read): one wins, every
    other one gets one sentence naming who moved it and to what, and the history lost nothing."""
    if where == "s3":
        store = open_store(f"s3://{request.getfixturevalue('s3_bucket')}/releases")
    keys = [publish(store, n) for n in range(1, 6)]
    channels.promote(store, ref("candidate"), build=keys[0], by="first")
    barrier = threading.Barrier(4)
    real = channels.candidate_and_smoke  # what every move reads its build with, between its read and its write

    def after_the_read(*args, **kwargs):
        barrier.wait(timeout=30)
        return real(*args, **kwargs)

    monkeypatch.setattr(channels, "candidate_and_smoke", after_the_read)
    won, lost = [], []

    def promote(i: int) -> None:
        try:
            channels.promote(store, ref("candidate"), build=keys[i], by=f"promoter-{i}")
            won.append(i)
        except channels.ChannelMoved as exc:
            lost.append(str(exc))

    threads = [threading.Thread(target=promote, args=(i,)) for i in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1 and len(lost) == 3, (won, lost)
    winner = won[0]
    assert all(f"was moved by promoter-{winner} at " in m and f"(promote to {keys[winner][:12]})" in m for m in lost)
    record = channels.get(store, ref("candidate"))
    assert [m.by for m in record.moves] == [f"promoter-{winner}", "first"]


def test_the_farm_index_rows_follow_the_channels(store) -> None:
    a, b = publish(store, 1), publish(store, 2)
    rebuild(store)
    channels.promote(store, ref("candidate"), build=a)
    channels.promote(store, ref("beta"), build=a)
    channels.promote(store, ref("candidate"), build=b)
    reviews.decide(store, b, "rejected", "bob", "bad", channels.now())

    def rows() -> dict[str, tuple[list[str], str | None]]:
        window = FarmIndex.open(store).window()
        return {e.key: (e.channels, (e.review or {}).get("state")) for e in window.entries}

    expected = {a: (["beta"], None), b: (["candidate"], "rejected")}
    assert rows() == expected
    rebuild(store)  # from the channels and reviews themselves
    assert rows() == expected


def test_channels_lists_one_model_without_reading_the_others(store) -> None:
    key, other = publish(store, 1), publish(store, 1, model="other")
    channels.promote(store, ref("candidate"), build=key)
    channels.promote(store, channels.ChannelRef.parse("builtin:other", "cpu", "candidate"), build=other)
    assert [r.model for r in channels.channels_of(store, MODEL)] == [MODEL]
    assert [r.model for r in channels.channels_of(store)] == ["builtin:other", MODEL]


@pytest.mark.parametrize(
    ("model", "profile", "channel", "why"),
    [
        (MODEL, "cpu", "Stable!", "channel 'Stable!': use lower-case letters"),
        (MODEL, "../x", "stable", "profile '../x': give a serving profile name"),
        ("org/name@main", "cpu", "stable", "names a revision: a channel spans revisions"),
    ],
)
def test_a_bad_channel_name_is_one_line(model: str, profile: str, channel: str, why: str) -> None:
    with pytest.raises(InvalidInput, match=why):
        channels.ChannelRef.parse(model, profile, channel)


def test_a_channel_record_of_a_newer_release_is_refused(store) -> None:
    key = publish(store, 1)
    channels.promote(store, ref("candidate"), build=key)
    data = json.loads(store.get_bytes(ref("candidate").record_key))
    data["schema_version"] = ChannelRecord.SCHEMA + 1
    store.put_bytes(json.dumps(data).encode(), ref("candidate").record_key)
    with pytest.raises(RecordTooNew, match="upgrade neuronforge"):
        channels.promote(store, ref("candidate"), build=publish(store, 2))


def test_a_rollback_is_nine_requests_on_s3(s3_bucket: str) -> None:
    """The release commands open the store without the bucket probe, and a rollback checks its build as a
    promote does: channel GET; the build's index entry, manifest and folder listing (`candidate`); its
    review and damage records; channel PUT; farm-index tail GET and PUT. Nothing copied
    (bench/channels.py measures it against copying a build)."""
    from neuronforge.interfaces.cli import main

    uri = f"s3://{s3_bucket}/rollback"
    store = open_store(uri)
    a, b = publish(store, 1), publish(store, 2)
    for key in (a, b):
        channels.promote(store, ref("candidate"), build=key)
    sent: list[tuple[str, str]] = []

    def record(request, **_) -> None:
        url = urlsplit(request.url)
        listed = parse_qs(url.query).get("prefix")  # ListObjectsV2: the bucket's URL, the prefix a parameter
        path = unquote(url.path).split(f"/{s3_bucket}/", 1)[-1]
        sent.append(("LIST", listed[0]) if listed else (request.method, path))

    events = store.client.meta.events  # the process's client of this endpoint: the command's too
    events.register("before-send.s3", record, unique_id="test-rollback-requests")
    try:
        assert main(["rollback", MODEL, "--profile", "cpu", "--channel", "candidate", "--store", uri]) == 0
    finally:
        events.unregister("before-send.s3", unique_id="test-rollback-requests")
    record_key = f"rollback/{ref('candidate').record_key}"
    prefix = json.loads(store.get_bytes(layout.index_entry(a)))["prefix"]
    assert sent == [
        ("GET", record_key),
        ("GET", f"rollback/{layout.index_entry(a)}"),
        ("GET", f"rollback/{prefix}/manifest.json"),
        ("LIST", f"rollback/{prefix}/"),
        ("GET", f"rollback/reviews/{a}.json"),
        ("GET", f"rollback/damaged/{a}.json"),
        ("PUT", record_key),
        ("GET", "rollback/farm-index/tail.json"),
        ("PUT", "rollback/farm-index/tail.json"),
    ], sent
