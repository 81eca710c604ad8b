"""neuronforge_recompile_on_upgrade: keep the model catalog compiled for its serving profiles.

A new Neuron SDK release is a new profile version, served by its own queue (`neuron-<release>`,
one worker image per release); a catalog target naming a bare profile follows the newest version
that serves its instance family, up to the form's `sdk` release (empty: the newest the profile data
knows). Each target's upgrade is decided and reported (`neuronforge.farm.upgrades`): rebuild on the
newest release of its line for its family, stay where the line is frozen for it, or a proposed
migration where the line ends (built only with `migrate`); an SDK release the data does not know is
reported as unknown and nothing is rebuilt for it.
Daily and on demand: `sync_releases` proposes every Neuron release the store's mirror of AWS's release
manifest adds (`neuronforge releases sync`; the report names each one waiting for review, and a failing
sync is reported, never the run's failure). `check_workers` (default queue) refuses a conf with unknown
keys and asks, for every Neuron queue the catalog's profile versions need, whether a worker consumes it
(Celery only; other executors serve every queue). Each served queue's `watch_toolchain_<queue>` runs
there and reports the toolchain of every profile version routed to it, checked against the profile's
pins; an unserved queue's watch is skipped at once and its targets are reported unavailable, naming the
queue. Every catalog entry × target whose key (profile version + toolchain) has no complete manifest is
stale for that version; one `neuronforge_compile_publish` run per model rebuilds its stale targets, each
pinned to the version it is stale for (in catalog order; throttled by default: at most 2 rebuild runs in
flight, each trigger waiting deferred for its run, so the compile DAG keeps run slots for manual runs).
At most `[core] max_map_length` runs are triggered (a mapped task of more items fails the run): the
targets of the models past it are reported waiting, for the next recompile run.
A published build the upgrade keeps with decision `re-smoke` is smoked at the release and attested
(`farm.attest`), never rebuilt: by `attest_kept_default` for a profile that reads no Neuron SDK (cpu), and
on the Neuron hosts of the release the run aims at — queue `neuron-<release>`, whatever the release (one
with a registered profile, one only the release table knows, one accepted from the feed) — by
`attest_kept_neuron`, which the cluster policy puts on that queue (`route_attests` returns the Neuron
queues with builds to attest and a worker; the task is mapped over them). A build no worker can smoke is
reported with the command that attests it on a Neuron host of the release: start a worker of the
release's image on queue `neuron-<release>`.
The report — leading with the summary (counts per decision and per line, then what was done), then per
entry × target the profile versions it is published for and stale for, rebuilt, failed and why, still
running, waiting, attested — goes to this run's last task log, `reports/recompile-<stamp>.{md,json}` in
the store, and the `neuronforge-recompile-report` Asset.

Only wiring: the tasks live in `neuronforge_airflow/operators/recompile.py`, the logic in
`neuronforge/farm/recompile.py`.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import dag

from neuronforge.common.deployment_names import COMPILE_DAG, RECOMPILE_DAG
from neuronforge.profiles import neuron_queues
from neuronforge_airflow.operators.recompile import (
    REBUILD_SLOTS,
    TRIGGER_TASK,
    AwaitRebuildsOperator,
    attest_kept_default,
    attest_kept_neuron,
    check_workers,
    find_stale,
    rebuild_runs,
    report,
    route_attests,
    sync_releases,
    verdict,
    watch_toolchain,
)
from neuronforge_airflow.operators.trigger_run import TriggerRunOperator
from neuronforge_airflow.params import RECOMPILE_PARAMS, with_form


@dag(
    dag_id=RECOMPILE_DAG,
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["neuronforge"],
    doc_md=__doc__,
)
def neuronforge_recompile_on_upgrade():
    workers = check_workers()
    plan = find_stale(feed=sync_releases())  # the release feed's sync from the store's mirror, before deciding
    for queue in neuron_queues():  # one watch per SDK release's queue, on that queue
        workers >> watch_toolchain(queue) >> plan
    workers >> plan
    triggered = TriggerRunOperator.partial(
        task_id=TRIGGER_TASK,
        trigger_dag_id=COMPILE_DAG,
        skip_when_already_exists=True,  # a retried trigger does not start a second run
        # Throttled rebuilds (rebuild_runs sets wait_for_completion): each trigger waits, deferred
        # (no worker slot), until its run ends either way, and at most REBUILD_SLOTS wait at once.
        deferrable=True,
        poke_interval=60,
        allowed_states=["success", "failed"],
        failed_states=[],
        max_active_tis_per_dagrun=REBUILD_SLOTS,
    ).expand_kwargs(rebuild_runs(plan))
    waited = AwaitRebuildsOperator(task_id="await_rebuilds", plan=plan, wait_minutes="{{ params.wait_minutes }}")
    triggered >> waited
    summary = report(plan)
    waited >> summary
    attests = route_attests(plan)  # the Neuron queues to attest on: at most neuron-<the run's release>
    attests >> attest_kept_default(plan) >> summary
    # each instance on its queue: the cluster policy routes it (a task's declared queue is every run's)
    attest_kept_neuron.partial(plan=plan).expand(hosts=attests) >> summary
    verdict(summary)


with_form(neuronforge_recompile_on_upgrade(), RECOMPILE_PARAMS)  # the form: on the DAG, not copied into its tasks
