"""One sentence for a bad trigger of a neuronforge DAG, on the api-server, before any run exists.

Airflow checks a trigger's conf against the DAG's Params and answers a bad value with the whole
JSON schema of the field. Both the UI's trigger form and the REST API post to
`POST /api/v2/dags/{dag_id}/dagRuns`; this root middleware (`fastapi_root_middlewares`) reads the
conf of such a request for a neuronforge DAG and, when `operators.compile_params.conf_problem`
refuses it, answers 400 with its one sentence naming the field and the values it accepts (the UI
shows it in its error alert). Anything else, and every valid conf, passes through untouched.
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar

from airflow.plugins_manager import AirflowPlugin

TRIGGER = re.compile(r"^/api/v2/dags/(?P<dag_id>[^/]+)/dagRuns/?$")


class OneSentenceTriggerErrors:
    """Pure ASGI: buffers a trigger request's body, checks it, replays it to the app."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        match = TRIGGER.match(scope.get("path", "")) if scope.get("type") == "http" else None
        if match is None or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        from operators.compile_params import FORMS, conf_problem

        dag_id = match["dag_id"]
        headers = {k.lower(): v for k, v in scope.get("headers", [])}
        signed_in = b"authorization" in headers or b"_token=" in headers.get(b"cookie", b"")
        if dag_id not in FORMS or not signed_in:  # Airflow answers a request without credentials (401)
            await self.app(scope, receive, send)
            return
        messages, body = [], b""
        while True:
            message = await receive()
            messages.append(message)
            body += message.get("body", b"")
            if message["type"] != "http.request" or not message.get("more_body"):
                break
        problem = None
        try:
            payload = json.loads(body or b"{}")
            if isinstance(payload, dict) and "conf" in payload:
                problem = conf_problem(dag_id, payload["conf"])
        except ValueError:
            pass  # not JSON: Airflow answers it
        if problem is not None:
            data = json.dumps({"detail": problem}).encode()
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
            await send({"type": "http.response.start", "status": 400, "headers": headers})
            await send({"type": "http.response.body", "body": data})
            return

        async def replay() -> dict[str, Any]:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)


class NeuronforgeFormsPlugin(AirflowPlugin):
    name = "neuronforge_forms"
    fastapi_root_middlewares: ClassVar[list[dict[str, Any]]] = [
        {"middleware": OneSentenceTriggerErrors, "args": [], "kwargs": {}, "name": "neuronforge trigger errors"}
    ]
