"""The edges people use: the command line, the demo, the local Airflow."""
