"""`python -m tests.reliability.stalled_cli STAGE MARKER ARGV...`: the `neuronforge` console script with
one stage of `run` stalled where a kill can reach it, so that the kill matrix (test_kills.py) stops a
run at each stage without waiting for a real compile to be there. `... --task STAGE MARKER STATE_FILE`:
the DAG's stage task for the build state in STATE_FILE, as Airflow's task runner runs it, stalled alike.

MARKER is written once the stage is reached (with the PID of what runs there). Each stall is where
that stage's time really goes:
- `claim_build`: the lease just taken and announced (before the first stage keeps it);
- `compile_graphs`: a toolchain child, started as the backends start theirs (`child.run_process`, a
  session of its own), compiling forever: MARKER holds the child's PID; `compile_graphs!`: the same
  child ignoring SIGTERM (its stop waits out the grace before SIGKILL);
- `publish_artifact`: the payload copied into the artifact folder, the manifest not yet written;
- the others: the stage's own work, sleeping in this process.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from pathlib import Path

FOREVER_S = 600.0


def stall(stage: str, marker: Path) -> None:
    from neuronforge.pipeline import runner

    def reached(pid: int | None = None) -> None:
        marker.write_text(str(pid or os.getpid()))

    if stage == "claim_build":
        from neuronforge.artifacts import farm_index

        announce = farm_index.announce

        def announced(*args: object, **kwargs: object) -> None:
            announce(*args, **kwargs)
            reached()
            time.sleep(FOREVER_S)

        farm_index.announce = announced
        return
    if stage == "publish_artifact":
        from neuronforge.records.artifact_manifest import ArtifactManifest

        def manifest_write(self: object, *args: object, **kwargs: object) -> None:
            reached()
            time.sleep(FOREVER_S)

        ArtifactManifest.write = manifest_write
        return

    stubborn = stage.endswith("!")
    stage = stage.rstrip("!")

    def stalled(state: object, ctx: object) -> object:
        if stage == "compile_graphs":
            from neuronforge.compilation.backends.child import run_process

            child = (
                "import os, signal, sys, time;"
                # as `python -m neuronforge_toolchain` starts: it ends with its worker, even a SIGKILLed one
                + (
                    "signal.signal(signal.SIGTERM, signal.SIG_IGN);"
                    if stubborn
                    else "from neuronforge_toolchain.orphan import end_with_parent; end_with_parent();"
                )
                + "open(sys.argv[1] + '.tmp', 'w').write(str(os.getpid()));"
                "os.rename(sys.argv[1] + '.tmp', sys.argv[1]); time.sleep(600)"
            )
            run_process([sys.executable, "-c", child, str(marker)], env=dict(os.environ), timeout_s=FOREVER_S, what="x")
        reached()
        time.sleep(FOREVER_S)
        return state

    stages = tuple(dataclasses.replace(s, run=stalled) if s.name == stage else s for s in runner.STAGES)
    assert any(s.name == stage for s in stages), f"no stage {stage}"
    runner.STAGES = stages
    runner.STAGE_BY_NAME = {s.name: s for s in stages}


def as_airflow_task(stage: str, state_file: Path) -> int:
    """The stage task's body as Airflow 3.3's task runner runs it: SIGINT at its default (the
    supervisor's `_reset_signals`) and SIGTERM calling the operator's `on_kill` and returning
    (`task_runner._execute_task`'s `_on_term`: the task would go on until the SIGKILL 5 s later).
    Prints how the task ended."""
    import json
    import logging
    import signal

    from airflow.sdk.exceptions import AirflowTaskTerminated

    from neuronforge_airflow.operators.compile_publish import run_stage_task

    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, lambda signum, frame: None)  # on_kill of a TaskFlow task: nothing
    try:
        run_stage_task(stage, json.loads(state_file.read_text()))
    except AirflowTaskTerminated as exc:
        print(f"AirflowTaskTerminated: {exc}", flush=True)
        return 0
    return 1


if __name__ == "__main__":
    if sys.argv[1] == "--task":
        stage, marker, state_file = sys.argv[2:]
        stall(stage, Path(marker))
        sys.exit(as_airflow_task(stage.rstrip("!"), Path(state_file)))
    stage, marker, *argv = sys.argv[1:]
    stall(stage, Path(marker))
    from neuronforge.interfaces.cli import main

    sys.argv = ["neuronforge", *argv]
    sys.exit(main())  # as the console script calls it: the process's entry point
