"""The build commands: `plan` a target before compiling, `fetch` and `quantize` a checkpoint, print a
compile request's `cache-key`, and `run` the whole pipeline for one target in this process (no Airflow)."""

from __future__ import annotations

import argparse
from pathlib import Path

from neuronforge.common import settings
from neuronforge.common.errors import CheckpointError, InvalidInput
from neuronforge.common.secrets import print_line
from neuronforge.interfaces.cli.command import Command
from neuronforge.interfaces.cli.exit_codes import EXIT_OK, EXIT_REJECTED
from neuronforge.interfaces.cli.options import (
    JSON_HELP,
    WORK_DIR_HELP,
    add_store_args,
    add_target_args,
    default_work_dir,
    json_file,
    name_value,
    opened_store,
    print_json,
    target_from_args,
)


def _plan_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="folder with config.json (and safetensors), or a config.json")
    add_target_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--suggest", action="store_true", help="also list feasible (tp, batch, seq-len) on the instance")


def cmd_plan(args: argparse.Namespace) -> int:
    from neuronforge.checkpoints.checkpoint import read_safetensors_header
    from neuronforge.pipeline.planner import gib, per_core_text, plan
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
    target = target_from_args(args)
    try:
        config = load_config(model)
    except CheckpointError as exc:
        raise InvalidInput(str(exc)) from None
    try:
        arch = ModelArch.from_config(config, where=str(model))
    except InvalidInput as exc:
        if args.json:
            print_json({"fits": False, "error": str(exc), "checks": []})
        else:
            print_line(f"error: {exc}")
        return EXIT_REJECTED
    tensors = None
    if model.is_dir() and (shards := sorted(model.glob("*.safetensors"))):
        tensors = {}
        for shard in shards:
            tensors.update(read_safetensors_header(shard))
    result = plan(arch, target, tensors=tensors, with_suggestions=args.suggest)
    if args.json:
        print_json(result.to_json())
    else:
        print(
            f"{arch.architecture} ({result.parameter_count / 1e9:.2f}B parameters) on {target.instance_type}, "
            f"tp={target.tp_degree}, batch {target.batch_size}, sequence {target.sequence_length}, {target.dtype}"
            + (f", {target.quantization.slug}" if target.quantization.enabled else "")
        )
        print(
            f"  weights {gib(result.weight_bytes)}, KV cache {gib(result.kv_cache_bytes)}; "
            f"{per_core_text(result.per_core_bytes, result.hbm_per_core_bytes)} "
            f"(with {gib(result.runtime_reserve_bytes)} runtime reserve)"
        )
        for c in result.checks:
            print(f"  [{'FAIL' if not c.ok else 'warn' if c.warn else 'ok'}] {c.name}: {c.message}")
        if result.suggestions is not None:
            print("feasible configurations (largest batch per tp and sequence length):")
            for s in result.suggestions:
                print(
                    f"  tp={s.tp:<3} seq_len={s.seq_len:<7} batch_size={s.batch_size:<4} {gib(s.per_core_bytes)}/core"
                )
            if not result.suggestions:
                print("  none on this instance")
    return EXIT_OK if result.ok else EXIT_REJECTED


def _fetch_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", help="org/name[@revision], hf://org/name@rev, s3://bucket/prefix, or a folder")
    add_store_args(p)
    p.add_argument("--work-dir", default=str(default_work_dir()), help=WORK_DIR_HELP)
    p.add_argument("--allow-pickle", action="store_true", help="accept *.bin/*.pt weights (loaded weights_only)")
    p.add_argument("--json", action="store_true", help=JSON_HELP)


def cmd_fetch(args: argparse.Namespace) -> int:
    import os

    from neuronforge.pipeline.stages.fetch import FetchRequest, fetch, fetch_summary
    from neuronforge.spec.source import ModelSource

    req = FetchRequest(
        source=ModelSource.parse(args.source),  # a source that cannot be parsed creates no store
        work_dir=Path(args.work_dir).expanduser(),
        allow_pickle=args.allow_pickle,
        token=os.environ.get("HF_TOKEN"),
    )
    result = fetch(req, opened_store(args.store, must_exist=False))
    summary = fetch_summary(result)
    if args.json:
        print_json(summary)
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


def _quantize_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", help="org/name[@revision], s3://bucket/prefix, or a folder")
    p.add_argument("--dtype", required=True, help="int8, f8e4m3 or f8e5m2")
    p.add_argument("--method", default="per_tensor", help="per_tensor or per_channel (default per_tensor)")
    p.add_argument("--target-dtype", default="bf16", help="dtype of the tensors left unquantized (bf16, fp16, fp32)")
    p.add_argument("--modules-to-not-convert", nargs="*", help="module name substrings to keep unquantized")
    add_store_args(p)
    p.add_argument("--work-dir", default=str(default_work_dir()), help=WORK_DIR_HELP)
    p.add_argument("--json", action="store_true", help=JSON_HELP)


def cmd_quantize(args: argparse.Namespace) -> int:
    import os

    from neuronforge.pipeline.stages.fetch import FetchRequest, fetch
    from neuronforge.pipeline.stages.quantize import QuantizeRequest, quantize
    from neuronforge.spec.source import ModelSource
    from neuronforge.spec.target import Quantization

    quantization = Quantization.parse(f"{args.dtype}:{args.method}")  # bad dtype/method: before any work
    work_dir = Path(args.work_dir).expanduser()
    source = ModelSource.parse(args.source)  # a source that cannot be parsed creates no store
    store = opened_store(args.store, must_exist=False)
    fetched = fetch(FetchRequest(source, work_dir, token=os.environ.get("HF_TOKEN")), store)
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
        print_json(summary)
    else:
        state = "already in the store" if result.reused else "quantized"
        print(f"{summary['source']}: {state} ({summary['quantization']}, other tensors {args.target_dtype})")
        print(f"  uri        {summary['uri']}")
        print(
            f"  tensors    {summary['tensors_quantized']} quantized, max relative error {summary['max_rel_error']:.3e}"
        )
        print(f"  local      {summary['local_dir']}")
    return EXIT_OK


def _cache_key_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="model source (resolved to an immutable revision)")
    add_target_args(p)
    p.add_argument("--toolchain", type=json_file, help="JSON file with the toolchain (as recorded in a manifest)")
    p.add_argument("--backend-version", help="backend version, e.g. 0.6.1 (with --compiler-version: no detection)")
    p.add_argument("--compiler", help="compiler name (default: neuronxcc, or torch-inductor for cpu)")
    p.add_argument("--compiler-version", help="compiler version, e.g. 2.21.33363.0+82129205")
    p.add_argument(
        "--package",
        action="append",
        default=[],
        type=name_value,
        metavar="NAME=VERSION",
        help="another package version in the key (repeatable; with --backend-version and --compiler-version)",
    )
    p.add_argument(
        "--compiler-flags",
        metavar="FLAGS",
        help='NEURON_CC_FLAGS-style string; may start with "-": --compiler-flags "-O1" works as written',
    )
    p.add_argument("--work-dir", default=str(default_work_dir()), help=WORK_DIR_HELP)
    p.add_argument("--explain", action="store_true", help="print the hashed material too")


def cmd_cache_key(args: argparse.Namespace) -> int:
    from neuronforge.pipeline.stages.resolve import resolve_source
    from neuronforge.profiles.registry import compile_request, profile_of
    from neuronforge.profiles.request import cache_key, cache_key_material
    from neuronforge.spec.toolchain import Toolchain

    target = target_from_args(args)
    profile = profile_of(target)
    backend = profile.backend
    if args.toolchain:
        try:
            toolchain = Toolchain.from_json(args.toolchain)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            said = f"{type(exc).__name__}: {exc}"
            raise InvalidInput(f"--toolchain is no toolchain as a manifest records it ({said})") from None
    elif args.compiler_version or args.backend_version:
        if not (args.compiler_version and args.backend_version):
            raise InvalidInput("give both --backend-version and --compiler-version (or neither, to detect them)")
        packages = dict(args.package)
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
        print_json({"cache_key": key, "material": cache_key_material(request, toolchain)})
    else:
        print(key)
    return EXIT_OK


def _run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="", help=f"model source (default: {settings.DEFAULT_MODEL}, a tiny Llama)")
    add_target_args(p)
    add_store_args(p)
    p.add_argument("--prompt", action="append", help='smoke-test prompt (repeatable; may start with "-")')
    p.add_argument("--max-new-tokens", type=int, default=8, help="tokens the smoke test generates (default 8)")
    p.add_argument("--hub-registry", metavar="ORG/NAME", help=HUB_REGISTRY_HELP)


HUB_REGISTRY_HELP = (
    "optimum-neuron profile: after the smoke test, register the build in this Hugging Face cache repository "
    "(its NEFFs and optimum's registry entry; created private if missing) so that `optimum-cli neuron cache "
    "lookup` and `serve` find it; endpoint and token from HF_ENDPOINT / HF_TOKEN. Default: NEURONFORGE_HUB_REGISTRY "
    "(where it applies); - for none"
)


def cmd_run(args: argparse.Namespace) -> int:
    from neuronforge.pipeline.runner import run_target

    target = target_from_args(args)
    store = opened_store(args.store, must_exist=False)
    model = args.model or settings.DEFAULT_MODEL
    # A rejected plan or a failed smoke test exits 3 (`PlanRejected`/`SmokeFailed`.exit_code, in `main`).
    outcome = run_target(
        model,
        target,
        store,
        settings.work_dir(),
        prompts=args.prompt or None,
        max_new_tokens=args.max_new_tokens,
        hub_registry=args.hub_registry,
    )
    print_json(outcome.summary())
    return EXIT_OK


COMMANDS = (
    Command("plan", "check before compiling that a model fits a target, and why not", _plan_options, cmd_plan),
    Command("fetch", "download, verify and mirror a checkpoint into a store", _fetch_options, cmd_fetch),
    Command(
        "quantize",
        "quantize a checkpoint into NxD Inference's quantized format, streaming",
        _quantize_options,
        cmd_quantize,
    ),
    Command("cache-key", "print the cache key of a compile request", _cache_key_options, cmd_cache_key),
    Command("run", "run the whole pipeline for one target in this process (no Airflow)", _run_options, cmd_run),
)
