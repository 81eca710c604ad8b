"""The code neuronforge runs inside a Neuron toolchain's own Python.

A Neuron SDK ships as an image with its own interpreter (the LMI image of SDK 2.21.1 runs Python
3.10, the SDK 2.26.1 DLC Python 3.11), which is not the Airflow worker's. So the Airflow worker
(neuronforge, Python 3.11, its own venv) never imports the SDK: it starts this package under the
toolchain's interpreter, hands it one request and reads one response (`protocol`), relaying what
the toolchain prints as it works.

Rules for everything in this package, checked in CI (`vermin`, ruff with `target-version = "py310"`,
`tests/toolchain_side/`): the standard library and the SDK only (no neuronforge, no Airflow, no
pydantic), Python 3.10 syntax and APIs, SDK modules imported inside the functions that use them.
"""

PROTOCOL = 1  # bumped whenever a request or a response changes shape; both sides must agree
