"""The table of error classes and their outcomes in docs/failure-behaviour.md, rendered from the
classes themselves (`exit_code`, `retryable`, `http_status`, `prefix`, the docstring's first paragraph), from
`errors.DISK_FIXES` and from the two signals the CLI turns into `interrupts.Interrupted`, so that the
page cannot say what the code does not do.

It lives above every module that declares an error class (it imports them all to find every
subclass); `tests/test_error_outcomes.py` fails when the page differs. Regenerate the page with:

    python -m neuronforge.interfaces.error_table
"""

from __future__ import annotations

import errno
import inspect
import signal
import sys

import neuronforge.artifacts.channels
import neuronforge.artifacts.farm_index.log
import neuronforge.artifacts.hub_registry
import neuronforge.artifacts.leases

# Every module that declares an error class, imported so that each class is a known subclass here
# (tests/test_error_outcomes.py scans the sources for a class this list misses).
import neuronforge.compilation.backends.child
import neuronforge.compilation.host_probe
import neuronforge.farm.attest
import neuronforge.pipeline.planner
import neuronforge.pipeline.stages.payload
import neuronforge.pipeline.stages.smoke
import neuronforge.profiles.release_manifest
import neuronforge.profiles.release_table
import neuronforge.records.base
import neuronforge.stores.base  # noqa: F401
from neuronforge.common.docs_section import DOCS, GeneratedSection, cell, write_all
from neuronforge.common.errors import DISK_FIXES, NAME_LIMITS, TRANSIENT_DISK, ExitCode, NeuronforgeError
from neuronforge.common.interrupts import Interrupted


def error_classes() -> list[type[NeuronforgeError]]:
    """Every public error class of neuronforge, depth first from `NeuronforgeError` (a class with two
    bases under its first), siblings by name."""
    out: list[type[NeuronforgeError]] = []

    def walk(cls: type[NeuronforgeError]) -> None:
        out.append(cls)
        children = [
            c
            for c in cls.__subclasses__()
            if c.__bases__[0] is cls and c.__module__.startswith("neuronforge.") and not c.__name__.startswith("_")
        ]
        for c in sorted(children, key=lambda c: c.__name__):
            walk(c)

    walk(NeuronforgeError)
    return out


def _meaning(cls: type) -> str:
    doc = inspect.getdoc(cls) or ""
    return cell(doc.split("\n\n")[0], tags=False)


def _retried(retryable: bool) -> str:
    return "retried (`AirflowException`)" if retryable else "not retried (`AirflowFailException`)"


def body() -> list[str]:
    """The table's rows and the line after it."""
    rows = [
        "| Error | Is a | Exit | The DAG's tasks | HTTP | Prefix | What it means |",
        "|---|---|---|---|---|---|---|",
    ]
    for cls in error_classes():
        bases = ", ".join(f"`{b.__name__}`" for b in cls.__bases__ if b is not object)
        prefix = f'`"{cls.prefix}"`' if cls.prefix else ""
        rows.append(
            f"| `{cls.__name__}` (`{cls.__module__}`) | {bases} | {int(cls.exit_code)} "
            f"| {_retried(cls.retryable)} | {int(cls.http_status)} | {prefix} | {_meaning(cls)} |"
        )
    for code, fix in DISK_FIXES.items():
        rows.append(
            f"| `OSError` `{errno.errorcode[code]}` | | 1 | {_retried(code in TRANSIENT_DISK)} | | "
            f"| a disk that cannot be written; the line names the path, then: {cell(fix, tags=False)} |"
        )
    rows.append(
        "| `OSError` `ENAMETOOLONG` | | 2 | not retried (`AirflowFailException`) | "
        f"| a name given (an argument, a setting) too long for this host: `file name too long: NAME; {NAME_LIMITS}` |"
    )
    for sig, code in ((signal.SIGINT, ExitCode.INTERRUPTED), (signal.SIGTERM, ExitCode.TERMINATED)):
        rows.append(
            f"| `{sig.name}` (`{Interrupted.__module__}.Interrupted`) | `BaseException` | {int(code)} "
            f"| Airflow's own: the task ends as killed (`AirflowTaskTerminated`), a handed-on lease expires | "
            f"| `interrupted by {sig.name}: ` | {_meaning(Interrupted)} |"
        )
    tail = "Any other exception is not explained: the CLI and the task end with its traceback (a bug to report)."
    return [*rows, "", tail]


SECTION = GeneratedSection(
    DOCS / "failure-behaviour.md",
    "error-table",
    "neuronforge.interfaces.error_table",
    "the error classes",
    body,
)
SECTIONS = (SECTION,)

if __name__ == "__main__":
    sys.exit(write_all(SECTIONS))
