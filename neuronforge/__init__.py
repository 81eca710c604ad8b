"""neuronforge: compile-and-publish LLMs for AWS Neuron, with the planning done before the hour-long compile.

This package is the Airflow-free core: specs, planner, stores, stages, backends and the CLI.
"""

__version__ = "0.1.0"
