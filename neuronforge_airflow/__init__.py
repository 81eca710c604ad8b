"""Thin Airflow operators over the `neuronforge` core: they translate Airflow context (params,
connections, XCom) into typed stage inputs and back, and hold no pipeline logic themselves.
The compile-and-publish operators arrive with the DAG (issue: pipeline end to end)."""
