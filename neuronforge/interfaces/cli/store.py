"""The store commands: what a store holds and whether it is sound. `ls` the published artifacts, `show`
one's manifest, `verify` one (or the farm index against the manifests), `index rebuild`, `gc` older
compilers' artifacts, and `store ls` its raw objects. An artifact is named by its cache key, a unique
prefix of one (`artifacts.published.find_key`), or its manifest or folder URI, and opened one way
whatever the name (`artifacts.opening.open_artifact`): checked, and its damage recorded, as by its key."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from neuronforge.common.errors import InvalidInput
from neuronforge.common.secrets import print_line
from neuronforge.interfaces.cli.command import Command
from neuronforge.interfaces.cli.exit_codes import EXIT_FAILURE, EXIT_OK, EXIT_REJECTED
from neuronforge.interfaces.cli.options import (
    JSON_HELP,
    WORK_DIR_HELP,
    add_store_args,
    complete_instances,
    complete_profiles,
    completes,
    default_work_dir,
    location,
    opened_store,
    print_json,
    store_help,
    whole,
)


# -- artifacts by key or URI ------------------------------------------------------------------------
def _say_unrecorded(opened: Any) -> None:
    """A folder its store's index does not name (a copy) is checked as itself: one line says that what
    is found there is not recorded, rather than silence."""
    if opened.unrecorded:
        print_line(f"warning: {opened.unrecorded}")


def _output_uris(store: Any, prefix: str, formats: dict[str, str]) -> dict[str, str]:
    """Where each output of the artifact is: `published.format_uris` below its folder; for a store
    opened at the artifact's own folder (a URI was given), its paths (or old manifests' URIs) as they are."""
    from neuronforge.artifacts.published import format_uris

    if prefix:
        return format_uris(store, prefix, formats)
    return {name: str(where) if "://" in str(where) else store.uri(str(where)) for name, where in formats.items()}


# -- ls ---------------------------------------------------------------------------------------------
def _ls_options(p: argparse.ArgumentParser) -> None:
    add_store_args(p, positional=True)
    p.add_argument("--limit", type=whole(1, 10_000), default=50, help="rows per page (default 50)")
    p.add_argument("--offset", type=whole(0, 10**12), default=0, help="rows to skip (the previous page's 'next page')")
    p.add_argument("--model", help="only models whose source contains this (any case)")
    completes(p.add_argument("--profile", help="only this serving profile (name, or name@version)"), complete_profiles)
    completes(p.add_argument("--instance", help="only this instance type"), complete_instances)
    p.add_argument(
        "--status",
        choices=["published", "stale", "smoke-failed", "failed", "building", "damaged"],
        help="builds in this state (default: published artifacts, stale or found damaged since, and damaged rows)",
    )
    p.add_argument("--check", action="store_true", help="also list each shown artifact's files (one request each)")
    p.add_argument("--json", action="store_true", help=JSON_HELP)


def cmd_ls(args: argparse.Namespace) -> int:
    """A page of the store's published artifacts, from the farm index (the head, the tail and the
    pages shown: a handful of requests however large the farm); `--check` lists each shown
    artifact's folder to say whether its files are all there (one request per row), and records the
    damage it finds. A damaged artifact is listed with the reason."""
    from neuronforge.farm.rows import FarmQuery, farm_page
    from neuronforge.spec.source import model_ref

    store = opened_store(args.store)
    query = FarmQuery(model=args.model, profile=args.profile, instance=args.instance, status=args.status)
    if not args.status:
        query.published_only = True
    page = farm_page(store, query, offset=args.offset, limit=args.limit)
    rows = []
    for r in page.rows:
        row = {
            "cache_key": r.key,
            "status": r.status,
            "model": r.model,
            "revision": r.revision,
            "profile": r.profile,
            "target": r.target,
            "instance": r.instance,
            "published_at": r.at if r.manifest_uri else "",
            "manifest_uri": r.manifest_uri,
            "message": r.message,
            "channels": r.channels,
            "review": r.review,
            "attested": r.attested,  # the newer SDK releases it is attested for (`recompile --sdk`)
            "damage": r.damage,
            # the optimum-neuron cache repository it is registered in (None: none); did optimum's lookup find it
            "hub_registry": r.hub_registry or None,
            "hub_registry_found": r.hub_registry_found,
        }
        if args.check and r.manifest_uri and r.status != "damaged":
            row.update(_checked_row(store, r.key, r.manifest_uri.removeprefix(store.root_uri).strip("/")))
        rows.append(row)
    if args.json:
        print_json(rows)
        return EXIT_OK
    if rows:  # KEY is what `show` and `verify` take
        print(f"{'KEY':<12}  {'STATUS' if args.status else 'PUBLISHED':<20}  {'PROFILE':<22} {'TARGET':<40} MODEL")
    for r in rows:
        state = ""
        if r.get("complete") is False:
            lacking = len(r["missing_or_truncated"])
            state = f"  INCOMPLETE: {lacking} file(s) missing or truncated" if lacking else "  INCOMPLETE"
        when = r["status"] if r["status"] == "damaged" else r["published_at"] or r["status"]
        if r["channels"]:
            state += f"  [{', '.join(r['channels'])}]"
        if r["attested"]:
            state += f"  attested {', '.join(r['attested'])}"
        if r["status"] == "damaged":
            state += f"  DAMAGED: {r['message']}"
        if r["review"] != "pending":
            served = " BUT A CHANNEL POINTS TO IT" if r["channels"] and r["review"] == "rejected" else ""
            state += f"  {r['review'].upper() if r['review'] == 'rejected' else r['review']}{served}"
        print(
            f"{r['cache_key'][:12]:<12}  {when:<20}  {r['profile'] or '-':<22} {r['target']:<40} "
            f"{model_ref(r['model'], r['revision'])}{state}"
        )
    what = f"{args.status} build(s)" if args.status else "published artifact(s)"
    more = page.total is None and len(rows) == args.limit
    if page.total is None:
        shown = f"{len(rows)}{' (more match)' if more else ''}"
    else:
        shown = f"{len(rows)} of {page.total}" if len(rows) < page.total else f"{page.total}"
    broken = sum(r.get("complete") is False for r in rows)
    tail = f" ({broken} incomplete: run neuronforge verify on them)" if broken else ""
    damaged = sum(r["status"] == "damaged" for r in rows)
    if damaged and args.status != "damaged":
        tail += f" ({damaged} DAMAGED: each row says why)"
    print(f"{shown} {what} in {store.root_uri}{tail}")
    if more or (page.total is not None and args.offset + len(rows) < page.total):
        print(f"next page: --offset {args.offset + len(rows)}")
    return EXIT_OK


def _checked_row(store: Any, key: str, manifest_key: str) -> dict[str, Any]:
    """`ls --check` of one row: the artifact opened as every reader opens it (`opening.open_published`),
    its pointer as the farm index holds it (the row's manifest: one GET, one listing), what is damaged
    recorded and shown as the next `ls` shows it."""
    from neuronforge.artifacts.opening import open_published
    from neuronforge.artifacts.published import Damage
    from neuronforge.farm.rows import damage_message
    from neuronforge.records.index_entry import IndexEntry

    opened = open_published(store, key, by="ls --check", index=IndexEntry(cache_key=key, manifest=manifest_key))
    if opened is None or not opened.damaged:
        return {"complete": True, "missing_or_truncated": []}
    found = opened.found
    lacking = [f"{path}: missing or wrong size" for path in found.missing] if isinstance(found, Damage) else []
    out: dict[str, Any] = {"complete": False, "missing_or_truncated": lacking}
    if opened.record is not None:
        damage = opened.record.summary()
        out.update(status="damaged", message=damage_message(damage), damage=damage)
    return out


# -- show -------------------------------------------------------------------------------------------
def _show_release(store: Any, manifest: Any) -> None:
    """The build's review decision, the channels pointing to it (its model's channels: one listing) and
    its attestations at newer SDK releases (one read); nothing for a manifest outside a store's layout."""
    from neuronforge.artifacts import attestations, channels, reviews
    from neuronforge.common import advice
    from neuronforge.farm.releases import move_away

    if store is None:
        return
    key = manifest.cache_key
    review = reviews.review_of(store, key)
    held = channels.records_pointing_to(store, key, manifest)
    if review is None:
        approve = advice.command("approve", key[:12], store=store.root_uri)
        reject = advice.command("reject", key[:12], reason="why", store=store.root_uri)
        print(f"review     pending ({approve} / {reject})")
    else:
        d = review.current
        word = "REJECTED" if d.state == "rejected" else d.state
        print(f"review     {word} by {d.by} at {d.at}" + (f": {d.reason}" if d.reason else ""))
    names = [f"{r.model} · {r.profile_line} · {r.channel}" for r in held]
    print(f"channels   {', '.join(names) if held else '(none)'}")
    _show_attestations(attestations.attestations_of(store, key))
    if review is not None and review.state == "rejected":
        for name, r in zip(names, held, strict=True):
            print(f"WARNING    {name} points to this REJECTED build: {move_away(store, r)}")


def _amount(name: str, value: float) -> str:
    """A figure's value in its unit: tokens per second, else seconds (milliseconds below one)."""
    from neuronforge.records.smoke import TOKENS_PER_S

    if name == TOKENS_PER_S:
        return f"{value:.1f} tok/s"
    return f"{value:.2f} s" if abs(value) >= 1 else f"{value * 1e3:.2f} ms"


def measurement_lines(measurement: Any) -> list[str]:
    """The smoke protocol's figures as `show` prints them: how and where they were measured, then per
    figure its median and p10–p90 (and spread) over the repetitions; "SYNTHETIC" when a fake consumer
    produced them. None (a build from before the protocol): no lines."""
    from neuronforge.records.smoke import FIGURE_TITLES, FIGURES

    if measurement is None:
        return []
    m, h = measurement, measurement.host
    what = "SYNTHETIC (a fake consumer: proves the mechanism, not a Neuron device); " if m.synthetic else ""
    lines = [
        f"{what}{m.repetitions} repetition(s) after {m.warmup} warm-up, batch {m.batch_size}, "
        f"prompts of {m.short_prompt_tokens} and {m.long_prompt_tokens} tokens, {m.new_tokens} new; "
        f"on {h.instance_type or '?'} ({h.cores} cores, load {h.load_average:.2f}), {h.runtime_line or '?'}"
    ]
    for name in FIGURES:
        f = m.figures.get(name)
        if f is None:
            continue
        spread = f", spread {f.spread:.0%}" if f.spread is not None else ""
        lines.append(
            f"  {FIGURE_TITLES[name]}: {_amount(name, f.median)} "
            f"(p10–p90 {_amount(name, f.p10)}–{_amount(name, f.p90)}, {f.samples} sample(s){spread})"
        )
    return lines


def _show_attestations(record: Any) -> None:
    """The newest attestation of each release, newest first: what `recompile --sdk` proved of the build
    at that release without compiling (a later failure of a release revokes its pass)."""
    seen: set[str] = set()
    for a in record.attestations if record is not None else []:
        if a.release in seen:
            continue
        seen.add(a.release)
        word = "passed" if a.passed else "FAILED"
        found = f", {len(a.keys_found)} key(s) found" if a.keys_found else ""
        missing = f", {len(a.keys_missing)} MISSING" if a.keys_missing else ""
        print(
            f"attested   SDK {a.release}: {a.run} {word} on {a.host or '?'} at {a.at or '?'}{found}{missing}"
            + (f": {a.detail}" if a.detail else "")
        )
        for line in measurement_lines(a.measurement):
            print(f"{'':<10}   {line}")
    if not seen:
        print("attested   (none: only its own SDK release)")


def _show_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "ref",
        metavar="KEY_OR_URI",
        help="a cache key, a unique prefix of one (>= 6 hex characters; `ls` prints 12), "
        "or the URI of a manifest.json or of an artifact root",
    )
    add_store_args(p)
    p.add_argument("--json", action="store_true", help="print the manifest as stored")


def cmd_show(args: argparse.Namespace) -> int:
    """The manifest, readably; a damaged artifact, however it is named, is refused in one line (and
    recorded in the farm index: `opening.open_artifact`)."""
    from neuronforge.artifacts.opening import open_artifact
    from neuronforge.spec.source import model_name, model_ref

    opened = open_artifact(args.ref, args.store, by="show")
    _say_unrecorded(opened)
    store, key, prefix, m = opened.store, opened.manifest_key, opened.prefix, opened.manifest
    assert m is not None  # a manifest that does not read is refused
    if args.json:
        print_json(m.as_stored())
        return EXIT_OK
    from neuronforge.common.stored_numbers import finite

    smoke = m.smoke
    # the shown parts as the store holds them: one of another type prints as "?", never a traceback
    target = m.hashed_target
    print(f"artifact   {store.uri(key).rsplit('/', 1)[0]}")
    print(f"cache key  {m.cache_key}")
    print(f"model      {model_ref(model_name(m.source.model_dump()), m.source.revision)}")
    batch, sequence = target.get("batch_size", "?"), target.get("sequence_length", "?")
    print(f"target     {m.target_slug} (batch {batch}, sequence {sequence})")
    if m.profile is not None:
        prof = m.profile
        print(f"profile    {prof.ref} (SDK {prof.sdk_release}): {prof.title}")
    tc = m.toolchain
    print(f"toolchain  {tc.backend} {tc.backend_version}, {tc.compiler} {tc.compiler_version}")
    if m.consumer_versions is not None:
        print(f"loads in   {' · '.join(f'{k} {v}' for k, v in m.consumer_versions.items())} (exactly these)")
    if m.hub_registry is not None:
        r = m.hub_registry
        said = "returns it" if r.lookup.found else f"does NOT return it: {r.lookup.reason}"
        print(f"registry   {r.repo_id} at {r.endpoint}: optimum-neuron's lookup {said}")
        print(f"           {r.entry_path}")
    print(f"flags      {' '.join(m.compiler_flags) or '(none)'}")
    print(f"smoke      {'passed' if smoke.passed else 'FAILED'}: {smoke.reason}")
    load, first, per = (finite(v) for v in (smoke.load_s, smoke.time_to_first_token_s, smoke.per_token_s))
    if load is not None and first is not None and per is not None:
        print(f"           load {load:.2f}s, first token {first * 1e3:.1f} ms, {per * 1e3:.2f} ms/token")
    for i, line in enumerate(measurement_lines(smoke.measurement)):
        print(f"{'measured' if i == 0 else '':<10} {line}")
    _show_release(None if opened.unrecorded else store, m)

    for i, line in enumerate(m.hosts.describe()):
        print(f"{'hosts' if i == 0 else '':<10} {line}")
    from neuronforge.records.transfers import describe as transfer_lines

    for i, line in enumerate(transfer_lines(m.transfers)):
        print(f"{'transfers' if i == 0 else '':<10} {line}")
    print(f"files      {len(m.files)} ({m.size_bytes} bytes), published {m.published_at}")
    outputs = _output_uris(store, prefix, m.formats)
    width = max(map(len, outputs), default=0)
    for i, (name, uri) in enumerate(outputs.items()):
        print(f"{'outputs' if i == 0 else '':<10} {name:<{width}}  {uri}")
    return EXIT_OK


# -- verify -----------------------------------------------------------------------------------------
def _verify_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "ref",
        nargs="?",
        metavar="KEY_OR_URI",
        help="the artifact: a cache key, a unique prefix of one (>= 6 hex characters), or the URI "
        "of its manifest.json or folder; none: check the store's farm index against its manifests, both ways",
    )
    p.add_argument(
        "--store",
        dest="store_opt",
        nargs="?",
        const="",
        type=location,
        metavar="URI",
        help=store_help("where a cache key is looked up, or (without KEY_OR_URI) whose farm index is checked"),
    )
    p.add_argument(
        "--repair",
        action="store_true",
        help="with --store: scrub the store a page at a time — check each artifact (pointer, manifest, sizes), "
        "record what is damaged, index again what the farm index lacks — resuming where the last scrub stopped",
    )
    p.add_argument(
        "--cursor",
        type=_scrub_cursor,
        metavar="KEY",
        help="--repair: start after this cache key (the last scrub's 'next page'); '' starts a new pass "
        "(default: where the last scrub, the daily DAG's included, stopped)",
    )
    p.add_argument(
        "--page-size",
        type=whole(1, 10_000),
        default=200,
        metavar="N",
        help="--repair: index pointers per page (default 200)",
    )
    p.add_argument(
        "--pages", type=whole(1, 10_000), default=1, metavar="N", help="--repair: pages in this call (default 1)"
    )
    p.add_argument("--work-dir", default=str(default_work_dir()), help=WORK_DIR_HELP)
    p.add_argument(
        "--retrace",
        action="store_true",
        help="also re-run the consumer's start-up in its SDK image's interpreter, no device, compiling "
        "forbidden (vllm-neuron-native: on a CPU worker of queue neuron-compile-<sdk>)",
    )
    p.add_argument("--json", action="store_true", help=JSON_HELP)


def _scrub_cursor(raw: str) -> str:
    """`--cursor`, checked by the scrub's own rule (`scrub.cursor_problem`) before the store is opened."""
    from neuronforge.farm.scrub import cursor_problem

    if (problem := cursor_problem(raw.strip().lower())) is not None:
        raise argparse.ArgumentTypeError(f"{problem}: give the one the last scrub printed, or none")
    return raw


def cmd_verify_store(args: argparse.Namespace) -> int:
    from neuronforge.artifacts import farm_index

    store = opened_store(args.store)
    problems = farm_index.check(store)
    if args.json:
        print_json({"store": store.root_uri, "ok": not problems, "problems": problems})
    else:
        for problem in problems:
            print(f"  FAIL {problem}")
        print(f"ok: the farm index of {store.root_uri} matches the manifests" if not problems else "FAILED")
    return EXIT_REJECTED if problems else EXIT_OK


def cmd_verify_repair(args: argparse.Namespace) -> int:
    """`verify --store URI --repair`: one bounded, resumable call of the integrity scrub
    (`neuronforge.farm.scrub`); exits 3 when it found a damaged artifact."""
    from neuronforge.farm.scrub import scrub

    store = opened_store(args.store)
    store.probe(write=True)
    report = scrub(store, args.cursor, page_size=args.page_size, pages=args.pages)
    if args.json:
        print_json(report.to_json())
    else:
        from neuronforge.common import advice

        why = advice.command("ls", status="damaged", store=store.root_uri)
        for key in report.damaged_keys:
            print(f"  DAMAGED {key[:12]} ({why} says why)")
        print(report.line())
    return EXIT_REJECTED if report.damaged else EXIT_OK


def cmd_verify(args: argparse.Namespace) -> int:
    from neuronforge.artifacts.opening import is_key_ref, open_artifact
    from neuronforge.farm.verify import verify_artifact

    if args.repair or args.cursor is not None:
        if args.ref or args.retrace:
            raise InvalidInput("--repair scrubs a whole store a page at a time: give --store URI, not an artifact")
        return cmd_verify_repair(args)
    if not args.ref:  # the store's farm index against its manifests
        if args.retrace:
            raise InvalidInput("--retrace is for an artifact: give its cache key (or prefix) or URI")
        return cmd_verify_store(args)
    if args.store_opt is not None and not is_key_ref(args.ref):
        raise InvalidInput(
            "verify takes an artifact URI or --store, not both (--store is where a cache key is looked up)"
        )
    # however named, a store's own artifact: what the re-hash finds is recorded in its farm index
    opened = open_artifact(args.ref, args.store, by="verify", deep=True)
    _say_unrecorded(opened)
    work_dir = Path(args.work_dir).expanduser()
    result = verify_artifact(opened.store, opened.manifest_key, work_dir, retrace=args.retrace, opened=opened)
    if args.json:
        print_json(result.to_json())
    else:
        print(f"artifact  {result.artifact_uri}")
        print(f"profile   {result.profile}")
        print(f"files     {result.files} checked against the manifest (size and sha256)")
        if result.retraced is not None:
            print(
                "retrace   the serving command traced again in the toolchain's interpreter, compiling forbidden"
                if result.retraced
                else "retrace   not applicable: the profile has no start-up re-trace"
            )
        for problem in result.problems:
            print(f"  FAIL {problem}")
        print("ok: the files match and the consumer's load-time rules hold" if result.ok else "FAILED")
    return EXIT_OK if result.ok else EXIT_REJECTED


# -- index rebuild ----------------------------------------------------------------------------------
def _index_rebuild_options(p: argparse.ArgumentParser) -> None:
    add_store_args(p, positional=True)
    p.add_argument("--json", action="store_true", help=JSON_HELP)


def cmd_index(args: argparse.Namespace) -> int:
    """`index rebuild`: the farm index written afresh from the manifests (a full scan, once)."""
    from neuronforge.artifacts import farm_index

    store = opened_store(args.store)
    store.probe(write=True)
    skipped: list[Any] = []
    head = farm_index.rebuild(store, skipped)
    summary = {"store": store.root_uri, "rows": head.rows, "pages": len(head.pages), "seq": head.seq}
    for s in skipped:
        print_line(f"warning: skipped {store.uri(s.index_key)}: {s.problem}")
    if args.json:
        print_json(summary)
    else:
        left_out = f"; {len(skipped)} index pointer(s) left out, not artifacts (warnings above)" if skipped else ""
        print(f"farm index of {store.root_uri} rebuilt: {head.rows} row(s) in {len(head.pages)} page(s){left_out}")
    return EXIT_OK


# -- gc ---------------------------------------------------------------------------------------------
def _gc_options(p: argparse.ArgumentParser) -> None:
    add_store_args(p, positional=True)
    p.add_argument(
        "--keep-compilers", type=whole(1, 1_000), required=True, metavar="N", help="newest compiler versions to keep"
    )
    p.add_argument(
        "--catalog", help="catalog whose pins are kept (default: NEURONFORGE_CATALOG or catalog/models.yaml)"
    )
    p.add_argument("--dry-run", action="store_true", help="print what would be deleted, delete nothing")
    p.add_argument("--json", action="store_true", help=JSON_HELP)


def cmd_gc(args: argparse.Namespace) -> int:
    from neuronforge.farm.catalog import check_catalog
    from neuronforge.farm.gc import collect

    catalog = check_catalog(Path(args.catalog).expanduser() if args.catalog else None)
    store = opened_store(args.store)
    report = collect(store, args.keep_compilers, catalog, dry_run=args.dry_run)
    # never "done" over artifacts it could not decide: exit 1 while any is unconfirmed or blocked
    if args.json:
        print_json(report.to_json())
        return EXIT_FAILURE if report.undecided else EXIT_OK
    verb = "would delete" if args.dry_run else "deleted"
    for compiler, versions in sorted(report.keep.items()):
        print(f"keep {compiler}: {', '.join(versions)}")
    for c in report.channel_kept:
        print(f"kept by channels {c['key'][:12]}: {', '.join(c['channels'])}")
    for p in report.pinned:
        print(f"kept (catalog pin {p['compiler_version']}): {p['manifest']}")
    for d in report.deleted:
        print(f"{verb} {d['prefix']} ({d['compiler_version']})")
    for cdir in report.cache_dirs_deleted:
        print(f"{verb} compile cache {cdir}")
    for t in report.tmp_deleted:
        print(f"{verb} upload leftover {t['key']} ({t['bytes']} bytes, {t['age_hours']} h old)")
    for u in report.unconfirmed:
        print(f"LEFT ALONE {u['manifest']} ({u['compiler_version']}): {u['why']}")
    for bad in report.unreadable_channels:
        n = sum(b["channels"] == bad["channels"] for b in report.blocked)
        print(
            f"LEFT ALONE {n} build(s) of {bad['channels']}: a channel record does not read ({bad['why']}); "
            "restore or remove it, then run gc again"
        )
    for lost in report.lost_by_channels:
        print(
            f"ERROR {lost['key'][:12]} was deleted while {', '.join(lost['channels'])} moved onto it: "
            "promote or roll back that channel again"
        )
    line = f"{len(report.deleted)} artifact(s) {verb}, {report.kept} kept"
    if report.unconfirmed:
        from neuronforge.common import advice

        verify = advice.command("verify", store=store.root_uri)
        rebuild = advice.command("index rebuild", store=store.root_uri)
        line += (
            f"; {len(report.unconfirmed)} of them NOT COLLECTED: due for deletion by the farm index, but their "
            f"manifest does not confirm it (check with {verify}, then {rebuild})"
        )
    if report.blocked:
        line += f"; {len(report.blocked)} NOT COLLECTED: a channel record of their model does not read"
    print(line)
    return EXIT_FAILURE if report.undecided else EXIT_OK


# -- store ls ---------------------------------------------------------------------------------------
def _store_ls_options(p: argparse.ArgumentParser) -> None:
    add_store_args(p, positional=True)
    p.add_argument("prefix", nargs="?", default=None, help="only keys under this folder-like prefix")
    p.add_argument(
        "--limit", type=whole(1, 100_000), default=1000, help="objects per page (default 1000: one S3 request)"
    )
    p.add_argument("--start-after", metavar="KEY", help="list keys after this one (the previous page's last)")
    p.add_argument("--json", action="store_true", help=JSON_HELP)


def cmd_store_ls(args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise InvalidInput("--limit must be at least 1")
    store = opened_store(args.store)
    objects = store.list_page(args.prefix or "", start_after=args.start_after or "", limit=args.limit)
    if args.json:
        print_json([{"key": o.key, "size": o.size, "uri": store.uri(o.key)} for o in objects])
    else:
        for o in objects:
            print(f"{o.size:>14}  {o.key}")
        print(f"{len(objects)} objects, {sum(o.size for o in objects)} bytes under {store.uri(args.prefix or '')}")
        if len(objects) == args.limit:
            print(f"next page: --start-after {objects[-1].key}")
    return EXIT_OK


COMMANDS = (
    Command(
        "store",
        "inspect a store",
        subcommands=(
            Command("ls", "list objects under a store URI, a page at a time", _store_ls_options, cmd_store_ls),
        ),
    ),
    Command("show", "print a published artifact's manifest readably", _show_options, cmd_show),
    Command(
        "gc",
        "prune artifacts of older compiler versions (catalog pins and channels' builds are kept)",
        _gc_options,
        cmd_gc,
    ),
    Command(
        "verify",
        "re-hash a published artifact and run its profile's consumer preflight; without one, check the "
        "store's farm index against its manifests",
        _verify_options,
        cmd_verify,
    ),
    Command("ls", "list the published artifacts of a store, a page at a time", _ls_options, cmd_ls),
    Command(
        "index",
        "the store's farm index (what ls and the catalog page read)",
        subcommands=(
            Command(
                "rebuild",
                "write the farm index afresh from the manifests (a full scan)",
                _index_rebuild_options,
                cmd_index,
            ),
        ),
    ),
)
