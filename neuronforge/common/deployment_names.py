"""The names a deployment of neuronforge is known by in Airflow: its DAG ids, its Assets and asset aliases,
its Variables and its pool. Declared once here, read by the DAG files, the operators, the cluster policy,
the catalog plugin, `make demo` and the recompile planner (which names the compile DAG in its requests).

A name is an interface: a consumer's DAG is scheduled on an Asset by its name, an operator's
`TriggerDagRunOperator` targets a DAG id, a policy finds the record it keeps under a Variable's name, and
runs already in a database carry the DAG id. Renaming one here renames it everywhere at once; nothing
else in the package, the DAGs or the plugins writes one (`tests/test_deployment_names.py`). Plain text:
Airflow-free, so the core and the cluster policy (loaded by the scheduler before anything else) read
it without importing Airflow.
"""

from __future__ import annotations

# -- DAG ids ------------------------------------------------------------------------------------------
COMPILE_DAG = "neuronforge_compile_publish"  # checkpoint -> plan -> quantize -> compile -> smoke -> publish
RECOMPILE_DAG = "neuronforge_recompile_on_upgrade"  # keeps the catalog compiled for each SDK release
RELEASE_DAG = "neuronforge_release"  # moves a channel or reviews a build
SWEEP_DAG = "neuronforge_config_sweep"  # the export-configuration sweep
SCRUB_DAG = "neuronforge_scrub"  # the store's daily integrity scrub
DAG_IDS = (COMPILE_DAG, RECOMPILE_DAG, RELEASE_DAG, SWEEP_DAG, SCRUB_DAG)

# -- Assets and asset aliases (what a consumer's DAG is scheduled on) ----------------------------------
ARTIFACTS_ALIAS = "neuronforge-artifacts"  # one Asset per published artifact root
CHANNELS_ALIAS = "neuronforge-channels"  # one Asset per release channel, an event per move
SWEEP_ASSET = "neuronforge-config-sweeps"  # a finished sweep's two files
REPORT_ASSET = "neuronforge-recompile-report"  # a recompile run's report

# -- Variables and the pool ---------------------------------------------------------------------------
DEPLOYMENT_VARIABLE = "neuronforge_deployment"  # what the cluster policy recorded of this deployment
CATALOG_VARIABLE = "neuronforge_catalog"  # the recompile DAG's catalog, when not given in its conf
NEURON_POOL = "neuron_cores"  # a Neuron task takes tp slots of it (`policies.routing`)

NAMES = (*DAG_IDS, ARTIFACTS_ALIAS, CHANNELS_ALIAS, SWEEP_ASSET, REPORT_ASSET, DEPLOYMENT_VARIABLE, CATALOG_VARIABLE)
