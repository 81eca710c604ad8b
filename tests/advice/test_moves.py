"""The advice of the move and release messages, followed (issue 54): each scenario builds the state a
message describes, produces the message in-process, takes the command it suggests and runs it in a fresh
process as a user pasting it would (`follow`), then checks it did what the message said.

The stores are temporary folders, never the default store, so every suggestion must carry `--store`
(advice read from one store and pasted into another shell would otherwise look elsewhere); the followed
commands run with NEURONFORGE_STORE unset and a home of their own. Builds are hand-made
(`tests.releases.builds`: what a channel checks, without compiling) except where the command run needs a
real build (`verify` re-hashes and loads it, `attest` smokes it): there, a copy of the session's compiled
store (`compiled`, read only)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path

import pytest

from neuronforge.artifacts import attestations, channels, farm_index, layout, reviews
from neuronforge.artifacts.published import Damage
from neuronforge.common.errors import InvalidInput
from neuronforge.interfaces.cli import main
from neuronforge.records.artifact_manifest import ArtifactManifest
from neuronforge.records.index_entry import IndexEntry
from neuronforge.stores import open_store
from tests.advice import covers, follow, suggested
from tests.releases.builds import MODEL, publish
from tests.releases.measured import measured

CHANNELS = "neuronforge.artifacts.channels"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """This process and the followed commands: a home of their own, no default store given, the
    default gates and approvals (stable gated at 5 %, requiring approval)."""
    monkeypatch.setenv("NEURONFORGE_HOME", str(tmp_path / "home"))
    for var in ("NEURONFORGE_STORE", "NEURONFORGE_REGRESSION_GATES", "NEURONFORGE_APPROVAL_CHANNELS"):
        monkeypatch.delenv(var, raising=False)
    return dict(os.environ)


@pytest.fixture
def store(tmp_path: Path, env: dict[str, str]):
    return open_store(f"file://{tmp_path / 'store'}")


@pytest.fixture
def real_store(compiled, tmp_path: Path, env: dict[str, str]):
    """A copy of the session's compiled store (a real cpu build: `verify` and `attest` run it), the
    build's key and its model (the checkpoint's folder)."""
    root = tmp_path / "real"
    shutil.copytree(Path(compiled.store.root_uri.removeprefix("file://")), root)
    return open_store(f"file://{root}"), compiled.first.key, str(compiled.checkpoint)


def cli(capsys: pytest.CaptureFixture, store, *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--store", store.root_uri])
    out, err = capsys.readouterr()
    return code, out, err


def another_build(store, key: str) -> str:
    """A second published build of the real build's model: its files and manifest under another key."""
    entry = json.loads(store.get_bytes(layout.index_entry(key)))
    new = hashlib.sha256(f"another {key}".encode()).hexdigest()
    prefix = f"{entry['prefix'].rsplit('/', 1)[0]}/{new[:12]}"
    for obj in store.list(f"{entry['prefix']}/"):
        store.put_bytes(store.get_bytes(obj.key), f"{prefix}/{obj.key.removeprefix(entry['prefix'] + '/')}")
    manifest = {**json.loads(store.get_bytes(entry["manifest"])), "cache_key": new}
    store.put_bytes(json.dumps(manifest).encode(), f"{prefix}/manifest.json")
    index = IndexEntry.from_json({"cache_key": new, "manifest": f"{prefix}/manifest.json", "prefix": prefix})
    store.put_bytes(json.dumps(index.to_json()).encode(), layout.index_entry(new))
    farm_index.note_published(store, index, ArtifactManifest.from_json(manifest))
    return new


def ref(channel: str, model: str = MODEL) -> channels.ChannelRef:
    return channels.ChannelRef.parse(model, "cpu", channel)


def points_to(store, channel: str, model: str = MODEL) -> str:
    return channels.get(store, ref(channel, model)).current.build.key


def listed_keys(listing: str, env: dict[str, str]) -> list[str]:
    """The builds a suggested `ls` lists (the first column: the key's first 12 hex digits)."""
    listed = follow(listing, env)
    assert listed.returncode == 0, listed.stderr
    return [w[0] for w in map(str.split, listed.stdout.splitlines()) if w and re.fullmatch("[0-9a-f]{12}", w[0])]


def only(commands: list[str]) -> str:
    assert len(commands) == 1, commands
    return commands[0]


# -- rollback and promote ------------------------------------------------------------------------------
@covers(f"{CHANNELS}:promote_advice")
def test_a_rollback_with_no_earlier_build_names_the_promote_that_moves_the_channel(store, env, capsys) -> None:
    """One build on the channel: nothing to roll back to, said in one sentence; the promote it names,
    KEY one of the builds the listing it names gives, moves the channel."""
    a, b = publish(store, 1), publish(store, 2)
    channels.promote(store, ref("candidate"), build=a)
    code, _, err = cli(capsys, store, "rollback", MODEL, "--profile", "cpu", "--channel", "candidate")
    assert code == 2 and len(err.splitlines()) == 1 and "there is nothing to roll back to" in err
    promote, listing = suggested(err, f"{CHANNELS}:promote_advice")
    assert promote.endswith(f"--build KEY --store {store.root_uri}")
    assert set(listed_keys(listing, env)) == {a[:12], b[:12]}
    done = follow(promote.replace(" KEY ", f" {b[:12]} "), env)
    assert done.returncode == 0, done.stderr
    assert points_to(store, "candidate") == b


@covers(f"{CHANNELS}:plan_rollback")
def test_a_rollback_further_back_than_the_history_names_the_history_that_lists_it(store, env, capsys) -> None:
    a, b = publish(store, 1), publish(store, 2)
    for key in (a, b):
        channels.promote(store, ref("candidate"), build=key)
    code, _, err = cli(capsys, store, "rollback", MODEL, "--profile", "cpu", "--channel", "candidate", "--steps", "3")
    assert code == 2 and "give --steps 1 at most, or --build KEY of a build" in err
    history = follow(only(suggested(err, f"{CHANNELS}:plan_rollback")), env)
    assert history.returncode == 0, history.stderr
    listed = [line[2:].split()[2] for line in history.stdout.splitlines()]  # "* AT  ACTION KEY TARGET ..."
    assert listed == [b[:12], a[:12]]  # the builds a `--build KEY` may name, newest first


@covers("neuronforge.farm.releases:move_away")
def test_rejecting_the_build_stable_serves_names_a_move_that_works(store, env, capsys) -> None:
    """`reject` (and then `channels`, `show`) warn that stable serves the build: the rollback they name
    moves it back; once the earlier build is rejected too, they name a promote instead, which works."""
    a, b, c = (publish(store, n) for n in (1, 2, 3))
    for key in (a, b, c):
        reviews.decide(store, key, "approved", "qa", "", channels.now())
    for key in (a, b):
        channels.promote(store, ref("stable"), build=key)
    code, out, _ = cli(capsys, store, "reject", b[:12], "--reason", "wrong answers")
    assert code == 0 and f"stable still points to it: `neuronforge rollback {MODEL}" in out
    rollback = only(suggested(out, "neuronforge.farm.releases:move_away"))
    assert rollback == f"neuronforge rollback {MODEL} --profile cpu --channel stable --store {store.root_uri}"
    for shown in (["channels", MODEL], ["show", b[:12]]):  # the same advice where the build is listed
        code, out, _ = cli(capsys, store, *shown)
        assert code == 0 and f"`{rollback}` (back to {a[:12]})" in out, shown
    moved = follow(rollback, env)
    assert moved.returncode == 0, moved.stderr
    assert points_to(store, "stable") == a

    channels.promote(store, ref("stable"), build=c)  # c, then a rejected: going back would be refused
    reviews.decide(store, a, "rejected", "qa", "garbled", channels.now())
    code, out, _ = cli(capsys, store, "reject", c[:12], "--reason", "slow")
    assert f"(a rollback to {a[:12]} would be refused: build {a[:12]} is rejected (garbled)" in out
    fresh = publish(store, 4)
    reviews.decide(store, fresh, "approved", "qa", "", channels.now())
    promote, listing = suggested(out, f"{CHANNELS}:promote_advice")
    assert fresh[:12] in listed_keys(listing, env)
    moved = follow(promote.replace(" KEY ", f" {fresh[:12]} "), env)
    assert moved.returncode == 0, moved.stderr
    assert points_to(store, "stable") == fresh


@covers(f"{CHANNELS}:get")
def test_a_channel_that_does_not_exist_names_the_listing_of_the_models_channels(store, env, capsys) -> None:
    channels.promote(store, ref("candidate"), build=publish(store, 1))
    code, _, err = cli(capsys, store, "history", MODEL, "--profile", "cpu", "--channel", "stable")
    assert code == 2 and "no channel" in err
    listed = follow(only(suggested(err, f"{CHANNELS}:get")), env)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith(f"{MODEL} · cpu · candidate: ")


@covers(f"{CHANNELS}:_moved_meanwhile")
def test_a_lost_race_names_the_history_that_shows_the_winner(store, env) -> None:
    a, b, c = (publish(store, n) for n in (1, 2, 3))
    channels.promote(store, ref("candidate"), build=a)
    ours = channels.plan_promote(store, ref("candidate"), build=b)
    channels.promote(store, ref("candidate"), build=c, by="winner")  # between our read and our write
    with pytest.raises(channels.ChannelMoved) as lost:
        channels.apply(store, ours)
    history = follow(only(suggested(str(lost.value), f"{CHANNELS}:_moved_meanwhile")), env)
    assert history.returncode == 0, history.stderr
    first = history.stdout.splitlines()[0]
    assert first.startswith("* ") and c[:12] in first and "by winner" in first


# -- what a move refuses, and the command that lifts the refusal ------------------------------------
@covers(f"{CHANNELS}:review_refusal")
def test_stable_refusing_a_build_not_approved_names_the_approval_that_lets_it_in(store, env, capsys) -> None:
    a = publish(store, 1)
    promote = ("promote", MODEL, "--profile", "cpu", "--channel", "stable", "--build", a[:12])
    code, _, err = cli(capsys, store, *promote)
    assert code == 3 and "requires an approved build" in err
    approved = follow(only(suggested(err, f"{CHANNELS}:review_refusal")), env)
    assert approved.returncode == 0, approved.stderr
    assert cli(capsys, store, *promote)[0] == 0 and points_to(store, "stable") == a


@covers(f"{CHANNELS}:regression_refusal")
def test_a_gated_refusal_names_the_comparison_that_shows_it(store, env, capsys) -> None:
    """stable refuses a slower build: the comparison it names is the one under stable's gate — run, it
    shows every figure and the same verdict (exit 3), the channel where it was; the promote it names
    with a reason moves it, the reason kept."""
    serving, slower = publish(store, 1, smoke=measured(0.010)), publish(store, 2, smoke=measured(0.012))
    for key in (serving, slower):
        reviews.decide(store, key, "approved", "qa", "", channels.now())
    channels.promote(store, ref("stable"), build=serving)
    code, _, err = cli(capsys, store, "promote", MODEL, "--profile", "cpu", "--channel", "stable", "--build", slower)
    assert code == 3 and "is gated" in err
    compare_it, accept = suggested(err, f"{CHANNELS}:regression_refusal")
    compared = follow(compare_it, env)
    assert compared.returncode == 3, compared.stderr
    assert any(line.startswith("per output token") and "+20.0 %" in line for line in compared.stdout.splitlines())
    assert "regression" in compared.stdout.lower()
    assert points_to(store, "stable") == serving
    accepted = follow(accept.replace(" REASON ", " 'batch 2 is worth it' "), env)
    assert accepted.returncode == 0, accepted.stderr
    moved = channels.get(store, ref("stable")).current
    assert (moved.build.key, moved.accepted_regression) == (slower, "batch 2 is worth it")


@covers(f"{CHANNELS}:_gated")
def test_a_served_build_that_does_not_open_names_the_show_that_says_why(store, env, capsys) -> None:
    a, b = publish(store, 1, smoke=measured()), publish(store, 2, smoke=measured())
    for key in (a, b):
        reviews.decide(store, key, "approved", "qa", "", channels.now())
    channels.promote(store, ref("stable"), build=a)
    store.delete_prefix(layout.index_entry(a))  # what stable serves is no longer published
    code, out, _ = cli(capsys, store, "promote", MODEL, "--profile", "cpu", "--channel", "stable", "--build", b)
    assert code == 0 and "does not open" in out  # not compared: nothing refused, the reason kept
    shown = follow(only(suggested(out, f"{CHANNELS}:_gated")), env)
    assert shown.returncode != 0 and len(shown.stderr.splitlines()) == 1
    assert a[:12] in shown.stderr


@covers(f"{CHANNELS}:release_refusal", "neuronforge.interfaces.cli.releases:_attest")
def test_a_channel_requiring_a_release_names_the_attestation_that_proves_a_build_there(real_store, env, capsys) -> None:
    """Two channels run SDK 2.33.1: candidate already points to the real build (`require-release` and
    `channels` warn it is not attested), beta refuses it. Both name the same `attest`; run once, it
    proves the build at 2.33.1: candidate's warning goes, and beta takes the build."""
    store, key, model = real_store
    other = another_build(store, key)
    channels.promote(store, ref("candidate", model), build=key)
    channels.promote(store, ref("beta", model), build=other)
    code, out, _ = cli(capsys, store, "require-release", model, "--profile", "cpu", "--channel", "candidate",
                       "--release", "2.33.1")  # fmt: skip
    assert code == 0 and "not attested for 2.33.1" in out
    warned = only(suggested(out, "neuronforge.interfaces.cli.releases:_attest"))
    channels.require_release(store, ref("beta", model), "2.33.1")
    promote = ("promote", model, "--profile", "cpu", "--channel", "beta", "--build", key[:12])
    code, _, err = cli(capsys, store, *promote)
    assert code == 3 and "requires a build attested for Neuron SDK 2.33.1" in err
    refused = only(suggested(err, f"{CHANNELS}:release_refusal"))
    assert refused == warned == f"neuronforge attest {key[:12]} --sdk 2.33.1 --store {store.root_uri}"
    attested = follow(refused, env)
    assert attested.returncode == 0, attested.stderr
    assert attestations.attested_for(store, key, "2.33.1", "none")
    code, out, _ = cli(capsys, store, "channels", model)
    (line,) = [line for line in out.splitlines() if f"· candidate: {key[:12]}" in line]
    assert code == 0 and "SDK 2.33.1: attested)" in line and f"{key[:12]} is not attested" not in out
    assert cli(capsys, store, *promote)[0] == 0 and points_to(store, "beta", model) == key


@covers(f"{CHANNELS}:recorded_refusal")
def test_a_build_recorded_damaged_names_the_verify_that_clears_it(real_store, env, capsys) -> None:
    """Damage recorded for a build whose files are whole again (restored since): the promote is refused
    naming `verify`, which re-hashes it, clears the record, and the promote then goes through."""
    store, key, model = real_store
    farm_index.note_damaged(store, Damage(key, "model.pt missing (restored since)"), "ls --check")
    promote = ("promote", model, "--profile", "cpu", "--channel", "candidate", "--build", key[:12])
    code, _, err = cli(capsys, store, *promote)
    assert code == 3 and "is damaged (model.pt missing (restored since)" in err
    verified = follow(only(suggested(err, f"{CHANNELS}:recorded_refusal")), env)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert farm_index.read_damage(store, key) is None
    assert cli(capsys, store, *promote)[0] == 0 and points_to(store, "candidate", model) == key


@covers(f"{CHANNELS}:repin_advice")
def test_a_build_published_again_since_the_move_names_the_verify_and_the_promote_that_pin_it(
    real_store, env, capsys
) -> None:
    """The manifest of the build a channel points to changed since the move (published again): hosts
    refuse it, `channels` names `verify` (it checks the build: exit 0) then the promote, which pins the
    channel to the manifest as it is now — and `channels` warns no more."""
    store, key, model = real_store
    channels.promote(store, ref("candidate", model), build=key)
    manifest = json.loads(store.get_bytes(layout.index_entry(key)))["manifest"]
    store.put_bytes(json.dumps({**json.loads(store.get_bytes(manifest)), "published_at": "2026-11-29T00:00:00Z"})
                    .encode(), manifest)  # fmt: skip
    code, out, _ = cli(capsys, store, "channels", model)
    assert code == 0 and "UNREADABLE" in out
    verify, promote = suggested(out, f"{CHANNELS}:repin_advice")[:2]
    assert verify.startswith(f"neuronforge verify {key[:12]}") and promote.startswith("neuronforge promote")
    for command in (verify, promote):
        done = follow(command, env)
        assert done.returncode == 0, (command, done.stdout, done.stderr)
    code, out, _ = cli(capsys, store, "channels", model)
    assert code == 0 and "WARNING" not in out


# -- show, the scrub, gc ----------------------------------------------------------------------------
@covers("neuronforge.interfaces.cli.store:_show_release")
def test_show_of_a_build_pending_review_names_the_approve_and_the_reject_that_decide_it(store, env, capsys) -> None:
    a, b = publish(store, 1), publish(store, 2)
    code, out, _ = cli(capsys, store, "show", a[:12])
    assert code == 0
    approve, reject = suggested(out, "neuronforge.interfaces.cli.store:_show_release")
    assert follow(approve, env).returncode == 0
    assert reviews.state_of(store, a) == "approved"
    code, out, _ = cli(capsys, store, "show", b[:12])
    reject = suggested(out, "neuronforge.interfaces.cli.store:_show_release")[1]
    assert reject.startswith(f"neuronforge reject {b[:12]} --reason") and follow(reject, env).returncode == 0
    assert reviews.state_of(store, b) == "rejected"


@covers("neuronforge.interfaces.cli.store:cmd_verify_repair")
def test_the_scrub_names_the_listing_that_says_why_a_build_is_damaged(store, env, capsys) -> None:
    a = publish(store, 1)
    weights = f"{json.loads(store.get_bytes(layout.index_entry(a)))['prefix']}/model/weights.bin"
    store.put_bytes(b"short", weights)
    code, out, _ = cli(capsys, store, "verify", "--repair")
    assert code == 3 and f"DAMAGED {a[:12]}" in out
    listed = follow(only(suggested(out, "neuronforge.interfaces.cli.store:cmd_verify_repair")), env)
    assert listed.returncode == 0, listed.stderr
    assert a[:12] in listed.stdout and "weights.bin" in listed.stdout


@covers("neuronforge.interfaces.cli.store:cmd_gc")
def test_gc_left_alone_names_the_check_and_the_rebuild_after_which_it_collects(store, env, capsys) -> None:
    """The farm index says a build is due for deletion, its manifest says otherwise: gc leaves it alone
    (exit 1), naming `verify` (which finds the disagreement) and `index rebuild`; after both, gc decides
    every build (exit 0)."""
    old, new = publish(store, 1), publish(store, 2)

    def compiled_by(key: str, version: str) -> None:
        path = json.loads(store.get_bytes(layout.index_entry(key)))["manifest"]
        manifest = json.loads(store.get_bytes(path))
        manifest["toolchain"]["compiler_version"] = version
        store.put_bytes(json.dumps(manifest).encode(), path)

    compiled_by(new, "2")
    farm_index.rebuild(store)  # the index: old by compiler 1, new by 2
    compiled_by(old, "3")  # the manifest, the truth, now says old is the newest
    code, out, _ = cli(capsys, store, "gc", "--keep-compilers", "1", "--dry-run")
    assert code == 1 and "NOT COLLECTED" in out
    verify, rebuild = suggested(out, "neuronforge.interfaces.cli.store:cmd_gc")
    checked = follow(verify, env)
    assert checked.returncode == 3 and old[:12] in checked.stdout + checked.stderr  # the disagreement, named
    assert follow(rebuild, env).returncode == 0
    code, out, _ = cli(capsys, store, "gc", "--keep-compilers", "1", "--dry-run")
    assert code == 0 and "NOT COLLECTED" not in out


def test_no_suggestion_leaves_out_the_store_it_is_about(store, env) -> None:
    """Every suggestion above ran with NEURONFORGE_STORE unset, so each carried `--store`; a message
    about the default store names none (the command finds it by itself)."""
    with pytest.raises(InvalidInput) as raised:
        channels.get(store, ref("stable"))
    assert f"--store {store.root_uri}`" in str(raised.value)
    os.environ["NEURONFORGE_STORE"] = store.root_uri
    try:
        with pytest.raises(InvalidInput) as raised:
            channels.get(store, ref("stable"))
    finally:
        del os.environ["NEURONFORGE_STORE"]
    assert f"`neuronforge channels {MODEL}`" in str(raised.value)
