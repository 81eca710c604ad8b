#!/usr/bin/env python
"""Forms middleware overhead: what `plugins/neuronforge_forms.py` adds to each request of the
api-server, isolated from Airflow. The same in-process ASGI inner app (it reads the whole body
and answers 200, as a fast route would) is called directly, with and without the middleware in
front, for the same requests, measured in the same run, interleaved round by round:

- `other DAG`: `POST /api/v2/dags/other_dag/dagRuns` with a small JSON conf (passed through untouched);
- `other route`: `GET /api/v2/version` (passed through untouched);
- `nf trigger ok`: a valid trigger of neuronforge_compile_publish (read, checked, replayed);
- `nf trigger bad`: a trigger with tp_degree 0 (our 400; the Airflow access check replaced by a stub
  that says yes — in the api-server it is one JWT decode and one access check, only for bad confs);
- `nf 512 KiB`: a valid trigger carrying 512 KiB of prompts (checked off the event loop).

Two inner apps: a null ASGI app (the middleware's own cost, nothing to hide it) and a small FastAPI
app with the same two routes (a pydantic body, a JSON answer: less than the api-server does for any
request, before auth and the DB). Prints, per request kind, the median per-request time without
and with the middleware (median of `--rounds` rounds of `--requests` requests each), the
difference and the ratio. No goal is asserted; the point is that the pass-through rows add about a
microsecond (a method check, a suffix check and, for a POST to `.../dagRuns`, a regex).

    .venv/bin/python bench/forms_middleware.py [--rounds 15] [--requests 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


class Trigger(BaseModel):
    """The trigger body, as Airflow's `TriggerDAGRunPostBody` reads its conf."""

    logical_date: str | None = None
    conf: dict | None = None


def load_forms() -> Any:
    spec = importlib.util.spec_from_file_location("neuronforge_forms", ROOT / "plugins" / "neuronforge_forms.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def inner(scope: dict, receive: Any, send: Any) -> None:
    """A fast route: reads the body, answers 200."""
    while True:
        message = await receive()
        if message["type"] != "http.request" or not message.get("more_body"):
            break
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"{}"})


def scope(method: str, path: str, body: bytes) -> dict:
    headers = [
        (b"host", b"127.0.0.1:8080"),
        (b"authorization", b"Bearer x"),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    return {"type": "http", "method": method, "path": path, "root_path": "", "query_string": b"", "headers": headers}


COMPILE = "/api/v2/dags/neuronforge_compile_publish/dagRuns"
GOOD = {"logical_date": None, "conf": {"tp_degree": 2, "sequence_length": 64, "max_new_tokens": 8}}
BIG = {"logical_date": None, "conf": {"prompts": ["Hello, my name is " * 4] * 7500}}
CASES: dict[str, tuple[str, str, bytes]] = {
    "other DAG": ("POST", "/api/v2/dags/other_dag/dagRuns", json.dumps({"conf": {"x": 1}}).encode()),
    "other route": ("GET", "/api/v2/version", b""),
    "nf trigger ok": ("POST", COMPILE, json.dumps(GOOD).encode()),
    "nf trigger bad": ("POST", COMPILE, json.dumps({"conf": {"tp_degree": 0}}).encode()),
    "nf 512 KiB": ("POST", COMPILE, json.dumps(BIG).encode()),
}


async def per_request(app: Any, case: tuple[str, str, bytes], n: int) -> float:
    method, path, body = case
    message = {"type": "http.request", "body": body, "more_body": False}
    statuses = []

    async def receive() -> dict:
        return message

    async def send(msg: dict) -> None:
        if msg["type"] == "http.response.start":
            statuses.append(msg["status"])

    t0 = time.perf_counter()
    for _ in range(n):
        await app(scope(method, path, body), receive, send)
    elapsed = (time.perf_counter() - t0) / n
    assert statuses and all(s in (200, 400) for s in statuses), statuses[:3]
    return elapsed


def fastapi_app() -> Any:
    """The same two routes as FastAPI serves them (a pydantic body, a JSON answer): the scale of
    what the api-server itself spends on the cheapest request, before any DB or auth work."""
    from fastapi import FastAPI

    app = FastAPI()

    @app.post("/api/v2/dags/{dag_id}/dagRuns")
    async def trigger(dag_id: str, body: Trigger) -> dict:
        return {"dag_id": dag_id, "conf": len(body.conf or {})}

    @app.get("/api/v2/version")
    async def version() -> dict:
        return {"version": "3"}

    return app


async def measure(app: Any, rounds: int, requests: int) -> dict[str, tuple[float, float]]:
    forms = load_forms()

    async def allowed(scope: dict, dag_id: str) -> bool:
        return True

    wrapped = forms.OneSentenceTriggerErrors(app, may_trigger=allowed)
    out = {}
    for name, case in CASES.items():
        n = max(10, requests // 100) if name == "nf 512 KiB" else requests
        await per_request(app, case, min(n, 50))  # warm: imports, regex, jsonschema validators
        await per_request(wrapped, case, min(n, 50))
        plain, through = [], []
        for _ in range(rounds):
            plain.append(await per_request(app, case, n))
            through.append(await per_request(wrapped, case, n))
        out[name] = (statistics.median(plain), statistics.median(through))
    return out


def table(title: str, results: dict[str, tuple[float, float]]) -> None:
    print(f"\n== {title}")
    print(f"{'request':<16}| {'without':>11} | {'with':>11} | {'added':>11} | ratio")
    print("-" * 68)
    for name, (plain, through) in results.items():
        added = through - plain
        print(
            f"{name:<16}| {plain * 1e6:>8.1f} µs | {through * 1e6:>8.1f} µs | {added * 1e6:>8.1f} µs | "
            f"{through / plain:.2f}x"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--requests", type=int, default=2000)
    args = ap.parse_args()
    print(f"Python {sys.version.split()[0]}, {args.rounds} rounds x {args.requests} requests, median per request")
    table("a null ASGI app (reads the body, answers 200)", asyncio.run(measure(inner, args.rounds, args.requests)))
    fastapi = asyncio.run(measure(fastapi_app(), args.rounds, args.requests))
    table("a FastAPI app (the same routes, a pydantic body)", fastapi)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
