"""Thin Airflow operators over the `neuronforge` core: they translate Airflow context (params,
connections, XCom) into typed stage inputs and back, and hold no pipeline logic themselves.
The compile-and-publish operators arrive with the DAG (issue: pipeline end to end).

Importing it masks every log record of the process (`common.secrets.mask_logs`): each DAG file,
task, trigger and policy of ours imports this package first, and the handlers that write a task's
log are Airflow's, set up before any of our code runs, so masking where records are made is the one
place that covers them all (issue 51)."""

from neuronforge.common.secrets import mask_logs

mask_logs()
