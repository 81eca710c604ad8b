"""The deployment fixture: one real deployment (PostgreSQL, redis, S3, Airflow with two Celery
workers) per module, every process stopped by PID at the end. Skipped, with the reason, on a machine
without the PostgreSQL / redis binaries or the deployment packages (requirements-deploy.txt)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.deployment.services import SUMMARY, missing_requirements, note

MISSING = missing_requirements()


def pytest_terminal_summary(terminalreporter) -> None:
    if SUMMARY:
        terminalreporter.section("neuronforge deployment")
        for line in SUMMARY:
            terminalreporter.write_line(line)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not MISSING:
        return
    skip = pytest.mark.skip(reason="deployment test needs " + "; ".join(MISSING))
    for item in items:
        if "tests/deployment/" in item.nodeid:
            item.add_marker(skip)


@pytest.fixture(scope="module")
def deployment(request: pytest.FixtureRequest) -> Iterator:
    from tests.deployment.airflow_deploy import CHANNEL_CONSUMER, CHANNEL_CONSUMER_DAG, deploy, teardown

    # Not under pytest's 0700 tmp dirs: PostgreSQL may run as another account and must reach its dir.
    root = Path(tempfile.mkdtemp(prefix="nf-deploy-"))
    root.chmod(0o755)
    dep = deploy(root, extra_dags={f"{CHANNEL_CONSUMER}.py": CHANNEL_CONSUMER_DAG})
    note(
        f"deployment up in {dep.timings['deployment total']:.0f}s at {root}: workers "
        f"{[w.name for w in dep.workers]} isolated by {dep.isolation}; "
        + ", ".join(f"{k} {v:.0f}s" for k, v in dep.timings.items())
    )
    failed_before = request.session.testsfailed
    try:
        yield dep
    finally:
        teardown(dep)
        keep = os.environ.get("NF_DEPLOY_KEEP") or request.session.testsfailed > failed_before
        if keep:
            print(f"\ndeployment files kept at {root} (logs/, airflow/logs/)")
        else:
            shutil.rmtree(root, ignore_errors=True)
