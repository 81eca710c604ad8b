"""neuronforge_release: move a release channel or review a build — promote, rollback, approve, reject.

The form is `neuronforge.farm.releases.ReleaseRequest`'s fields (the CLI's `promote`, `rollback`,
`approve`, `reject` take the same request). One task, `release`, does it against the store as the
user who triggered the run, and logs and returns the outcome in one line. A promote to a gated
channel (`stable` by default: NEURONFORGE_REGRESSION_GATES) logs the comparison of the build with the
one the channel serves first, as `neuronforge compare` prints it. A refusal — a build that is not
approved for `stable`, rejected, not smoke-tested or of another profile line; a regression the form's
`accept_regression` does not accept with a reason; a channel that another mover moved meanwhile —
fails the run at once with that line (no retry: a retry cannot change it).

Every move emits an event on the Asset of its channel (through the `neuronforge-channels` alias):
consumers schedule on `neuronforge_airflow.operators.releases.channel_asset(store, model, profile,
channel)`. A request that changes nothing emits no event.

Only wiring: the task lives in `neuronforge_airflow/operators/releases.py`.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import dag

from neuronforge.common.deployment_names import RELEASE_DAG
from neuronforge_airflow.operators.releases import release
from neuronforge_airflow.params import RELEASE_PARAMS, with_form


@dag(
    dag_id=RELEASE_DAG,
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["neuronforge"],
    doc_md=__doc__,
)
def neuronforge_release():
    release()


with_form(neuronforge_release(), RELEASE_PARAMS)  # the form: on the DAG, not copied into its tasks
