"""The versioned JSON protocol between the Airflow worker and the toolchain's interpreter.

    <toolchain python> -m neuronforge_toolchain REQUEST.json RESPONSE.json

REQUEST.json: {"protocol": 1, "action": "detect" | "compile" | "generate" | "registry_entry" |
"registry_lookup" (optimum only), "toolchain": "optimum" |
"nxdi" | "tnx" | "vllm_native" (not for detect), "spec": {...}}. RESPONSE.json, written once the action ended:
{"protocol": 1, "ok": true, "result": {...}} or {"protocol": 1, "ok": false, "error": {"type": ...,
"message": ...}}. Standard output is the toolchain's own progress (compiler log lines), which the
worker relays into the task log; it carries no results. Exit status: 0 ok, 1 the action failed
(RESPONSE.json says why), 2 the request could not be read (another protocol version, bad usage).
"""

import json
import os
import traceback

from neuronforge_toolchain import PROTOCOL

ACTIONS = ("detect", "compile", "generate", "registry_entry", "registry_lookup")


class RequestError(Exception):
    """The request is not one this side of the protocol can run (version, action, toolchain)."""


def read_request(path):
    """The request in `path`, checked for the protocol version and its fields."""
    with open(path, encoding="utf-8") as f:
        request = json.load(f)
    if not isinstance(request, dict):
        raise RequestError(f"{path}: a request is a JSON object, not {type(request).__name__}")
    version = request.get("protocol")
    if version != PROTOCOL:
        raise RequestError(
            f"request protocol {version!r}, but this neuronforge_toolchain speaks protocol {PROTOCOL}: "
            "the worker and the toolchain-side package come from different neuronforge versions"
        )
    action = request.get("action")
    if action not in ACTIONS:
        raise RequestError(f"unknown action {action!r}; known: {', '.join(ACTIONS)}")
    if not isinstance(request.get("spec"), dict):
        raise RequestError("the request has no 'spec' object")
    return request


def write_response(path, result=None, error=None):
    """Write the response atomically (a reader never sees half of it)."""
    body = {"protocol": PROTOCOL, "ok": error is None}
    if error is None:
        body["result"] = result if result is not None else {}
    else:
        body["error"] = {
            "type": type(error).__name__,
            "message": str(error) or type(error).__name__,
            "traceback": traceback.format_exception(type(error), error, error.__traceback__)[-6:],
        }
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(body, f)
    os.replace(tmp, path)
