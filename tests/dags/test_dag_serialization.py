"""What the dag-processor does with every DAG file on every loop: parse it and serialize its DAG
(`DagSerialization.to_dict`, as `dag_processing.processor._serialize_dags` calls it). A DAG's params
are its trigger form: serialized, and their schemas checked, once with the DAG — not copied into each
task (Airflow's default for `@dag(params=...)`), where the dag-processor validated every copy twice
(the compile DAG: 2 130 `check_schema` calls, ~1 s per loop)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from neuronforge.common.deployment_names import COMPILE_DAG
from neuronforge_airflow.params import FORMS, PARAMS

DAGS = Path(__file__).resolve().parents[2] / "dags"


@pytest.fixture(scope="module")
def dags() -> dict:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS))
    assert bag.import_errors == {}
    return bag.dags


@pytest.fixture
def schema_checks(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict]]:
    """Every `check_schema` jsonschema runs (Param.resolve calls `jsonschema.validate`, which checks
    the schema against its metaschema first: the expensive part)."""
    import jsonschema

    seen: list[dict] = []
    for cls in (jsonschema.Draft202012Validator, jsonschema.Draft7Validator, jsonschema.Draft4Validator):
        original = cls.check_schema.__func__

        def counting(klass, schema, *args, _original=original, **kwargs):
            seen.append(schema)
            return _original(klass, schema, *args, **kwargs)

        monkeypatch.setattr(cls, "check_schema", classmethod(counting))
    yield seen


def _carrying_params(data: dict) -> list[str]:
    return [
        t["__var"]["task_id"]
        for t in data["dag"]["tasks"]
        if "params" in t["__var"] or "params" in t["__var"].get("partial_kwargs", {})
    ]


@pytest.mark.parametrize("dag_id", sorted(FORMS))
def test_the_form_is_serialized_once_with_the_dag_not_per_task(dags, dag_id: str) -> None:
    from airflow.serialization.serialized_objects import DagSerialization

    data = DagSerialization.to_dict(dags[dag_id])
    assert [name for name, _ in data["dag"]["params"]] == list(FORMS[dag_id])  # the whole form, in its order
    assert _carrying_params(data) == []


def test_serializing_the_compile_dag_checks_each_schema_at_most_once(dags, schema_checks: list[dict]) -> None:
    from airflow.serialization.serialized_objects import DagSerialization

    dag = dags[COMPILE_DAG]
    assert len(dag.tasks) > 40  # per task it would be thousands of checks
    DagSerialization.to_dict(dag)
    assert len(schema_checks) <= len(PARAMS)


def test_a_task_still_sees_the_forms_params_merged_with_the_conf(dags) -> None:
    """What the task runner gives a task as `context["params"]` (`process_params`: the DAG's, the
    task's own, then the run's conf), validated as before."""
    from airflow.sdk.definitions.param import process_params
    from airflow.sdk.exceptions import ParamValidationError

    dag = dags[COMPILE_DAG]
    assert not dag.get_task("expand_targets").params and not dag.get_task("cpu_target.smoke").params
    task = dag.get_task("cpu_target.smoke")
    got = process_params(dag, task, {"max_new_tokens": 5}, suppress_exception=False)
    assert got["max_new_tokens"] == 5 and got["prompts"] == PARAMS["prompts"].value and set(got) == set(PARAMS)
    with pytest.raises(ParamValidationError, match="max_new_tokens"):
        process_params(dag, task, {"max_new_tokens": 0}, suppress_exception=False)
    assert PARAMS["max_new_tokens"].value == 8  # the DAG's copy took the conf, not the module's form
