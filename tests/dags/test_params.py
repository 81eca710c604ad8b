"""The trigger forms of both DAGs against real Airflow: the defaults trigger, an unknown conf key is
refused when the run is created (REST `POST /api/v2/dags/{id}/dagRuns`, answered 400, no run left
behind) by the `task_instance_mutation_hook` cluster policy, and by the first task without it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from neuronforge.common.errors import InvalidInput
from neuronforge_airflow.params import (
    COMPILE_DAG,
    FORMS,
    PARAMS,
    RECOMPILE_DAG,
    RECOMPILE_PARAMS,
    RELEASE_DAG,
    TARGET_SCHEMA,
    refuse_unknown_conf,
    validate_conf,
    validate_recompile_conf,
)

DAGS = Path(__file__).resolve().parents[2] / "dags"


def test_target_schema_stays_importable_from_compile_params() -> None:
    assert TARGET_SCHEMA["additionalProperties"] is False and "tp_degree" in TARGET_SCHEMA["required"]


@pytest.mark.parametrize(
    ("params", "optional"),
    [(PARAMS, {"model", "store"}), (RECOMPILE_PARAMS, {"catalog", "store"})],
)
def test_optional_params_are_nullable_and_the_defaults_validate(params: dict, optional: set[str]) -> None:
    from airflow.sdk.definitions.param import ParamsDict

    for name in optional:
        assert "null" in params[name].schema["type"] and params[name].value is None
    # What the form's "required" rule tests (a type without "null"): only non-optional ones.
    required = {k for k, p in params.items() if "null" not in p.schema.get("type", [])}
    assert not (required & optional)
    assert ParamsDict(params).validate()  # the defaults are a valid conf


def test_unknown_keys_are_named_with_the_allowed_ones_and_a_suggestion() -> None:
    validate_conf({})
    validate_conf({"targets": [], "model": None})
    with pytest.raises(InvalidInput) as err:
        validate_conf({"target": [{"tp_degree": 2}]})
    msg = str(err.value)
    assert "'target' (did you mean 'targets'?)" in msg and "max_new_tokens" in msg and msg.count(".") == 1
    with pytest.raises(InvalidInput, match=r"'colour', 'dryrun' \(did you mean 'dry_run'\?\)"):
        validate_recompile_conf({"dryrun": True, "colour": "red"})


@pytest.fixture
def synced(airflow_db: str):
    """Both DAGs parsed and written to the metadata DB, as the dag-processor does."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db
    from airflow.utils.session import create_session

    with create_session() as session:
        DagBundlesManager().sync_bundles_to_db(session=session)
    bag = DagBag(dag_folder=str(DAGS))
    assert bag.import_errors == {}
    sync_bag_to_db(bag, "dags-folder", None)
    return bag.dags


@pytest.fixture
def conf_policy() -> Iterator[None]:
    """`refuse_unknown_conf` installed as Airflow installs airflow_local_settings' hook."""
    from airflow import settings
    from airflow.policies import hookimpl

    class Policy:
        @staticmethod
        @hookimpl
        def task_instance_mutation_hook(task_instance: Any, dag_run: Any) -> None:
            refuse_unknown_conf(task_instance, dag_run)

    manager = settings.get_policy_plugin_manager()
    name = manager.register(Policy())
    noop = settings.task_instance_mutation_hook.is_noop
    settings.task_instance_mutation_hook.is_noop = False
    try:
        yield
    finally:
        settings.task_instance_mutation_hook.is_noop = noop
        manager.unregister(name=name)


@pytest.fixture
def api(synced, conf_policy, monkeypatch: pytest.MonkeyPatch):
    """The real API server app (in process) with every request an admin."""
    from airflow.api_fastapi.app import create_app
    from fastapi.testclient import TestClient

    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS", "True")
    with TestClient(create_app(apps="core")) as client:
        yield client


def _runs(dag_id: str) -> list[tuple[str, dict]]:
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        return [(r.run_id, dict(r.conf or {})) for r in session.scalars(select(DagRun).where(DagRun.dag_id == dag_id))]


@pytest.mark.parametrize(
    ("dag_id", "bad_key", "hint"), [(COMPILE_DAG, "target", "targets"), (RECOMPILE_DAG, "stor", "store")]
)
def test_rest_trigger_accepts_the_defaults_and_refuses_an_unknown_key(
    api, dag_id: str, bad_key: str, hint: str
) -> None:
    # The form is built from the details' schemas: the optional strings are nullable with a null default.
    details = api.get(f"/api/v2/dags/{dag_id}/details").json()
    optional = {"model", "store"} if dag_id == COMPILE_DAG else {"catalog", "store"}
    for name in optional:
        assert details["params"][name]["value"] is None and "null" in details["params"][name]["schema"]["type"]
    before = _runs(dag_id)

    # The trigger form submitted with its defaults: every param at its default value.
    defaults = {k: v["value"] for k, v in details["params"].items()}
    ok = api.post(f"/api/v2/dags/{dag_id}/dagRuns", json={"logical_date": None, "conf": defaults})
    assert ok.status_code == 200, ok.text
    empty = api.post(f"/api/v2/dags/{dag_id}/dagRuns", json={"logical_date": None, "conf": {}})
    assert empty.status_code == 200, empty.text

    bad = api.post(f"/api/v2/dags/{dag_id}/dagRuns", json={"logical_date": None, "conf": {bad_key: 1}})
    assert bad.status_code == 400, bad.text
    assert f"'{bad_key}' (did you mean '{hint}'?)" in bad.json()["detail"]
    created = [r for r in _runs(dag_id) if r not in before]
    assert sorted((c for _, c in created), key=len) == [{}, defaults]  # no run for the bad conf

    # The runs' params, as the tasks will see them: valid, the optional strings None.
    from airflow.models.serialized_dag import SerializedDagModel

    served = SerializedDagModel.get_dag(dag_id)
    for _, conf in created:
        resolved = served.params.deep_merge(conf).validate()
        assert all(resolved[name] is None for name in optional)


def test_the_release_form_needs_an_action_and_refuses_an_unknown_key(api) -> None:
    """The release DAG's form over REST: no run without an action (it has no default), none for a
    misspelt key; a valid request is a run."""
    before = _runs(RELEASE_DAG)

    def trigger(conf: dict):
        return api.post(f"/api/v2/dags/{RELEASE_DAG}/dagRuns", json={"logical_date": None, "conf": conf})

    details = api.get(f"/api/v2/dags/{RELEASE_DAG}/details").json()
    assert details["params"]["action"]["schema"]["enum"] == ["promote", "rollback", "approve", "reject"]
    no_action = trigger({"build": "0123456789ab"})
    assert no_action.status_code == 400 and "action" in no_action.text, no_action.text
    misspelt = trigger({"action": "approve", "build": "0123456789ab", "chanel": "stable"})
    assert misspelt.status_code == 400, misspelt.text
    assert "'chanel' (did you mean 'channel'?)" in misspelt.json()["detail"]
    ok = trigger({"action": "approve", "build": "0123456789ab"})
    assert ok.status_code == 200, ok.text
    created = [conf for run in _runs(RELEASE_DAG) if run not in before for conf in run[1:]]
    assert created == [{"action": "approve", "build": "0123456789ab"}]  # only the valid one


def test_dag_test_refuses_an_unknown_key_before_any_task(synced, conf_policy) -> None:
    with pytest.raises(InvalidInput, match="did you mean 'targets'"):
        synced[COMPILE_DAG].test(run_conf={"target": []})
    from airflow import settings

    settings.Session.rollback()  # dag.test leaves its failed transaction open; the REST API rolls back
    assert not [r for r in _runs(COMPILE_DAG) if r[1] == {"target": []}]


def _number_fields() -> list[tuple[str, str, Any]]:
    from neuronforge_airflow.params import FORMS

    return [
        (dag, name, p)
        for dag, form in FORMS.items()
        for name, p in form.items()
        if {"integer", "number"}
        & set([p.schema.get("type")] if isinstance(p.schema.get("type"), str) else p.schema.get("type", []))
    ]


def test_no_number_field_gives_the_browser_a_range_to_clamp_to() -> None:
    """Airflow's form hands a number field's `minimum`/`maximum` to the input, which clamps what
    is typed (0 sent as 1): the range lives under `allOf`, where only validation reads it."""
    fields = _number_fields()
    assert {n for _, n, _ in fields} >= {"tp_degree", "batch_size", "sequence_length", "max_new_tokens"}
    for dag, name, p in fields:
        assert not {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} & set(p.schema), (dag, name)


@pytest.mark.parametrize(
    ("conf", "sentence"),
    [
        ({"tp_degree": 0}, "tp_degree = 0 is not allowed; use a whole number from 1 to 128."),
        ({"tp_degree": 300}, "tp_degree = 300 is not allowed; use a whole number from 1 to 128."),
        ({"batch_size": 2000}, "batch_size = 2000 is not allowed; use a whole number from 1 to 1024."),
        ({"sequence_length": 4}, "sequence_length = 4 is not allowed; use a whole number from 8 to 1048576."),
        (
            {"max_context_length": 0},
            "max_context_length = 0 is not allowed; use empty or a whole number of at least 1.",
        ),
        ({"tp_degree": 1.5}, "tp_degree = 1.5 is not allowed; use a whole number from 1 to 128."),
        ({"max_new_tokens": 257}, "max_new_tokens = 257 is not allowed; use a whole number from 1 to 256."),
    ],
)
def test_a_number_out_of_range_gets_one_sentence(conf: dict, sentence: str) -> None:
    from airflow.sdk.definitions.param import ParamsDict

    from neuronforge_airflow.params import conf_problem

    assert conf_problem(COMPILE_DAG, conf) == f"{COMPILE_DAG}: {sentence}"
    # and Airflow's own Param check still refuses it (a caller that bypasses the api-server)
    params = ParamsDict(PARAMS)
    with pytest.raises(Exception, match="Invalid input"):
        params.update(conf)
        params.validate()


def test_a_number_in_range_passes() -> None:
    from neuronforge_airflow.params import conf_problem

    assert conf_problem(COMPILE_DAG, {"tp_degree": 128, "batch_size": 1, "max_context_length": None}) is None


@pytest.mark.parametrize("dag_id", sorted(FORMS))
def test_every_form_field_says_what_it_is(dag_id: str) -> None:
    """Each field of each trigger form has a description, and one that says more than its title (the
    form shows both: "Batch size" over "batch size" tells nothing); each field of a target in the
    `targets` JSON too (the JSON editor shows them)."""
    bare = []
    for name, param in FORMS[dag_id].items():
        text, title = (param.description or "").strip(), str(param.schema.get("title", name))
        if not text or text.lower().rstrip(".") == title.lower():
            bare.append(f"{name} ({text!r})")
    assert not bare, f"{dag_id}: fields without a description: {', '.join(bare)}"
    if dag_id == COMPILE_DAG:
        assert all(p.get("description") for p in TARGET_SCHEMA["properties"].values())


def test_a_misspelt_key_inside_a_target_gets_a_suggestion() -> None:
    """The REST conf check (the middleware's sentence) names the field a misspelt target key means, as it
    does for a misspelt top-level key; the DAG's first task (`TargetSpec.parse`) says the same."""
    from neuronforge_airflow.params import conf_problem

    sentence = conf_problem(COMPILE_DAG, {"targets": [{"instnace_type": "inf2.xlarge", "tp_degree": 1}]})
    assert (
        sentence is not None
        and "targets[0] has unknown field(s) instnace_type (did you mean 'instance_type'?)" in sentence
    )
