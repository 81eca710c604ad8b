"""Hooks: how the Airflow layer reaches what lies outside it (the store), from Airflow Connections."""
