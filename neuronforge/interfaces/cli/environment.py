"""The commands about this installation rather than a build: the serving `profiles` it knows, its
effective `config` (every NEURONFORGE_* setting), the `worker-queues` of a worker image, and this
checkout's Airflow UI (`airflow`, what `make airflow` runs)."""

from __future__ import annotations

import argparse
from pathlib import Path

from neuronforge.common import advice, settings
from neuronforge.common.errors import ExitCode
from neuronforge.interfaces.cli.command import Command
from neuronforge.interfaces.cli.exit_codes import EXIT_OK
from neuronforge.interfaces.cli.options import JSON_HELP, print_json, sdk_release, whole


def _profiles_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--brief", action="store_true", help="one line per profile version, no lifecycle tables")
    p.add_argument("--json", action="store_true", help=JSON_HELP)


def cmd_profiles(args: argparse.Namespace) -> int:
    from neuronforge.interfaces import lifecycle_table
    from neuronforge.profiles import all_profiles
    from neuronforge.profiles.registry import refused_stacks

    rows = [p.describe() for p in all_profiles()]
    refused = [{"name": s.name, "reason": s.reason, "nearest": s.nearest} for s in refused_stacks()]
    if args.json:
        print_json({"profiles": rows, "not_supported": refused, "lifecycles": lifecycle_table.to_json()})
        return EXIT_OK
    for r in rows:
        print(f"{r['ref']:<24} {r['title']}")
        if args.brief:
            continue
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
    if args.brief:
        print(f"each line's status per instance family and SDK release, with sources: {advice.command('profiles')}")
        return EXIT_OK
    for line in lifecycle_table.text():
        print(line)
    return EXIT_OK


def _config_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON object: variable -> value and source")


def cmd_config(args: argparse.Namespace) -> int:
    """Every setting's effective value and where it came from (`settings.effective()`); a URI with
    credentials is shown masked, as the store refuses it."""
    from neuronforge.stores.base import masked

    rows = settings.effective()
    for r in rows:
        if isinstance(r.value, str):
            r.value = masked(r.value) or r.value
    if args.json:
        print_json({r.variable: {"value": r.value, "source": r.source} for r in rows})
        return EXIT_OK
    values = ["-" if r.value is None else f"{r.value:g}" if isinstance(r.value, float) else str(r.value) for r in rows]
    var_width, value_width = max(len(r.variable) for r in rows), max(map(len, values))
    for r, value in zip(rows, values, strict=True):
        print(f"{r.variable:<{var_width}}  {value:<{value_width}}  {r.source}")
    return EXIT_OK


def _worker_queues_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sdk", required=True, type=sdk_release, help="the image's Neuron SDK release, e.g. 2.26.1")
    p.add_argument("--role", required=True, choices=["compile", "neuron"], help="the worker's role")


def cmd_worker_queues(args: argparse.Namespace) -> int:
    """The Celery queues a worker of one SDK release's image consumes in its role (the image's CMD)."""
    from neuronforge.profiles.registry import worker_queues

    print(",".join(worker_queues(args.sdk, args.role)))
    return EXIT_OK


def _airflow_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--port", type=whole(1, 65_535), default=8080, help="the UI's port on 127.0.0.1 (default 8080)")
    p.add_argument("--airflow-home", help="Airflow home (default: $NEURONFORGE_HOME/airflow)")


def cmd_airflow(args: argparse.Namespace) -> int:
    from neuronforge.interfaces.local_airflow import serve

    # serve() answers 0 on a clean stop (Ctrl+C), 1 when a component died on its own
    code = serve(port=args.port, home=Path(args.airflow_home) if args.airflow_home else None)
    return ExitCode.OK if code == 0 else ExitCode.FAILURE


COMMANDS = (
    Command(
        "profiles",
        "list the serving profiles: SDK, compiler, backend, instances, what is published, and each line's "
        "lifecycle per instance family",
        _profiles_options,
        cmd_profiles,
    ),
    Command(
        "config",
        "print every NEURONFORGE_* setting's effective value and where it came from (env, default)",
        _config_options,
        cmd_config,
    ),
    Command(
        "worker-queues",
        "the Celery queues a Neuron worker image consumes: compile (CPU host) or neuron role",
        _worker_queues_options,
        cmd_worker_queues,
    ),
    Command(
        "airflow",
        "run this checkout's Airflow UI on 127.0.0.1 in the foreground (Ctrl+C stops it)",
        _airflow_options,
        cmd_airflow,
    ),
)
