"""The release commands: move a channel to a proven build and back, and review builds.

    promote MODEL --profile P --to CHANNEL (--build KEY | --from CHANNEL)
    rollback MODEL --profile P CHANNEL [--steps N | --to KEY]
    channels [MODEL]                    the current pointers (one listing of channels/, never the artifacts)
    history MODEL --profile P CHANNEL   the kept moves, newest first
    approve KEY [--reason ...]  /  reject KEY --reason ...

Each builds a `ReleaseRequest` (`neuronforge.farm.releases`), the same the release DAG and the catalog's
buttons run; a refused move exits 3, a lost race (another mover wrote first) exits 1 naming the winner.
"""

from __future__ import annotations

import argparse

from neuronforge.interfaces.cli.command import Command
from neuronforge.interfaces.cli.exit_codes import EXIT_OK
from neuronforge.interfaces.cli.options import JSON_HELP, add_store_args, complete_profiles, completes, print_json

MODEL_HELP = "the model as builds name it (org/name, s3://bucket/prefix, builtin:tiny-llama), without a revision"
PROFILE_HELP = "the serving profile line the channel serves (a profile name, e.g. vllm-neuron; a @version is ignored)"
BY_HELP = "who moves or decides, as recorded (default: user@host)"


def _store(args: argparse.Namespace, *, probe: bool = True):
    """The store, which must exist; a move skips the remote probe (S3: a HEAD of the bucket): its first
    read fails as clearly on a missing bucket, and a rollback is counted in requests (bench/channels.py)."""
    from neuronforge.stores import open_store

    return open_store(args.store, must_exist=True, probe=probe)


def _common(p: argparse.ArgumentParser, *, json: bool = True) -> None:
    add_store_args(p)
    p.add_argument("--by", default="", help=BY_HELP)
    if json:
        p.add_argument("--json", action="store_true", help=JSON_HELP)


def _profile(p: argparse.ArgumentParser) -> None:
    completes(p.add_argument("--profile", required=True, help=PROFILE_HELP), complete_profiles)


def _run(args: argparse.Namespace, **request: object) -> None:
    from neuronforge.farm.releases import ReleaseRequest, run

    outcome = run(_store(args, probe=False), ReleaseRequest.from_json(request), by=args.by)
    if args.json:
        print_json(outcome.to_json())
    else:
        print(outcome.line)


# -- promote / rollback ---------------------------------------------------------------------------------
def _promote_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="MODEL", help=MODEL_HELP)
    _profile(p)
    p.add_argument("--to", required=True, metavar="CHANNEL", dest="channel", help="the channel to move, e.g. stable")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--build", metavar="KEY", help="the build: its cache key or first 12 hex digits")
    which.add_argument("--from", metavar="CHANNEL", dest="from_channel", help="the build another channel points to")
    p.add_argument("--reason", default="", help="why, as recorded in the channel's history")
    _common(p)


def cmd_promote(args: argparse.Namespace) -> int:
    """Point the channel at a published build whose smoke test passed, which is not rejected and, where the
    channel requires it (stable by default), approved."""
    _run(
        args, action="promote", model=args.model, profile=args.profile, channel=args.channel,
        build=args.build or "", from_channel=args.from_channel or "", reason=args.reason,
    )  # fmt: skip
    return EXIT_OK


def _rollback_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="MODEL", help=MODEL_HELP)
    _profile(p)
    p.add_argument("channel", metavar="CHANNEL", help="the channel to move back, e.g. stable")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--steps", type=int, default=1, help="how many earlier builds back (default 1: the previous)")
    which.add_argument("--to", metavar="KEY", default="", help="a build of the channel's history (key or its first 12)")
    p.add_argument("--reason", default="", help="why, as recorded in the channel's history")
    _common(p)


def cmd_rollback(args: argparse.Namespace) -> int:
    """Point the channel back at a build it held before: one small write, nothing copied."""
    _run(
        args, action="rollback", model=args.model, profile=args.profile, channel=args.channel,
        steps=args.steps, to=args.to, reason=args.reason,
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
    """The current pointer of each channel, with the build's review state and whether it was found
    damaged (a rejected or damaged build a channel still points to is flagged, and the command says what
    to do): one listing, then a GET of the review and of the damage record per channel."""
    from neuronforge.artifacts import channels
    from neuronforge.artifacts.farm_index import read_damage

    store = _store(args)
    records = channels.channels_of(store, args.model)
    rows = [(r, _review_word(store, r.current.build.key)) for r in records]
    damage = {r.current.build.key: read_damage(store, r.current.build.key) for r, _ in rows}
    if args.json:
        print_json(
            [
                {**r.to_json(), "review_state": state.lower(), "damage": _damage_json(damage[r.current.build.key])}
                for r, state in rows
            ]
        )
        return EXIT_OK
    if not rows:
        print(f"no channels{' of ' + args.model if args.model else ''} in {store.root_uri}")
        return EXIT_OK
    from neuronforge.spec.source import model_ref

    for r, state in rows:
        m = r.current
        approval = ", requires approval" if r.requires_approval else ""
        broken = ", DAMAGED" if damage[m.build.key] is not None else ""
        print(  # a channel spans revisions: its model's name, as every listing shows it (`model_ref`)
            f"{model_ref(r.model)} · {r.profile_line} · {r.channel}: {m.build.key[:12]} {m.build.target} "
            f"({state}{broken}{approval}); {m.action} by {m.by} at {m.at}"
        )
    for r, state in rows:
        if state == "REJECTED":
            print(
                f"WARNING: {r.model} · {r.profile_line} · {r.channel} points to the REJECTED build "
                f"{r.current.build.key[:12]}: `neuronforge rollback {r.model} --profile {r.profile_line} {r.channel}`"
            )
        found = damage[r.current.build.key]
        if found is not None:
            print(
                f"WARNING: {r.model} · {r.profile_line} · {r.channel} points to the DAMAGED build "
                f"{r.current.build.key[:12]} ({found.reason}; found by {found.by} at {found.at}): rebuild it, or "
                f"`neuronforge rollback {r.model} --profile {r.profile_line} {r.channel}`"
            )
    return EXIT_OK


def _damage_json(found) -> dict[str, str] | None:
    return None if found is None else {"reason": found.reason, "at": found.at, "by": found.by}


def _history_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="MODEL", help=MODEL_HELP)
    _profile(p)
    p.add_argument("channel", metavar="CHANNEL", help="the channel, e.g. stable")
    add_store_args(p)
    p.add_argument("--json", action="store_true", help=JSON_HELP)


def cmd_history(args: argparse.Namespace) -> int:
    """Every kept move of the channel, newest (the current one) first."""
    from neuronforge.artifacts import channels

    store = _store(args)
    record = channels.get(store, channels.ChannelRef.parse(args.model, args.profile, args.channel))
    if args.json:
        print_json(record.to_json())
        return EXIT_OK
    for i, m in enumerate(record.moves):
        mark = "*" if i == 0 else " "
        why = f": {m.reason}" if m.reason else ""
        print(f"{mark} {m.at}  {m.action:<8} {m.build.key[:12]} {m.build.target}  by {m.by}{why}")
    return EXIT_OK


COMMANDS = (
    Command("promote", "point a release channel at a proven build", _promote_options, cmd_promote),
    Command("rollback", "point a release channel back at a build it held", _rollback_options, cmd_rollback),
    Command("channels", "the release channels and the builds they point to", _channels_options, cmd_channels),
    Command("history", "a release channel's moves, newest first", _history_options, cmd_history),
    Command(
        "approve",
        "approve a published build (channels such as stable take only approved ones)",
        _approve_options,
        cmd_approve,
    ),
    Command("reject", "reject a published build: no channel takes it", _reject_options, cmd_reject),
)
