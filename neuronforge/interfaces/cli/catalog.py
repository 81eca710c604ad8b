"""The catalog commands: the model catalog the recompile schedule keeps compiled. `catalog check`
validates it and plans every target; `catalog stale` says which targets have no artifact for this
machine's toolchain (the recompile DAG's stale set)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from neuronforge.common import advice, settings
from neuronforge.common.errors import InvalidInput
from neuronforge.interfaces.cli.command import Command
from neuronforge.interfaces.cli.exit_codes import EXIT_FAILURE, EXIT_OK, EXIT_REJECTED, EXIT_STALE
from neuronforge.interfaces.cli.options import JSON_HELP, add_store_args, opened_store, print_json

CATALOG_PATH_HELP = "catalog YAML (default: NEURONFORGE_CATALOG or catalog/models.yaml)"


def _check_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", nargs="?", help=CATALOG_PATH_HELP)
    p.add_argument("--json", action="store_true", help=JSON_HELP)


def cmd_catalog_check(args: argparse.Namespace) -> int:
    """Every problem with its line; exit 3 when there are any (nothing gets scheduled from it), else
    1 when some target could not be planned (its config.json unavailable here): never "ok" over them."""
    from neuronforge.farm.catalog import check_catalog

    report = check_catalog(Path(args.path).expanduser() if args.path else None)
    targets = sum(len(e.targets) for e in report.entries)
    if args.json:
        print_json({"path": str(report.path), "ok": report.ok and not report.unplanned, "entries": len(report.entries),
                     "targets": targets, "unplanned": report.unplanned, "problems": report.problems,
                     "notes": report.notes})  # fmt: skip
    else:
        for line in report.problems:
            print(line)
        for line in report.notes:
            print(f"note: {line}")
        state = "ok" if report.ok else f"{len(report.problems)} problem(s)"
        if report.unplanned:
            unplanned = f"{report.unplanned} of {targets} target(s) NOT PLANNED (see the notes)"
            state = unplanned if report.ok else f"{state}; {unplanned}"
        print(f"{report.path}: {len(report.entries)} model(s), {targets} target(s): {state}")
    if not report.ok:
        return EXIT_REJECTED
    return EXIT_FAILURE if report.unplanned else EXIT_OK


def _stale_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", nargs="?", help=CATALOG_PATH_HELP)
    add_store_args(p)
    p.add_argument("--json", action="store_true", help=JSON_HELP)


def cmd_catalog_stale(args: argparse.Namespace) -> int:
    """The recompile DAG's stale set, computed here with this machine's toolchains for the profile
    versions the catalog uses (one whose backend is not installed here, or is not its pins, is
    listed as unavailable). Exit 4 when something is stale."""
    from neuronforge.farm import recompile
    from neuronforge.farm.catalog import check_catalog

    catalog = check_catalog(Path(args.path).expanduser() if args.path else None)
    if not catalog.ok:
        raise InvalidInput(
            f"catalog {catalog.path} has problems ({advice.command('catalog check', catalog.path)} names them)"
        )
    toolchains = recompile.detect_toolchains(recompile.profiles_of(catalog), "on this machine")
    states = recompile.find_stale(catalog, toolchains, opened_store(args.store), settings.work_dir())
    if args.json:
        print_json([s.to_json() for s in states])
    else:
        for s in states:
            why = f"  ({s.detail})" if s.status != recompile.FRESH and s.detail else ""
            print(f"{s.status:<11} {s.key[:12] or '-':<12} {s.slug:<44} {s.profile:<22} {s.source}{why}")
        print(stale_summary(states, args.store))
    counts = {status: sum(s.status == status for s in states) for status in (recompile.STALE, *UNDECIDED)}
    if counts[recompile.STALE]:
        return EXIT_STALE
    return EXIT_FAILURE if any(counts[status] for status in UNDECIDED) else EXIT_OK


# Catalog targets `catalog stale` could not decide: neither fresh nor stale is known of them.
UNDECIDED = {
    "unresolved": "unresolved (the source could not be pinned: Hub or store unreachable, folder missing)",
    "unavailable": "unavailable (no usable toolchain here for the profile)",
}


def stale_summary(states: list[Any], store: str) -> str:
    """The last line of `catalog stale`. It never reads as "nothing stale" over targets that were
    not checked: those are counted by why (each is listed above with its detail)."""
    line = f"{sum(s.status == 'stale' for s in states)} stale of {len(states)} catalog target(s) in {store}"
    counts = {status: n for status in UNDECIDED if (n := sum(s.status == status for s in states))}
    if not counts:
        return line
    named = ", ".join(f"{n} {UNDECIDED[status]}" for status, n in counts.items())
    return f"{line}; {sum(counts.values())} NOT CHECKED: {named}"


COMMANDS = (
    Command(
        "catalog",
        "the model catalog the recompile schedule keeps compiled",
        subcommands=(
            Command("check", "validate the catalog and plan every target", _check_options, cmd_catalog_check),
            Command(
                "stale",
                "which catalog targets have no artifact for this machine's toolchain",
                _stale_options,
                cmd_catalog_stale,
            ),
        ),
    ),
)
