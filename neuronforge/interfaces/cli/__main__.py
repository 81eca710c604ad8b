# PYTHON_ARGCOMPLETE_OK
"""`python -m neuronforge.interfaces.cli ...`: the `neuronforge` console script without installing it
(`make airflow`, the bench, tests that run the CLI in a fresh interpreter)."""

import sys

from neuronforge.interfaces.cli import main

sys.exit(main())
