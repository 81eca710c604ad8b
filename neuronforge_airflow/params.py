"""The trigger forms of both DAGs (their Params) and the check that refuses a conf with unknown keys.

Airflow validates each Param of a conf against its JSON schema when a run is created (REST
`POST /api/v2/dags/{id}/dagRuns`, the UI's trigger form, `airflow dags trigger`,
the recompile DAG's trigger task, `dag.test`), but a top-level key that is not a Param is taken as a new,
schema-less Param: `{"target": [...]}` instead of `targets` would silently build the default target.
Airflow 3.3 has no setting or Params feature that rejects extra keys (`SerializedParamsDict.deep_merge`
adds them unchecked). The one hook every path calls synchronously inside `create_dagrun`, before the
run is committed, is the `task_instance_mutation_hook` cluster policy (`DagRun.verify_integrity`
runs it for each new task instance): `refuse_unknown_conf` below raises there, so the REST API and
the UI answer 400 with its sentence and no run exists; the recompile DAG's trigger task fails with it.
Where the policy is not installed, the DAGs' first task calls `validate_conf` /
`validate_recompile_conf` and fails the run before any work.

Optional params are nullable (`type: ["null", "string"]`, default None): the Airflow 3 trigger form
marks a Param required when its schema type does not include "null", and refuses an empty value for
it; code reading them treats None like "".
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import typing
from collections.abc import Iterable, Mapping
from typing import Any

from airflow.sdk import Param

from neuronforge.artifacts.channels import CHANNEL_NAME
from neuronforge.common import advice, settings
from neuronforge.common.deployment_names import COMPILE_DAG, RECOMPILE_DAG, RELEASE_DAG, SCRUB_DAG, SWEEP_DAG
from neuronforge.common.errors import InvalidInput
from neuronforge.common.hub_ids import REPO_ID_PATTERN
from neuronforge.common.secrets import mask_credentials
from neuronforge.common.spelling import did_you_mean
from neuronforge.farm.releases import ACTIONS, ReleaseRequest
from neuronforge.profiles import all_profiles, profile_names
from neuronforge.spec.target import QUANTIZATION_CHOICES, TargetInput, TargetSpec, target_inputs, target_json_schema

QUANTIZATIONS = QUANTIZATION_CHOICES

# The form's profile choices, read from the registry: each name (its newest version) and each
# `name@version` a registered profile has.
PROFILE_CHOICES = profile_names() + [p.ref for p in all_profiles()]

# JSON schema of one target in the trigger form (Airflow validates it before any task runs), generated
# from `TargetSpec`'s declaration: the same fields and bounds the CLI and the pipeline apply.
TARGET_SCHEMA: dict[str, Any] = target_json_schema(choices={"profile": PROFILE_CHOICES})
TARGET_INPUTS: dict[str, TargetInput] = target_inputs()  # each declared input, as every form field is made from it

OPTIONAL_STRING = ["null", "string"]


def bounded(lo: int | None = None, hi: int | None = None) -> dict[str, Any]:
    """A number field's range, as the trigger form must carry it: inside `allOf`, not as the
    schema's own `minimum`/`maximum`. Airflow 3's form (its `FieldNumber`, a Chakra NumberInput)
    passes those two to the input as `min`/`max`, and the input clamps on blur — 0 typed in
    "Tensor parallel degree" was sent as 1, 300 as 128, while the field still showed what was
    typed. Under `allOf` the browser leaves the number alone, Airflow's Param check and
    `conf_problem` still enforce the range, and a value outside it gets its one sentence."""
    limits = {k: v for k, v in (("minimum", lo), ("maximum", hi)) if v is not None}
    return {"allOf": [limits]}


def store_param() -> Param:
    """Both DAGs' `store` field (a fresh Param per form)."""
    return Param(
        None,
        type=OPTIONAL_STRING,
        title="Store URI",
        description="where the artifacts are read and published: s3://bucket/prefix or file:///path, never with "
        "credentials in it; empty: NEURONFORGE_STORE or the local store",
    )


def target_param(inp: TargetInput, default: Any, choices: list[Any] | None = None) -> Param:
    """The form field of one declared target input (`TargetSpec`): its title, help, type and choices,
    its bounds under `allOf` (`bounded`), `default` as its value."""
    schema = {k: v for k, v in inp.schema.items() if k not in ("minimum", "maximum")}
    if choices is not None:
        schema["enum"] = list(choices)
    if "minimum" in inp.schema or "maximum" in inp.schema:
        schema |= bounded(inp.schema.get("minimum"), inp.schema.get("maximum"))
    return Param(default, **schema, title=inp.declared.title, description=inp.declared.help)


def form_target_fields(
    spec: type[TargetSpec] | None = None, defaults: Mapping[str, Any] | None = None
) -> dict[str, Param]:
    """The compile form's own target fields (each input declared `form=True`), valued at `defaults`
    (the embedded default target) or, for one it does not name, at the declared default."""
    defaults = settings.DEFAULT_TARGET if defaults is None else defaults
    return {
        name: target_param(inp, defaults.get(name, inp.default))
        for name, inp in target_inputs(spec).items()
        if inp.declared.form
    }


# The one target the form's own fields describe (the common case: no JSON to write); its defaults, the
# embedded default target, must be a valid target (checked here, when the DAG file is parsed).
TargetSpec.parse(settings.DEFAULT_TARGET)
FORM_TARGET_FIELDS: dict[str, Param] = form_target_fields()


def requested_targets(params: Mapping[str, Any], conf: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """A compile run's targets: the form's own target (its fields), then `targets`. When `targets` is
    given and the form's target fields are absent (the REST API, the recompile DAG) or left at their
    defaults (`dag.test` and the UI send every field), only `targets` is built. `params`: the
    run's params (defaults merged); `conf`: what the trigger sent (default: `params`)."""
    conf = params if conf is None else conf
    more = list(params.get("targets") or [])
    untouched = all(params.get(k) == p.value for k, p in FORM_TARGET_FIELDS.items())
    if more and (untouched or not any(k in conf for k in FORM_TARGET_FIELDS)):
        return more  # the form's target left at its defaults (or absent): the extra targets alone
    form = {k: params.get(k) for k in FORM_TARGET_FIELDS if params.get(k) is not None}
    return [form, *more]


def conf_targets(conf: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """`requested_targets` from a trigger's raw conf (the cluster policy sees no merged params)."""
    conf = dict(conf or {})
    merged = {k: p.value for k, p in FORM_TARGET_FIELDS.items()} | conf
    return requested_targets(merged, conf)


# A channel name as a form field takes it (empty: none), the pattern the release channels apply.
CHANNEL_PATTERN = f"^(?:{CHANNEL_NAME.pattern})?$"

# The compile DAG's trigger form (`with_form(dag, PARAMS)`).
PARAMS: dict[str, Param] = {
    "model": Param(
        None,
        type=OPTIONAL_STRING,
        title="Model",
        description="org/name[@revision], s3://bucket/prefix or a folder; empty: the embedded tiny Llama",
    ),
    "profile": target_param(TARGET_INPUTS["profile"], "cpu", PROFILE_CHOICES),
    **FORM_TARGET_FIELDS,
    "targets": Param(
        None,
        type=["null", "array"],
        items=TARGET_SCHEMA,
        title="More targets (advanced)",
        description="extra targets as JSON objects (instance_type, tp_degree, batch_size, sequence_length, "
        "dtype, quantization, ...), built besides the one above unless its fields are left at their "
        "defaults: then only these are built",
    ),
    "store": store_param(),
    "prompts": Param(
        ["Hello, my name is", "The capital of France is"],
        type="array",
        minItems=1,
        items={"type": "string", "minLength": 1},
        title="Smoke-test prompts",
        description="what the smoke test generates from, the artifact loaded as its server loads it (on a Neuron "
        "host for the Neuron profiles); the tokens must match the reference computed when it was built",
    ),
    "max_new_tokens": Param(
        8,
        type="integer",
        **bounded(1, 256),
        title="Smoke-test tokens",
        description="tokens the smoke test generates per prompt (1 to 256): more checks more of the decode graph "
        "and takes longer",
    ),
    "promote_to": Param(
        None,
        type=OPTIONAL_STRING,
        pattern=CHANNEL_PATTERN,
        title="Promote to channel",
        description="after a target publishes (or is already published) and its smoke test passed, point this "
        "release channel of its model and profile line at it (e.g. candidate); empty: no promotion. A refusal "
        "(stable takes only approved builds) is reported by the publish task and keeps the build published",
    ),
    "hub_registry": Param(
        None,
        type=OPTIONAL_STRING,
        pattern=f"^(?:{REPO_ID_PATTERN}|-)?$",
        title="Register in cache repository",
        description="optimum-neuron targets of a Hub model: after the smoke test, put the build's NEFFs and "
        "optimum-neuron's registry entry into this Hugging Face cache repository (org/name; created private if "
        "missing) so that `optimum-cli neuron cache lookup` and `serve` find it. Endpoint and token: the Airflow "
        "connection neuronforge_hub_registry (host, password), else HF_ENDPOINT / HF_TOKEN; empty: the workers' "
        "NEURONFORGE_HUB_REGISTRY, if any; -: not registered",
    ),
}

# The recompile DAG's trigger form.
RECOMPILE_PARAMS: dict[str, Param] = {
    "catalog": Param(
        None,
        type=OPTIONAL_STRING,
        title="Catalog",
        description="path of the catalog YAML; empty: Variable neuronforge_catalog, NEURONFORGE_CATALOG, "
        "or catalog/models.yaml",
    ),
    "store": store_param(),
    "sdk": Param(
        None,
        type=OPTIONAL_STRING,
        title="Neuron SDK release",
        description="the release to upgrade the catalog to, e.g. 2.33; empty: the newest release the profile data "
        "knows. Each target is rebuilt on the newest release of its line that serves its instance family, stays "
        f"where its line is frozen, or is offered a migration where its line ends (see {advice.command('profiles')})",
    ),
    "migrate": Param(
        False,
        type="boolean",
        title="Build migrations",
        description="also build the proposed migrations (a target whose line is frozen or ends for its family, on "
        "the line that takes over, with the changes the report lists); off: they are only proposed",
    ),
    "dry_run": Param(False, type="boolean", title="Dry run", description="report the stale set, trigger nothing"),
    "wait_minutes": Param(
        720,
        type="integer",
        **bounded(0),
        title="Wait for rebuilds (minutes)",
        description="how long the report waits (deferred) for the triggered runs; 0: report at once "
        "(with throttled rebuilds the triggers already waited for every run to end)",
    ),
    "throttle_rebuilds": Param(
        True,
        type="boolean",
        title="Throttle rebuilds",
        description="keep at most 2 rebuild runs of neuronforge_compile_publish in flight, the next one "
        "triggered when one ends, so the compile DAG's other run slots stay free for manual runs; "
        "off: trigger every rebuild at once",
    ),
}

# The sweep DAG's trigger form (`neuronforge sweep`'s options; the candidate lists are optional).
OPTIONAL_INTS = {"type": ["null", "array"], "items": {"type": "integer", "minimum": 1}}
SWEEP_PARAMS: dict[str, Param] = {
    "model": Param(
        None,
        type=OPTIONAL_STRING,
        title="Model",
        description="org/name[@revision], s3://bucket/prefix or a folder; empty: the embedded tiny Llama",
    ),
    # instance and dtype: one per sweep, the form fields of a target's (TargetSpec declares them)
    "instance": target_param(TARGET_INPUTS["instance_type"], "inf2.48xlarge"),
    "profile": Param(
        "optimum-neuron",
        type="string",
        enum=PROFILE_CHOICES,
        title="Serving profile",
        description="what each valid candidate is built and published for (its queue runs the candidates)",
    ),
    "tp": Param(None, **OPTIONAL_INTS, title="Tensor parallel sizes", description="empty: every one the rules allow"),
    "batch_sizes": Param(None, **OPTIONAL_INTS, title="Batch sizes", description="empty: 1 4 8 16 32 64 128"),
    "seq_lens": Param(
        None, **OPTIONAL_INTS, title="Sequence lengths", description="empty: powers of two from 1024 to max positions"
    ),
    "dtype": target_param(TARGET_INPUTS["dtype"], "bf16"),
    "method": Param(
        "planned",
        type="string",
        enum=["planned", "document"],
        title="Method",
        description="planned: the planner and monotonicity skip what they decide; document: try as the document does",
    ),
    "retry_failed": Param(False, type="boolean", title="Retry failed", description="try again what a run saw fail"),
    "store": store_param(),
}

# The release DAG's form: help for the fields of `ReleaseRequest` (which declares them: names, types,
# defaults); a field without a line here still gets its form field.
RELEASE_HELP: dict[str, str] = {
    "action": "promote or rollback a channel; approve or reject a build",
    "model": "the channel's model, without a revision (org/name, s3://bucket/prefix, builtin:tiny-llama)",
    "profile": "the channel's serving profile line (vllm-neuron, cpu, ...; a version after @ is ignored)",
    "channel": "the channel's name (stable, candidate, ...)",
    "build": "promote, approve, reject: the build's cache key or its first 12 hex digits; rollback: the build of "
    "the channel's history to return to (instead of steps)",
    "from_channel": "promote: the channel of the same model and line whose build to promote (instead of build)",
    "steps": "rollback: how many builds back in the channel's history",
    "reason": "why (kept in the channel's history or the review; reject requires it)",
    "accept_regression": "promote: why to promote past a regression the channel's gate refuses (kept in its history)",
}
_JSON_TYPES = {str: "string", int: "integer", bool: "boolean"}


def release_params(request: type[ReleaseRequest] = ReleaseRequest) -> dict[str, Param]:
    """The release DAG's form, derived from the request's declaration: a field per dataclass field, its
    JSON type from the annotation and its default (`action`: one of `ACTIONS`, promote by default for
    the form's sake, but a conf must name it: `REQUIRED_KEYS`); an optional text ("" by default) is
    nullable with a None default, as every optional form field here (`OPTIONAL_STRING`), and
    `ReleaseRequest.from_json` reads None as unset. Then the store, as every form has it."""
    hints = typing.get_type_hints(request)
    out: dict[str, Param] = {}
    for f in dataclasses.fields(request):
        kind = _JSON_TYPES[hints[f.name]]
        text = {"title": f.name.replace("_", " ").capitalize(), "description": RELEASE_HELP.get(f.name)}
        if f.name == "action":
            # a default: Airflow 3.3's form keeps Trigger disabled for an enum without one, even once the
            # pasted configuration JSON sets it (what the catalog's confirmation hands over)
            out[f.name] = Param(ACTIONS[0], type=kind, enum=list(ACTIONS), **text)
        elif f.default == "":
            out[f.name] = Param(None, type=["null", kind], **text)
        else:
            out[f.name] = Param(f.default, type=kind, **text)
    out["store"] = store_param()
    return out


RELEASE_PARAMS: dict[str, Param] = release_params()

# The integrity scrub's form (`neuronforge.farm.scrub`): how much of the store one run checks.
SCRUB_PARAMS: dict[str, Param] = {
    "page_size": Param(
        200, type="integer", **bounded(1, 1000), title="Page size", description="index pointers per page (1 to 1000)"
    ),
    "pages": Param(
        10,
        type="integer",
        **bounded(1, 1000),
        title="Pages",
        description="pages this run checks, after where the last scrub stopped (the next run goes on from here)",
    ),
    "store": store_param(),
}


def with_form(dag: Any, params: Mapping[str, Param]) -> Any:
    """Give a built DAG its form: `params` on the DAG only, set once its tasks exist — where `@dag(params=...)`
    would have copied them into every task.

    Airflow deep-copies a DAG's params into each task it creates and the dag-processor serializes every
    copy, validating each Param's schema (`jsonschema.validate`, so `check_schema`) twice per task: with
    the compile DAG's 15 params and 71 tasks that was 2 130 schema checks and ~1 s per parse loop, and
    the copies were most of its parse time. Nothing reads the copies: a task's `params` at run time are
    the DAG's, its own, then the conf's (`process_params`), and the trigger form, the REST conf check
    and `dag.test` read the DAG's. Assigning runs `DAG`'s own converter and validator, as the constructor
    does (a scheduled DAG's defaults must validate). A copy: a run's conf resolves into the DAG's Params
    (`process_params` sets their values), which must not reach the module's forms."""
    dag.params = copy.deepcopy(dict(params))
    return dag


ALLOWED_KEYS: dict[str, frozenset[str]] = {
    COMPILE_DAG: frozenset(PARAMS),
    RECOMPILE_DAG: frozenset(RECOMPILE_PARAMS),
    SWEEP_DAG: frozenset(SWEEP_PARAMS),
    RELEASE_DAG: frozenset(RELEASE_PARAMS),
    SCRUB_DAG: frozenset(SCRUB_PARAMS),
}


MAX_NAMED = 5  # unknown keys named in a sentence
MAX_SHOWN = 80  # characters of a value a sentence quotes


def shown(value: Any, quote: str | None = None) -> str:
    """`value` as a sentence quotes it: JSON (or the text between `quote`s), at most MAX_SHOWN
    characters of it, any credentials replaced by `***` (`common.secrets`, the one rule) — a sentence
    repeats what the caller sent, never a secret in it, and stays one line for a 1 MiB value."""
    if quote is not None and isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, allow_nan=True, default=repr)
        except (ValueError, RecursionError):  # a circular or very deep value (not from JSON)
            text = f"<{type(value).__name__}>"
    text = mask_credentials(text)  # all of it: a credential's `@` may lie past what is shown
    text = "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in text[: MAX_SHOWN + 1])  # one line
    if len(text) > MAX_SHOWN:
        text = text[: MAX_SHOWN - 1] + "…"
    return f"{quote}{text}{quote}" if quote is not None else text


def refuse_unknown_keys(conf: Mapping[str, Any] | None, allowed: Iterable[str], dag_id: str) -> None:
    """Raise InvalidInput, in one sentence, when `conf` has a top-level key that is not a Param."""
    allowed = sorted(allowed)
    unknown = sorted(str(k) for k in (conf or {}) if k not in allowed)
    if not unknown:
        return
    hints = []
    for key in unknown[:MAX_NAMED]:  # a conf of 50 000 unknown keys is named by its first few
        hints.append(shown(key, quote="'") + did_you_mean(key, allowed))
    if len(unknown) > MAX_NAMED:
        hints.append(f"and {len(unknown) - MAX_NAMED} more")
    noun = "key" if len(unknown) == 1 else "keys"
    raise InvalidInput(
        f"{dag_id} does not take the conf {noun} {', '.join(hints)}; its conf keys are: {', '.join(allowed)}."
    )


def validate_conf(conf: Mapping[str, Any] | None) -> None:
    """The compile DAG's conf: refuse unknown top-level keys (Airflow checks the known ones)."""
    refuse_unknown_keys(conf, ALLOWED_KEYS[COMPILE_DAG], COMPILE_DAG)


def validate_recompile_conf(conf: Mapping[str, Any] | None) -> None:
    """The recompile DAG's conf: refuse unknown top-level keys."""
    refuse_unknown_keys(conf, ALLOWED_KEYS[RECOMPILE_DAG], RECOMPILE_DAG)


# Keys a conf must name although their Param has a default: the release form's `action` defaults to
# promote only because Airflow's form needs a default (`release_params`); a REST trigger says what it does.
REQUIRED_KEYS: dict[str, tuple[str, ...]] = {RELEASE_DAG: ("action",)}


def refuse_missing_keys(conf: Mapping[str, Any] | None, dag_id: str) -> None:
    missing = [k for k in REQUIRED_KEYS.get(dag_id, ()) if k not in (conf or {})]
    if missing:
        raise InvalidInput(f"{dag_id} needs the conf key {', '.join(missing)}: say what the run does.")


def validate_release_conf(conf: Mapping[str, Any] | None) -> None:
    """The release DAG's conf: refuse unknown top-level keys, and a conf that does not name its action."""
    refuse_unknown_keys(conf, ALLOWED_KEYS[RELEASE_DAG], RELEASE_DAG)
    refuse_missing_keys(conf, RELEASE_DAG)


def _being_created(task_instance: Any) -> bool:
    """True while `DagRun.verify_integrity` creates the instance of a root task (no upstream),
    unmapped: that happens only when the run itself is created (`create_dagrun`), never when the
    scheduler later expands mapped tasks or re-verifies a running run, where raising would break
    the scheduler loop instead of refusing a trigger."""
    from sqlalchemy import inspect

    task = getattr(task_instance, "task", None)
    if task is None or getattr(task_instance, "map_index", -1) != -1 or task.upstream_task_ids:
        return False
    try:
        return bool(inspect(task_instance).transient)
    except Exception:  # not an ORM object: nothing to refuse
        return False


def refuse_unknown_conf(task_instance: Any, dag_run: Any = None) -> None:
    """Cluster-policy part (`task_instance_mutation_hook`): refuse, at trigger time, a run of either
    neuronforge DAG whose conf has an unknown top-level key. Raising InvalidInput (a ValueError)
    inside `create_dagrun` rolls the run back; the REST API answers 400 with the message."""
    allowed = ALLOWED_KEYS.get(getattr(task_instance, "dag_id", None))
    if allowed is None or dag_run is None or not _being_created(task_instance):
        return
    conf = getattr(dag_run, "conf", None)
    if isinstance(conf, Mapping):
        refuse_unknown_keys(conf, allowed, task_instance.dag_id)
        refuse_missing_keys(conf, task_instance.dag_id)


FORMS: dict[str, dict[str, Param]] = {
    COMPILE_DAG: PARAMS,
    RECOMPILE_DAG: RECOMPILE_PARAMS,
    SWEEP_DAG: SWEEP_PARAMS,
    RELEASE_DAG: RELEASE_PARAMS,
    SCRUB_DAG: SCRUB_PARAMS,
}


@functools.cache
def _validator(dag_id: str, name: str) -> Any:
    """The JSON-schema validator of one field of a form (built once: a trigger checks each field)."""
    from jsonschema import Draft202012Validator

    return Draft202012Validator(FORMS[dag_id][name].schema)


def _allowed(schema: dict[str, Any]) -> str:
    """What a field accepts, in words (for the one-sentence answer to a bad value)."""
    if "enum" in schema:
        values = [v for v in schema["enum"] if v is not None]
        shown = ", ".join(str(v) for v in values[:24]) + (", ..." if len(values) > 24 else "")
        return f"one of {shown}"
    kinds = schema.get("type")
    kinds = [kinds] if isinstance(kinds, str) else list(kinds or [])
    words = {
        "integer": "a whole number",
        "number": "a number",
        "string": "text",
        "boolean": "true or false",
        "array": "a list",
        "object": "an object",
        "null": "empty",
    }
    text = " or ".join(words.get(k, k) for k in kinds) or "a valid value"
    if "pattern" in schema:
        text += f" matching {schema['pattern']}"
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None and high is not None:
        text += f" from {low} to {high}"
    elif low is not None:
        text += f" of at least {low}"
    elif high is not None:
        text += f" of at most {high}"
    return text


def _flat(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with its `allOf` parts merged in (what `_allowed` describes)."""
    out = {k: v for k, v in schema.items() if k != "allOf"}
    for part in schema.get("allOf") or ():
        out.update(part)
    return out


def conf_problem(dag_id: str, conf: Mapping[str, Any] | None) -> str | None:
    """One sentence naming the first field of `conf` the DAG's form refuses and what it accepts (an
    unknown key, a value outside its schema), or None. Airflow's own Param check answers the same
    conf with the whole JSON schema; the api-server middleware (plugins/neuronforge_forms.py) answers
    with this first."""
    form = FORMS.get(dag_id)
    if form is None or conf is None:
        return None
    if not isinstance(conf, Mapping):
        return f"{dag_id}: the conf must be a JSON object of its form's fields ({', '.join(form)})."
    try:
        refuse_unknown_keys(conf, form, dag_id)
    except InvalidInput as exc:
        return str(exc)
    for name, value in conf.items():
        validator = _validator(dag_id, name)
        schema = validator.schema
        errors = sorted(validator.iter_errors(value), key=lambda e: len(e.path))
        if not errors:
            continue
        err = errors[0]
        if not err.path:  # the field itself: its type and its range (`bounded`) in one description
            err.schema = _flat(schema)
        where = name + "".join(f"[{p}]" if isinstance(p, int) else f".{shown(str(p), quote='')}" for p in err.path)
        if err.validator == "additionalProperties":
            allowed = ", ".join(sorted(err.schema.get("properties", {})))
            extra = sorted(set(err.instance) - set(err.schema.get("properties", {})))
            named = [shown(k, quote="") + did_you_mean(k, err.schema.get("properties", {})) for k in extra[:MAX_NAMED]]
            named += [f"and {len(extra) - MAX_NAMED} more"] if len(extra) > MAX_NAMED else []
            return f"{dag_id}: {where} has unknown field(s) {', '.join(named)}; allowed: {allowed}."
        if err.validator == "required":
            return f"{dag_id}: {where} is missing a field: {err.message}."
        return f"{dag_id}: {where} = {shown(err.instance)} is not allowed; use {_allowed(err.schema)}."
    return _credentials_problem(dag_id, conf)


def _credentials_problem(dag_id: str, conf: Mapping[str, Any]) -> str | None:
    """The sentence for a `store` or `model` URI carrying credentials: refused at the trigger, so
    the secret never lands in Airflow's run table (the run's first task would refuse it too)."""
    from neuronforge.stores.base import refuse_credentials

    for name, what in (("store", "store URI"), ("model", "model source")):
        if isinstance(conf.get(name), str):
            try:
                refuse_credentials(conf[name], what)
            except InvalidInput as exc:
                return f"{dag_id}: {str(exc).rstrip('.')}."
    return None
