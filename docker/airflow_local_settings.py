"""Airflow cluster policies for neuronforge: install as $AIRFLOW_HOME/config/airflow_local_settings.py on
every Airflow component (api-server, scheduler, dag-processor, triggerer, workers) and restart them.

The hook sizes the Neuron compile / smoke task instances (pool_slots = tp) and, where a run's task
instances are created, records the `neuron_cores` pool for the run-start check
(neuronforge_airflow/policies/deployment_checks.py), which refuses a Neuron run when this policy is missing.
"""

from neuronforge_airflow.policies.routing import task_instance_mutation_hook

__all__ = ["task_instance_mutation_hook"]
