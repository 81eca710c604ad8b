# PYTHON_ARGCOMPLETE_OK
"""`neuronforge` command line.

Every command that takes a target defaults to the same serving profile (`settings.default_profile()`:
NEURONFORGE_PROFILE, else `cpu`); every command that reads or writes a store defaults to the same store
(`settings.store_uri()`: NEURONFORGE_STORE, else the local store under NEURONFORGE_HOME). The exit codes
are a contract later tooling relies on: `ExitCode` (in `neuronforge.common.errors`, where each error class names
its own) and `EXIT_CODES` below are their one table (printed at the end of `neuronforge --help`). Which
error ends in which code and line is `errors.outcome`'s to say, for `main` and the DAG's tasks alike.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
from pathlib import Path
from typing import Any

from neuronforge.common import errors, settings
from neuronforge.common.errors import CheckpointError, ExitCode, InvalidInput, NeuronforgeError

# The one exit-code table: what each code means, per command where it differs.
EXIT_CODES: dict[ExitCode, str] = {
    ExitCode.OK: "success; for `plan`, the configuration is valid and fits",
    ExitCode.FAILURE: "a store or environment failure (unreachable store or Hub, full disk, ...); for `catalog "
    "stale`, `catalog check` and `gc`: some items could not be checked or handled (source unresolved, no toolchain "
    'here, config unavailable, a manifest not confirming the index): the summary line counts them, never "ok" '
    "over them",
    ExitCode.USAGE: "usage error: unknown instance or profile, malformed value, missing file, unknown key",
    ExitCode.REJECTED: "`plan`/`run`: the configuration is invalid or does not fit (or `run`'s smoke test failed); "
    "`fetch`/`quantize`: the checkpoint failed verification; `verify`: a file does not match the manifest, "
    "the farm index disagrees with the manifests, or the profile's consumer would refuse the artifact; "
    "`catalog check`: the catalog has problems",
    ExitCode.STALE: "`catalog stale`: some catalog target has no artifact for the current toolchain",
}
EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_REJECTED, EXIT_STALE = (
    ExitCode.OK,
    ExitCode.FAILURE,
    ExitCode.USAGE,
    ExitCode.REJECTED,
    ExitCode.STALE,
)

# Options whose value may start with `-` (`--compiler-flags "-O1"`): argparse would take the value for an
# option, so `main` joins them to `--option=value` before parsing.
DASH_VALUE_OPTIONS = ("--compiler-flags", "--prompt")
JSON_HELP = "print JSON instead of text"
WORK_DIR_HELP = "local work dir for downloads and builds (default: $NEURONFORGE_HOME/work)"


def _default_work_dir() -> Path:
    """The one default work dir, the same the DAG's tasks use (`settings.work_dir()`)."""
    return settings.work_dir()


def _store_help(what: str = "store URI: file:///path, a path, or s3://bucket/prefix") -> str:
    return f"{what} (default: $NEURONFORGE_STORE, else the local store $NEURONFORGE_HOME/store: {settings.store_uri()})"


def _add_store_args(p: argparse.ArgumentParser, *, positional: bool = False) -> None:
    """`--store URI` (and, where the store was a positional argument, an optional positional STORE);
    `_resolve_store` turns them into `args.store`, the default store when neither is given."""
    if positional:
        p.add_argument("store_pos", nargs="?", metavar="STORE", help=_store_help("store URI, the same as --store"))
    p.add_argument("--store", dest="store_opt", metavar="URI", help=_store_help())


def _resolve_store(args: argparse.Namespace) -> None:
    """`args.store`: the store a command reads or writes (given, else NEURONFORGE_STORE, else local)."""
    if not hasattr(args, "store_opt"):
        return
    pos = getattr(args, "store_pos", None)
    if pos and args.store_opt:
        if getattr(args, "prefix", "") is None:  # `store ls --store URI PREFIX`: the one positional is the prefix
            args.prefix, pos = pos, None
        elif pos != args.store_opt:
            raise InvalidInput(f"two stores given ({pos} and --store {args.store_opt}): give one")
    args.store = settings.store_uri(args.store_opt or pos)


def _profile_help() -> str:
    return (
        "serving profile: the stack that will load the artifact (`neuronforge profiles` lists them; default: "
        f"$NEURONFORGE_PROFILE, else {settings.DEFAULT_PROFILE}: {settings.default_profile()}). `plan` checks "
        "the Neuron instance's limits for every profile, cpu included: the same checks `run` applies"
    )


def _completes(action: argparse.Action, completer: Any) -> None:
    """Tab completion of the option's values (argcomplete reads `action.completer`)."""
    action.completer = completer  # type: ignore[attr-defined]


def _complete_profiles(**_: Any) -> list[str]:
    from neuronforge.profiles.registry import profile_names

    return profile_names()


def _complete_instances(**_: Any) -> list[str]:
    from neuronforge.spec.instances import INSTANCES

    return list(INSTANCES)


def _add_target_args(p: argparse.ArgumentParser, spec: Any = None) -> None:
    """A flag for each target input `TargetSpec` (or `spec`) declares one for (`Declared.flag`), in its
    order, with its help; required when the field is. `--profile` defaults to the CLI's one default profile."""
    from neuronforge.spec.target import target_inputs

    for inp in target_inputs(spec).values():
        if inp.declared.flag is None:
            continue
        kwargs: dict[str, Any] = {"help": inp.declared.help}
        if inp.schema["type"] in ("integer", ["null", "integer"]):
            kwargs["type"] = int
        if "array" in inp.schema["type"]:
            kwargs.update(nargs="+", metavar=inp.declared.metavar)
        if inp.required:
            kwargs["required"] = True
        elif inp.name == "profile":
            kwargs.update(default=settings.default_profile(), help=_profile_help())
        elif isinstance(inp.default, int | str) and inp.declared.form_spelling is None:
            kwargs.update(default=inp.default, help=f"{inp.declared.help} (default {inp.default})")
        action = p.add_argument(inp.declared.flag, **kwargs)
        if inp.name == "profile":
            _completes(action, _complete_profiles)
        elif inp.declared.choices is not None:
            _completes(action, _choices_completer(inp.declared.choices))


def _choices_completer(choices: Any) -> Any:
    """Tab completion of a declared input's choices (the instance types, the quantizations, ...)."""
    return lambda **_: [str(c) for c in choices() if c is not None]


def _target_values(args: argparse.Namespace, spec: Any = None) -> dict[str, Any]:
    """What the target flags gave, under their fields' names (a flag left out: the field's default)."""
    from neuronforge.spec.target import target_inputs

    given = {inp.name: getattr(args, inp.dest) for inp in target_inputs(spec).values() if inp.dest}
    return {name: value for name, value in given.items() if value is not None}


def _target(args: argparse.Namespace):
    """The target the flags give, validated and its profile pinned."""
    from neuronforge.profiles import parse_target

    return parse_target(_target_values(args))


def _print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, sort_keys=False))


# -- plan -------------------------------------------------------------------------------------------
def cmd_plan(args: argparse.Namespace) -> int:
    from neuronforge.checkpoints.checkpoint import read_safetensors_header
    from neuronforge.pipeline.planner import gib, plan
    from neuronforge.spec.modelconfig import ModelArch, load_config
    from neuronforge.stores.base import refuse_credentials

    refuse_credentials(args.model, "--model")
    if args.model.strip().startswith("builtin:"):  # the embedded model: its folder, generated here on first use
        from neuronforge.pipeline.stages.resolve import local_folder
        from neuronforge.spec.source import ModelSource

        model = local_folder(ModelSource.parse(args.model))
    else:
        model = Path(args.model).expanduser()
    if not model.exists():
        hint = (
            " (plan reads a local folder, a config.json or builtin:tiny-llama; fetch or run take Hub ids, s3:// URIs)"
        )
        raise InvalidInput(
            f"--model {args.model}: no such folder or config.json file{hint if '://' in args.model else ''}"
        )
    target = _target(args)
    try:
        config = load_config(model)
    except CheckpointError as exc:
        raise InvalidInput(str(exc)) from None
    try:
        arch = ModelArch.from_config(config, where=str(model))
    except InvalidInput as exc:
        if args.json:
            _print_json({"fits": False, "error": str(exc), "checks": []})
        else:
            print(f"error: {exc}", file=sys.stderr)
        return EXIT_REJECTED
    tensors = None
    if model.is_dir() and (shards := sorted(model.glob("*.safetensors"))):
        tensors = {}
        for shard in shards:
            tensors.update(read_safetensors_header(shard))
    result = plan(arch, target, tensors=tensors, with_suggestions=args.suggest)
    if args.json:
        _print_json(result.to_json())
    else:
        print(
            f"{arch.architecture} ({result.parameter_count / 1e9:.2f}B parameters) on {target.instance_type}, "
            f"tp={target.tp_degree}, batch {target.batch_size}, sequence {target.sequence_length}, {target.dtype}"
            + (f", {target.quantization.slug}" if target.quantization.enabled else "")
        )
        print(
            f"  weights {gib(result.weight_bytes)}, KV cache {gib(result.kv_cache_bytes)}, "
            f"per core {gib(result.per_core_bytes)} of {gib(result.hbm_per_core_bytes)}"
        )
        for c in result.checks:
            print(f"  [{'ok' if c.ok else 'FAIL'}] {c.name}: {c.message}")
        if result.suggestions is not None:
            print("feasible configurations (largest batch per tp and sequence length):")
            for s in result.suggestions:
                print(
                    f"  tp={s.tp:<3} seq_len={s.seq_len:<7} batch_size={s.batch_size:<4} {gib(s.per_core_bytes)}/core"
                )
            if not result.suggestions:
                print("  none on this instance")
    return EXIT_OK if result.ok else EXIT_REJECTED


# -- fetch ------------------------------------------------------------------------------------------
def cmd_fetch(args: argparse.Namespace) -> int:
    import os

    from neuronforge.pipeline.stages.fetch import FetchRequest, fetch, fetch_summary

    req = FetchRequest(
        source=args.source,
        store_uri=args.store,
        work_dir=Path(args.work_dir).expanduser(),
        allow_pickle=args.allow_pickle,
        token=os.environ.get("HF_TOKEN"),
    )
    result = fetch(req)
    summary = fetch_summary(result)
    if args.json:
        _print_json(summary)
    else:
        state = "already in the store (verified)" if result.reused else "fetched and verified"
        print(f"{summary['source']}: {state}")
        print(f"  revision  {summary['revision']}")
        print(f"  files     {summary['files']} ({summary['bytes']} bytes), {summary['architecture']}")
        print(f"  manifest  {summary['manifest_uri']}")
        print(f"  local     {summary['local_dir']}")
        for w in result.warnings:
            print(f"  warning   {w}")
    return EXIT_OK


# -- quantize ---------------------------------------------------------------------------------------
def cmd_quantize(args: argparse.Namespace) -> int:
    import os

    from neuronforge.pipeline.stages.fetch import FetchRequest, fetch
    from neuronforge.pipeline.stages.quantize import QuantizeRequest, quantize
    from neuronforge.spec.target import Quantization
    from neuronforge.stores import open_store

    quantization = Quantization.parse(f"{args.dtype}:{args.method}")  # bad dtype/method: before any work
    work_dir = Path(args.work_dir).expanduser()
    store = open_store(args.store)
    fetched = fetch(FetchRequest(args.source, args.store, work_dir, token=os.environ.get("HF_TOKEN")), store)
    req = QuantizeRequest(
        fetched.local_dir,
        fetched.source,
        quantization,
        args.target_dtype,
        work_dir,
        modules_to_not_convert=tuple(args.modules_to_not_convert or ()),
    )
    result = quantize(req, store)
    summary = {
        "source": str(fetched.source),
        "quantization": quantization.slug,
        "uri": store.uri(result.prefix),
        "local_dir": str(result.local_dir),
        "reused": result.reused,
        "tensors_quantized": len(result.manifest.tensors),
        "max_rel_error": result.manifest.max_rel_error,
        "seconds": result.manifest.seconds,
    }
    if args.json:
        _print_json(summary)
    else:
        state = "already in the store" if result.reused else "quantized"
        print(f"{summary['source']}: {state} ({summary['quantization']}, other tensors {args.target_dtype})")
        print(f"  uri        {summary['uri']}")
        print(
            f"  tensors    {summary['tensors_quantized']} quantized, max relative error {summary['max_rel_error']:.3e}"
        )
        print(f"  local      {summary['local_dir']}")
    return EXIT_OK


# -- catalog ----------------------------------------------------------------------------------------
def cmd_catalog_check(args: argparse.Namespace) -> int:
    """Every problem with its line; exit 3 when there are any (nothing gets scheduled from it), else
    1 when some target could not be planned (its config.json unavailable here): never "ok" over them."""
    from neuronforge.farm.catalog import check_catalog

    report = check_catalog(Path(args.path).expanduser() if args.path else None)
    targets = sum(len(e.targets) for e in report.entries)
    if args.json:
        _print_json({"path": str(report.path), "ok": report.ok and not report.unplanned, "entries": len(report.entries),
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


def cmd_catalog_stale(args: argparse.Namespace) -> int:
    """The recompile DAG's stale set, computed here with this machine's toolchains for the profile
    versions the catalog uses (one whose backend is not installed here, or is not its pins, is
    listed as unavailable). Exit 4 when something is stale."""
    from neuronforge.farm import recompile
    from neuronforge.farm.catalog import check_catalog
    from neuronforge.stores import open_store

    catalog = check_catalog(Path(args.path).expanduser() if args.path else None)
    if not catalog.ok:
        raise InvalidInput(f"catalog {catalog.path} has problems (run `neuronforge catalog check`)")
    toolchains = recompile.detect_toolchains(recompile.profiles_of(catalog), "on this machine")
    states = recompile.find_stale(catalog, toolchains, open_store(args.store, must_exist=True), settings.work_dir())
    if args.json:
        _print_json([s.to_json() for s in states])
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


# -- gc ---------------------------------------------------------------------------------------------
def cmd_gc(args: argparse.Namespace) -> int:
    from neuronforge.farm.catalog import check_catalog
    from neuronforge.farm.gc import collect
    from neuronforge.stores import open_store

    catalog = check_catalog(Path(args.catalog).expanduser() if args.catalog else None)
    report = collect(open_store(args.store, must_exist=True), args.keep_compilers, catalog, dry_run=args.dry_run)
    # never "done" over artifacts it could not decide: exit 1 while any is unconfirmed
    if args.json:
        _print_json(report.to_json())
        return EXIT_FAILURE if report.unconfirmed else EXIT_OK
    verb = "would delete" if args.dry_run else "deleted"
    for compiler, versions in sorted(report.keep.items()):
        print(f"keep {compiler}: {', '.join(versions)}")
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
    line = f"{len(report.deleted)} artifact(s) {verb}, {report.kept} kept"
    if report.unconfirmed:
        line += (
            f"; {len(report.unconfirmed)} of them NOT COLLECTED: due for deletion by the farm index, but their "
            "manifest does not confirm it (check with `neuronforge verify --store`, then `neuronforge index rebuild`)"
        )
    print(line)
    return EXIT_FAILURE if report.unconfirmed else EXIT_OK


# -- cache-key --------------------------------------------------------------------------------------
def cmd_cache_key(args: argparse.Namespace) -> int:
    from neuronforge.pipeline.stages.resolve import resolve_source
    from neuronforge.profiles import get_profile
    from neuronforge.profiles.registry import compile_request
    from neuronforge.profiles.request import cache_key, cache_key_material
    from neuronforge.spec.toolchain import Toolchain

    target = _target(args)
    profile = get_profile(target.profile)
    backend = profile.backend
    if args.toolchain:
        toolchain = Toolchain.from_json(json.loads(Path(args.toolchain).read_text()))
    elif args.compiler_version or args.backend_version:
        if not (args.compiler_version and args.backend_version):
            raise InvalidInput("give both --backend-version and --compiler-version (or neither, to detect them)")
        packages = dict(kv.split("=", 1) for kv in args.package)
        compiler = args.compiler or backend.compiler
        toolchain = Toolchain(
            backend.name, args.backend_version, compiler, args.compiler_version, packages, args.compiler_flags or ()
        )
    else:
        try:
            toolchain = profile.detect_toolchain(args.compiler_flags or ())
        except InvalidInput as exc:
            raise InvalidInput(f"{exc}; or give the versions: --backend-version and --compiler-version") from None
    source = resolve_source(args.model, work_dir=Path(args.work_dir).expanduser())
    request = compile_request(source, target)
    key = cache_key(request, toolchain)
    if args.explain:
        _print_json({"cache_key": key, "material": cache_key_material(request, toolchain)})
    else:
        print(key)
    return EXIT_OK


# -- store ------------------------------------------------------------------------------------------
def cmd_store_ls(args: argparse.Namespace) -> int:
    from neuronforge.stores import open_store

    if args.limit < 1:
        raise InvalidInput("--limit must be at least 1")
    store = open_store(args.store, must_exist=True)
    objects = store.list_page(args.prefix or "", start_after=args.start_after or "", limit=args.limit)
    if args.json:
        _print_json([{"key": o.key, "size": o.size, "uri": store.uri(o.key)} for o in objects])
    else:
        for o in objects:
            print(f"{o.size:>14}  {o.key}")
        print(f"{len(objects)} objects, {sum(o.size for o in objects)} bytes under {store.uri(args.prefix or '')}")
        if len(objects) == args.limit:
            print(f"next page: --start-after {objects[-1].key}")
    return EXIT_OK


# -- published artifacts ----------------------------------------------------------------------------
def _open_manifest(uri: str) -> tuple[Any, str]:
    """(store, manifest key) for a manifest URI or an artifact-root URI."""
    from neuronforge.stores import open_store

    uri = uri.rstrip("/")
    root, _, name = uri.rpartition("/")
    if name == "manifest.json":
        return open_store(root, must_exist=True), name
    return open_store(uri, must_exist=True), "manifest.json"


KEY_PREFIX_MIN = 6  # hex characters of a cache key `show`/`verify` accept (`ls` prints 12)
_HEX = re.compile(r"[0-9a-fA-F]+")
_CANDIDATES_SHOWN = 10


def _is_key_ref(ref: str) -> bool:
    """A cache key or a prefix of one (hex, no `/`), unless a local path of that name exists."""
    return bool(_HEX.fullmatch(ref)) and len(ref) <= 64 and not Path(ref).exists()


def find_key(store: Any, prefix: str) -> str:
    """The one cache key of the store's index that starts with `prefix`: one listing request that
    starts at `index/<prefix>` (S3: ListObjectsV2 with StartAfter), never a scan of the store."""
    from neuronforge.artifacts import layout

    prefix = prefix.lower()
    if len(prefix) < KEY_PREFIX_MIN:
        raise InvalidInput(
            f"key prefix {prefix!r} is too short: give at least {KEY_PREFIX_MIN} hex characters of the cache key "
            "(`neuronforge ls` prints 12)"
        )
    first = layout.index_entry(prefix).removesuffix(".json")
    page = store.list_page("index", start_after=first, limit=_CANDIDATES_SHOWN + 1)
    keys = [
        o.key.removeprefix("index/").removesuffix(".json")
        for o in page
        if o.key.startswith(first) and o.key.endswith(".json")
    ]
    if exact := [k for k in keys if k == prefix]:
        return exact[0]
    if not keys:
        raise InvalidInput(
            f"no artifact in {store.root_uri} has a cache key starting with {prefix} (`neuronforge ls` lists them)"
        )
    if len(keys) > 1:
        more = ", ..." if len(keys) > _CANDIDATES_SHOWN else ""
        shown = ", ".join(k[:16] for k in keys[:_CANDIDATES_SHOWN])
        raise InvalidInput(f"key prefix {prefix} is ambiguous in {store.root_uri}: {shown}{more}; give more characters")
    return keys[0]


def _open_artifact(ref: str, store_uri: str) -> tuple[Any, str, str]:
    """(store, manifest key, artifact prefix) for a cache key, a unique key prefix (looked up in
    `store_uri`'s index) or a manifest / artifact-root URI (the prefix is then the store's root: "")."""
    if not _is_key_ref(ref):
        store, key = _open_manifest(ref)
        return store, key, ""
    from neuronforge.artifacts import layout
    from neuronforge.records.base import RecordError
    from neuronforge.records.index_entry import IndexEntry
    from neuronforge.stores import NotFound, open_store

    store = open_store(store_uri, must_exist=True)
    key = find_key(store, ref)
    try:
        entry = IndexEntry.read(store, layout.index_entry(key))
    except NotFound:
        raise InvalidInput(f"no artifact in {store.root_uri} has the cache key {key}") from None
    except RecordError:
        raise InvalidInput(
            f"{store.uri(layout.index_entry(key))} is not an index entry (run neuronforge index rebuild)"
        ) from None
    return store, entry.manifest, entry.artifact_prefix


def _output_uris(store: Any, prefix: str, formats: dict[str, str]) -> dict[str, str]:
    """Where each output of the artifact is: `published.format_uris` below its folder; for a store
    opened at the artifact's own folder (a URI was given), its paths (or old manifests' URIs) as they are."""
    from neuronforge.artifacts.published import format_uris

    if prefix:
        return format_uris(store, prefix, formats)
    return {name: str(where) if "://" in str(where) else store.uri(str(where)) for name, where in formats.items()}


def cmd_show(args: argparse.Namespace) -> int:
    from neuronforge.artifacts.published import read_manifest

    store, key, prefix = _open_artifact(args.ref, args.store)
    m = read_manifest(store, key)
    if args.json:
        _print_json(m.as_stored())
        return EXIT_OK
    smoke = m.smoke
    target = m.request["target"]
    print(f"artifact   {store.uri(key).rsplit('/', 1)[0]}")
    print(f"cache key  {m.cache_key}")
    print(f"model      {m.source.location} @ {m.source.revision}")
    print(f"target     {m.target_slug} (batch {target['batch_size']}, sequence {target['sequence_length']})")
    if m.profile is not None:
        prof = m.profile
        print(f"profile    {prof.ref} (SDK {prof.sdk_release}): {prof.title}")
    tc = m.toolchain
    print(f"toolchain  {tc.backend} {tc.backend_version}, {tc.compiler} {tc.compiler_version}")
    print(f"flags      {' '.join(m.compiler_flags) or '(none)'}")
    print(f"smoke      {'passed' if smoke.get('passed') else 'FAILED'}: {smoke.get('reason')}")
    if smoke.get("load_s") is not None:
        print(
            f"           load {smoke['load_s']:.2f}s, first token {smoke['time_to_first_token_s'] * 1e3:.1f} ms, "
            f"{smoke['per_token_s'] * 1e3:.2f} ms/token"
        )
    from neuronforge.common.hosts import describe

    for i, line in enumerate(describe(m.hosts)):
        print(f"{'hosts' if i == 0 else '':<10} {line}")
    print(f"files      {len(m.files)} ({m.size_bytes} bytes), published {m.published_at}")
    outputs = _output_uris(store, prefix, m.formats)
    width = max(map(len, outputs), default=0)
    for i, (name, uri) in enumerate(outputs.items()):
        print(f"{'outputs' if i == 0 else '':<10} {name:<{width}}  {uri}")
    return EXIT_OK


def cmd_ls(args: argparse.Namespace) -> int:
    """A page of the store's published artifacts, from the farm index (the head, the tail and the
    pages shown: a handful of requests however large the farm); `--check` lists each shown
    artifact's folder to say whether its files are all there (one request per row)."""
    from neuronforge.artifacts.published import verify_manifest
    from neuronforge.farm.rows import FarmQuery, farm_page
    from neuronforge.stores import open_store

    if args.limit < 1 or args.offset < 0:
        raise InvalidInput("--limit must be at least 1 and --offset at least 0")
    store = open_store(args.store, must_exist=True)
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
        }
        if args.check and r.manifest_uri:
            lacking = verify_manifest(store, r.manifest_uri.removeprefix(store.root_uri).strip("/"))
            row.update(complete=not lacking, missing_or_truncated=lacking)
        rows.append(row)
    if args.json:
        _print_json(rows)
        return EXIT_OK
    if rows:  # KEY is what `show` and `verify` take
        print(f"{'KEY':<12}  {'STATUS' if args.status else 'PUBLISHED':<20}  {'PROFILE':<22} {'TARGET':<40} MODEL")
    for r in rows:
        state = ""
        if r.get("complete") is False:
            state = f"  INCOMPLETE: {len(r['missing_or_truncated'])} file(s) missing or truncated"
        when = r["published_at"] or r["status"]
        print(
            f"{r['cache_key'][:12]:<12}  {when:<20}  {r['profile'] or '-':<22} {r['target']:<40} "
            f"{r['model']}@{r['revision'][:12]}{state}"
        )
    what = f"{args.status} build(s)" if args.status else "published artifact(s)"
    more = page.total is None and len(rows) == args.limit
    if page.total is None:
        shown = f"{len(rows)}{' (more match)' if more else ''}"
    else:
        shown = f"{len(rows)} of {page.total}" if len(rows) < page.total else f"{page.total}"
    broken = sum(r.get("complete") is False for r in rows)
    tail = f" ({broken} incomplete: run neuronforge verify on them)" if broken else ""
    print(f"{shown} {what} in {store.root_uri}{tail}")
    if more or (page.total is not None and args.offset + len(rows) < page.total):
        print(f"next page: --offset {args.offset + len(rows)}")
    return EXIT_OK


def cmd_index(args: argparse.Namespace) -> int:
    """`index rebuild`: the farm index written afresh from the manifests (a full scan, once)."""
    from neuronforge.artifacts import farm_index
    from neuronforge.stores import open_store

    store = open_store(args.store, must_exist=True)
    store.probe(write=True)
    skipped: list[Any] = []
    head = farm_index.rebuild(store, skipped)
    summary = {"store": store.root_uri, "rows": head.rows, "pages": len(head.pages), "seq": head.seq}
    for s in skipped:
        print(f"warning: skipped {store.uri(s.index_key)}: {s.problem}", file=sys.stderr)
    if args.json:
        _print_json(summary)
    else:
        left_out = f"; {len(skipped)} index pointer(s) left out, not artifacts (warnings above)" if skipped else ""
        print(f"farm index of {store.root_uri} rebuilt: {head.rows} row(s) in {len(head.pages)} page(s){left_out}")
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    from neuronforge.pipeline.runner import run_target
    from neuronforge.stores import open_store

    target = _target(args)
    store = open_store(settings.store_uri(args.store))
    model = args.model or settings.DEFAULT_MODEL
    # A rejected plan or a failed smoke test exits 3 (`PlanRejected`/`SmokeFailed`.exit_code, in `main`).
    outcome = run_target(
        model, target, store, settings.work_dir(), prompts=args.prompt or None, max_new_tokens=args.max_new_tokens
    )
    _print_json(outcome.summary())
    return EXIT_OK


def cmd_profiles(args: argparse.Namespace) -> int:
    from neuronforge.profiles import all_profiles
    from neuronforge.profiles.registry import refused_stacks

    rows = [p.describe() for p in all_profiles()]
    refused = [{"name": s.name, "reason": s.reason, "nearest": s.nearest} for s in refused_stacks()]
    if args.json:
        _print_json({"profiles": rows, "not_supported": refused})
        return EXIT_OK
    for r in rows:
        print(f"{r['ref']:<24} {r['title']}")
        print(
            f"  SDK {r['sdk_release']}, compiler {r['compiler_version'] or '(as installed)'}, backend {r['backend']}, "
            f"queue {r['queue'] or 'default'}"
            + (
                f", {'/'.join(r['device_stages'])} on Neuron hosts (queue {r['device_queue']})"
                if r["device_queue"]
                else ""
            )
        )
        print(f"  instances: {', '.join(r['instance_families']) or 'any (CPU)'}")
        print(f"  publishes: {r['publishes']}")
    for s in refused:
        print(f"not supported: {s['name']}: {s['reason']} (nearest: {s['nearest']})")
    return EXIT_OK


def cmd_config(args: argparse.Namespace) -> int:
    """Every setting's effective value and where it came from (`settings.effective()`); a URI with
    credentials is shown masked, as the store refuses it."""
    from neuronforge.stores.base import masked

    rows = settings.effective()
    for r in rows:
        if isinstance(r.value, str):
            r.value = masked(r.value) or r.value
    if args.json:
        _print_json({r.variable: {"value": r.value, "source": r.source} for r in rows})
        return EXIT_OK
    values = ["-" if r.value is None else f"{r.value:g}" if isinstance(r.value, float) else r.value for r in rows]
    var_width, value_width = max(len(r.variable) for r in rows), max(map(len, values))
    for r, value in zip(rows, values, strict=True):
        print(f"{r.variable:<{var_width}}  {value:<{value_width}}  {r.source}")
    return EXIT_OK


def cmd_worker_queues(args: argparse.Namespace) -> int:
    """The Celery queues a worker of one SDK release's image consumes in its role (the image's CMD)."""
    from neuronforge.profiles.registry import worker_queues

    print(",".join(worker_queues(args.sdk, args.role)))
    return EXIT_OK


def cmd_verify_store(args: argparse.Namespace) -> int:
    from neuronforge.artifacts import farm_index
    from neuronforge.stores import open_store

    store = open_store(args.store, must_exist=True)
    problems = farm_index.check(store)
    if args.json:
        _print_json({"store": store.root_uri, "ok": not problems, "problems": problems})
    else:
        for problem in problems:
            print(f"  FAIL {problem}")
        print(f"ok: the farm index of {store.root_uri} matches the manifests" if not problems else "FAILED")
    return EXIT_REJECTED if problems else EXIT_OK


def cmd_verify(args: argparse.Namespace) -> int:
    from neuronforge.farm.verify import verify_artifact

    if not args.ref:  # the store's farm index against its manifests
        if args.retrace:
            raise InvalidInput("--retrace is for an artifact: give its cache key (or prefix) or URI")
        return cmd_verify_store(args)
    if args.store_opt is not None and not _is_key_ref(args.ref):
        raise InvalidInput(
            "verify takes an artifact URI or --store, not both (--store is where a cache key is looked up)"
        )
    store, key, _ = _open_artifact(args.ref, args.store)
    result = verify_artifact(store, key, Path(args.work_dir).expanduser(), retrace=args.retrace)
    if args.json:
        _print_json(result.to_json())
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


def cmd_sweep(args: argparse.Namespace) -> int:
    from neuronforge.farm.sweep import CacheConfig, CommandTrial, PipelineTrial, RecordLog, Space, records_path, sweep
    from neuronforge.farm.sweep.modelinfo import model_id, read_arch
    from neuronforge.farm.sweep.space import refuse_profile
    from neuronforge.farm.sweep.trials import ENVIRONMENT
    from neuronforge.profiles import get_profile
    from neuronforge.spec.instances import get_instance

    config_file = _sweep_config_file(args.model)
    if args.model_id is not None and model_id(args.model_id, hub_only=True) != args.model_id.strip():
        raise InvalidInput(f"--model-id {args.model_id}: give the Hub id without a revision, e.g. org/name")
    if config_file and not args.model_id:
        raise InvalidInput(
            f"--model {args.model} is a config.json file: add --model-id org/name, the Hub id the results are "
            "for (the cache-config file is keyed by it and --to-catalog writes it as the model's source)"
        )
    key = args.model_id or model_id(args.model)
    instance = get_instance(args.instance)
    profile = get_profile(args.profile)
    arch = read_arch(args.model)
    space = Space.build(arch, instance, args.tp, args.batch_sizes, args.seq_lens, profile)
    refuse_profile(profile, instance, arch, space)
    out = Path(args.out).expanduser()
    header = {
        "model": args.model,
        "instance": instance.name,
        "profile": profile.ref,
        "method": args.method,
        "space": space.to_json(),
    }
    log_file, earlier = RecordLog.load(records_path(out), header)
    cache_config = CacheConfig.load(out, key, instance.family)
    if args.try_command:
        trial = CommandTrial(args.try_command, args.model, instance.name)
    else:  # the pipeline builds from weights: a bare config.json has none, its Hub id has
        build_from = args.model_id if config_file else args.model
        trial = PipelineTrial(
            build_from, instance.name, profile.ref, settings.store_uri(args.store), settings.work_dir(), args.dtype
        )
    try:
        result = sweep(
            arch,
            instance,
            space,
            trial,
            cache_config,
            log_file,
            earlier,
            method=args.method,
            planner_margin=args.planner_margin,
            retry_failed=args.retry_failed,
            dtype=args.dtype,
        )
    except ENVIRONMENT as exc:  # no candidate is judged on it: the sweep stops, resumable
        raise NeuronforgeError(
            f"{exc}; the sweep stopped: what it decided so far is in {log_file.path}, run it again to resume"
        ) from None
    summary = {**result.to_json(), "out": str(out), "records": str(log_file.path)}
    if args.to_catalog:
        from neuronforge.farm.sweep.to_catalog import add_to_catalog, catalog_targets

        catalog = Path(args.to_catalog).expanduser()
        targets = catalog_targets(result.valid, instance.name, args.profile, args.dtype)
        source = args.model_id if config_file else args.model
        added, notes = add_to_catalog(catalog, source, targets, config=config_file)
        summary["catalog"] = {"path": str(catalog), "added": added, "notes": notes}
    if args.json:
        _print_json(summary)
        return EXIT_OK
    for r in result.records:
        print(f"{r.outcome:<8} {r.by:<12} {r.candidate}  {r.reason}")
    if args.to_catalog:
        for note in summary["catalog"]["notes"]:
            print(f"catalog: {note}")
        print(f"catalog: {summary['catalog']['added']} target(s) added to {summary['catalog']['path']}")
    print(
        f"{len(result.valid)} valid configuration(s) of {key} on {instance.name}, "
        f"{result.attempts} compile(s) tried ({args.method}); written to {out}, records in {log_file.path}"
    )
    return EXIT_OK


def _sweep_config_file(model: str) -> Path | None:
    """The sweep's `--model` when it is a bare config.json (what the bench and tests sweep): it says
    nothing of which model it describes, hence `--model-id`."""
    path = Path(model).expanduser()
    return path.resolve() if path.is_file() and path.suffix == ".json" else None


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


def cmd_airflow(args: argparse.Namespace) -> int:
    from neuronforge.interfaces.local_airflow import serve

    # serve() answers 0 on a clean stop (Ctrl+C), 1 when a component died on its own
    code = serve(port=args.port, home=Path(args.airflow_home) if args.airflow_home else None)
    return ExitCode.OK if code == 0 else ExitCode.FAILURE


def cmd_cache(args: argparse.Namespace) -> int:
    from neuronforge.compilation.compile_cache import prune_store, stored_entries
    from neuronforge.stores import open_store

    store = open_store(args.store, must_exist=True)
    selection, named = _cache_selection(args)
    if args.cache_command == "prune":
        if not (args.compiler_version or args.incomplete):
            raise InvalidInput("cache prune needs --compiler-version VERSION and/or --incomplete")
        from neuronforge.farm.gc import referenced_cache_entries

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
    entries = stored_entries(store, **selection)
    if args.cache_command == "ls":
        if args.json:
            _print_json([e.__dict__ for e in entries])
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
    stats: dict[str, dict[str, int]] = {}
    for e in entries:
        s = stats.setdefault(e.compiler_dir, {"entries": 0, "complete": 0, "incomplete": 0, "bytes": 0})
        s["entries"] += 1
        s["complete" if e.complete else "incomplete"] += 1
        s["bytes"] += e.bytes
    if args.json:
        _print_json(stats)
    elif not stats:
        print(_nothing_matches(store, named))
    else:
        for cdir, s in sorted(stats.items()):
            print(
                f"{cdir:<34} {s['entries']:>5} entries ({s['complete']} complete, {s['incomplete']} incomplete), "
                f"{s['bytes']} bytes"
            )
    return EXIT_OK


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("neuronforge")
    except PackageNotFoundError:
        return "unknown (not installed)"


def _epilog() -> str:
    import textwrap

    codes = "\n".join(
        textwrap.fill(text, 100, initial_indent=f"  {int(code)}  ", subsequent_indent="     ")
        for code, text in EXIT_CODES.items()
    )
    return (
        f"defaults:\n  profile  $NEURONFORGE_PROFILE, else {settings.DEFAULT_PROFILE} (every command that takes a "
        "target, but sweep)\n  store    $NEURONFORGE_STORE, else the local store $NEURONFORGE_HOME/store "
        "(every command that\n           reads or writes one)\n  settings `neuronforge config` prints every "
        "NEURONFORGE_* setting and where its value came from\n\n"
        f"exit codes:\n{codes}\n\n"
        'shell completion (bash, zsh): eval "$(register-python-argcomplete neuronforge)"'
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="neuronforge",
        description=__doc__.splitlines()[0],
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the result and errors, no progress")
    parser.add_argument("--version", action="version", version=f"neuronforge {_version()}", help="print the version")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", help="one of:")

    p = sub.add_parser("plan", help="check before compiling that a model fits a target, and why not")
    p.add_argument("--model", required=True, help="folder with config.json (and safetensors), or a config.json")
    _add_target_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--suggest", action="store_true", help="also list feasible (tp, batch, seq-len) on the instance")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("fetch", help="download, verify and mirror a checkpoint into a store")
    p.add_argument("source", help="org/name[@revision], hf://org/name@rev, s3://bucket/prefix, or a folder")
    _add_store_args(p)
    p.add_argument("--work-dir", default=str(_default_work_dir()), help=WORK_DIR_HELP)
    p.add_argument("--allow-pickle", action="store_true", help="accept *.bin/*.pt weights (loaded weights_only)")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(func=cmd_fetch)

    p = sub.add_parser("quantize", help="quantize a checkpoint into NxD Inference's quantized format, streaming")
    p.add_argument("source", help="org/name[@revision], s3://bucket/prefix, or a folder")
    p.add_argument("--dtype", required=True, help="int8, f8e4m3 or f8e5m2")
    p.add_argument("--method", default="per_tensor", help="per_tensor or per_channel (default per_tensor)")
    p.add_argument("--target-dtype", default="bf16", help="dtype of the tensors left unquantized (bf16, fp16, fp32)")
    p.add_argument("--modules-to-not-convert", nargs="*", help="module name substrings to keep unquantized")
    _add_store_args(p)
    p.add_argument("--work-dir", default=str(_default_work_dir()), help=WORK_DIR_HELP)
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(func=cmd_quantize)

    p = sub.add_parser("cache-key", help="print the cache key of a compile request")
    p.add_argument("--model", required=True, help="model source (resolved to an immutable revision)")
    _add_target_args(p)
    p.add_argument("--toolchain", help="JSON file with the toolchain (as recorded in a manifest)")
    p.add_argument("--backend-version", help="backend version, e.g. 0.6.1 (with --compiler-version: no detection)")
    p.add_argument("--compiler", help="compiler name (default: neuronxcc, or torch-inductor for cpu)")
    p.add_argument("--compiler-version", help="compiler version, e.g. 2.21.33363.0+82129205")
    p.add_argument(
        "--package",
        action="append",
        default=[],
        metavar="NAME=VERSION",
        help="another package version in the key (repeatable; with --backend-version and --compiler-version)",
    )
    p.add_argument(
        "--compiler-flags",
        metavar="FLAGS",
        help='NEURON_CC_FLAGS-style string; may start with "-": --compiler-flags "-O1" works as written',
    )
    p.add_argument("--work-dir", default=str(_default_work_dir()), help=WORK_DIR_HELP)
    p.add_argument("--explain", action="store_true", help="print the hashed material too")
    p.set_defaults(func=cmd_cache_key)

    p = sub.add_parser("store", help="inspect a store")
    store_sub = p.add_subparsers(dest="store_command", required=True, metavar="COMMAND", help="one of:")
    ls = store_sub.add_parser("ls", help="list objects under a store URI, a page at a time")
    _add_store_args(ls, positional=True)
    ls.add_argument("prefix", nargs="?", default=None, help="only keys under this folder-like prefix")
    ls.add_argument("--limit", type=int, default=1000, help="objects per page (default 1000: one S3 request)")
    ls.add_argument("--start-after", metavar="KEY", help="list keys after this one (the previous page's last)")
    ls.add_argument("--json", action="store_true", help=JSON_HELP)
    ls.set_defaults(func=cmd_store_ls)

    p = sub.add_parser("run", help="run the whole pipeline for one target in this process (no Airflow)")
    p.add_argument("--model", default="", help=f"model source (default: {settings.DEFAULT_MODEL}, a tiny Llama)")
    _add_target_args(p)
    _add_store_args(p)
    p.add_argument("--prompt", action="append", help='smoke-test prompt (repeatable; may start with "-")')
    p.add_argument("--max-new-tokens", type=int, default=8, help="tokens the smoke test generates (default 8)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("show", help="print a published artifact's manifest readably")
    p.add_argument(
        "ref",
        metavar="KEY_OR_URI",
        help=f"a cache key, a unique prefix of one (>= {KEY_PREFIX_MIN} hex characters, as `ls` prints), "
        "or the URI of a manifest.json or of an artifact root",
    )
    _add_store_args(p)
    p.add_argument("--json", action="store_true", help="print the manifest as stored")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("catalog", help="the model catalog the recompile schedule keeps compiled")
    catalog_sub = p.add_subparsers(dest="catalog_command", required=True, metavar="COMMAND", help="one of:")
    c = catalog_sub.add_parser("check", help="validate the catalog and plan every target")
    c.add_argument("path", nargs="?", help="catalog YAML (default: NEURONFORGE_CATALOG or catalog/models.yaml)")
    c.add_argument("--json", action="store_true", help=JSON_HELP)
    c.set_defaults(func=cmd_catalog_check)
    c = catalog_sub.add_parser("stale", help="which catalog targets have no artifact for this machine's toolchain")
    c.add_argument("path", nargs="?", help="catalog YAML (default: NEURONFORGE_CATALOG or catalog/models.yaml)")
    _add_store_args(c)
    c.add_argument("--json", action="store_true", help=JSON_HELP)
    c.set_defaults(func=cmd_catalog_stale)

    p = sub.add_parser("gc", help="prune artifacts of older compiler versions (catalog pins are kept)")
    _add_store_args(p, positional=True)
    p.add_argument("--keep-compilers", type=int, required=True, metavar="N", help="newest compiler versions to keep")
    p.add_argument(
        "--catalog", help="catalog whose pins are kept (default: NEURONFORGE_CATALOG or catalog/models.yaml)"
    )
    p.add_argument("--dry-run", action="store_true", help="print what would be deleted, delete nothing")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(func=cmd_gc)

    p = sub.add_parser("cache", help="inspect and prune the store's compile cache (neuron-cache/)")
    cache_sub = p.add_subparsers(dest="cache_command", required=True, metavar="COMMAND", help="one of:")
    for name, text in (
        ("ls", "list entries"),
        ("stats", "counts and sizes per compiler version"),
        ("prune", "delete one compiler version's entries, or incomplete ones"),
    ):
        c = cache_sub.add_parser(name, help=text)
        _add_store_args(c, positional=True)
        c.add_argument("--compiler", help="limit to this compiler: neuronxcc, or torch-inductor for cpu (default: any)")
        c.add_argument("--compiler-version", help="limit to this compiler version (without its +label: every label)")
        if name == "prune":
            c.add_argument("--incomplete", action="store_true", help="only entries without model.done")
            c.add_argument("--dry-run", action="store_true", help="print what would be deleted, delete nothing")
        else:
            c.add_argument("--json", action="store_true", help=JSON_HELP)
        c.set_defaults(func=cmd_cache)

    p = sub.add_parser(
        "profiles", help="list the serving profiles: SDK, compiler, backend, instances, what is published"
    )
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(func=cmd_profiles)

    p = sub.add_parser(
        "config", help="print every NEURONFORGE_* setting's effective value and where it came from (env, default)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object: variable -> value and source")
    p.set_defaults(func=cmd_config)

    p = sub.add_parser(
        "worker-queues", help="the Celery queues a Neuron worker image consumes: compile (CPU host) or neuron role"
    )
    p.add_argument("--sdk", required=True, help="the image's Neuron SDK release, e.g. 2.26.1")
    p.add_argument("--role", required=True, choices=["compile", "neuron"], help="the worker's role")
    p.set_defaults(func=cmd_worker_queues)

    p = sub.add_parser(
        "airflow", help="run this checkout's Airflow UI on 127.0.0.1 in the foreground (Ctrl+C stops it)"
    )
    p.add_argument("--port", type=int, default=8080, help="the UI's port on 127.0.0.1 (default 8080)")
    p.add_argument("--airflow-home", help="Airflow home (default: $NEURONFORGE_HOME/airflow)")
    p.set_defaults(func=cmd_airflow)

    p = sub.add_parser(
        "verify",
        help="re-hash a published artifact and run its profile's consumer preflight; without one, check the "
        "store's farm index against its manifests",
    )
    p.add_argument(
        "ref",
        nargs="?",
        metavar="KEY_OR_URI",
        help=f"the artifact: a cache key, a unique prefix of one (>= {KEY_PREFIX_MIN} hex characters), or the URI "
        "of its manifest.json or folder; none: check the store's farm index against its manifests, both ways",
    )
    p.add_argument(
        "--store",
        dest="store_opt",
        nargs="?",
        const="",
        metavar="URI",
        help=_store_help("where a cache key is looked up, or (without KEY_OR_URI) whose farm index is checked"),
    )
    p.add_argument("--work-dir", default=str(_default_work_dir()), help=WORK_DIR_HELP)
    p.add_argument(
        "--retrace",
        action="store_true",
        help="also re-run the consumer's start-up in its SDK image's interpreter, no device, compiling "
        "forbidden (vllm-neuron-native: on a CPU worker of queue neuron-compile-<sdk>)",
    )
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("sweep", help="find every (tp, batch, sequence length) of a model that loads on an instance")
    p.add_argument("--model", required=True, help="Hub id[@revision], s3:// prefix, local folder or config.json")
    _completes(
        p.add_argument("--instance", required=True, help="instance type, e.g. inf2.48xlarge"), _complete_instances
    )
    _completes(
        p.add_argument(
            "--profile",
            default="optimum-neuron",
            help="serving profile the builds are for (default optimum-neuron, whose inference-cache-config the "
            "sweep writes: a sweep measures what loads on a Neuron device, which the cpu profile has not)",
        ),
        _complete_profiles,
    )
    p.add_argument("--tp", type=int, nargs="+", help="tensor parallel sizes (default: every one the rules allow)")
    p.add_argument("--batch-sizes", type=int, nargs="+", help="default: 1 4 8 16 32 64 128")
    p.add_argument("--seq-lens", type=int, nargs="+", help="default: powers of two from 1024 to max positions")
    p.add_argument("--dtype", default="bf16", help="bf16 | fp16 | fp32 (default bf16)")
    p.add_argument("--out", required=True, help="inference-cache-config JSON (records go beside it)")
    p.add_argument("--try-command", help="command that tries one candidate (JSON on stdin, exit 0 = loads)")
    p.add_argument(
        "--method",
        choices=("planned", "document"),
        default="planned",
        help="document: the documented workflow's order (tp up, batch down, sequence down); planned (default): "
        "the same entries with fewer compiles (monotonicity, batch up, the planner skips what cannot fit)",
    )
    p.add_argument("--planner-margin", type=float, default=1.5, help="skip when the planner's need > this x HBM")
    p.add_argument("--retry-failed", action="store_true", help="try again candidates an earlier run saw fail")
    _add_store_args(p)
    p.add_argument("--to-catalog", metavar="FILE", help="add the valid configurations to this catalog YAML")
    p.add_argument(
        "--model-id",
        metavar="ORG/NAME",
        help="the Hub id the results are for: required when --model is a config.json file (the cache-config file "
        "is keyed by it, --to-catalog writes it as the source); default: --model's Hub id",
    )
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("ls", help="list the published artifacts of a store, a page at a time")
    _add_store_args(p, positional=True)
    p.add_argument("--limit", type=int, default=50, help="rows per page (default 50)")
    p.add_argument("--offset", type=int, default=0, help="rows to skip (the previous page's 'next page')")
    p.add_argument("--model", help="only models whose source contains this (any case)")
    _completes(
        p.add_argument("--profile", help="only this serving profile (name, or name@version)"), _complete_profiles
    )
    _completes(p.add_argument("--instance", help="only this instance type"), _complete_instances)
    p.add_argument(
        "--status",
        choices=["published", "stale", "smoke-failed", "failed", "building"],
        help="builds in this state (default: published and stale artifacts)",
    )
    p.add_argument("--check", action="store_true", help="also list each shown artifact's files (one request each)")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(func=cmd_ls)

    p = sub.add_parser("index", help="the store's farm index (what ls and the catalog page read)")
    index_sub = p.add_subparsers(dest="index_command", required=True, metavar="COMMAND", help="one of:")
    c = index_sub.add_parser("rebuild", help="write the farm index afresh from the manifests (a full scan)")
    _add_store_args(c, positional=True)
    c.add_argument("--json", action="store_true", help=JSON_HELP)
    c.set_defaults(func=cmd_index)
    return parser


def _join_dash_values(argv: list[str]) -> list[str]:
    """`--compiler-flags -O1` -> `--compiler-flags=-O1` for the options of DASH_VALUE_OPTIONS, whose
    value may start with `-` (argparse would take it for an option); nothing after `--` is touched."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            out += argv[i:]
            break
        if arg in DASH_VALUE_OPTIONS and i + 1 < len(argv):
            out.append(f"{arg}={argv[i + 1]}")
            i += 2
            continue
        out.append(arg)
        i += 1
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    if argv == ["--version"]:  # before the parser: its target flags are read from TargetSpec (pydantic)
        print(f"neuronforge {_version()}")
        return EXIT_OK
    try:  # a bad NEURONFORGE_* value: one line, before any work (the parser's help shows the settings too)
        settings.current()
        parser = build_parser()
    except InvalidInput as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if "_ARGCOMPLETE" in os.environ:  # the shell's completion hook (register-python-argcomplete neuronforge)
        import argcomplete

        argcomplete.autocomplete(parser)
    args = parser.parse_args(_join_dash_values(argv))
    from neuronforge.common import progress

    logging.basicConfig(
        level=logging.ERROR if args.quiet else logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        handlers=[progress.StderrHandler()],  # above the progress display, not through it
    )

    caller = progress.current()  # restored after: `main` is also called in-process (the demo, tests)
    try:
        _resolve_store(args)
        # Progress on stderr, never stdout: a display on a terminal, else log lines (-v shows them).
        progress.use(progress.for_cli(quiet=args.quiet, machine=getattr(args, "json", False)))
        return args.func(args)
    except Exception as exc:  # KeyboardInterrupt is not ours to explain: Python's own exit
        found = errors.outcome(exc, lambda: _written_places(args))
        if found is None:
            raise  # not explained: a bug, with its traceback
        print(f"error: {found.message}", file=sys.stderr)
        return found.exit_code
    finally:
        progress.use(caller)


def _written_places(args: argparse.Namespace) -> list[Path]:
    """Where a command writes on this host, the most specific first: --out, --work-dir, its file
    store, NEURONFORGE_HOME."""
    from neuronforge.stores import local_folder

    places = [Path(p) for p in (getattr(args, "out", None), getattr(args, "work_dir", None)) if p]
    uri = getattr(args, "store", None)
    store = local_folder(str(uri)) if uri else None
    return [*places, *([store] if store else []), settings.home()]


if __name__ == "__main__":
    sys.exit(main())
