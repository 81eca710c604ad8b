"""`neuronforge sweep`: find every (tp, batch, sequence length) of a model that loads on an instance,
and write them as an inference-cache-config (and, with `--to-catalog`, as catalog targets)."""

from __future__ import annotations

import argparse
from pathlib import Path

from neuronforge.common import settings
from neuronforge.common.errors import InvalidInput, NeuronforgeError
from neuronforge.interfaces.cli.command import Command
from neuronforge.interfaces.cli.exit_codes import EXIT_OK
from neuronforge.interfaces.cli.options import (
    JSON_HELP,
    add_store_args,
    complete_instances,
    complete_profiles,
    completes,
    number,
    opened_store,
    print_json,
    target_field,
)


def _sweep_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="Hub id[@revision], s3:// prefix, local folder or config.json")
    completes(p.add_argument("--instance", required=True, help="instance type, e.g. inf2.48xlarge"), complete_instances)
    completes(
        p.add_argument(
            "--profile",
            default="optimum-neuron",
            help="serving profile the builds are for (default optimum-neuron, whose inference-cache-config the "
            "sweep writes: a sweep measures what loads on a Neuron device, which the cpu profile has not)",
        ),
        complete_profiles,
    )
    p.add_argument(
        "--tp",
        type=target_field("tp_degree"),
        nargs="+",
        help="tensor parallel sizes (default: every one the rules allow)",
    )
    p.add_argument("--batch-sizes", type=target_field("batch_size"), nargs="+", help="default: 1 4 8 16 32 64 128")
    p.add_argument(
        "--seq-lens",
        type=target_field("sequence_length"),
        nargs="+",
        help="default: powers of two from 1024 to max positions",
    )
    p.add_argument("--dtype", type=target_field("dtype"), default="bf16", help="bf16 | fp16 | fp32 (default bf16)")
    p.add_argument("--out", required=True, help="inference-cache-config JSON (records go beside it)")
    p.add_argument("--try-command", help="command that tries one candidate (JSON on stdin, exit 0 = loads)")
    p.add_argument(
        "--method",
        choices=("planned", "document"),
        default="planned",
        help="document: the documented workflow's order (tp up, batch down, sequence down); planned (default): "
        "the same entries with fewer compiles (monotonicity, batch up, the planner skips what cannot fit)",
    )
    p.add_argument(
        "--planner-margin", type=number(0, 100), default=1.5, help="skip when the planner's need > this x HBM"
    )
    p.add_argument("--retry-failed", action="store_true", help="try again candidates an earlier run saw fail")
    add_store_args(p)
    p.add_argument("--to-catalog", metavar="FILE", help="add the valid configurations to this catalog YAML")
    p.add_argument(
        "--model-id",
        metavar="ORG/NAME",
        help="the Hub id the results are for: required when --model is a config.json file (the cache-config file "
        "is keyed by it, --to-catalog writes it as the source); default: --model's Hub id",
    )
    p.add_argument("--json", action="store_true", help=JSON_HELP)


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
    profile = get_profile(args.profile, instance.family)
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
        store = opened_store(args.store, must_exist=False)
        trial = PipelineTrial(build_from, instance.name, profile.ref, store, settings.work_dir(), args.dtype)
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
        print_json(summary)
        return EXIT_OK
    for r in result.records:
        print(f"{r.outcome:<8} {r.by:<12} {r.candidate}  {r.reason}")
    if args.to_catalog:
        for note in summary["catalog"]["notes"]:
            print(f"catalog: {note}")
        print(f"catalog: {summary['catalog']['added']} target(s) added to {summary['catalog']['path']}")
    print(
        f"{len(result.valid)} valid configuration(s) of {key} on {instance.name}, "
        f"{result.attempts} {'tried by --try-command' if args.try_command else 'compile(s) tried'} ({args.method}); "
        f"written to {out}, records in {log_file.path}"
    )
    return EXIT_OK


def _sweep_config_file(model: str) -> Path | None:
    """The sweep's `--model` when it is a bare config.json (what the bench and tests sweep): it says
    nothing of which model it describes, hence `--model-id`."""
    path = Path(model).expanduser()
    return path.resolve() if path.is_file() and path.suffix == ".json" else None


COMMANDS = (
    Command(
        "sweep",
        "find every (tp, batch, sequence length) of a model that loads on an instance",
        _sweep_options,
        cmd_sweep,
    ),
)
