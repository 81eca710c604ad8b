"""One sentence for a bad trigger of a neuronforge DAG, on the api-server, before any run exists.

Airflow checks a trigger's conf against the DAG's Params and answers a bad value with the whole
JSON schema of the field. Both the UI's trigger form and the REST API post to
`POST /api/v2/dags/{dag_id}/dagRuns`; this root middleware (`fastapi_root_middlewares`) reads the
body of such a request for a neuronforge DAG and, when it is not a JSON object whose conf
`neuronforge_airflow.params.conf_problem` accepts, answers 400 with one sentence naming the field
and the values it accepts (the UI shows it in its error alert).

Guarantees (tests/plugins/test_forms_middleware.py, tests/plugins/test_catalog_plugin.py):

- Every other request (another DAG, another route, another method, a path Airflow would redirect)
  goes to Airflow with the very scope, receive and send it came with: nothing read, nothing copied.
- A neuronforge trigger's body is read up to `MAX_BODY` bytes and then replayed unchanged, one
  message at a time; a longer body (or a Content-Length announcing one) gets 413 at once, before
  the rest is read. A client that disconnects mid-body: what was read goes to Airflow, as sent.
- Our 400 is sent only to a caller Airflow itself would let trigger that DAG (its token resolved
  and its access checked by Airflow's own functions); anyone else's request goes to Airflow as
  sent, which answers it (401, 403, 404, 422) as it would without this plugin.
- Nothing here raises into Airflow: a body that is not JSON, not UTF-8, nested deeper than
  `MAX_DEPTH`, or holds NaN/Infinity or a key twice is one more sentence; any failure of the check
  itself sends the request on to Airflow unchanged. Sentences quote at most a short excerpt of the
  value, with a URI's credentials masked, and never a path or traceback.

Where the sentence is seen: Airflow's UI draws it in an alert at the top of the trigger dialog, and
its toast says only "Failed to Trigger Dag / Bad Request" (the UI's client words the toast from the
status code alone, never from the body). Our form is long: the alert is about 1 200 px above the
Trigger button the user just clicked. So the plugin, when loaded, adds one rule to the UI's theme
(`[api] theme`, its `globalCss`, merged into whatever theme the deployment sets): an error alert in a
dialog stays in sight at the top of the dialog's visible part (sticky) while the dialog scrolls.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

import anyio.to_thread
from airflow.plugins_manager import AirflowPlugin

from neuronforge.common.secrets import mask_credentials, mask_logs

log = logging.getLogger(__name__)
mask_logs()  # the api-server's log lines of ours and Airflow's, masked (common.secrets)

TRIGGER = re.compile(r"^/api/v2/dags/(?P<dag_id>[^/]+)/dagRuns$")  # no trailing slash: Airflow redirects it
MAX_BODY = 1024 * 1024  # a trigger's body: a conf of a few KiB, a generous margin
MAX_DEPTH = 32  # the forms' deepest value is 5 levels (targets[0].backend_options.x)
MAX_DISCARD_FACTOR = 16  # past the cap, up to 16 MiB more is read and dropped so the client reads the 413
INLINE_CHECK = 64 * 1024  # bodies up to this are checked on the event loop (well under a millisecond)

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
MayTrigger = Callable[[Scope, str], Awaitable[bool]]


def route_path(scope: Scope) -> str:
    """The path Airflow routes on: `path` without the app's `root_path` (a deployment under a
    base URL, `[api] base_url`), as Starlette's router strips it."""
    path, root = scope.get("path", ""), scope.get("root_path", "")
    if root and path.startswith(root) and path[len(root) : len(root) + 1] in ("/", ""):
        return path[len(root) :]
    return path


def neuronforge_trigger(scope: Scope) -> str | None:
    """The DAG id when `scope` is the trigger of a neuronforge DAG (the only requests read)."""
    if scope.get("method") != "POST" or scope.get("type") != "http" or not scope.get("path", "").endswith("/dagRuns"):
        return None
    match = TRIGGER.match(route_path(scope))
    return match["dag_id"] if match is not None and match["dag_id"] in _forms() else None


@functools.cache
def _forms() -> frozenset[str]:
    """The neuronforge DAG ids (imported on the first trigger, not when Airflow loads plugins)."""
    from neuronforge_airflow.params import FORMS

    return frozenset(FORMS)


async def airflow_may_trigger(scope: Scope, dag_id: str) -> bool:
    """True when Airflow would let this request trigger `dag_id`: its credential resolved the way
    Airflow's `get_user` does (Bearer header first, then the user the JWT refresh middleware
    vouched for, then the `_token` cookie) and `requires_access_dag("POST", RUN)` passed. Any
    failure (no token, a garbage, expired or revoked one, no access, the DB down): False, and
    Airflow answers the request itself."""
    try:
        from airflow.api_fastapi.auth.managers.base_auth_manager import COOKIE_NAME_JWT_TOKEN
        from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
        from airflow.api_fastapi.core_api.security import (
            USER_INJECTED_BY_TRUSTED_MIDDLEWARE,
            requires_access_dag,
            resolve_user_from_token,
        )
        from fastapi.security.utils import get_authorization_scheme_param
        from starlette.requests import Request

        request = Request({**scope, "path_params": {"dag_id": dag_id}})  # a copy: the scope stays as sent
        # as FastAPI's HTTPBearer(auto_error=False) reads the header for Airflow's `get_user`
        scheme, credentials = get_authorization_scheme_param(request.headers.get("authorization"))
        state = scope.get("state") or {}
        if scheme.lower() == "bearer" and credentials:
            user = await resolve_user_from_token(credentials)
        elif state.get("user") and state.get("user_authenticated_via") is USER_INJECTED_BY_TRUSTED_MIDDLEWARE:
            user = state["user"]
        else:
            user = await resolve_user_from_token(request.cookies.get(COOKIE_NAME_JWT_TOKEN))
        check = requires_access_dag(method="POST", access_entity=DagAccessEntity.RUN)
        await anyio.to_thread.run_sync(check, request, user)  # it reads the DAG's team from the DB
        return True
    except Exception:  # not authenticated or not allowed: Airflow's own answer, not ours
        return False


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number; send a number or leave the field empty")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))
        from neuronforge_airflow.params import shown

        raise ValueError(f"the key {shown(twice)} appears twice in one object; send it once")
    return out


def _too_deep(value: Any) -> bool:
    """True when `value` nests more than MAX_DEPTH lists/objects (iterative: no recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > MAX_DEPTH:
                return True
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False


def body_problem(dag_id: str, headers: dict[bytes, bytes], body: bytes) -> str | None:
    """One sentence on what is wrong with a trigger's body for `dag_id`, or None."""
    from neuronforge_airflow.params import conf_problem

    kind = headers.get(b"content-type", b"application/json").split(b";")[0].strip().lower()
    if not kind.startswith(b"application/") or not (kind == b"application/json" or kind.endswith(b"+json")):
        shown = kind.decode("latin-1")[:60]
        return f"{dag_id}: send the trigger as JSON (Content-Type: application/json), not {shown}."
    try:
        payload = json.loads(body or b"{}", parse_constant=_no_constant, object_pairs_hook=_no_duplicates)
    except RecursionError:
        return f"{dag_id}: the trigger's JSON nests deeper than {MAX_DEPTH} levels; send the form's fields."
    except UnicodeDecodeError:
        return f"{dag_id}: the trigger's body is not UTF-8 text; send it as UTF-8 JSON."
    except json.JSONDecodeError as exc:
        return f"{dag_id}: the trigger's body is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})."
    except ValueError as exc:  # NaN/Infinity, a duplicate key
        return f"{dag_id}: {exc}."
    if _too_deep(payload):
        return f"{dag_id}: the trigger's JSON nests deeper than {MAX_DEPTH} levels; send the form's fields."
    if not isinstance(payload, dict):
        return f'{dag_id}: the trigger\'s body must be a JSON object such as {{"conf": {{...}}}}.'
    return conf_problem(dag_id, payload.get("conf"))


async def _answer(send: Send, status: int, sentence: str) -> None:
    """Every answer of ours: the sentence masked here, once (`common.secrets`), whatever built it."""
    data = json.dumps({"detail": mask_credentials(sentence)}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


class OneSentenceTriggerErrors:
    """Pure ASGI: reads a neuronforge trigger's body (bounded), checks it, replays it to the app."""

    def __init__(
        self,
        app: Any,
        max_body: int = MAX_BODY,
        may_trigger: MayTrigger = airflow_may_trigger,
        max_discard: int | None = None,
    ) -> None:
        self.app = app
        self.max_body = max_body
        self.may_trigger = may_trigger
        self.max_discard = MAX_DISCARD_FACTOR * max_body if max_discard is None else max_discard

    async def _too_big(
        self, dag_id: str, headers: dict[bytes, bytes], receive: Receive, send: Send, sending: bool
    ) -> None:
        """413. A client still sending its body would see a reset connection, not this answer, if
        it came now: what it still sends is read and dropped first (nothing kept), up to
        `max_discard` bytes. A client that asked `Expect: 100-continue` has sent nothing (the
        server sends "100 Continue" only once the body is read), and one announcing more than the
        cap plus `max_discard` is not waited for: both are answered at once."""
        announced = headers.get(b"content-length", b"").strip()
        waits = headers.get(b"expect", b"").lower() == b"100-continue"
        if sending and not waits and not (announced.isdigit() and int(announced) > self.max_body + self.max_discard):
            dropped = 0
            while dropped < self.max_discard:
                message = await receive()
                if message["type"] != "http.request":
                    break
                dropped += len(message.get("body", b""))
                if not message.get("more_body"):
                    break
        sentence = f"{dag_id}: the trigger's body is larger than {self.max_body} bytes; send the form's fields only."
        await _answer(send, 413, sentence)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        dag_id = neuronforge_trigger(scope)
        if dag_id is None:
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        announced = headers.get(b"content-length", b"").strip()
        if announced.isdigit() and int(announced) > self.max_body:
            await self._too_big(dag_id, headers, receive, send, sending=True)
            return
        messages: list[Message] = []
        size = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":  # http.disconnect: Airflow sees it as it would have
                break
            size += len(message.get("body", b""))
            if size > self.max_body:
                messages.clear()
                await self._too_big(dag_id, headers, receive, send, sending=bool(message.get("more_body")))
                return
            if not message.get("more_body"):
                break
        problem = None
        if messages[-1]["type"] == "http.request":
            body = b"".join(m.get("body", b"") for m in messages)
            try:
                if len(body) <= INLINE_CHECK:
                    problem = body_problem(dag_id, headers, body)
                else:  # parsing and validating up to 1 MiB must not stall the api-server's event loop
                    problem = await anyio.to_thread.run_sync(body_problem, dag_id, headers, body)
            except Exception:  # a check that fails must not fail the trigger: Airflow decides
                log.warning("neuronforge_forms: the conf check of a %s trigger failed; left to Airflow", dag_id)
        if problem is not None and await self.may_trigger(scope, dag_id):
            await _answer(send, 400, problem)
            return

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)


# An error alert in a dialog (Airflow's ErrorAlert, where the trigger dialog shows our sentence) sticks
# to the top of what the dialog shows while it scrolls: in sight wherever the user clicked Trigger.
# The theme's global CSS is in a lower cascade layer than the alert's own `position: relative`:
# `!important` lets it win.
ALERT_IN_SIGHT: dict[str, dict[str, str]] = {
    "[data-scope=dialog][data-part=content] [data-testid=error-alert]": {
        "position": "sticky !important",
        "top": "0",
        "zIndex": "10",
        "boxShadow": "0 4px 12px rgba(0, 0, 0, 0.25)",
    }
}
THEME_ENV = "AIRFLOW__API__THEME"


def theme_with_alert_in_sight(theme: str) -> str | None:
    """`theme` (the `[api] theme` JSON, empty when unset) with `ALERT_IN_SIGHT` added to its
    `globalCss`; a rule the deployment already sets for the same selector is kept as it is. None when
    `theme` is not a JSON object (left alone: Airflow reports its own setting)."""
    try:
        loaded = json.loads(theme) if theme.strip() else {}
    except ValueError:
        return None
    if not isinstance(loaded, dict) or not isinstance(loaded.get("globalCss", {}), dict):
        return None
    return json.dumps({**loaded, "globalCss": {**ALERT_IN_SIGHT, **loaded.get("globalCss", {})}})


def keep_alerts_in_sight() -> None:
    """Merge `ALERT_IN_SIGHT` into this process's `[api] theme`, which the api-server hands the UI
    (`/ui/config`) on every page load. An `AIRFLOW__API__THEME` in the environment wins over the
    config file, so the merge goes where the deployment's own theme is."""
    from airflow.configuration import conf

    current = conf.get("api", "theme", fallback="") or ""
    merged = theme_with_alert_in_sight(current)
    if merged is None:
        log.warning("neuronforge_forms: [api] theme is not a JSON object; trigger refusals stay at the dialog's top")
        return
    if THEME_ENV in os.environ:
        os.environ[THEME_ENV] = merged
    else:
        conf.set("api", "theme", merged.replace("%", "%%"))  # the config file's layer interpolates %


class NeuronforgeFormsPlugin(AirflowPlugin):
    name = "neuronforge_forms"
    fastapi_root_middlewares: ClassVar[list[dict[str, Any]]] = [
        {"middleware": OneSentenceTriggerErrors, "args": [], "kwargs": {}, "name": "neuronforge trigger errors"}
    ]

    @classmethod
    def on_load(cls, *args: Any, **kwargs: Any) -> None:
        keep_alerts_in_sight()
