"""`neuronforge releases`: the Neuron SDK releases neuronforge knows, and the feed that proposes new ones
from AWS's release manifest (`neuronforge.farm.release_feed`).

    releases ls                         every release of the table and the store: its state (shipped with
                                        neuronforge, accepted, proposed, rejected), date, compiler, and per
                                        line and family its status; a proposal flags what needs review
    releases sync [--manifest WHERE] [--accept VERSION]
                                        propose every release the manifest adds (its package changes, one
                                        line each); default: the store's mirror, else AWS's upstream file
    releases accept VERSION [--same-as RELEASE]
                                        the proposal is known from now on, to every worker and the DAGs;
                                        --same-as: the packages and lines the manifest does not carry are
                                        as in RELEASE (a patch release's "all other packages are the same")
    releases reject VERSION --reason …  kept out: the same release is not proposed again
"""

from __future__ import annotations

import argparse

from neuronforge.interfaces.cli.command import Command
from neuronforge.interfaces.cli.exit_codes import EXIT_OK, EXIT_REJECTED
from neuronforge.interfaces.cli.options import JSON_HELP, add_store_args, opened_store, print_json, sdk_release

BY_HELP = "who decides, as recorded (default: user@host)"


def _common(p: argparse.ArgumentParser) -> None:
    add_store_args(p)
    p.add_argument("--json", action="store_true", help=JSON_HELP)


# -- ls -------------------------------------------------------------------------------------------------
def cmd_ls(args: argparse.Namespace) -> int:
    """Reads the table and the store's `sdk-releases/entries/` only."""
    from neuronforge.common.secrets import print_line
    from neuronforge.farm import release_feed

    rows, damaged = release_feed.rows(opened_store(args.store))
    if args.json:
        print_json({"releases": [r.to_json() for r in rows], "damaged": [str(d) for d in damaged]})
    else:
        for r in rows:
            review = f"; NEEDS REVIEW: {', '.join(r.needs_review)}" if r.needs_review else ""
            cc = f"neuronx-cc {r.compiler}" if r.compiler else "no compiler listed"
            print(f"{r.version:<8} {r.state:<9} {r.date or '(no date)':<10} {cc}{review}")
            for line, families in r.statuses.items():
                print(f"    {line}: {', '.join(f'{fam} {status}' for fam, status in families.items())}")
        for d in damaged:
            print_line(f"error: {d}")
    return EXIT_REJECTED if damaged else EXIT_OK


# -- sync -----------------------------------------------------------------------------------------------
def _sync_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--manifest",
        metavar="PATH|URL",
        help="AWS's release manifest (n2-manifest.json): a path, file://, s3://bucket/key or https:// (default: "
        "the store's sdk-releases/n2-manifest.json, else the upstream file on GitHub)",
    )
    p.add_argument(
        "--accept", type=sdk_release, metavar="VERSION", help="then accept this release (it must be proposed)"
    )
    p.add_argument("--by", default="", help=BY_HELP)
    _common(p)


def cmd_sync(args: argparse.Namespace) -> int:
    from neuronforge.farm import release_feed

    store = opened_store(args.store, must_exist=False)
    result = release_feed.sync(store, args.manifest, by=args.by, accept=args.accept)
    if args.json:
        print_json(result.to_json())
        return EXIT_OK
    m = result.manifest
    print(f"manifest {m.uri} (manifest_version {m.manifest_version or '?'}, {m.manifest_date or 'no date'})")
    for s in result.releases:
        print(s.line)
        if s.outcome in ("proposed", "updated"):
            for change in s.record.changes:
                print(f"  {change.line}")
            print(f"  accept with {release_feed.accept_command(s.version, store)}")
    if not result.releases:
        print("nothing new: every release it lists is known")
    if result.older:
        print(f"{result.older} release(s) older than the oldest neuronforge knows: not proposed")
    return EXIT_OK


# -- accept / reject ------------------------------------------------------------------------------------
def _accept_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("version", type=sdk_release, metavar="VERSION", help="the proposed release, e.g. 2.33.9")
    p.add_argument(
        "--same-as",
        metavar="RELEASE",
        default="",
        help="the packages and lines it needs reviewed (not in AWS's manifest: vLLM, a line's release) are as in "
        "RELEASE, as its release notes say ('all other packages are the same as in ...'); recorded with --by",
    )
    p.add_argument("--by", default="", help=BY_HELP)
    _common(p)


def _reject_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("version", type=sdk_release, metavar="VERSION", help="the proposed release, e.g. 2.33.9")
    p.add_argument("--reason", required=True, help="why (required): whoever syncs next reads it")
    p.add_argument("--by", default="", help=BY_HELP)
    _common(p)


def _decide(args: argparse.Namespace, state: str, reason: str) -> None:
    from neuronforge.farm import release_feed

    same_as = getattr(args, "same_as", "")
    record = release_feed.decide(opened_store(args.store), args.version, state, args.by, reason, same_as=same_as)
    if args.json:
        print_json(record.to_json())
        return
    why = f": {reason}" if reason else ""
    print(f"Neuron {record.version} {record.state} by {record.current.by}{why}")
    settled = [r.what for r in record.reviewed if r.same_as == same_as and r.at == record.current.at]
    if settled:
        print(f"  as in {same_as}: {', '.join(settled)}")
    if state == "accepted" and record.needs_review:
        print(f"  still needs review: {', '.join(n.what for n in record.needs_review)}")


def cmd_accept(args: argparse.Namespace) -> int:
    """Known from now on: `recompile --sdk VERSION` and the recompile DAG read it from the store."""
    _decide(args, "accepted", "")
    return EXIT_OK


def cmd_reject(args: argparse.Namespace) -> int:
    _decide(args, "rejected", args.reason)
    return EXIT_OK


COMMANDS = (
    Command(
        "releases",
        "the Neuron SDK releases neuronforge knows, and new ones proposed from AWS's release manifest",
        subcommands=(
            Command(
                "ls", "every release: shipped, accepted, proposed or rejected, and each line's status", _common, cmd_ls
            ),
            Command(
                "sync",
                "propose the releases AWS's manifest adds (the package changes of each)",
                _sync_options,
                cmd_sync,
            ),
            Command(
                "accept", "make a proposed release known (to every worker and the DAGs)", _accept_options, cmd_accept
            ),
            Command("reject", "keep a proposed release out", _reject_options, cmd_reject),
        ),
    ),
)
