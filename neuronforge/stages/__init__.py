"""Pipeline stages: plain functions of typed inputs returning typed results. They never read Airflow
context; the operators in `operators/` translate between the two."""
