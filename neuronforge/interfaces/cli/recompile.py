"""`neuronforge recompile`: the catalog's upgrade to a Neuron SDK release, decided target by target —
rebuild on the newest release of its line that serves its family, stay (the line is frozen for the
family), migrate (proposed; built with `--migrate`), or unknown (a release the profile data does not
know) — then, without `--dry-run`, the stale rows rebuilt here, one `run` each, and the kept builds
attested at the release (`re-smoke`, `re-verify`: `farm.attest`). The recompile DAG makes the same decisions
(`neuronforge.farm.upgrades`) and rebuilds on its workers."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from neuronforge.common import advice, settings
from neuronforge.common.errors import InvalidInput, NeuronforgeError
from neuronforge.interfaces.cli.catalog import CATALOG_PATH_HELP, UNDECIDED
from neuronforge.interfaces.cli.command import Command
from neuronforge.interfaces.cli.exit_codes import EXIT_FAILURE, EXIT_OK, EXIT_REJECTED, EXIT_STALE
from neuronforge.interfaces.cli.options import JSON_HELP, add_store_args, opened_store, print_json, sdk_release


def _options(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", nargs="?", help=CATALOG_PATH_HELP)
    p.add_argument(
        "--sdk",
        type=sdk_release,
        metavar="RELEASE",
        help="the Neuron SDK release to upgrade to, e.g. 2.33 (default: the newest release the profile data knows)",
    )
    p.add_argument("--dry-run", action="store_true", help="decide and print; build nothing")
    p.add_argument(
        "--migrate",
        action="store_true",
        help="also build the proposed migrations (a target whose line is frozen or ends for its family, moved "
        "to the line that takes over); without it they are only proposed",
    )
    add_store_args(p)
    p.add_argument("--json", action="store_true", help=JSON_HELP)


def cmd_recompile(args: argparse.Namespace) -> int:
    from neuronforge.farm.release_feed import known_table
    from neuronforge.profiles.sdk_releases import in_effect

    store = opened_store(args.store)
    with in_effect(known_table(store)):  # the table's releases and the store's accepted ones
        return cmd_recompile_with(args, store)


def cmd_recompile_with(args: argparse.Namespace, store: Any) -> int:
    """`recompile` on `store`, with its releases in effect (`cmd_recompile`)."""
    from neuronforge.farm import recompile, speed, upgrades
    from neuronforge.farm.catalog import check_catalog
    from neuronforge.profiles.sdk_releases import known_release

    release = upgrades.target_release(args.sdk)
    catalog = check_catalog(Path(args.path).expanduser() if args.path else None)
    if not catalog.ok:
        raise InvalidInput(
            f"catalog {catalog.path} has problems ({advice.command('catalog check', catalog.path)} names them)"
        )
    # For a release the data does not know nothing is checked or built: no toolchain is asked for.
    known = known_release(release) is not None
    profiles = recompile.profiles_of(catalog, release, args.migrate) if known else []
    toolchains = recompile.detect_toolchains(profiles, "on this machine")
    states = recompile.find_stale(catalog, toolchains, store, settings.work_dir(), release, args.migrate)
    if not args.dry_run:
        _rebuild(store, states)
        recompile.attest_kept(store, states, release, settings.work_dir())
        speed.against_stable(store, states, release)
    if args.json:
        print_json(
            {
                "release": release,
                "dry_run": args.dry_run,
                "summary": recompile.decision_summary(states),
                "targets": [s.to_json() for s in states],
            }
        )
    else:
        print(recompile.summary_line(release, states))
        for line in _lines(states):
            print(line)
        print(summary(release, states, args.dry_run, args.migrate))
    # 3: the release is unknown (nothing could be decided); 1: a rebuild failed or a row could not be
    # checked here; 4: a dry run that would rebuild something; else 0.
    if any(s.upgrade and s.upgrade["action"] == upgrades.UNKNOWN for s in states):
        return EXIT_REJECTED
    if any(s.outcome in (recompile.FAILED, recompile.NOT_ATTESTED) or s.status in UNDECIDED for s in states):
        return EXIT_FAILURE
    if args.dry_run and any(s.status == recompile.STALE for s in states):
        return EXIT_STALE
    return EXIT_OK


def _rebuild(store: Any, states: list[Any]) -> None:
    """Each stale row built here, in catalog order (`run`'s pipeline); one that fails is recorded as
    its store says (`settle`) and the next one still runs."""
    from neuronforge.farm import recompile
    from neuronforge.pipeline.runner import run_target
    from neuronforge.profiles.registry import parse_target

    for s in sorted((s for s in states if recompile.rebuildable(s)), key=lambda s: s.order):
        try:
            run_target(s.pinned, parse_target(s.target), store, settings.work_dir())
        except NeuronforgeError as exc:
            s.outcome, s.outcome_detail = recompile.FAILED, str(exc)
    recompile.settle(store, [s for s in states if s.outcome != recompile.FAILED])


def _lines(states: list[Any]) -> list[str]:
    from neuronforge.farm import recompile, upgrades

    out = []
    for s in sorted(states, key=lambda s: s.order):
        state = s.outcome or s.status
        why = f" ({s.outcome_detail or s.detail})" if state not in (recompile.FRESH, recompile.REBUILT) and (
            s.outcome_detail or s.detail
        ) else ""  # fmt: skip
        if s.migrated_from:
            out.append(f"  migration -> {s.slug} ({s.profile}): {state}{why}")
            continue
        decision = (s.upgrade or {}).get("sentence", "")
        out.append(f"{s.source} {s.slug} [{(s.upgrade or {}).get('family', '')}] {s.profile}: {decision}")
        if (s.upgrade or {}).get("action") != upgrades.UNKNOWN:  # nothing was checked for an unknown release
            out.append(f"  {state}{why}")
        if s.speed:
            out.append(f"  {recompile.speed_line(s)}")
    return out


def summary(release: str, states: list[Any], dry_run: bool, migrate: bool) -> str:
    """The last line: how many targets each decision took, and what was (or would be) built."""
    from neuronforge.farm import recompile, upgrades

    actions: dict[str, int] = {}
    for s in states:
        if s.upgrade and not s.migrated_from:
            actions[s.upgrade["action"]] = actions.get(s.upgrade["action"], 0) + 1
    proposed = sum(1 for s in states if s.upgrade and s.upgrade.get("migration") and not s.migrated_from)
    built = sum(1 for s in states if s.migrated_from)
    words = {
        upgrades.REBUILD: "to rebuild",
        upgrades.CURRENT: "up to date",
        upgrades.STAY: "staying (frozen for their family)",
        upgrades.PINNED: "pinned by the catalog",
        upgrades.UNSERVED: "not served by their line",
        upgrades.UNKNOWN: "unknown (release not in the profile data)",
        upgrades.NOTHING: "kept: nothing they read changed",
        upgrades.RESMOKE: "to re-smoke (kept: only what a load reads changed)",
        upgrades.REVERIFY: "to re-verify (kept: the consumer's re-trace decides)",
    }
    counted = ", ".join(f"{n} {words[a]}" for a, n in actions.items())
    migrations = f"; {proposed} migration(s) proposed" + (
        f", {built} added as builds" if migrate else " (--migrate builds them)"
    )
    checked = [s for s in states if (s.upgrade or {}).get("action") != upgrades.UNKNOWN]
    undecided = {status: n for status in UNDECIDED if (n := sum(s.status == status for s in checked))}
    unchecked = "; NOT CHECKED: " + ", ".join(f"{n} {UNDECIDED[k]}" for k, n in undecided.items()) if undecided else ""
    rebuilt = sum(s.outcome == recompile.REBUILT for s in states)
    failed = sum(s.outcome in (recompile.FAILED, recompile.NOT_ATTESTED) for s in states)
    attested = sum(s.outcome == recompile.ATTESTED for s in states)
    done = f"{rebuilt} rebuilt here" + (f", {attested} attested without compiling" if attested else "")
    tail = "dry run: nothing built" if dry_run else f"{done}, {failed} failed"
    return f"Neuron SDK {release}: {len(states)} row(s): {counted}{migrations if proposed else ''}{unchecked}; {tail}"


def _attest_options(p: argparse.ArgumentParser) -> None:
    from neuronforge.interfaces.cli.options import WORK_DIR_HELP, default_work_dir

    p.add_argument("key", metavar="KEY", help="the published build: its cache key or first 12 hex digits")
    p.add_argument(
        "--sdk",
        required=True,
        type=sdk_release,
        metavar="RELEASE",
        help="the Neuron SDK release to attest it at, e.g. 2.33.1",
    )
    p.add_argument("--work-dir", default=str(default_work_dir()), help=WORK_DIR_HELP)
    add_store_args(p)
    p.add_argument("--json", action="store_true", help=JSON_HELP)


def cmd_attest(args: argparse.Namespace) -> int:
    """Prove a published build at a newer SDK release without compiling (`farm.attest`): its smoke test
    here, where only what a load reads changed; where a library its consumer's key may hash changed, that
    consumer's re-trace in the release's interpreter first (`re-verify`); refused (exit 3) where the release
    asks a rebuild. The attestation is recorded passed or not; a failed one exits 3."""
    from neuronforge.artifacts.published import find_key
    from neuronforge.farm.attest import attest_build
    from neuronforge.farm.release_feed import known_table
    from neuronforge.profiles.sdk_releases import in_effect, known_release

    store = opened_store(args.store)
    key = find_key(store, args.key)
    with in_effect(known_table(store)):  # the table's releases and the store's accepted ones, as recompile
        known = known_release(args.sdk)
        if known is None:
            raise InvalidInput(
                f"--sdk {args.sdk}: not a released Neuron SDK the release table or the store's accepted releases "
                f"know ({advice.command('releases ls', store=store.root_uri)} lists them)"
            )
        release = known.version
        outcome = attest_build(store, key, release, Path(args.work_dir).expanduser())
    a = outcome.attestation
    if args.json:
        print_json(
            {"key": key, "release": release, "decision": outcome.decision, "attestation": a.model_dump() if a else None}
        )
    else:
        print(outcome.line)
    return EXIT_REJECTED if a is not None and not a.passed else EXIT_OK


COMMANDS = (
    Command(
        "attest",
        "prove a published build at a newer Neuron SDK release without compiling (its re-trace and smoke test there)",
        _attest_options,
        cmd_attest,
    ),
    Command(
        "recompile",
        "upgrade the catalog to a Neuron SDK release: rebuild, stay frozen, or migrate, target by target",
        _options,
        cmd_recompile,
    ),
)
