"""Airflow cluster policies for neuronforge: copy to $AIRFLOW_HOME/config/airflow_local_settings.py."""

from operators.routing import task_instance_mutation_hook

__all__ = ["task_instance_mutation_hook"]
