"""`neuronforge` command line (being split per command group: for now all of it is in `store.py`)."""

from neuronforge.interfaces.cli.store import *  # noqa: F403
from neuronforge.interfaces.cli.store import EXIT_CODES, ExitCode, build_parser, main  # noqa: F401
