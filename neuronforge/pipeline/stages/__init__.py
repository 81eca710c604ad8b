"""Pipeline stages: plain functions of typed inputs returning typed results. They never read Airflow
context; the operators in `neuronforge_airflow/` translate between the two."""
