"""The release commands: move a channel to a proven build and back, and review builds.

    promote MODEL --profile P --channel C (--build KEY | --from CHANNEL) [--accept-regression REASON]
                                        a gated channel (stable by default) compares the build with the one
                                        it serves first, and refuses a regression unless it is accepted
    compare KEY_A KEY_B                 build B against build A (the base): each figure, its change, the
    compare MODEL --profile P --channel C --build KEY
                                        noise, the verdict; or a build against the one channel C serves
    rollback MODEL --profile P --channel C [--steps N | --build KEY]
    channels [MODEL]                    the current pointers and whether each build is still sound (one
                                        listing of channels/, then a few reads per channel: never a scan)
    history MODEL --profile P --channel C
                                        the kept moves, newest first
    require-release MODEL --profile P --channel C --release R
                                        the SDK release the channel's fleet runs: moves then take only a
                                        build built on it or attested for it (`--release none`: no more)
    approve KEY [--reason ...]  /  reject KEY --reason ...

Each move or review builds a `ReleaseRequest` (`neuronforge.farm.releases`), the same the release DAG and
the catalog's buttons run; a refused move exits 3, a lost race (another mover wrote first) exits 1 naming
the winner. `compare` exits 3 on a regression or a numerics difference, 0 otherwise (not comparable too).
A channel is `--channel C` and a build `--build KEY` in every command; the old spellings (a positional
CHANNEL, promote's `--to CHANNEL`, rollback's `--to KEY`) work for one release (`spellings`).
"""

from __future__ import annotations

import argparse
from typing import Any

from neuronforge.common.errors import InvalidInput
from neuronforge.interfaces.cli.command import Command
from neuronforge.interfaces.cli.exit_codes import EXIT_OK, EXIT_REJECTED
from neuronforge.interfaces.cli.options import (
    JSON_HELP,
    add_store_args,
    complete_profiles,
    completes,
    opened_store,
    print_json,
)
from neuronforge.interfaces.cli.spellings import add_renamed

MODEL_HELP = "the model as builds name it (org/name, s3://bucket/prefix, builtin:tiny-llama), without a revision"
PROFILE_HELP = "the serving profile line the channel serves (a profile name, e.g. vllm-neuron; a @version is ignored)"
BY_HELP = "who moves or decides, as recorded (default: user@host)"


def _store(args: argparse.Namespace, *, probe: bool = True):
    """The store, which must exist; a move skips the remote probe (S3: a HEAD of the bucket): its first
    read fails as clearly on a missing bucket, and a rollback is counted in requests (bench/channels.py)."""
    return opened_store(args.store, probe=probe)


def _common(p: argparse.ArgumentParser, *, json: bool = True) -> None:
    add_store_args(p)
    p.add_argument("--by", default="", help=BY_HELP)
    if json:
        p.add_argument("--json", action="store_true", help=JSON_HELP)


def _profile(p: argparse.ArgumentParser) -> None:
    completes(p.add_argument("--profile", required=True, help=PROFILE_HELP), complete_profiles)


def _channel(p: argparse.ArgumentParser, help: str, *, old: str = "CHANNEL") -> None:
    """`--channel CHANNEL`, the one spelling of a move's channel (as `compare` has it); the old one (a
    positional CHANNEL; promote's `--to CHANNEL`) works for one release, with a warning (`spellings`)."""
    add_renamed(p, "--channel", old=old, dest="channel", metavar="CHANNEL", required=True, help=help)


def _run(args: argparse.Namespace, **request: object) -> None:
    from neuronforge.farm.releases import ReleaseRequest, run

    show = None if args.json else print  # a gated promote's comparison, before it moves or is refused
    outcome = run(_store(args, probe=False), ReleaseRequest.from_json(request), by=args.by, show=show)
    if args.json:
        print_json(outcome.to_json())
    else:
        print(outcome.line)


# -- promote / rollback ---------------------------------------------------------------------------------
def _promote_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="MODEL", help=MODEL_HELP)
    _profile(p)
    _channel(p, "the channel to move, e.g. stable", old="--to")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--build", metavar="KEY", help="the build: its cache key or first 12 hex digits")
    which.add_argument("--from", metavar="CHANNEL", dest="from_channel", help="the build another channel points to")
    p.add_argument("--reason", default="", help="why, as recorded in the channel's history")
    p.add_argument(
        "--accept-regression", metavar="REASON",
        help="promote even if the build is slower than the one a gated channel serves, or its numerics differ: "
        "why, as recorded in the channel's history beside the comparison (NEURONFORGE_REGRESSION_GATES)",
    )  # fmt: skip
    _common(p)


def cmd_promote(args: argparse.Namespace) -> int:
    """Point the channel at a published build whose smoke test passed, which is not rejected and, where the
    channel requires it (stable by default), approved; a gated channel (stable by default) takes it only
    when it is no regression against the build it serves, or when `--accept-regression` says why."""
    accepted = args.accept_regression
    if accepted is not None and not accepted.strip():
        raise InvalidInput("--accept-regression: give the reason, as the channel's history will keep it")
    _run(
        args, action="promote", model=args.model, profile=args.profile, channel=args.channel,
        build=args.build or "", from_channel=args.from_channel or "", reason=args.reason,
        accept_regression=accepted or "",
    )  # fmt: skip
    return EXIT_OK


def _rollback_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="MODEL", help=MODEL_HELP)
    _profile(p)
    _channel(p, "the channel to move back, e.g. stable")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--steps", type=int, default=1, help="how many earlier builds back (default 1: the previous)")
    add_renamed(
        p, "--build", old="--to", dest="build", metavar="KEY", group=which,
        help="a build of the channel's history (its cache key or first 12 hex digits)",
    )  # fmt: skip
    p.add_argument("--reason", default="", help="why, as recorded in the channel's history")
    _common(p)


def cmd_rollback(args: argparse.Namespace) -> int:
    """Point the channel back at a build it held before: one small write, nothing copied."""
    _run(
        args, action="rollback", model=args.model, profile=args.profile, channel=args.channel,
        steps=args.steps, build=args.build, reason=args.reason,
    )  # fmt: skip
    return EXIT_OK


# -- approve / reject -----------------------------------------------------------------------------------
def _approve_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("key", metavar="KEY", help="the build: its cache key or first 12 hex digits")
    p.add_argument("--reason", default="", help="why, as recorded with the decision")
    _common(p)


def cmd_approve(args: argparse.Namespace) -> int:
    _run(args, action="approve", build=args.key, reason=args.reason)
    return EXIT_OK


def _reject_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("key", metavar="KEY", help="the build: its cache key or first 12 hex digits")
    p.add_argument("--reason", required=True, help="why (required): whoever deployed the build reads it")
    _common(p)


def cmd_reject(args: argparse.Namespace) -> int:
    """Reject a build: no channel takes it from now on; channels that point to it are named, loudly."""
    _run(args, action="reject", build=args.key, reason=args.reason)
    return EXIT_OK


# -- channels / history ---------------------------------------------------------------------------------
def _channels_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="MODEL", nargs="?", help=f"{MODEL_HELP}; default: every model's channels")
    add_store_args(p)
    p.add_argument("--json", action="store_true", help=JSON_HELP)


def _review_word(store, key: str) -> str:
    from neuronforge.artifacts import reviews

    state = reviews.state_of(store, key)
    return "REJECTED" if state == "rejected" else state


def cmd_channels(args: argparse.Namespace) -> int:
    """The current pointer of each channel, with the build's review state and whether that build is
    still sound (`channels.pointer`: a damaged or unreadable build a channel still points to is flagged,
    and the command says what to do; a rejected one too): one listing, then per channel its review and
    damage records and, none recorded, its build's index entry, manifest and folder listing. A record
    that is not a channel's (`channels.ChannelDamaged`) is one `error:` line of its own after the others
    are listed, and the command exits 3."""
    from neuronforge.artifacts import attestations, channels

    store = _store(args)
    listed = channels.listing(store, args.model)
    records = listed.records
    reviewed: dict[str, str] = {}  # a build on several channels: its review read once
    checked = []  # per channel (what each recorded is checked): its build's review state, its `Pointer`
    attested: dict[tuple[str, str, str], bool] = {}  # a channel requiring a release: its build attested (one read)
    for r in records:
        key = r.current.build.key
        if key not in reviewed:
            reviewed[key] = _review_word(store, key)
        checked.append((r, reviewed[key], channels.pointer(store, r)))
        if r.requires_release:
            attested[_where(r)] = attestations.attested_for(store, key, r.requires_release, r.current.build.sdk_release)
    if args.json:
        print_json(
            [
                {**r.to_json(), "review_state": state.lower(), **p.to_json(), "attested": attested.get(_where(r))}
                for r, state, p in checked
            ]
        )
        _say_damaged(listed.damaged)
        return EXIT_REJECTED if listed.damaged else EXIT_OK
    if not records and not listed.damaged:
        print(f"no channels{' of ' + args.model if args.model else ''} in {store.root_uri}")
        return EXIT_OK
    from neuronforge.farm.releases import gate_said, move_away
    from neuronforge.spec.source import model_ref

    for r, state, found in checked:
        m = r.current
        approval = ", requires approval" if r.requires_approval else ""
        broken = f", {found.state.upper()}" if found.state != "ok" else ""
        if r.requires_release:
            word = "attested" if attested[_where(r)] else "NOT ATTESTED"
            approval += f", SDK {r.requires_release}: {word}"
        print(  # a channel spans revisions: its model's name, as every listing shows it (`model_ref`)
            f"{model_ref(r.model)} · {r.profile_line} · {r.channel}: {m.build.key[:12]} {m.build.target} "
            f"({state}{broken}{approval}); {m.action} by {m.by} at {m.at}{gate_said(m)}"
        )
    for r, state, found in checked:
        name, short = f"{r.model} · {r.profile_line} · {r.channel}", r.current.build.key[:12]
        if r.requires_release and not attested[_where(r)]:
            print(
                f"WARNING: {name} runs SDK {r.requires_release} and {short} is not attested for it: {_attest(store, r)}"
            )
        if state == "REJECTED":
            print(f"WARNING: {name} points to the REJECTED build {short}: {move_away(store, r)}")
        if found.damage is not None:
            d = found.damage
            print(
                f"WARNING: {name} points to the DAMAGED build {short} ({d.reason}; found by {d.by} at {d.at}): "
                f"rebuild it, or {move_away(store, r)}"
            )
        elif found.state != "ok":
            advice = f"{found.advice}; or {move_away(store, r)}" if found.advice else move_away(store, r)
            print(f"WARNING: {name} points to the UNREADABLE build {short} ({found.reason}): {advice}")
    _say_damaged(listed.damaged)
    return EXIT_REJECTED if listed.damaged else EXIT_OK


def _say_damaged(damaged: list[Any]) -> None:
    """Each record `channels` found that is not a channel's, as the one line its error is (what the
    other commands print for it), after the channels that read (the command then exits 3)."""
    from neuronforge.common.errors import outcome
    from neuronforge.common.secrets import print_line

    for exc in damaged:
        said = outcome(exc)
        print_line(f"error: {said.message if said is not None else exc}")


def _history_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="MODEL", help=MODEL_HELP)
    _profile(p)
    _channel(p, "the channel, e.g. stable")
    add_store_args(p)
    p.add_argument("--json", action="store_true", help=JSON_HELP)


def cmd_history(args: argparse.Namespace) -> int:
    """Every kept move of the channel, newest (the current one) first, with what the regression gate
    compared and the reason a regression was accepted."""
    from neuronforge.artifacts import channels
    from neuronforge.farm.releases import gate_said

    store = _store(args)
    record = channels.get(store, channels.ChannelRef.parse(args.model, args.profile, args.channel))
    if args.json:
        print_json(record.to_json())
        return EXIT_OK
    for i, m in enumerate(record.moves):
        mark = "*" if i == 0 else " "
        why = f": {m.reason}" if m.reason else ""
        print(f"{mark} {m.at}  {m.action:<8} {m.build.key[:12]} {m.build.target}  by {m.by}{why}{gate_said(m)}")
    return EXIT_OK


def _where(record: Any) -> tuple[str, str, str]:
    return (record.model, record.profile_line, record.channel)


def _attest(store: Any, record: Any) -> str:
    from neuronforge.common import advice

    short, release = record.current.build.key[:12], record.requires_release
    return f"{advice.command('attest', short, sdk=release, store=store.root_uri)} proves it there without compiling"


def _require_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="MODEL", help=MODEL_HELP)
    _profile(p)
    _channel(p, "the channel, e.g. stable")
    p.add_argument(
        "--release", required=True, metavar="R",
        help="the Neuron SDK release the channel's fleet runs, e.g. 2.33.1; `none` requires none",
    )  # fmt: skip
    add_store_args(p)
    p.add_argument("--json", action="store_true", help=JSON_HELP)


def cmd_require_release(args: argparse.Namespace) -> int:
    """Record the SDK release a channel's fleet runs: from then on a promote or rollback takes only a
    build built on it or attested for it. The channel is not moved; a build it points to that is not
    attested is named (exit 0: the next move is what is checked)."""
    from neuronforge.artifacts import channels

    store = _store(args, probe=False)
    ref = channels.ChannelRef.parse(args.model, args.profile, args.channel)
    release = "" if args.release.strip().lower() == "none" else args.release.strip()
    record, attested = channels.require_release(store, ref, release)
    if args.json:
        print_json({**record.to_json(), "attested": attested})
        return EXIT_OK
    print(f"{ref}: requires SDK {release}" if release else f"{ref}: requires no SDK release")
    if not attested:
        short = record.current.build.key[:12]
        print(f"WARNING: it points to {short}, not attested for {release}: {_attest(store, record)}")
    return EXIT_OK


# -- compare ------------------------------------------------------------------------------------------
def _compare_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "refs", nargs="+", metavar="KEY_OR_MODEL",
        help="KEY_A KEY_B: the base build and the candidate (a cache key, its first 6+ hex digits, or an "
        "artifact's URI); with --channel: MODEL, the channel's model",
    )  # fmt: skip
    p.add_argument("--channel", metavar="CHANNEL", help="compare --build with the build this channel serves")
    completes(p.add_argument("--profile", help=f"with --channel: {PROFILE_HELP}"), complete_profiles)
    p.add_argument("--build", metavar="KEY", help="with --channel: the candidate (its cache key or first 12)")
    add_store_args(p)
    p.add_argument("--json", action="store_true", help=JSON_HELP)


def _compared(args: argparse.Namespace) -> tuple[str, str, str | None]:
    """(base, candidate, channel) as the arguments name them, or `InvalidInput` for a wrong set."""
    if args.channel is None:
        if len(args.refs) != 2 or args.profile or args.build:
            raise InvalidInput(
                "compare: give two builds (KEY_A KEY_B: the base, then the candidate), or MODEL --profile P "
                "--channel C --build KEY"
            )
        return args.refs[0], args.refs[1], None
    if len(args.refs) != 1 or not args.profile or not args.build:
        raise InvalidInput("compare --channel C: give the model, its --profile and the candidate's --build")
    from neuronforge.artifacts import channels

    ref = channels.ChannelRef.parse(args.refs[0], args.profile, args.channel)
    return channels.get(_store(args, probe=False), ref).current.build.key, args.build, args.channel


def cmd_compare(args: argparse.Namespace) -> int:
    """Build B against build A (or against the build `--channel` serves): each figure of their smoke
    measurements side by side, its change and noise, and the verdict under the channel's gate (without
    one, the default threshold). Exit 3 on a regression or a numerics difference, else 0 — not comparable
    too, saying why and what would make it possible; a damaged build is refused as `show` refuses it."""
    from neuronforge.artifacts import channels
    from neuronforge.artifacts.comparison import compare
    from neuronforge.artifacts.opening import open_artifact

    base_ref, candidate_ref, channel = _compared(args)
    opened = [open_artifact(ref, args.store, by="compare") for ref in (base_ref, candidate_ref)]
    base, cand = (o.manifest for o in opened)
    assert base is not None and cand is not None  # a manifest that does not read is refused
    found = compare(
        base.smoke, cand.smoke, base_key=base.cache_key, candidate_key=cand.cache_key, policy=channels.judging(channel)
    )
    if args.json:
        print_json(found.to_json())
    else:
        for line in found.lines():
            print(line)
    return EXIT_REJECTED if found.refuses else EXIT_OK


COMMANDS = (
    Command("promote", "point a release channel at a proven build", _promote_options, cmd_promote),
    Command(
        "compare",
        "compare two builds' speed and numerics, or a build with what a channel serves",
        _compare_options,
        cmd_compare,
    ),
    Command("rollback", "point a release channel back at a build it held", _rollback_options, cmd_rollback),
    Command("channels", "the release channels and the builds they point to", _channels_options, cmd_channels),
    Command("history", "a release channel's moves, newest first", _history_options, cmd_history),
    Command(
        "require-release",
        "the Neuron SDK release a channel's fleet runs: moves take only builds attested for it",
        _require_options,
        cmd_require_release,
    ),
    Command(
        "approve",
        "approve a published build (channels such as stable take only approved ones)",
        _approve_options,
        cmd_approve,
    ),
    Command("reject", "reject a published build: no channel takes it", _reject_options, cmd_reject),
)
