"""The compile-cache commands: `cache ls`, `cache stats` and `cache prune` over the store's compile
cache (neuron-cache/), one compiler folder or version at a time. An entry a published artifact points
at is never pruned."""

from __future__ import annotations

import argparse
from typing import Any

from neuronforge.common.errors import InvalidInput
from neuronforge.interfaces.cli.command import Command
from neuronforge.interfaces.cli.exit_codes import EXIT_OK
from neuronforge.interfaces.cli.options import JSON_HELP, add_store_args, opened_store, print_json


def _selection_options(p: argparse.ArgumentParser) -> None:
    """The store and the compiler filters, the same for each `cache` command."""
    add_store_args(p, positional=True)
    p.add_argument("--compiler", help="limit to this compiler: neuronxcc, or torch-inductor for cpu (default: any)")
    p.add_argument("--compiler-version", help="limit to this compiler version (without its +label: every label)")


def _listing_options(p: argparse.ArgumentParser) -> None:
    _selection_options(p)
    p.add_argument("--json", action="store_true", help=JSON_HELP)


def _prune_options(p: argparse.ArgumentParser) -> None:
    _selection_options(p)
    p.add_argument("--incomplete", action="store_true", help="only entries without model.done")
    p.add_argument("--dry-run", action="store_true", help="print what would be deleted, delete nothing")


def _cache_selection(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    """`cache`'s filters as `compile_cache` takes them, and how to name them in a message. Both
    given: the one folder `<compiler>-<version>` (or its labelled siblings); either alone: across
    the other (`--compiler-version 2.13.0` finds `torch-inductor-2.13.0+cpu` too)."""
    from neuronforge.artifacts import layout

    compiler, version = args.compiler, args.compiler_version
    if version is not None or compiler is not None:  # a path component each: refused, never cleaned
        layout.compiler_dir(compiler or "any", version or "0")
    named = " ".join(f"{flag} {v}" for flag, v in (("--compiler", compiler), ("--compiler-version", version)) if v)
    if compiler and version:
        return {"compiler_dir": layout.compiler_dir(compiler, version)}, named
    return {"compiler": compiler, "version": version}, named + (" (any compiler)" if version and not compiler else "")


def _nothing_matches(store: Any, named: str) -> str:
    from neuronforge.compilation.compile_cache import compiler_dirs

    present = compiler_dirs(store) if named else []
    if not present:
        return f"no compile-cache entries in {store.uri('neuron-cache')}" + (f" ({named})" if named else "")
    return f"no compile-cache entries match {named}; compiler folders present: {', '.join(present)}"


def _selected(args: argparse.Namespace) -> tuple[Any, dict[str, Any], str]:
    """The store (it must exist), then the filters: a bad store is reported before a bad filter."""
    store = opened_store(args.store)
    selection, named = _cache_selection(args)
    return store, selection, named


def cmd_cache_ls(args: argparse.Namespace) -> int:
    from neuronforge.compilation.compile_cache import stored_entries

    store, selection, named = _selected(args)
    entries = stored_entries(store, **selection)
    if args.json:
        print_json([e.__dict__ for e in entries])
    elif not entries:
        print(_nothing_matches(store, named))
    else:
        print(f"{'COMPILER FOLDER':<34} {'ENTRY':<40} {'FILES':>9} {'BYTES':>14}  STATE")
        for e in entries:
            print(
                f"{e.compiler_dir:<34} {e.name:<40} {e.files:>3} files {e.bytes:>12} B  "
                f"{'complete' if e.complete else 'INCOMPLETE'}"
            )
        print(f"{len(entries)} entries, {sum(e.bytes for e in entries)} bytes")
    return EXIT_OK


def cmd_cache_stats(args: argparse.Namespace) -> int:
    from neuronforge.compilation.compile_cache import stored_entries

    store, selection, named = _selected(args)
    stats: dict[str, dict[str, int]] = {}
    for e in stored_entries(store, **selection):
        s = stats.setdefault(e.compiler_dir, {"entries": 0, "complete": 0, "incomplete": 0, "bytes": 0})
        s["entries"] += 1
        s["complete" if e.complete else "incomplete"] += 1
        s["bytes"] += e.bytes
    if args.json:
        print_json(stats)
    elif not stats:
        print(_nothing_matches(store, named))
    else:
        for cdir, s in sorted(stats.items()):
            print(
                f"{cdir:<34} {s['entries']:>5} entries ({s['complete']} complete, {s['incomplete']} incomplete), "
                f"{s['bytes']} bytes"
            )
    return EXIT_OK


def cmd_cache_prune(args: argparse.Namespace) -> int:
    from neuronforge.compilation.compile_cache import prune_store
    from neuronforge.farm.gc import referenced_cache_entries

    store, selection, named = _selected(args)
    if not (args.compiler_version or args.incomplete):
        raise InvalidInput("cache prune needs --compiler-version VERSION and/or --incomplete")
    # (folder, entry) -> the manifest of a published artifact that points at it: kept, and named below
    referenced: dict[tuple[str, str], str] = {}

    def keep(chosen: list) -> set[tuple[str, str]]:  # what prune_store must not delete
        referenced.update(referenced_cache_entries(store, chosen))
        return set(referenced)

    entries = prune_store(store, incomplete_only=args.incomplete, dry_run=args.dry_run, keep=keep, **selection)
    for (cdir, name), manifest in sorted(referenced.items()):
        print(f"kept {cdir}/{name}: published artifact {manifest} points at it")
    verb = "would delete" if args.dry_run else "deleted"
    if not entries and not referenced:
        what = f"{named} --incomplete".strip() if args.incomplete else named
        print(_nothing_matches(store, what) if named else "no incomplete compile-cache entries")
    kept = f"; kept {len(referenced)} that published artifacts point at" if referenced else ""
    print(f"{verb} {len(entries)} entries ({sum(e.bytes for e in entries)} bytes){kept}")
    return EXIT_OK


COMMANDS = (
    Command(
        "cache",
        "inspect and prune the store's compile cache (neuron-cache/)",
        subcommands=(
            Command("ls", "list entries", _listing_options, cmd_cache_ls),
            Command("stats", "counts and sizes per compiler version", _listing_options, cmd_cache_stats),
            Command(
                "prune",
                "delete one compiler version's entries, or incomplete ones",
                _prune_options,
                cmd_cache_prune,
            ),
        ),
    ),
)
