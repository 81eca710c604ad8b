"""One error policy: each error class carries its outcome (exit code, retried or not, prefix),
`errors.outcome` reads it, and the CLI's `main` and the tasks' `task_failure` both follow it; the
table in docs/failure-behaviour.md is rendered from the classes."""

from __future__ import annotations

import ast
import errno
from http import HTTPStatus
from pathlib import Path

import pytest

from neuronforge.artifacts.leases import LeaseLost
from neuronforge.common import errors
from neuronforge.common.errors import CheckpointError, ExitCode, InvalidInput, NeuronforgeError, StoreError, outcome
from neuronforge.interfaces import cli, error_table
from neuronforge.pipeline.planner import PlanRejected
from neuronforge.pipeline.stages.smoke import SmokeFailed
from tests.conftest import TARGET

ROOT = Path(__file__).resolve().parents[1]


def _instance(cls: type[NeuronforgeError], message: str) -> NeuronforgeError:
    return cls(message, []) if cls.__name__ == "ChildFailed" else cls(message)


@pytest.mark.parametrize(
    ("exc", "code", "retryable", "message"),
    [
        (InvalidInput("--tp 3: use 1, 2 or 4"), ExitCode.USAGE, False, "--tp 3: use 1, 2 or 4"),
        (
            CheckpointError("x.safetensors is truncated"),
            ExitCode.REJECTED,
            False,
            "checkpoint rejected: x.safetensors is truncated",
        ),
        (PlanRejected("slug: does not fit"), ExitCode.REJECTED, False, "slug: does not fit"),
        (SmokeFailed("slug: smoke test failed"), ExitCode.REJECTED, False, "slug: smoke test failed"),
        (StoreError("bucket 'b' does not exist"), ExitCode.FAILURE, False, "bucket 'b' does not exist"),
        (errors.StoreUnreachable("cannot reach http://x"), ExitCode.FAILURE, True, "cannot reach http://x"),
        (errors.ServiceUnreachable("the Hub answers 503"), ExitCode.FAILURE, True, "the Hub answers 503"),
        (LeaseLost("lease abc was taken over"), ExitCode.FAILURE, True, "lease abc was taken over"),
        (NeuronforgeError(""), ExitCode.FAILURE, False, "NeuronforgeError"),
    ],
)
def test_each_error_carries_its_outcome(exc: NeuronforgeError, code: ExitCode, retryable: bool, message: str) -> None:
    found = outcome(exc)
    assert found is not None
    assert (found.exit_code, found.retryable, found.message) == (code, retryable, message)


def test_a_multi_line_message_is_one_line_for_the_tasks_and_keeps_its_prefix_first() -> None:
    found = outcome(CheckpointError("\n  a.safetensors is truncated\n\nb.safetensors is missing  \n"))
    assert found is not None
    assert found.line == "checkpoint rejected: a.safetensors is truncated; b.safetensors is missing"
    assert found.message.startswith("checkpoint rejected: \n")  # the CLI prints it as raised


def test_disk_errors_name_the_path_and_only_a_full_disk_is_retried(tmp_path: Path) -> None:
    asked: list[int] = []

    def places() -> list[Path]:
        asked.append(1)
        return [tmp_path]

    full = outcome(OSError(errno.ENOSPC, "No space left on device", "/srv/store/x"), places)
    assert full is not None and full.retryable and full.exit_code == ExitCode.FAILURE
    assert full.message == f"No space left on device: /srv/store/x; {errors.DISK_FIXES[errno.ENOSPC]}"
    read_only = outcome(OSError(errno.EROFS, "Read-only file system", "/srv"))
    assert read_only is not None and not read_only.retryable
    assert outcome(InvalidInput("x"), places) is not None and not asked  # asked for a disk error naming no file only
    unnamed = outcome(OSError(errno.ENOSPC, "No space left on device"), places)
    assert unnamed is not None and asked and unnamed.message.startswith("No space left on device: ")


def test_anything_unexplained_has_no_outcome() -> None:
    for exc in (KeyError("a bug"), OSError(errno.ENOENT, "No such file"), RuntimeError("x"), KeyboardInterrupt()):
        assert outcome(exc) is None


def test_every_class_exit_code_is_in_the_cli_table() -> None:
    for cls in error_table.error_classes():
        assert isinstance(cls.exit_code, ExitCode) and cls.exit_code in cli.EXIT_CODES, cls
        assert isinstance(cls.retryable, bool) and isinstance(cls.prefix, str), cls


@pytest.mark.parametrize("cls", error_table.error_classes(), ids=lambda c: c.__name__)
def test_the_cli_and_the_tasks_follow_the_same_outcome(cls, monkeypatch, capsys) -> None:
    from airflow.sdk.exceptions import AirflowException, AirflowFailException

    from neuronforge.pipeline.buildstate import BuildState
    from neuronforge.spec.target import TargetSpec
    from neuronforge_airflow.operators.compile_publish import task_failure

    exc = _instance(cls, "what failed: the value\nwhat to do")

    def raising():
        raise exc

    monkeypatch.setattr("neuronforge.profiles.all_profiles", raising)  # what `neuronforge profiles` lists
    assert cli.main(["profiles"]) == cls.exit_code
    assert capsys.readouterr().err == f"error: {cls.prefix}what failed: the value\nwhat to do\n"

    state = BuildState(model="m", target=TargetSpec.parse(TARGET), store_uri="file:///tmp/s")
    raised = task_failure(exc, state)
    assert type(raised) is (AirflowException if cls.retryable else AirflowFailException)
    assert str(raised) == f"{cls.prefix}what failed: the value; what to do"


def test_the_docs_table_is_rendered_from_the_classes() -> None:
    page = (ROOT / "docs" / "failure-behaviour.md").read_text()
    assert error_table.SECTION.on_page(page), (
        f"docs/failure-behaviour.md lost its error-table markers ({error_table.SECTION.begin})"
    )
    assert error_table.SECTION.on_page(page) == error_table.SECTION.render(), (
        f"docs/failure-behaviour.md's error table differs from the classes: run `{error_table.SECTION.regenerate}`"
    )


def test_the_table_lists_every_error_class_declared_in_the_sources() -> None:
    """A class declared in a module `error_table` does not import would be missing from the page:
    scan the sources for every subclass (by name, to a fixed point) of a listed class."""
    listed = {c.__name__ for c in error_table.error_classes()}
    declared: dict[str, tuple[str, list[str]]] = {}
    for path in (ROOT / "neuronforge").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                bases = [b.id if isinstance(b, ast.Name) else ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases]
                declared[node.name] = (str(path.relative_to(ROOT)), bases)
    errors_found = {"NeuronforgeError"}
    while True:
        more = {name for name, (_, bases) in declared.items() if errors_found & set(bases)} - errors_found
        if not more:
            break
        errors_found |= more
    missing = sorted(f"{name} ({declared[name][0]})" for name in errors_found - listed)
    assert not missing, f"import their modules in neuronforge/interfaces/error_table.py: {missing}"
    assert {"LeaseLost", "PlanRejected", "RecordTooNew", "NotFound"} <= listed


@pytest.mark.parametrize("cls", error_table.error_classes(), ids=lambda c: c.__name__)
def test_each_class_http_status_follows_its_outcome_unless_it_says_otherwise(cls) -> None:
    """What a web surface answers: a class that sets no `http_status` has the one its outcome implies."""
    assert isinstance(cls.http_status, HTTPStatus), cls
    if "http_status" not in vars(cls):
        assert cls.http_status == errors.derived_status(cls), cls
    if cls.retryable:
        assert cls.http_status == HTTPStatus.SERVICE_UNAVAILABLE, cls  # it may pass: ask again later
    if issubclass(cls, StoreError) and cls.http_status != HTTPStatus.NOT_FOUND:
        assert cls.http_status == HTTPStatus.SERVICE_UNAVAILABLE, cls  # the store a page reads, not the request


def test_the_http_statuses_of_the_kinds_of_failure() -> None:
    from neuronforge.artifacts.channels import ChannelDamaged, ChannelMoved, PromotionRefused
    from neuronforge.records.base import RecordError
    from neuronforge.stores.base import NotFound

    assert InvalidInput.http_status == HTTPStatus.BAD_REQUEST  # bad input
    assert NotFound.http_status == HTTPStatus.NOT_FOUND
    assert PlanRejected.http_status == PromotionRefused.http_status == ChannelMoved.http_status == 409  # refused
    assert LeaseLost.http_status == 503  # retried: it may pass
    assert StoreError.http_status == RecordError.http_status == ChannelDamaged.http_status == 503
    assert errors.StoreUnreachable.http_status == errors.ServiceUnreachable.http_status == 503
    assert NeuronforgeError.http_status == HTTPStatus.INTERNAL_SERVER_ERROR

    class Refusal(NeuronforgeError):
        exit_code = ExitCode.REJECTED

    class Unusable(InvalidInput):
        http_status = HTTPStatus.UNPROCESSABLE_ENTITY

    class Quiet(StoreError):
        pass

    assert (Refusal.http_status, Unusable.http_status, Quiet.http_status) == (409, 422, 503)
