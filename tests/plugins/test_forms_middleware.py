"""The forms middleware (plugins/neuronforge_forms.py) as an ASGI class, between a client that sends
exact ASGI messages and a recording inner app: what passes through is byte-identical (the same
scope, receive and send objects: nothing read, nothing copied), a neuronforge trigger's body is
bounded and replayed exactly, and every bad body — malformed, non-UTF-8, 100 000 levels deep,
NaN, a key twice, 1 MiB of one value — is one sentence, never an exception out of the middleware.
The real api-server answering the same requests: tests/plugins/test_catalog_plugin.py."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from neuronforge.common.deployment_names import COMPILE_DAG, RECOMPILE_DAG, SWEEP_DAG
from neuronforge_airflow.params import FORMS, conf_problem
from tests.plugins.conftest import load_plugin

REPO = Path(__file__).resolve().parents[2]
SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"
TRIGGER = f"/api/v2/dags/{COMPILE_DAG}/dagRuns"


@pytest.fixture(scope="module")
def forms() -> ModuleType:
    return load_plugin("neuronforge_forms")


def http(path: str, method: str = "POST", headers: list[tuple[bytes, bytes]] | None = None, **extra: Any) -> dict:
    raw = path.encode("utf-8")
    heads = [(b"content-type", b"application/json"), (b"authorization", b"Bearer t"), *(headers or [])]
    return {"type": "http", "method": method, "path": path, "raw_path": raw, "root_path": "", "query_string": b""} | {
        "headers": heads,
        **extra,
    }


class Inner:
    """The app behind the middleware: records the scope, receive and send it was called with and
    every message it read (it reads the whole body, as FastAPI does), then answers 200."""

    def __init__(self) -> None:
        self.calls: list[tuple[dict, Any, Any]] = []
        self.messages: list[dict] = []

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        self.calls.append((scope, receive, send))
        if scope["type"] == "http":
            while True:
                message = await receive()
                self.messages.append(message)
                if message["type"] != "http.request" or not message.get("more_body"):
                    break
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"inner"})


class Client:
    """Sends `messages` one receive() at a time (then blocks, like a live connection that has
    nothing more to say) and records what the middleware sent back."""

    def __init__(self, messages: list[dict] | Iterator[dict]) -> None:
        self.source = iter(messages)
        self.received = 0
        self.sent: list[dict] = []

    async def receive(self) -> dict:
        self.received += 1
        try:
            return next(self.source)
        except StopIteration:
            await asyncio.sleep(3600)  # a hang here is a test timeout, not a pass
            raise AssertionError("read past the end of the request") from None

    async def send(self, message: dict) -> None:
        self.sent.append(message)

    @property
    def status(self) -> int:
        return self.sent[0]["status"]

    @property
    def detail(self) -> str:
        return json.loads(b"".join(m.get("body", b"") for m in self.sent[1:]))["detail"]


def body(data: bytes, chunk: int | None = None) -> list[dict]:
    if chunk is None:
        return [{"type": "http.request", "body": data, "more_body": False}]
    parts = [data[i : i + chunk] for i in range(0, len(data), chunk)] or [b""]
    return [{"type": "http.request", "body": p, "more_body": i < len(parts) - 1} for i, p in enumerate(parts)]


async def _allowed(scope: dict, dag_id: str) -> bool:
    return True


async def _refused(scope: dict, dag_id: str) -> bool:
    return False


def run(forms: ModuleType, scope: dict, messages: Any, allowed: bool = True, **kw: Any) -> tuple[Inner, Client]:
    inner, client = Inner(), Client(messages)
    middleware = forms.OneSentenceTriggerErrors(inner, may_trigger=_allowed if allowed else _refused, **kw)
    asyncio.run(asyncio.wait_for(middleware(scope, client.receive, client.send), timeout=20))
    return inner, client


PASS_THROUGH = {
    "another DAG": http("/api/v2/dags/other_dag/dagRuns"),
    "Airflow's wildcard": http("/api/v2/dags/~/dagRuns"),
    "an id with dots and unicode": http("/api/v2/dags/team.dag_é/dagRuns"),
    "a URL-encoded other id": http("/api/v2/dags/other dag/dagRuns", raw_path=b"/api/v2/dags/other%20dag/dagRuns"),
    "a neuronforge id with a suffix": http(f"/api/v2/dags/{COMPILE_DAG}x/dagRuns"),
    "GET of a neuronforge trigger path": http(TRIGGER, method="GET"),
    "HEAD": http(TRIGGER, method="HEAD"),
    "PATCH": http(TRIGGER, method="PATCH"),
    "DELETE": http(TRIGGER, method="DELETE"),
    "trailing slash (Airflow redirects it)": http(TRIGGER + "/"),
    "one run of the DAG": http(f"/api/v2/dags/{COMPILE_DAG}/dagRuns/manual_1"),
    "the DAG runs list": http(f"/api/v2/dags/{COMPILE_DAG}/dagRuns/list"),
    "another route": http("/api/v2/version", method="GET"),
    "the UI's route": http(f"/ui/dags/{COMPILE_DAG}/dagRuns"),
    "under another root path": http("/elsewhere" + TRIGGER, root_path="/airflow"),
}


@pytest.mark.parametrize("case", sorted(PASS_THROUGH))
def test_everything_else_passes_through_untouched(forms: ModuleType, case: str) -> None:
    scope = PASS_THROUGH[case]
    sent = body(b"[" * 100_000 + b"]" * 100_000, chunk=4096)  # a body we would refuse, were it ours
    before = json.dumps(scope, default=repr)
    inner, client = run(forms, scope, list(sent), allowed=True)
    ((seen_scope, seen_receive, seen_send),) = inner.calls
    # the very objects: the middleware read nothing, buffered nothing, wrapped nothing
    assert seen_scope is scope and json.dumps(scope, default=repr) == before
    assert seen_receive == client.receive and seen_send == client.send
    assert inner.messages == sent and client.received == len(sent)
    assert client.sent[0]["status"] == 200


def test_lifespan_and_websocket_pass_through(forms: ModuleType) -> None:
    for scope in ({"type": "lifespan"}, {"type": "websocket", "path": TRIGGER, "headers": []}):
        inner, client = run(forms, scope, [])
        assert inner.calls == [(scope, client.receive, client.send)] and client.received == 0


GOOD = json.dumps({"logical_date": None, "conf": {"tp_degree": 2, "max_new_tokens": 16}}).encode()


@pytest.mark.parametrize("chunk", [None, 1, 7, 4096])
def test_a_good_trigger_is_replayed_message_for_message(forms: ModuleType, chunk: int | None) -> None:
    scope = http(TRIGGER)
    sent = body(GOOD, chunk)
    inner, client = run(forms, scope, list(sent))
    ((seen_scope, _, seen_send),) = inner.calls
    assert seen_scope is scope and seen_send == client.send
    assert inner.messages == sent  # the same messages, chunking and more_body flags included
    assert client.sent[0]["status"] == 200


def test_a_trigger_under_a_base_url_is_read(forms: ModuleType) -> None:
    scope = http("/airflow" + TRIGGER, root_path="/airflow")
    inner, client = run(forms, scope, body(b'{"conf": {"tp_degree": 0}}'))
    assert inner.calls == [] and client.status == 400 and "tp_degree = 0 is not allowed" in client.detail


def test_content_length_over_the_cap_is_refused_before_reading(forms: ModuleType) -> None:
    scope = http(TRIGGER, headers=[(b"content-length", str(2 * 1024 * 1024).encode())])
    inner, client = run(forms, scope, [], max_discard=0)  # (below: what is dropped to let the client read it)
    assert client.received == 0 and inner.calls == []
    assert client.status == 413 and client.detail.endswith("larger than 1048576 bytes; send the form's fields only.")


def test_a_long_chunked_body_is_refused_as_soon_as_it_passes_the_cap(forms: ModuleType) -> None:
    def stream() -> Iterator[dict]:  # 20 MB in 1 kB chunks, no Content-Length
        for i in range(20_000):
            yield {"type": "http.request", "body": b" " * 1000, "more_body": i < 19_999}

    inner, client = run(forms, http(TRIGGER), stream(), max_body=100_000, max_discard=0)
    assert client.received == 101 and inner.calls == []  # 101 kB read, not one chunk more
    assert client.status == 413 and "\n" not in client.detail


def test_past_the_cap_at_most_max_discard_bytes_are_read_and_dropped(forms: ModuleType) -> None:
    """So that a client still sending reads the 413 instead of a reset connection, and none waits
    for the end of an endless body."""

    def stream() -> Iterator[dict]:
        for i in range(20_000):
            yield {"type": "http.request", "body": b" " * 1000, "more_body": i < 19_999}

    inner, client = run(forms, http(TRIGGER), stream(), max_body=100_000, max_discard=500_000)
    assert client.received == 101 + 500 and inner.calls == [] and client.status == 413
    announced = [(b"content-length", b"300000")]
    inner, client = run(forms, http(TRIGGER, headers=announced), body(b" " * 300_000, chunk=1000), max_body=100_000)
    assert client.received == 300 and client.status == 413  # all of it read (and dropped), then answered
    waiting = [(b"content-length", b"300000"), (b"expect", b"100-continue")]
    for headers in ([(b"content-length", b"100000000")], waiting):
        inner, client = run(forms, http(TRIGGER, headers=headers), [], max_body=100_000)
        assert client.received == 0 and client.status == 413


def test_a_body_at_the_cap_is_read(forms: ModuleType) -> None:
    data = GOOD + b" " * (100_000 - len(GOOD))
    inner, client = run(forms, http(TRIGGER), body(data, chunk=10), max_body=100_000)
    assert client.sent[0]["status"] == 200 and b"".join(m["body"] for m in inner.messages) == data


def test_a_client_that_disconnects_mid_body_is_left_to_airflow(forms: ModuleType) -> None:
    sent = [{"type": "http.request", "body": b'{"conf": {"tp_', "more_body": True}, {"type": "http.disconnect"}]
    inner, client = run(forms, http(TRIGGER), list(sent))
    assert inner.messages == sent and client.sent[0]["status"] == 200  # Airflow saw what it would have


DEEP_LIST = b"[" * 100_000 + b"]" * 100_000
DEEP_CONF = b'{"conf": ' + b'{"a": ' * 100_000 + b"1" + b"}" * 100_001
HUGE = "x" * (1024 * 1024 - 200)
BAD_BODIES: dict[str, tuple[bytes, str]] = {
    "100 000 nested lists": (DEEP_LIST, "nests deeper than 32 levels"),
    "100 000 nested conf objects": (DEEP_CONF, "nests deeper than 32 levels"),
    "900 nested lists in a field": (
        b'{"conf": {"tp_degree": ' + b"[" * 900 + b"]" * 900 + b"}}",
        "nests deeper than 32 levels",
    ),
    "malformed": (b'{"conf": {tp_degree: 2}}', "is not JSON (Expecting property name enclosed in double quotes"),
    "truncated": (b'{"conf": {"tp_degree": 2', "is not JSON"),
    "not UTF-8": (b'{"conf": {"model": "\xff\xfe\xfd"}}', "is not UTF-8 text"),
    "Latin-1": ('{"conf": {"model": "café"}}'.encode("latin-1"), "is not UTF-8 text"),
    "a list body": (b"[1, 2]", 'must be a JSON object such as {"conf": {...}}'),
    "a number body": (b"42", "must be a JSON object"),
    "a conf that is a list": (b'{"conf": [1]}', "the conf must be a JSON object of its form's fields"),
    "a conf that is text": (b'{"conf": "tp_degree=2"}', "the conf must be a JSON object"),
    "a conf that is a number": (b'{"conf": 3}', "the conf must be a JSON object"),
    "an object for a number": (b'{"conf": {"tp_degree": {"a": {"b": 1}}}}', 'tp_degree = {"a": {"b": 1}} is not'),
    "NaN": (b'{"conf": {"tp_degree": NaN}}', "NaN is not a JSON number"),
    "Infinity deep in a target": (
        b'{"conf": {"targets": [{"instance_type": "inf2.xlarge", "tp_degree": 2, "sequence_length": 64, '
        b'"backend_options": {"x": Infinity}}]}}',
        "Infinity is not a JSON number",
    ),
    "-Infinity": (b'{"conf": {"max_new_tokens": -Infinity}}', "-Infinity is not a JSON number"),
    "a key twice": (b'{"conf": {"tp_degree": 2, "tp_degree": 0}}', 'the key "tp_degree" appears twice'),
    "1 MiB of one value": (json.dumps({"conf": {"instance_type": HUGE}}).encode(), 'instance_type = "xxxxxxxx'),
    "a credential in a value": (
        json.dumps({"conf": {"instance_type": f"s3://AKIAEXAMPLE:{SECRET}@bucket/x"}}).encode(),
        'instance_type = "s3://***@bucket/x" is not allowed',
    ),
    "a credential in the store": (
        json.dumps({"conf": {"store": f"s3://AKIAEXAMPLE:{SECRET}@bucket/store"}}).encode(),
        "store URI s3://***@bucket/store carries credentials",
    ),
    "a credential in an unknown key": (
        json.dumps({"conf": {f"https://u:{SECRET}@h/": 1}}).encode(),
        "does not take the conf key 'https://***@h/'",
    ),
    "50 000 unknown keys": (
        json.dumps({"conf": {f"k{i}": i for i in range(50_000)}}).encode(),
        "'k0', 'k1', 'k10', 'k100', 'k1000', and 49995 more; its conf keys are",
    ),
    "text/plain": (GOOD, "send the trigger as JSON (Content-Type: application/json), not text/plain."),
}


@pytest.mark.parametrize("case", sorted(BAD_BODIES))
def test_a_bad_body_is_one_sentence(forms: ModuleType, case: str) -> None:
    data, words = BAD_BODIES[case]
    kind = b"text/plain" if case == "text/plain" else b"application/json"
    scope = http(TRIGGER)
    scope["headers"] = [(b"content-type", kind), (b"authorization", b"Bearer t")]
    inner, client = run(forms, scope, body(data, chunk=65536))
    assert inner.calls == [] and client.status == 400, client.sent
    detail = client.detail
    assert words in detail, detail
    assert detail.startswith(COMPILE_DAG) and detail.endswith(".") and "\n" not in detail
    assert len(detail) < 700 and SECRET not in detail and "Traceback" not in detail
    assert str(REPO) not in detail and "site-packages" not in detail
    headers = dict(client.sent[0]["headers"])
    assert int(headers[b"content-length"]) == len(client.sent[1]["body"])


@pytest.mark.parametrize("case", sorted(BAD_BODIES))
def test_a_bad_body_from_a_caller_airflow_refuses_goes_to_airflow_as_sent(forms: ModuleType, case: str) -> None:
    data, _ = BAD_BODIES[case]
    scope, sent = http(TRIGGER), body(data, chunk=65536)
    inner, client = run(forms, scope, list(sent), allowed=False)
    ((seen_scope, _, seen_send),) = inner.calls
    assert seen_scope is scope and seen_send == client.send and inner.messages == sent
    assert client.sent[0]["status"] == 200  # Airflow's answer (401/403 in the real server), not ours


def test_a_failing_check_leaves_the_request_to_airflow(forms: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any) -> None:
        raise KeyError("/home/someone/secret/path")

    monkeypatch.setattr(forms, "body_problem", broken)
    sent = body(b'{"conf": {"tp_degree": 0}}')
    inner, client = run(forms, http(TRIGGER), list(sent))
    assert inner.messages == sent and client.sent[0]["status"] == 200


def test_without_an_airflow_app_nobody_may_trigger(forms: ModuleType) -> None:
    """The real check (Airflow's own token and access functions) refuses what it cannot resolve:
    no token, a garbage one (the api-server's answers: test_catalog_plugin.py)."""
    for headers in ([], [(b"authorization", b"Bearer garbage")], [(b"cookie", b"_token=garbage")]):
        scope = http(TRIGGER)
        scope["headers"] = headers
        assert asyncio.run(forms.airflow_may_trigger(scope, COMPILE_DAG)) is False


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(dag=st.sampled_from(sorted(FORMS)), conf=JSON)
def test_conf_problem_takes_any_json_value(dag: str, conf: Any) -> None:
    problem = conf_problem(dag, conf)
    assert problem is None or (isinstance(problem, str) and "\n" not in problem and len(problem) < 1500)


@settings(max_examples=300, deadline=None)
@given(dag=st.sampled_from([COMPILE_DAG, RECOMPILE_DAG, SWEEP_DAG]), value=JSON, data=st.data())
def test_conf_problem_takes_any_json_value_in_any_field(dag: str, value: Any, data: st.DataObject) -> None:
    field = data.draw(st.sampled_from(sorted(FORMS[dag])))
    problem = conf_problem(dag, {field: value})
    assert problem is None or (problem.startswith(dag) and "\n" not in problem and len(problem) < 1500)


# An AWS secret access key holds `/` (issue 39): the one masking rule (neuronforge.common.secrets) hides
# all of it — before the fix the middleware showed everything after its first `/`.
SLASHY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
SLASHY_URI = f"s3://AKIAIOSFODNN7EXAMPLE:{SLASHY}@bucket/prefix"


@pytest.mark.parametrize(
    ("conf", "words"),
    [
        ({"profile": SLASHY_URI}, 'profile = "s3://***@bucket/prefix"'),
        ({"max_new_tokens": SLASHY_URI}, 'max_new_tokens = "s3://***@bucket/prefix"'),
        ({SLASHY_URI: 1}, "'s3://***@bucket/prefix'"),
        ({"store": SLASHY_URI}, "store URI s3://***@bucket/prefix carries credentials"),
        ({"model": f"https://u:{SLASHY}@hub.example/org/m"}, "https://***@hub.example/org/m"),
        ({"profile": f"https://b.s3.amazonaws.com/k?X-Amz-Credential=AKIA%2F{SLASHY}&X-Amz-Signature=ab12"}, "***"),
    ],
    ids=["profile", "max_new_tokens", "unknown key", "store", "model", "presigned query"],
)
def test_a_secret_with_slashes_is_never_half_shown(forms: ModuleType, conf: dict, words: str) -> None:
    scope = http(TRIGGER)
    scope["headers"] = [(b"content-type", b"application/json"), (b"authorization", b"Bearer t")]
    inner, client = run(forms, scope, body(json.dumps({"conf": conf}).encode(), chunk=65536))
    assert inner.calls == [] and client.status == 400, client.sent
    detail = client.detail
    assert words in detail, detail
    for piece in (*SLASHY.split("/"), "ab12"):
        assert piece not in detail, detail


def test_the_alert_rule_joins_the_deployments_theme(forms: ModuleType) -> None:
    """The plugin adds its rule to whatever `[api] theme` the deployment sets, keeping its own rules
    (one for the same selector wins); a theme that is not a JSON object is left alone."""
    (selector,) = forms.ALERT_IN_SIGHT
    assert json.loads(forms.theme_with_alert_in_sight("")) == {"globalCss": forms.ALERT_IN_SIGHT}
    own = {"tokens": {"colors": {"brand": {"50": {"value": "oklch(0.97 0.01 17)"}}}}, "globalCss": {"a": {"x": "50%"}}}
    merged = json.loads(forms.theme_with_alert_in_sight(json.dumps(own)))
    assert merged["tokens"] == own["tokens"] and merged["globalCss"] == {**forms.ALERT_IN_SIGHT, "a": {"x": "50%"}}
    theirs = {"globalCss": {selector: {"position": "static"}}}
    assert json.loads(forms.theme_with_alert_in_sight(json.dumps(theirs))) == theirs
    for bad in ("not json", "[1, 2]", '{"globalCss": []}'):
        assert forms.theme_with_alert_in_sight(bad) is None
