"""A channel never points at nothing (issue 51): every move — promote, rollback by `--build`, by `--steps`,
onto a build a history entry names — checks its target as a promote does, a hand-edited history entry
is trusted for nothing, an empty or malformed `--build` is refused before anything is read, `channels`
flags a pointer whose build became damaged or unreadable since, and a channel record of the wrong kind
(a folder, another kind of file, another channel's record) is one line on every command, on a file
store and on a real S3 endpoint. Each refusal leaves `channel.json` byte-identical."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from neuronforge.artifacts import channels, layout, reviews
from neuronforge.artifacts.farm_index import read_damage
from neuronforge.common.errors import InvalidInput
from neuronforge.farm.releases import ReleaseRequest
from neuronforge.interfaces.cli import main
from neuronforge.stores import open_store
from tests.releases.builds import MODEL, publish

NEVER_PUBLISHED = "ab" * 32


@pytest.fixture(autouse=True)
def quiet_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto's server runs in this process: its access log is not the command's stderr."""
    monkeypatch.setattr(logging.getLogger("werkzeug"), "level", logging.WARNING)


@pytest.fixture
def store(tmp_path: Path):
    return open_store(f"file://{tmp_path / 'store'}")


def ref(channel: str = "candidate"):
    return channels.ChannelRef.parse(MODEL, "cpu", channel)


def cli(store, *argv: str) -> int:
    return main([*argv, "--store", store.root_uri])


def another(store, channel: str = "candidate") -> str:
    """The promote of another build a message suggests, KEY to be picked from the listing it names."""
    where = f"--profile cpu --store {store.root_uri}"
    return (
        f"`neuronforge promote {MODEL} --profile cpu --channel {channel} --build KEY --store {store.root_uri}` (KEY: "
        f"a build `neuronforge ls --model {MODEL} {where}` lists)"
    )


def rollback(store, *extra: str) -> int:
    return cli(store, "rollback", MODEL, "--profile", "cpu", "--channel", "candidate", *extra)


def prefix_of(store, key: str) -> str:
    return json.loads(store.get_bytes(layout.index_entry(key)))["prefix"]


def moved_through(store, *keys: str) -> bytes:
    """`candidate` promoted to each of `keys` in turn; the channel record as stored after."""
    for key in keys:
        channels.promote(store, ref(), build=key, by="ci")
    return store.get_bytes(ref().record_key)


def forge_history(store, **build: str) -> bytes:
    """The channel's record with a hand-added earlier move whose build has `build`'s fields (the rest
    copied from a real move of that key, else from the current one), newest after the current one;
    the record as stored."""
    data = json.loads(store.get_bytes(ref().record_key))
    moves = [data["current"], *data["history"]]
    forged = json.loads(json.dumps(next((m for m in moves if m["build"]["key"] == build.get("key")), moves[0])))
    forged["build"].update(build)
    data["history"].insert(0, forged)
    raw = json.dumps(data, indent=2).encode()
    store.put_bytes(raw, ref().record_key)
    return raw


def one_error(capsys: pytest.CaptureFixture) -> str:
    """The command's stderr, which must be exactly one line; nothing on stdout."""
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1, (out, err)
    return err


# -- a rollback checks its target as a promote does --------------------------------------------------
def test_a_rollback_onto_a_build_that_was_never_published_is_refused(store, capsys) -> None:
    a, b = publish(store, 1), publish(store, 2)
    moved_through(store, a, b)
    before = forge_history(store, key=NEVER_PUBLISHED)
    assert rollback(store, "--build", NEVER_PUBLISHED[:12]) == 3
    assert one_error(capsys) == (
        f"error: refused: build {NEVER_PUBLISHED[:12]} is not published in {store.root_uri} (no index entry)\n"
    )
    assert store.get_bytes(ref().record_key) == before
    assert rollback(store) == 3  # --steps 1 reaches the same entry: the same refusal
    assert "is not published" in one_error(capsys)
    assert store.get_bytes(ref().record_key) == before


def test_a_history_entry_that_names_no_key_is_refused_before_it_names_a_path(store, capsys) -> None:
    a, b = publish(store, 1), publish(store, 2)
    moved_through(store, a, b)
    before = forge_history(store, key="../../index/" + a)
    assert rollback(store) == 3
    assert one_error(capsys) == (
        f"error: refused: '../../index/{a}' is not a cache key (64 hex digits): the channel record that "
        "names it was edited; promote a published build with `promote --build`\n"
    )
    assert store.get_bytes(ref().record_key) == before


def test_a_history_entry_with_another_manifest_digest_is_refused(store, capsys) -> None:
    """The history names a published, sound build, but recorded another digest for its manifest: the
    build was altered since, or the history forged. Refused; the promote it suggests works (its `verify`
    runs on the demo's real build in docs/releasing.md)."""
    a, b = publish(store, 1), publish(store, 2)
    moved_through(store, a, b)
    before = forge_history(store, key=a, manifest_sha256="0" * 64)
    assert rollback(store, "--build", a[:12]) == 3
    assert one_error(capsys) == (
        f"error: refused: build {a[:12]}'s manifest is not the one {ref()}'s history recorded for it (sha256 "
        f"'000000000000', now {channels.candidate(store, a, ref()).manifest_sha256[:12]}): a published build never "
        "changes unless it is published again, so it was, or the history was edited; not rolled back: "
        f"`neuronforge verify {a[:12]} --store {store.root_uri}` checks the build, then `neuronforge promote {MODEL} "
        f"--profile cpu --channel candidate --build {a[:12]} --store {store.root_uri}` moves the channel to it as it "
        "is now\n"
    )
    assert store.get_bytes(ref().record_key) == before
    assert cli(store, "promote", MODEL, "--profile", "cpu", "--channel", "candidate", "--build", a[:12]) == 0


def test_the_move_records_the_build_as_read_now_not_as_the_history_says(store) -> None:
    a, b = publish(store, 1), publish(store, 2)
    moved_through(store, a, b)
    forge_history(store, key=a, artifact_uri="s3://elsewhere/x", target="forged", smoke={"passed": True})
    current = channels.rollback(store, ref()).record.current.build
    assert current == channels.candidate(store, a, ref())
    assert (current.artifact_uri, current.target) != ("s3://elsewhere/x", "forged")


@pytest.mark.parametrize("how", ["manifest deleted", "file truncated"])
def test_a_rollback_onto_a_build_damaged_since_is_refused_and_recorded(store, capsys, how: str) -> None:
    a, b = publish(store, 1), publish(store, 2)
    before = moved_through(store, a, b)
    if how == "manifest deleted":
        store.delete_prefix(f"{prefix_of(store, a)}/manifest.json")
        reason = f"manifest gone: {prefix_of(store, a)}/manifest.json"
    else:
        store.put_bytes(b"trunc", f"{prefix_of(store, a)}/model/weights.bin")
        reason = "1 of 2 file(s) missing or of another size (e.g. model/weights.bin)"
    assert rollback(store, "--steps", "1") == 3
    assert one_error(capsys) == (
        f"error: refused: build {a[:12]} is damaged ({reason}); recorded in the farm index: no channel takes a "
        "damaged build, run its build again to publish it afresh\n"
    )
    assert store.get_bytes(ref().record_key) == before
    found = read_damage(store, a)
    assert found is not None and (found.reason, found.by) == (reason, "rollback")


def test_a_rollback_by_steps_checks_the_build_it_reaches(store, capsys) -> None:
    a, b, c = publish(store, 1), publish(store, 2), publish(store, 3)
    before = moved_through(store, a, b, c)
    store.delete_prefix(prefix_of(store, a))  # the whole build is gone; its index entry still points to it
    assert rollback(store, "--steps", "2") == 3
    assert f"build {a[:12]} is damaged (manifest gone: " in one_error(capsys)
    assert store.get_bytes(ref().record_key) == before
    assert rollback(store, "--steps", "1") == 0  # b is sound
    assert channels.get(store, ref()).current.build.key == b


def test_a_rollback_refuses_a_build_whose_smoke_test_the_manifest_no_longer_passes(store, capsys) -> None:
    """The manifest was rewritten (a failed smoke result): the digest differs from the one recorded, and
    the smoke test no longer passes: refused either way, by the check a promote makes first."""
    a, b = publish(store, 1), publish(store, 2)
    before = moved_through(store, a, b)
    key = f"{prefix_of(store, a)}/manifest.json"
    manifest = json.loads(store.get_bytes(key))
    manifest["smoke"] = {"passed": False, "reason": "tokens differ"}
    store.put_bytes(json.dumps(manifest).encode(), key)
    assert rollback(store) == 3
    assert one_error(capsys) == f"error: refused: build {a[:12]}: its smoke test did not pass (tokens differ)\n"
    assert store.get_bytes(ref().record_key) == before


def test_promote_from_a_channel_whose_record_names_no_key_is_refused(store, capsys) -> None:
    a = publish(store, 1)
    channels.promote(store, ref("beta"), build=a)
    data = json.loads(store.get_bytes(ref("beta").record_key))
    data["current"]["build"]["key"] = "f" * 12
    store.put_bytes(json.dumps(data).encode(), ref("beta").record_key)
    assert cli(store, "promote", MODEL, "--profile", "cpu", "--channel", "candidate", "--from", "beta") == 3
    assert "error: refused: 'ffffffffffff' is not a cache key (64 hex digits)" in one_error(capsys)
    assert not store.exists(ref().record_key)


def test_a_build_published_again_is_flagged_and_a_promote_pins_the_channel_to_it(store, capsys) -> None:
    """A build rebuilt after damage is published again under its key, with a manifest of other bytes (its
    publish time): the channel's recorded digest no longer matches, and every host's resolve.sh refuses
    it. `channels` says so and what to run; promoting the build it points to pins it as it is now."""
    a = publish(store, 1)
    channels.promote(store, ref(), build=a, by="ci")
    key = f"{prefix_of(store, a)}/manifest.json"
    manifest = json.loads(store.get_bytes(key))
    store.put_bytes(json.dumps({**manifest, "published_at": "2026-11-27T00:00:00Z"}).encode(), key)
    assert cli(store, "channels", MODEL) == 0
    warning = capsys.readouterr().out.splitlines()[-1]
    assert warning.startswith(f"WARNING: {ref()} points to the UNREADABLE build {a[:12]} (its manifest changed ")
    where = f"--store {store.root_uri}"
    promote = f"neuronforge promote {MODEL} --profile cpu --channel candidate --build {a[:12]} {where}"
    assert warning.endswith(
        f"hosts refuse to start from it): `neuronforge verify {a[:12]} {where}` checks the build, then `{promote}` "
        f"pins the channel to it as it is now; or promote another build (it held no other build to roll back to): "
        f"{another(store)}"
    )
    assert main(promote.split()[1:]) == 0
    assert capsys.readouterr().out == (
        f"{ref()}: promote to {a[:12]} again (its manifest was published again since the channel moved to it: "
        "pinned to it as it is now)\n"
    )
    record = channels.get(store, ref())
    assert record.current.build.manifest_sha256 == channels.candidate(store, a, ref()).manifest_sha256
    assert [m.build.key for m in record.moves] == [a, a]
    assert cli(store, "channels", MODEL) == 0
    assert "WARNING" not in capsys.readouterr().out
    assert main(promote.split()[1:]) == 0  # pinned: nothing changes any more
    assert capsys.readouterr().out == f"{ref()} already points to {a[:12]}; nothing changed\n"


def test_a_flagged_channel_is_told_a_rollback_only_when_one_would_be_taken(store, capsys) -> None:
    a, b = publish(store, 1), publish(store, 2)
    moved_through(store, a, b)
    reviews.decide(store, a, "rejected", "r", "garbled", channels.now())
    store.delete_prefix(layout.index_entry(b))
    assert cli(store, "channels", MODEL) == 0
    said = capsys.readouterr().out.splitlines()[-1]
    assert said.endswith(
        f"promote another build (a rollback to {a[:12]} would be refused: build {a[:12]} is rejected (garbled); no "
        f"channel takes a rejected build): {another(store)}"
    )


# -- an empty or malformed --build ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("", "neuronforge rollback: error: argument --build: '' is empty (an unset variable?)"),
        ("   ", "neuronforge rollback: error: argument --build: '   ' is empty (an unset variable?)"),
        ("not-hex!", "error: --build 'not-hex!' is not a cache key: give its hex digits"),
        ("abc12", "error: key prefix --build 'abc12' is too short: give at least 6 hex characters"),
    ],
)
def test_an_empty_or_malformed_to_is_refused_before_anything_is_read(
    s3_bucket: str, capsys, given: str, said: str
) -> None:
    """On S3, so that "nothing read" is counted: no request at all once the command has the store."""
    store = open_store(f"s3://{s3_bucket}/to")
    a, b = publish(store, 1), publish(store, 2)
    before = moved_through(store, a, b)
    sent: list[str] = []
    events = store.client.meta.events  # the process's client of this endpoint: the command's too
    events.register("before-send.s3", lambda request, **_: sent.append(request.url), unique_id="test-to")
    try:
        try:
            code = rollback(store, "--build", given)
        except SystemExit as exc:  # refused by the parser's one text rule
            code = exc.code
        assert code == 2
    finally:
        events.unregister("before-send.s3", unique_id="test-to")
    assert one_error(capsys).startswith(said)
    assert sent == []
    assert store.get_bytes(ref().record_key) == before


def test_a_rollback_request_names_its_build_as_build_and_reads_the_old_to() -> None:
    """The DAG's conf and the catalog's request alike: a rollback's `build` given is a key; left out (or
    null, as the form leaves an empty field) the rollback goes back by steps. A conf written with the
    old name, `to` (the CLI's old `rollback --to KEY`), reads as `build`; both given is refused."""
    line = {"action": "rollback", "model": MODEL, "profile": "cpu", "channel": "candidate"}
    for name in ("build", "to"):
        with pytest.raises(InvalidInput, match=r"--build '' is empty"):
            ReleaseRequest.from_json({**line, name: ""})
        with pytest.raises(InvalidInput, match=r"--build 'zz' is not a cache key"):
            ReleaseRequest.from_json({**line, name: "zz"})
        assert ReleaseRequest.from_json({**line, name: None}).build == ""
        assert ReleaseRequest.from_json({**line, name: "abcdef012345"}).build == "abcdef012345"
    with pytest.raises(InvalidInput, match=r"`build` and its old name, `to`, both given"):
        ReleaseRequest.from_json({**line, "build": "abcdef012345", "to": "abcdef012345"})
    assert ReleaseRequest.from_json({**line, "steps": 2}).steps == 2
    assert ReleaseRequest.from_json({**line, "action": "promote", "build": "abcdef", "to": ""}).build == "abcdef"
    assert "to" not in ReleaseRequest.from_json({**line, "to": "abcdef012345"}).to_json()


# -- channels flags a pointer that is no longer sound -------------------------------------------------
def test_channels_flags_a_build_damaged_or_unreadable_since_the_move(store, capsys) -> None:
    a, b, c = publish(store, 1), publish(store, 2), publish(store, 3)
    for channel, key in (("candidate", a), ("beta", b), ("stable", c)):
        reviews.decide(store, key, "approved", "r", "ok", channels.now())
        channels.promote(store, ref(channel), build=key, by="ci")
    channels.promote(store, ref("beta"), build=c, by="ci")
    channels.promote(store, ref("beta"), build=b, by="ci")  # beta held c before: it can roll back
    store.delete_prefix(f"{prefix_of(store, a)}/manifest.json")  # candidate's build: damaged since
    store.delete_prefix(layout.index_entry(b))  # beta's: no longer published
    assert cli(store, "channels", MODEL) == 0
    out = capsys.readouterr().out.splitlines()
    gone = f"{prefix_of(store, a)}/manifest.json"
    assert out[0].startswith(f"{MODEL} · cpu · beta: {b[:12]} ") and "(approved, UNREADABLE);" in out[0]
    assert out[1].startswith(f"{MODEL} · cpu · candidate: {a[:12]} ") and "(approved, DAMAGED);" in out[1]
    assert "(approved, requires approval);" in out[2]  # stable: sound
    assert out[3:] == [
        f"WARNING: {MODEL} · cpu · beta points to the UNREADABLE build {b[:12]} (build {b[:12]} is not published "
        f"in {store.root_uri} (no index entry)): `neuronforge rollback {MODEL} --profile cpu --channel beta --store "
        f"{store.root_uri}` (back to {c[:12]})",
        f"WARNING: {MODEL} · cpu · candidate points to the DAMAGED build {a[:12]} (manifest gone: {gone}; found by "
        f"channels at {read_damage(store, a).at}): rebuild it, or promote another build (it held no other build to "
        f"roll back to): {another(store)}",
    ]
    assert cli(store, "channels", MODEL, "--json") == 0
    listed = {c["channel"]: c for c in json.loads(capsys.readouterr().out)}
    assert listed["beta"]["pointer"] == {
        "state": "unreadable",
        "reason": f"build {b[:12]} is not published in {store.root_uri} (no index entry)",
    }
    assert listed["beta"]["damage"] is None
    assert listed["candidate"]["pointer"] == {"state": "damaged", "reason": f"manifest gone: {gone}"}
    assert listed["candidate"]["damage"]["by"] == "channels"
    assert listed["stable"]["pointer"] == {"state": "ok", "reason": ""} and listed["stable"]["damage"] is None
    # the commands the warnings name work in this state
    assert cli(store, "rollback", MODEL, "--profile", "cpu", "--channel", "beta") == 0
    assert cli(store, "promote", MODEL, "--profile", "cpu", "--channel", "candidate", "--build", c[:12]) == 0
    capsys.readouterr()
    assert cli(store, "channels", MODEL) == 0
    assert "WARNING" not in capsys.readouterr().out


def test_channels_flags_a_manifest_that_changed_since_the_move(store, capsys) -> None:
    """A manifest rewritten with the same content in other bytes still verifies, but its digest is not
    the one the move recorded: every host's resolve.sh refuses it at its start."""
    a = publish(store, 1)
    channels.promote(store, ref(), build=a)
    key = f"{prefix_of(store, a)}/manifest.json"
    store.put_bytes(json.dumps(json.loads(store.get_bytes(key)), indent=4).encode(), key)
    assert cli(store, "channels", MODEL, "--json") == 0
    (listed,) = json.loads(capsys.readouterr().out)
    assert listed["pointer"]["state"] == "unreadable"
    assert listed["pointer"]["reason"].startswith("its manifest changed since the channel moved to it (sha256 ")


# -- a channel record of the wrong kind ---------------------------------------------------------------
def wrong_kind(store, how: str) -> str:
    """Make candidate's record `how`; the reason the one line gives in parentheses."""
    key = ref().record_key
    if how == "folder":
        store.delete_prefix(key)
        store.put_bytes(b"x", f"{key}/stray")  # on S3 a key under the key; on a file store a folder
        return "it is a folder"
    if how == "another kind":
        store.put_bytes(json.dumps({"schema_version": 1, "key": "ab" * 32}).encode(), key)
        return "not a valid release channel: model: Field required"
    if how == "another channel":
        store.put_bytes(store.get_bytes(ref("beta").record_key), key)
        return f"it is the record of '{MODEL} · cpu · beta'"
    raise AssertionError(how)


@pytest.mark.parametrize("where", ["file", "s3"])
@pytest.mark.parametrize("how", ["folder", "another kind", "another channel"])
def test_a_channel_record_of_the_wrong_kind_is_one_line_on_every_command(
    where: str, how: str, store, request: pytest.FixtureRequest, capsys
) -> None:
    if where == "s3":
        store = open_store(f"s3://{request.getfixturevalue('s3_bucket')}/kinds")
    a, b = publish(store, 1), publish(store, 2)
    moved_through(store, a, b)
    channels.promote(store, ref("beta"), build=a)
    why = wrong_kind(store, how)
    said = (
        f"error: damaged: {store.uri(ref().record_key)} is not a release channel record ({why}): move it away, or "
        "restore the channel's record from a copy; a promote then starts the channel afresh\n"
    )
    listing = sorted(o.key for o in store.list(ref().prefix))
    for argv in (
        ["promote", MODEL, "--profile", "cpu", "--channel", "candidate", "--build", b[:12]],
        ["rollback", MODEL, "--profile", "cpu", "--channel", "candidate"],
        ["history", MODEL, "--profile", "cpu", "--channel", "candidate"],
    ):
        assert cli(store, *argv) == 3, argv
        assert one_error(capsys) == said, argv
    # a listing says the same line for the damaged record, after the channels that read (beta): exit 3
    for argv in (["channels", MODEL], ["channels"], ["channels", MODEL, "--json"]):
        assert cli(store, *argv) == 3, argv
        out, err = capsys.readouterr()
        assert err == said, argv
        shown = [r["channel"] for r in json.loads(out)] if "--json" in argv else out.splitlines()
        assert len(shown) == 1 and "beta" in shown[0], (argv, out)
    assert sorted(o.key for o in store.list(ref().prefix)) == listing  # nothing written there


def test_an_empty_folder_where_the_record_belongs_is_one_line_not_a_retry(store, capsys) -> None:
    """A file store: the folder holds nothing (no listing finds it, no read says what it is), so the
    create is refused and nothing reads there: damage, never "changed while this move ran: run it again"."""
    a = publish(store, 1)
    (Path(store.root_uri.removeprefix("file://")) / ref().record_key).mkdir(parents=True)
    assert cli(store, "promote", MODEL, "--profile", "cpu", "--channel", "candidate", "--build", a[:12]) == 3
    assert one_error(capsys) == (
        f"error: damaged: {store.uri(ref().record_key)} is not a release channel record (it is a folder): "
        "move it away, or restore the channel's record from a copy; a promote then starts the channel "
        "afresh\n"
    )


# -- advice that works when followed (issue 54) -----------------------------------------------------
def test_a_rollback_with_nothing_to_go_back_to_says_so_and_its_advice_works(store, capsys) -> None:
    """One build on the channel: the rollback says there is nothing to roll back to and names the promote
    that moves it; run as printed (KEY: another build), it moves the channel, and the rollback then works."""
    a, b = publish(store, 1), publish(store, 2)
    moved_through(store, a)
    before = store.get_bytes(ref().record_key)
    assert rollback(store) == 2
    said = one_error(capsys)
    assert f"has pointed at no other build ({a[:12]} only): there is nothing to roll back to" in said
    assert said.endswith(f"promote another build: {another(store)}\n")
    advice = said.split("`")[1]
    assert store.get_bytes(ref().record_key) == before
    assert main(advice.replace("KEY", b[:12]).split()[1:]) == 0  # the advice, as printed, with a key
    assert json.loads(store.get_bytes(ref().record_key))["current"]["build"]["key"] == b
    assert rollback(store) == 0
    assert json.loads(store.get_bytes(ref().record_key))["current"]["build"]["key"] == a
    capsys.readouterr()
    assert rollback(store, "--steps", "5") == 2
    assert "--steps 5 goes further back than that: give --steps 1 at most" in one_error(capsys)
