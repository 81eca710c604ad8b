"""neuronforge_config_sweep: every (tp, batch, sequence length) of a model that compiles and loads on
an instance, for one serving profile (`neuronforge sweep`, as a DAG).

Only wiring: `neuronforge_airflow/operators/sweep.py` holds the tasks. The candidates are mapped tasks of the group of
the profile's queue, run one at a time in the sweep's order; each picks up from the records in the
store, so a candidate a rule, the planner or monotonicity decided is skipped without a compile, and
a new run resumes the last one. The cache-config file and the records are in the store under
`sweeps/`, announced on the `neuronforge-config-sweeps` Asset.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import dag

from neuronforge.common.deployment_names import SWEEP_DAG
from neuronforge_airflow.operators.compile_publish import queues
from neuronforge_airflow.operators.sweep import candidates_for, finish_sweep, plan_sweep, try_candidates
from neuronforge_airflow.params import SWEEP_PARAMS, with_form


@dag(
    dag_id=SWEEP_DAG,
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["neuronforge"],
    doc_md=__doc__,
)
def neuronforge_config_sweep():
    plan = plan_sweep()
    tried = [try_candidates(q).partial(plan=plan).expand(candidate=candidates_for(q)(plan)) for q in queues()]
    tried >> finish_sweep(plan)


with_form(neuronforge_config_sweep(), SWEEP_PARAMS)  # the form: on the DAG, not copied into its tasks
