"""The artifact catalog in the Airflow UI: what the compile farm's store holds, per model and
(serving profile, target), and how to deploy each artifact.

A FastAPI app mounted on the api-server at `/neuronforge` (`fastapi_apps`), with a navigation entry
(`external_views`, shown inside the UI in a same-origin iframe). Every route depends on Airflow's
own `get_user` (the `Authorization: Bearer` JWT or the UI's `_token` cookie), so access follows
Airflow's authentication: a request without a valid, unexpired token is answered 401 or 403. The
data comes from `neuronforge.farm.rows` (the store read through its farm index); this module only
renders it.

    GET /neuronforge/[?page=&per_page=]     one page of the farm: matrix, filters, latency plot, rows
    GET /neuronforge/artifacts/{key}        one artifact: URIs, verify status, deploy snippets, its channels
                                            and review state, with promote / rollback / approve / reject
    GET /neuronforge/channels?model=        a model's release channels: current builds, review, last moves
    GET /neuronforge/release?action=...     the confirmation of one release action (a `ReleaseRequest`):
                                            what will change, before -> after, and the way to Airflow's
                                            trigger form of the release DAG with the request's conf
    GET /neuronforge/leases[?start_after=]  the store's compile leases, a page at a time, read-only: who
                                            builds which key, and each lease's state (live, stale, ...)
    GET /neuronforge/api/artifacts          a page of rows as JSON (offset, limit; same filters)
    GET /neuronforge/api/artifacts/{key}    one row with its manifest and deploy snippets
    GET /neuronforge/api/leases             a page of the leases as JSON (start_after, limit)
    GET /neuronforge/static/{name}          the pages' catalog.css and catalog.js

The store is treated as hostile: every string it holds (model ids, failure messages, run ids,
launch files, URIs) reaches the page through Jinja2 templates with autoescape on
(`neuronforge_catalog_templates/`, next to this file); an `href` built from data is a link only
when it is relative to this server or http(s); every response carries a Content-Security-Policy
that allows no inline script or style (script and style are the files of `neuronforge_catalog_static/`);
a key must be 12 to 64 hex characters and a launch file a plain name before the store is read;
error bodies are one sentence without local paths or tracebacks (the detail goes to the log). Text a
store holds that cannot be encoded (a folder name that is not UTF-8: a lone surrogate) is shown as
its `\\xNN` escape by the rows (`farm.rows`) and, whatever else carries it, by the responses
themselves (`ShownHTML`, `ShownJSON`): one record never makes a page fail to encode.

A page view costs the farm index's head, tail and the pages it shows (`farm.farm_page`, called once:
its counts and instances make the summary and the instance filter; each row's channels and review
state are in its farm-index row); an artifact's JSON answer costs its index pointer, manifest and folder
listing (`farm.farm_row`: 3 requests; the deploy snippets are the manifest's own record of its launch
files, read one request each only for a manifest published before it recorded them); its page adds its
review record and its model's channels (one listing of `channels/<org>/<name>/` and one read per
channel); a model's channels page that listing, one review read per current build and, per channel,
the check of its build (`channels.pointer`: its damage record, index entry, manifest and folder listing);
a confirmation the few reads its action checks.

Release actions are never taken here. Every button of the pages leads to a confirmation page (GET,
no side effect) naming exactly what will change; its confirmation leads to Airflow's own trigger form
of the DAG `neuronforge_release` with the request's conf, so a move or a decision needs exactly the
permission that form needs, and is run, logged and retried by Airflow like any run. Airflow 3.3's UI
cannot fill its trigger form from a link (no route or query parameter takes a conf), so the page
copies the conf to the clipboard and shows it, to paste as the form's configuration JSON. The conf
pins the build the confirmation names (a promote from a channel and a rollback by steps become the
key they resolve to now): the run does what the page said, or refuses.
"""

from __future__ import annotations

import json
import logging
import math
import re
import unicodedata
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import quote, urlencode, urlsplit

from airflow.api_fastapi.core_api.security import get_user
from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from starlette.exceptions import HTTPException as StarletteHTTPException

from neuronforge.common.secrets import mask_credentials, mask_logs

log = logging.getLogger(__name__)
mask_logs()  # the api-server's log lines of ours and Airflow's, masked (common.secrets)

PREFIX = "/neuronforge"
COMPILE_DAG = "neuronforge_compile_publish"
RELEASE_DAG = "neuronforge_release"  # its Params are the fields of `farm.releases.ReleaseRequest`
SNIPPET_LIMIT = 64 * 1024  # a launch file larger than this is linked, not inlined
PER_PAGE, MAX_PER_PAGE = 50, 500  # rows per page view
API_LIMIT, MAX_API_LIMIT = 100, 1000  # rows per JSON answer
TEXT_LIMIT = 256  # characters of a filter (model substring, profile, instance, status) or a number
REASON_LIMIT = 500  # characters of a release action's reason (`farm.releases.REASON_MAX`)
HISTORY_SHOWN = 10  # a channel's last moves shown on its model's channels page

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "neuronforge_catalog_templates"  # no .py files: Airflow's plugin loader skips them
STATIC = HERE / "neuronforge_catalog_static"
ASSETS = {"catalog.css": "text/css; charset=utf-8", "catalog.js": "text/javascript; charset=utf-8"}

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'self'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "SAMEORIGIN",  # frame-ancestors for browsers that predate it
    "Cache-Control": "no-store",  # pages of a store's contents, behind a login
}
_HEADERS = [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]  # as ASGI sends them
_HEADER_NAMES = frozenset(k for k, _ in _HEADERS)
UNEXPECTED = "The catalog failed on this request; the api-server's log has the details."


class ShownJSON(JSONResponse):
    """A JSON answer in which text that cannot be encoded is `stored_text.shown` (never a 500)."""

    def render(self, content: Any) -> bytes:
        from neuronforge.common.stored_text import SHOWN

        text = json.dumps(content, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":"))
        return text.encode("utf-8", SHOWN)


class ShownHTML(HTMLResponse):
    """A page in which text that cannot be encoded is `stored_text.shown` (never a 500)."""

    def render(self, content: Any) -> bytes:
        from neuronforge.common.stored_text import SHOWN

        return content.encode("utf-8", SHOWN) if isinstance(content, str) else super().render(content)


app = FastAPI(
    title="neuronforge artifact catalog",
    default_response_class=ShownJSON,
    dependencies=[Depends(get_user)],
    # No /docs, /redoc or /openapi.json: they are not behind `get_user`, and Swagger's page needs
    # inline script and a CDN, which the Content-Security-Policy refuses.
    docs_url=None,
    redoc_url=None,
    openapi_url=None,
)


# -- security headers, errors ---------------------------------------------------------------------
class SecurityHeaders:
    """Pure ASGI middleware: SECURITY_HEADERS on every response of the app (pages, JSON, errors,
    static files, Airflow's 401 / 403), replacing any the route set."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in _HEADER_NAMES]
                message = {**message, "headers": kept + _HEADERS}
            await send(message)

        await self.app(scope, receive, with_headers)


app.add_middleware(SecurityHeaders)


def _is_page(request: Request) -> bool:
    """An HTML route (errors as the HTML page), not /api/ or /static/ (errors as JSON)."""
    root = request.scope.get("root_path", "")
    path = request.scope.get("path", "")
    path = path[len(root) :] if root and path.startswith(root) else path
    return not (path.startswith("/api/") or path == "/api" or path.startswith("/static/"))


def _sentence(text: Any) -> str:
    """A message as one sentence on one line."""
    text = " ".join(str(text).split())
    return text if text.endswith(".") else f"{text}."


def _error(request: Request, status: int, sentence: str, headers: dict[str, str] | None = None) -> Response:
    """Every error page and JSON error: the sentence masked here, once (`common.secrets`)."""
    sentence = mask_credentials(sentence)
    if _is_page(request):
        page = _render("error.html.j2", title="neuronforge artifact catalog", message=sentence)
        return ShownHTML(page, status_code=status, headers=headers)
    return ShownJSON({"detail": sentence}, status_code=status, headers=headers)


@app.exception_handler(StarletteHTTPException)
async def _refused(request: Request, exc: StarletteHTTPException) -> Response:
    """A 400 / 401 / 403 / 404 / 405 / 503 (ours, Airflow's `get_user`'s, the router's): its one
    sentence, as the HTML error page on a page route and `{"detail": ...}` on /api/ and /static/."""
    return _error(request, exc.status_code, _sentence(exc.detail), getattr(exc, "headers", None))


@app.exception_handler(RequestValidationError)
async def _invalid(request: Request, exc: RequestValidationError) -> Response:
    where = ", ".join(str(e.get("loc", ("?",))[-1]) for e in exc.errors()[:3]) or "a parameter"
    return _error(request, 400, f"the request's {where} is not valid; see the catalog's page for what it takes.")


@app.exception_handler(Exception)
async def _unexpected(request: Request, exc: Exception) -> Response:
    """Anything else: 500 with one generic sentence, never the traceback (that goes to the log).
    Starlette answers this outside the middleware stack, so the headers are set here too."""
    log.error("neuronforge catalog: %s %s failed", request.method, request.url.path, exc_info=exc)
    try:
        return _error(request, 500, UNEXPECTED, SECURITY_HEADERS)
    except Exception:  # the templates themselves: still one sentence
        return ShownJSON({"detail": UNEXPECTED}, status_code=500, headers=SECURITY_HEADERS)


# -- parameters -----------------------------------------------------------------------------------
def _shown(value: str) -> str:
    """A refused value as the sentence quotes it: at most 80 characters, in JSON quotes."""
    return json.dumps(value[:80] + ("..." if len(value) > 80 else ""))


def _text(name: str, value: str | None, limit: int = TEXT_LIMIT) -> str | None:
    """A text query parameter of at most `limit` characters (absent or empty: None), else 400."""
    if value is None or value == "":
        return None
    if len(value) > limit:
        raise HTTPException(
            status_code=400,
            detail=f"{name} is {len(value)} characters long; give at most {limit}.",
        )
    return value


def _whole(name: str, value: str | None, default: int, lo: int, hi: int | None = None) -> int:
    """A whole-number query parameter (absent or empty: `default`), else 400."""
    value = _text(name, value)
    if value is None or value.strip() == "":
        return default
    try:
        n: int | None = int(value.strip())
    except ValueError:
        n = None
    if n is None or n < lo or (hi is not None and n > hi):
        shown = value.strip() if value.strip().lstrip("-").isdigit() else _shown(value)
        span = f"from {lo} to {hi}" if hi is not None else f"from {lo} up"
        raise HTTPException(status_code=400, detail=f"{name} = {shown} is not allowed; use a whole number {span}.")
    return n


def _key(key: str) -> str:
    """A cache key or a prefix of one (lower-cased), checked before the store is touched by the rule
    `farm.resolve_key` applies (`farm.is_key`), else 400. Nothing else reaches a store path."""
    from neuronforge.farm.rows import KEY_MAX, KEY_MIN, is_key

    lowered = key.lower()
    if not is_key(lowered):
        raise HTTPException(
            status_code=400,
            detail=f"key {_shown(key)} is not a cache key: give {KEY_MIN} to {KEY_MAX} hex characters "
            "of one (`neuronforge ls` prints 12).",
        )
    return lowered


def _query(model: str | None, profile: str | None, instance: str | None, status: str | None):
    """The filters as a `FarmQuery` (empty values: no filter); too long or an unknown status: 400."""
    from neuronforge.common.errors import InvalidInput
    from neuronforge.farm.rows import FarmQuery

    texts = {n: _text(n, v) for n, v in (("model", model), ("profile", profile), ("instance", instance))}
    try:
        return FarmQuery(**texts, status=_text("status", status))
    except InvalidInput as exc:
        raise HTTPException(status_code=400, detail=_sentence(exc)) from None


# -- the store ------------------------------------------------------------------------------------
UNREADABLE = "the store NEURONFORGE_STORE names cannot be read; the api-server's log says why."


# A remote store, once open (its bucket checked), is kept for the api-server's life: a page view costs
# the reads it shows, not a bucket check each time. A bucket gone since is said by the next read (503).
_OPEN_REMOTE: dict[str, Any] = {}


def _store():
    """The store NEURONFORGE_STORE names (read, never created: a mistyped one is an error)."""
    from neuronforge.common import settings
    from neuronforge.common.errors import NeuronforgeError
    from neuronforge.stores import REMOTE_STORES, open_store

    uri = settings.store_uri(None)
    if uri in _OPEN_REMOTE:
        return _OPEN_REMOTE[uri]
    try:
        store = open_store(uri, must_exist=True)
    except NeuronforgeError as exc:
        log.warning("neuronforge catalog: the store cannot be opened: %s", exc)
        raise HTTPException(status_code=503, detail=UNREADABLE) from None
    if uri.partition("://")[0] in REMOTE_STORES:
        _OPEN_REMOTE[uri] = store
    return store


def _farm_page(store: Any, query: Any, offset: int, limit: int):
    from neuronforge.common.errors import InvalidInput, NeuronforgeError
    from neuronforge.farm.rows import farm_page

    try:
        return farm_page(store, query, offset=offset, limit=limit)
    except InvalidInput as exc:
        raise HTTPException(status_code=400, detail=_sentence(str(exc).replace(store.root_uri, "the store"))) from None
    except NeuronforgeError as exc:
        log.warning("neuronforge catalog: reading the farm index of %s failed: %s", store.root_uri, exc)
        raise HTTPException(status_code=503, detail=UNREADABLE) from None


def _farm_row(store: Any, key: str) -> tuple[Any, Any]:
    """One artifact's row and manifest (`farm.farm_row`), else 404."""
    from neuronforge.common.errors import NeuronforgeError
    from neuronforge.farm.rows import farm_row

    try:
        found = farm_row(store, key)
    except NeuronforgeError as exc:
        log.warning("neuronforge catalog: reading %s in %s failed: %s", key, store.root_uri, exc)
        raise HTTPException(status_code=503, detail=UNREADABLE) from None
    if found is None:
        raise HTTPException(status_code=404, detail=f"no single build with key '{key}' in the store.")
    return found


def _plain_name(name: str) -> bool:
    """A launch file's name as the pipeline writes it: one path part, no `..`, no control characters
    (a hostile manifest must not make the page read outside the artifact's launch/ folder)."""
    return (
        0 < len(name) <= 255
        and name not in (".", "..")
        and not any(c in "/\\" or unicodedata.category(c) in ("Cc", "Cs") for c in name)
    )


def _artifact_prefix(store: Any, row: Any) -> str | None:
    """The artifact's folder as a store key, when its URI is one inside the store."""
    from neuronforge.stores.base import is_safe_relpath

    if not row.artifact_uri.startswith(store.root_uri):
        return None
    prefix = row.artifact_uri.removeprefix(store.root_uri).strip("/")
    return prefix if is_safe_relpath(prefix) else None


def _snippets(store: Any, row: Any, manifest: Any) -> dict[str, str]:
    """The artifact's launch files up to SNIPPET_LIMIT, as text (larger, missing or oddly named
    ones: left out; a larger one unread when the manifest gives its size). From the manifest's own
    record of them (`launch_text`: no request); a manifest published before it recorded them has the
    files read, one request each."""
    from neuronforge.common.errors import StoreError

    prefix = _artifact_prefix(store, row) if row.launch else None
    if prefix is None:
        return {}
    recorded = manifest.launch_text if manifest is not None else None
    if recorded is not None:  # a file the manifest has no text of (too large, not UTF-8): linked, not read
        return {
            name: text
            for name in sorted(row.launch)
            if _plain_name(name) and (text := recorded.get(name)) is not None and len(text) <= SNIPPET_LIMIT
        }
    sizes = {f.path: f.size for f in manifest.files} if manifest is not None else {}
    out = {}
    for name in sorted(row.launch):
        if not _plain_name(name):
            log.warning("neuronforge catalog: launch file %r of %s not read: not a plain name", name, row.key)
            continue
        size = sizes.get(f"launch/{name}")
        if size is not None and size > SNIPPET_LIMIT:
            continue
        try:
            data = store.get_bytes(f"{prefix}/launch/{name}")
        except StoreError:  # missing: the verify line says so
            continue
        if len(data) <= SNIPPET_LIMIT:
            out[name] = data.decode("utf-8", errors="replace")
    return out


# -- the JSON API ---------------------------------------------------------------------------------
@app.get("/api/artifacts")
def artifacts(
    model: str | None = Query(None),
    profile: str | None = Query(None),
    instance: str | None = Query(None),
    status: str | None = Query(None),
    offset: str | None = Query(None, description="rows to skip (default 0)"),
    limit: str | None = Query(None, description=f"rows to return (default {API_LIMIT}, at most {MAX_API_LIMIT})"),
) -> dict[str, Any]:
    skip = _whole("offset", offset, 0, 0)
    count = _whole("limit", limit, API_LIMIT, 1, MAX_API_LIMIT)
    query = _query(model, profile, instance, status)
    shown = _farm_page(_store(), query, skip, count)
    return {
        "rows": [r.to_json() for r in shown.rows],
        "total": shown.total,
        "offset": shown.offset,
        "limit": count,
        "counts": shown.counts,
    }


@app.get("/api/artifacts/{key}")
def artifact(key: str) -> dict[str, Any]:
    key = _key(key)
    store = _store()
    row, manifest = _farm_row(store, key)
    out = row.to_json()
    from neuronforge.common.stored_text import shown_json

    out["manifest"] = manifest.as_stored() if manifest is not None else None  # as the store holds it
    out["snippets"] = _snippets(store, row, manifest)
    return shown_json(out)


@app.get("/static/{name}")
def static(name: str) -> Response:
    """The pages' style sheet and script (files, not inline: the CSP allows 'self' only)."""
    if name not in ASSETS:
        raise HTTPException(status_code=404, detail=f"no static file {_shown(name)}; there are {', '.join(ASSETS)}.")
    return Response((STATIC / name).read_bytes(), media_type=ASSETS[name])


# -- rendering ------------------------------------------------------------------------------------
SEPARATORS = re.compile(r"(?<=[/\-_@:?&=])")


def _wbr_parts(value: Any) -> list[str]:
    """`value` split after each `/`, `-`, `_`, `@`, `:`, `?`, `&`, `=` (the `w` macro puts `<wbr>`
    between the parts, each escaped)."""
    return SEPARATORS.split(str(value))


def _safe_href(href: Any) -> bool:
    """A link the page may render: a path on this server (`/...`, not `//host`) or an http(s) URL
    with a host. javascript:, data:, vbscript: and the rest are shown as text."""
    if not isinstance(href, str) or any(unicodedata.category(c) == "Cc" for c in href) or "\\" in href:
        return False
    if href.startswith("/"):
        return not href.startswith("//")
    parts = urlsplit(href)
    return parts.scheme in ("http", "https") and bool(parts.netloc)


ENV = Environment(
    loader=FileSystemLoader(TEMPLATES),
    autoescape=True,  # every template is HTML: every {{ value }} is escaped
    undefined=StrictUndefined,
    keep_trailing_newline=False,
)
ENV.filters["wbr_parts"] = _wbr_parts
ENV.tests["safe_href"] = _safe_href
ENV.globals.update(prefix=PREFIX, static=f"{PREFIX}/static")


def _render(template: str, **context: Any) -> str:
    return ENV.get_template(template).render(**context)


def _ms(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.3g} ms" if value < 100 else f"{value:,.0f} ms"


def _short_target(profile: str, target: str) -> str:
    """A target's slug without its profile's name (the column or line already names the profile)."""
    name = profile.partition("@")[0]
    return target.removeprefix(f"{name}-") if name else target


def _artifact_href(key: str) -> str:
    return f"{PREFIX}/artifacts/{quote(str(key), safe='')}"


PLOT_ROWS = 30
METRICS = (("ttft_ms", "ttft", "time to first token"), ("per_token_ms", "per-token", "per output token"))


def _log_scale(values: list[float]) -> tuple[float, float]:
    """Whole decades around `values` (ms): a bar ten times the others still leaves them readable."""
    lo = 10 ** math.floor(math.log10(min(values)))
    hi = 10 ** math.ceil(math.log10(max(values)))
    return lo, hi if hi > lo else lo * 10


def _width(value: float, scale: tuple[float, float]) -> float:
    """A bar's width in % of its track on the log `scale` (at least 4%: the smallest is visible)."""
    lo, hi = scale
    return 4 + 96 * math.log10(value / lo) / math.log10(hi / lo)


def _tick(ms: float) -> str:
    return f"{ms:g}" if ms < 1000 else f"{ms / 1000:g}k"


def _ticks(scale: tuple[float, float]) -> list[dict[str, str]]:
    """The scale's decades in ms; beyond three, every other one (labels of a narrow column must not
    run into each other). The first label starts at its tick, the last ends at it."""
    lo, hi = scale
    decades = round(math.log10(hi / lo))
    step = 1 if decades <= 3 else 2
    ticks = [lo * 10**k for k in range(0, decades + 1, step)]
    if ticks[-1] != hi:
        ticks.append(hi)
    last = len(ticks) - 1
    return [
        {
            "x": f"{_width(t, scale):.1f}",
            "anchor": "start" if i == 0 else "end" if i == last else "middle",
            "label": _tick(t),
        }
        for i, t in enumerate(ticks)
    ]


def _plot_view(rows: list[Any]) -> dict[str, Any] | None:
    """What `_plot.html.j2` draws: per metric a log scale and its ticks, per artifact a bar width
    (% of its track, computed here) and its value as text. None: no smoke latencies on this page."""
    timed = [r for r in rows if (r.ttft_ms or 0) > 0 or (r.per_token_ms or 0) > 0]
    if not timed:
        return None
    shown = timed[:PLOT_ROWS]
    scales: dict[str, tuple[float, float] | None] = {}
    for attr, _, _ in METRICS:
        values = [getattr(r, attr) for r in shown if (getattr(r, attr) or 0) > 0]
        scales[attr] = _log_scale(values) if values else None
    lines = []
    for r in shown:
        cells: list[dict[str, Any] | None] = []
        for attr, css, title in METRICS:
            v, scale = getattr(r, attr), scales[attr]
            if not v or v <= 0 or scale is None:
                cells.append(None)
                continue
            cells.append({"css": css, "title": title, "width": f"{_width(v, scale):.1f}", "ms": v, "text": _ms(v)})
        lines.append(
            {"model": r.model, "profile": r.profile, "target": _short_target(r.profile, r.target), "cells": cells}
        )
    return {
        "more": f" (the first {PLOT_ROWS} of this page's {len(timed)})" if len(timed) > PLOT_ROWS else "",
        "metrics": [
            {"css": css, "title": title, "ticks": _ticks(scales[attr]) if scales[attr] else []}
            for attr, css, title in METRICS
        ],
        "lines": lines,
    }


def _matrix_view(rows: list[Any]) -> dict[str, Any] | None:
    """Model × (profile, target) of the page's rows; each cell links to its artifacts' pages (more
    than one when the model has builds of several revisions for that target: each is reachable, by its
    revision shortened as every listing shows it, `spec.source.model_ref`)."""
    from neuronforge.spec.source import REVISION_SHOWN

    if not rows:
        return None
    columns = sorted({(r.profile, r.target) for r in rows})
    cell: dict[tuple[str, str, str], list[Any]] = {}
    for r in rows:
        cell.setdefault((r.model, r.profile, r.target), []).append(r)
    lines = []
    for m in sorted({r.model for r in rows}):
        cells: list[dict[str, Any] | None] = []
        for p, t in columns:
            found = cell.get((m, p, t))
            if not found:
                cells.append(None)
                continue
            entries = [
                {
                    "rev": r.revision[:REVISION_SHOWN] if len(found) > 1 and r.revision else "",
                    "href": _artifact_href(r.key),
                    "status": r.status,
                    "stage": r.stage,
                    "release": _release_view(r.channels, r.review, r.review_reason)
                    if r.status in ("published", "stale")
                    else None,
                    **_latency_view(r),
                }
                for r in found
            ]
            cells.append({"status": found[0].status, "entries": entries})
        lines.append({"model": m, "cells": cells, "channels_href": _channels_href(m)})
    return {"columns": [{"profile": p, "target": _short_target(p, t)} for p, t in columns], "lines": lines}


def _latency_view(r: Any) -> dict[str, str]:
    if r.ttft_ms is None and r.per_token_ms is None:
        return {"ttft": "", "per_token": ""}
    return {"ttft": _ms(r.ttft_ms), "per_token": _ms(r.per_token_ms)}


def _page_href(filters: dict[str, str | None], page: int, per_page: int) -> str:
    params: dict[str, Any] = {k: v for k, v in filters.items() if v}
    if page > 1:
        params["page"] = page
    if per_page != PER_PAGE:
        params["per_page"] = per_page
    return f"{PREFIX}/" + (f"?{urlencode(params)}" if params else "")


def _pager_view(filters: dict[str, str | None], page: int, per_page: int, shown: Any) -> dict[str, str]:
    """Previous / next links keeping the filters, and where this page is."""
    first = (page - 1) * per_page
    if shown.total is not None:
        pages = max(1, -(-shown.total // per_page))
        where = f"page {page} of {pages}"
        if shown.rows:
            where += f" (rows {first + 1}–{first + len(shown.rows)} of {shown.total})"
        more = first + per_page < shown.total
    else:  # a filtered view that stopped reading the index once it had this page: there may be more
        where = f"page {page}"
        if shown.rows:
            where += f" (rows {first + 1}–{first + len(shown.rows)})"
        more = True
    return {
        "prev": _page_href(filters, page - 1, per_page) if page > 1 else "",
        "where": where,
        "next": _page_href(filters, page + 1, per_page) if more else "",
    }


def _model_ref(name: str, revision: str) -> str:
    """A build's model as `ls`, `show` and `channels` name it (`spec.source.model_ref`: org/name@rev12)."""
    from neuronforge.spec.source import model_ref

    return model_ref(name, revision)


def _row_view(r: Any) -> dict[str, Any]:
    return {
        "release": _release_view(r.channels, r.review, r.review_reason) if r.status in ("published", "stale") else None,
        "short_key": r.key[:12],
        "href": _artifact_href(r.key),
        "model": _model_ref(r.model, r.revision),
        "profile": r.profile,
        "target": r.target,
        "status": r.status,
        "stage": r.stage,
        "message": r.message,
        "at": r.at,
        "registry": _registry_badge(r),
    }


def _registry_badge(r: Any) -> dict[str, str] | None:
    """Where optimum-neuron's lookup finds a build (its farm-index row says: no manifest read)."""
    if not r.hub_registry:
        return None
    found = r.hub_registry_found is True
    note = "" if found else " (lookup misses it)"
    return {"repo": r.hub_registry, "css": "published" if found else "failed", "note": note}


def _registry_view(manifest: Any) -> dict[str, Any] | None:
    """The manifest's `hub_registry` part as `artifact.html.j2` shows it, with the consumer's own lookup command."""
    import shlex

    r = manifest.hub_registry if manifest is not None else None
    if r is None:
        return None
    n = r.neuron
    model = str(n.get("checkpoint_id") or "")
    lookup = ["optimum-cli", "neuron", "cache", "lookup", model, "--task", "text-generation"]
    env = f"HF_ENDPOINT={shlex.quote(r.endpoint)} " if r.endpoint and r.endpoint != "https://huggingface.co" else ""
    return {
        "repo": r.repo_id,
        "endpoint": r.endpoint,
        "commit": r.commit[:12] or "(everything was there already)",
        "entry_path": r.entry_path,
        "modules": len(r.modules),
        "uploaded": f"{r.uploaded_files} files, {r.uploaded_bytes / 1e6:.1f} MB",
        "versions": " · ".join(f"{k} {v}" for k, v in sorted(r.versions.items())),
        "found": r.lookup.found,
        "reason": r.lookup.reason,
        "checked_at": r.lookup.checked_at,
        "command": f"{env}CUSTOM_CACHE_REPO={shlex.quote(r.repo_id)} {shlex.join(lookup)}",
    }


@app.get("/", response_class=HTMLResponse)
def catalog_page(
    model: str | None = Query(None),
    profile: str | None = Query(None),
    instance: str | None = Query(None),
    status: str | None = Query(None),
    page: str | None = Query(None, description="1-based page number (default 1)"),
    per_page: str | None = Query(None, description=f"rows per page (default {PER_PAGE}, at most {MAX_PER_PAGE})"),
) -> HTMLResponse:
    from neuronforge.farm.rows import STATUSES
    from neuronforge.profiles import profile_names

    number = _whole("page", page, 1, 1)
    size = _whole("per_page", per_page, PER_PAGE, 1, MAX_PER_PAGE)
    query = _query(model, profile, instance, status)
    store = _store()
    shown = _farm_page(store, query, (number - 1) * size, size)
    filters = {"model": query.model, "profile": query.profile, "instance": query.instance, "status": query.status}
    api = f"{PREFIX}/api/artifacts?" + urlencode(
        {**{k: v for k, v in filters.items() if v}, "offset": (number - 1) * size, "limit": size}
    )
    page_html = _render(
        "catalog.html.j2",
        title="neuronforge artifact catalog",
        store_uri=store.root_uri,
        summary=", ".join(f"{n} {s}" for s, n in shown.counts.items() if n) or "empty",
        api_href=api,
        filters={k: v or "" for k, v in filters.items()},
        profiles=profile_names(),
        instances=list(shown.instances),
        statuses=list(STATUSES),
        per_page_field=size if size != PER_PAGE else "",
        pager=_pager_view(filters, number, size, shown),
        matrix=_matrix_view(shown.rows),
        past_the_end=number > 1,
        plot=_plot_view(shown.rows),
        rows=[_row_view(r) for r in shown.rows],
    )
    return ShownHTML(page_html)


def _detail_view(row: Any, manifest: Any, snippets: dict[str, str]) -> dict[str, Any]:
    """One artifact as `artifact.html.j2` shows it."""
    from neuronforge.common.hosts import describe

    if row.incomplete is None:
        verify = "not checked"
    elif row.incomplete:
        verify = "INCOMPLETE: " + "; ".join(row.incomplete)
    else:
        verify = "complete (sizes match the manifest)"
    latency = None
    if row.ttft_ms is not None or row.per_token_ms is not None:
        latency = {"ttft": _ms(row.ttft_ms), "per_token": _ms(row.per_token_ms)}
    hosts = describe(manifest.hosts) if manifest is not None and row.manifest_uri else []
    return {
        "short_key": row.key[:12],
        "key": row.key,
        "model": _model_ref(row.model, row.revision),
        "target": row.target,
        "status": row.status,
        "stage": row.stage,
        "message": row.message,
        "profile": row.profile,
        "compiler": row.compiler_version or "-",
        "size": f" · {row.size_bytes / 1e6:.1f} MB" if isinstance(row.size_bytes, (int, float)) else "",
        "at": row.at,
        "run_id": row.run_id,
        "run_href": f"/dags/{COMPILE_DAG}/runs/{quote(row.run_id, safe='')}",
        "latency": latency,
        "manifest_uri": row.manifest_uri,
        "artifact_uri": row.artifact_uri,
        "verify": verify,
        "hosts": hosts[:2] if len(hosts) >= 2 else None,
        "json_href": f"{PREFIX}/api/artifacts/{quote(row.key, safe='')}",
        "uris": sorted(row.uris.items()),
        # larger than SNIPPET_LIMIT, missing (the verify line says which) or not a plain name: text None
        "launch": [{"name": n, "uri": u, "text": snippets.get(n)} for n, u in sorted(row.launch.items())],
        "registry": _registry_view(manifest) if row.manifest_uri else None,
        "consumer_versions": " · ".join(f"{k} {v}" for k, v in (manifest.consumer_versions or {}).items())
        if manifest is not None and row.manifest_uri
        else "",
    }


@app.get("/artifacts/{key}", response_class=HTMLResponse)
def artifact_page(key: str) -> HTMLResponse:
    """One artifact's page (what a matrix cell or row links to)."""
    key = _key(key)
    store = _store()
    row, manifest = _farm_row(store, key)
    snippets = _snippets(store, row, manifest)
    page_html = _render(
        "artifact.html.j2",
        title=f"{_model_ref(row.model, row.revision)} · {row.target} — neuronforge",
        store_uri=store.root_uri,
        a=_detail_view(row, manifest, snippets),
        release=_artifact_release(store, row, manifest),
    )
    return ShownHTML(page_html)


# -- release channels -----------------------------------------------------------------------------
def _channels_href(model: str) -> str:
    """A model's channels page; "" for a name the page would refuse for its length (no link)."""
    return f"{PREFIX}/channels?{urlencode({'model': model})}" if 0 < len(model) <= TEXT_LIMIT else ""


def _release_href(**fields: Any) -> str:
    """The confirmation page of one release action (`ReleaseRequest` fields; empty ones left out)."""
    return f"{PREFIX}/release?" + urlencode({k: v for k, v in fields.items() if v not in ("", None)})


def _state_css(state: str) -> str:
    """A review state as a CSS class: one of the three known ones, else `review-other` (a stored
    state is text from the store, never a class name)."""
    from neuronforge.records.review import REVIEW_STATES

    return f"review-{state}" if state in REVIEW_STATES else "review-other"


def _release_view(names: list[str], state: str, reason: str = "") -> dict[str, Any]:
    """A build's channels and review state as a row, a matrix cell and the artifact page show them.
    A rejected build that a channel points to is `loud`: a warning in words (and why it was
    rejected), not only a colour."""
    names = [str(n) for n in names]
    why = f" ({reason})" if reason else ""
    loud = (
        f"REJECTED{why}, still on {', '.join(names)}: roll back or promote another build" if state == "rejected" else ""
    )
    return {"channels": names, "state": state, "css": _state_css(state), "loud": loud if names else ""}


def _store_sentence(store: Any, exc: Exception) -> str:
    """An error's message as a page shows it: one sentence, the store's local root not named."""
    return _sentence(str(exc).replace(store.root_uri, "the store"))


def _channels_of(store: Any, model: str) -> tuple[list[Any], list[str]]:
    """The model's channels (`channels.listing`: one listing of its channels/ folder and one read per
    channel), and a sentence for each record there that is not a channel's (shown in its place: the
    others still show); a model that does not parse 400, a store that cannot be read 503."""
    from neuronforge.artifacts import channels
    from neuronforge.common.errors import InvalidInput, NeuronforgeError

    try:
        found = channels.listing(store, model)
    except InvalidInput as exc:
        raise HTTPException(status_code=400, detail=_store_sentence(store, exc)) from None
    except NeuronforgeError as exc:  # the store, or a newer neuronforge's record
        log.warning("neuronforge catalog: listing the channels of %s in %s failed: %s", model, store.root_uri, exc)
        raise HTTPException(status_code=503, detail=UNREADABLE) from None
    for exc in found.damaged:
        log.warning("neuronforge catalog: a channel record of %s does not read: %s", model, exc)
    return found.records, [_store_sentence(store, exc) for exc in found.damaged]


def _review_of(store: Any, key: str) -> tuple[str, Any]:
    """A build's review state and record (None: pending); a record that does not validate is shown
    as `unreadable`, never as a state it may not hold."""
    from neuronforge.artifacts import reviews
    from neuronforge.records.base import RecordError

    try:
        record = reviews.review_of(store, key)
    except RecordError as exc:
        log.warning("neuronforge catalog: the review record of %s does not validate: %s", key[:12], exc)
        return "unreadable", None
    return (record.state if record is not None else reviews.PENDING), record


def _decision_view(d: Any) -> dict[str, str]:
    return {"state": d.state, "css": _state_css(d.state), "by": d.by, "at": d.at, "reason": d.reason}


def _review_view(state: str, record: Any) -> dict[str, Any]:
    """A build's review: its state, who/when/why, the earlier decisions (newest first)."""
    return {
        "state": state,
        "css": _state_css(state),
        "current": _decision_view(record.current) if record is not None else None,
        "history": [_decision_view(d) for d in record.history] if record is not None else [],
    }


def _move_view(move: Any) -> dict[str, Any]:
    build = move.build
    return {
        "action": move.action,
        "short_key": build.key[:12],
        "href": _artifact_href(build.key),
        "target": build.target,
        "previous": move.previous[:12],
        "previous_href": _artifact_href(move.previous) if move.previous else "",
        "by": move.by,
        "at": move.at,
        "reason": move.reason,
        "review": move.review,
    }


def _pointer_of(store: Any, record: Any) -> Any:
    """Whether the channel's build is still sound (`channels.pointer`: its damage record, then the
    checks a move makes); a store that cannot be read now makes it `unreadable`, said so."""
    from neuronforge.artifacts import channels
    from neuronforge.common.errors import NeuronforgeError

    try:
        return channels.pointer(store, record, by="catalog")
    except NeuronforgeError as exc:
        log.warning("neuronforge catalog: checking the build of channel %s failed: %s", record.channel, exc)
        return channels.Pointer("unreadable", "its build could not be read now (the api-server's log says why)")


def _pointer_view(found: Any) -> dict[str, str]:
    """A channel's build as sound or not: its state word and, when it is not sound, a warning in words."""
    if found is None or found.state == "ok":
        return {"state": found.state if found is not None else "", "loud": ""}
    if found.damage is not None:
        d = found.damage
        why = f"{d.reason}; found by {d.by} at {d.at}"
        return {"state": "damaged", "loud": f"DAMAGED ({why}): rebuild it, or roll back or promote another build."}
    why = f"UNREADABLE ({found.reason}): a move onto it would be refused now"
    return {"state": found.state, "loud": f"{why}; roll back or promote another build."}


def _channel_view(
    record: Any, state: str, review: Any, siblings: list[Any], pointer: Any = None, attested: bool | None = None
) -> dict[str, Any]:
    """One channel as its model's page shows it, with its buttons: approve / reject its build,
    promote a sibling channel's build here, roll back to each earlier build of its history; whether
    its build is still sound (`pointer`, `channels.Pointer`: None when not checked); and, for a channel
    requiring its fleet's SDK release, whether the build is attested for it (`attested`)."""
    from neuronforge.artifacts import channels

    key = record.current.build.key
    ref = {"model": record.model, "profile": record.profile_line, "channel": record.channel}
    actions = []
    if state != "approved":
        actions.append({"label": f"approve {key[:12]}", "href": _release_href(action="approve", build=key)})
    if state != "rejected":
        actions.append({"label": f"reject {key[:12]}", "href": _release_href(action="reject", build=key)})
    for other in siblings:
        theirs = other.current.build.key
        if other.channel != record.channel and other.profile_line == record.profile_line and theirs != key:
            actions.append(
                {
                    "label": f"promote {other.channel}'s {theirs[:12]} here",
                    "href": _release_href(action="promote", **ref, build=theirs, reason=f"from {other.channel}"),
                }
            )
    rollback = {b.key: _release_href(action="rollback", **ref, to=b.key) for b in channels.earlier_builds(record)}
    shown = record.history[:HISTORY_SHOWN]
    history = [{**_move_view(m), "rollback": rollback.pop(m.build.key, "")} for m in shown]
    needs_now = channels.requires_approval(record.channel)
    loud = ""
    if state == "rejected":
        why = f" by {review.current.by} at {review.current.at}: {review.current.reason}" if review is not None else ""
        loud = f"REJECTED{why}. This channel still points to it: roll back or promote another build."
    return {
        "id": f"channel-{record.profile_line}-{record.channel}",
        "name": record.channel,
        "line": record.profile_line,
        "requires_approval": record.requires_approval,
        "approval_changed": needs_now != record.requires_approval,
        "current": _move_view(record.current),
        "build": {
            "uri": record.current.build.artifact_uri,
            "profile": record.current.build.profile,
            "published_at": record.current.build.published_at,
            "smoke_host": str(record.current.build.smoke.get("host") or ""),
            "compiler": str(record.current.build.toolchain.get("compiler_version") or ""),
        },
        "state": state,
        "css": _state_css(state),
        "review": _review_view(state, review)["current"],
        "loud": loud,
        "pointer": _pointer_view(pointer),
        "requires_release": record.requires_release,
        "attested": attested,
        "attest": f"neuronforge attest {key[:12]} --sdk {record.requires_release}" if attested is False else "",
        "actions": actions,
        "history": history,
        "more": len(record.history) - len(shown),
    }


def _model(model: str | None) -> str:
    """The `model` parameter as the one name records use (`ModelSource.name`), else 400."""
    from neuronforge.common.errors import InvalidInput
    from neuronforge.spec.source import ModelSource

    given = _text("model", model)
    if given is None:
        raise HTTPException(
            status_code=400,
            detail="give the model: channels?model=org/name (the catalog's matrix links each model to it).",
        )
    try:
        return ModelSource.parse(given).name
    except InvalidInput as exc:
        raise HTTPException(status_code=400, detail=_sentence(exc)) from None


@app.get("/channels", response_class=HTMLResponse)
def channels_page(model: str | None = Query(None)) -> HTMLResponse:
    """A model's release channels: each one's current build, its review state and whether it is still
    sound (`channels.pointer`, per channel), whether it requires approval, its last moves, and the
    buttons that lead to a confirmation."""
    name = _model(model)
    store = _store()
    records, damaged = _channels_of(store, name)
    reviews: dict[str, tuple[str, Any]] = {}
    for r in records:
        key = r.current.build.key
        if key not in reviews:
            reviews[key] = _review_of(store, key)
    views = [
        _channel_view(r, *reviews[r.current.build.key], records, _pointer_of(store, r), _attested_of(store, r))
        for r in records
    ]
    page_html = _render(
        "channels.html.j2",
        title=f"{name} · channels — neuronforge",
        store_uri=store.root_uri,
        model=name,
        catalog_href=f"{PREFIX}/?{urlencode({'model': name})}",
        channels=views,
        damaged=damaged,
    )
    return ShownHTML(page_html)


def _attested_of(store: Any, record: Any) -> bool | None:
    """Whether the channel's build is attested for the SDK release the channel requires (one read; None:
    it requires none, or the attestations do not read)."""
    from neuronforge.artifacts import attestations
    from neuronforge.records.base import RecordError

    if not record.requires_release:
        return None
    build = record.current.build
    try:
        return attestations.attested_for(store, build.key, record.requires_release, build.sdk_release)
    except RecordError as exc:
        log.warning("neuronforge catalog: the attestations of %s do not validate: %s", build.key[:12], exc)
        return None


def _attestations_view(store: Any, key: str) -> list[dict[str, Any]]:
    """A build's attestations at newer SDK releases, newest first (one read; a record that does not
    validate shows none, logged)."""
    from neuronforge.artifacts import attestations
    from neuronforge.records.base import RecordError

    try:
        record = attestations.attestations_of(store, key)
    except RecordError as exc:
        log.warning("neuronforge catalog: the attestations of %s do not validate: %s", key[:12], exc)
        return []
    return [
        {
            "release": a.release, "run": a.run, "passed": a.passed, "host": a.host, "at": a.at, "detail": a.detail,
            "keys_found": len(a.keys_found), "keys_missing": a.keys_missing,
            "current": record.passed_for(a.release) is a,
        }
        for a in (record.attestations if record is not None else [])
    ]  # fmt: skip


def _artifact_release(store: Any, row: Any, manifest: Any) -> dict[str, Any] | None:
    """A published build's release section, read: its review record and its model's channels (the
    ones that point to it are `channels.pointing_to`'s, from the same listing the buttons need). None
    for a build that is not published."""
    from neuronforge.common.stored_text import shown
    from neuronforge.spec.source import model_name

    if manifest is None or row.status not in ("published", "stale"):
        return None
    state, review = _review_of(store, row.key)
    # as `channels.pointing_to` names it; shown: it goes into links and the page (a name that is not
    # UTF-8 has no channels a link could name)
    model = shown(model_name(manifest.source.model_dump()))
    line = manifest.profile.name if manifest.profile is not None else ""
    try:
        records, damaged = _channels_of(store, model) if line else ([], [])
        unread = "; ".join(damaged)  # what reads still shows; each record that does not is said
    except HTTPException as exc:  # the build's page still shows; its channels part says why
        records, unread = [], str(exc.detail)
    view = _artifact_release_view(row.key, model, line, state, review, records, unread)
    return {**view, "attestations": _attestations_view(store, row.key)}


def _artifact_release_view(
    key: str, model: str, line: str, state: str, review: Any, records: list[Any], unread: str
) -> dict[str, Any]:
    """A published build's release section as `_release.html.j2` shows it: the channels of its model
    and profile line that point to it, its review, and its buttons."""
    from neuronforge.artifacts import channels

    same_line = [r for r in records if r.profile_line == line]
    pointing = [r.channel for r in same_line if r.current.build.key == key]
    actions = []
    if state != "approved":
        actions.append({"label": "approve", "href": _release_href(action="approve", build=key)})
    if state != "rejected":
        actions.append({"label": "reject", "href": _release_href(action="reject", build=key)})
    ref = {"model": model, "profile": line}
    for r in same_line:
        if r.current.build.key == key:
            continue
        actions.append(
            {
                "label": f"promote to {r.channel} (now {r.current.build.key[:12]})",
                "href": _release_href(action="promote", **ref, channel=r.channel, build=key),
            }
        )
        if any(b.key == key for b in channels.earlier_builds(r)):
            actions.append(
                {
                    "label": f"roll {r.channel} back to this build",
                    "href": _release_href(action="rollback", **ref, channel=r.channel, to=key),
                }
            )
    return {
        **_release_view(pointing, state),
        "review": _review_view(state, review),
        "pointing": [f"{model} · {line} · {c}" for c in pointing],
        "unread": unread,
        "actions": actions if line else [],
        "new_channel": {"model": model, "profile": line, "build": key} if line else None,
        "channels_href": _channels_href(model),
        "attestations": [],  # `_artifact_release` reads them (`_attestations_view`)
    }


# -- the confirmation of a release action ---------------------------------------------------------
def _release_request(fields: dict[str, str | None]) -> Any:
    """The query's `ReleaseRequest`, else 400 with its sentence. A reject without a reason is not
    refused here: its confirmation asks for the reason."""
    from neuronforge.common.errors import InvalidInput
    from neuronforge.farm.releases import ReleaseRequest

    given = {k: v for k, v in fields.items() if v is not None}
    if not given.get("action"):
        raise HTTPException(status_code=400, detail="give the action: promote, rollback, approve or reject.")
    unreasoned = given.get("action") == "reject" and not given.get("reason")
    try:
        request = ReleaseRequest.from_json({**given, "reason": "-"} if unreasoned else given)
    except InvalidInput as exc:
        raise HTTPException(status_code=400, detail=_sentence(exc)) from None
    return replace(request, reason="") if unreasoned else request


def _plan(store: Any, request: Any) -> dict[str, Any]:
    """What `request` will change, read from the store now: the pinned request (the key it names),
    before and after, warnings, and why the run would refuse it ("" when it would not)."""
    from neuronforge.artifacts import channels
    from neuronforge.artifacts.published import find_key
    from neuronforge.common.errors import InvalidInput
    from neuronforge.farm import releases
    from neuronforge.records.base import RecordError

    warnings: list[str] = []
    if request.action in ("promote", "rollback"):
        ref = request.channel_ref()
        try:
            plan, pinned = releases.plan(store, request)
        except InvalidInput as exc:
            raise HTTPException(status_code=400, detail=_store_sentence(store, exc)) from None
        except RecordError as exc:  # the channel's record is not one (`channels.ChannelDamaged`), or too new
            log.warning("neuronforge catalog: the channel record of %s does not read: %s", ref, exc)
            raise HTTPException(status_code=503, detail=_store_sentence(store, exc)) from None
        record, before, key = plan.record, plan.before, plan.key
        refused = str(plan.refused) if plan.refused is not None else ""
        if not plan.changes and not refused:
            refused = f"{ref} already points to {key[:12]}: nothing would change"
        since = f"{record.current.action} by {record.current.by} at {record.current.at}" if record else ""
        change = {
            "what": f"{ref} points to",
            "before": before[:12],
            "before_href": _artifact_href(before) if before else "",
            "after": key[:12],
            "after_href": _artifact_href(key),
            "since": since,
        }
    else:
        key = find_key(store, request.build)  # a published build's (its index entry)
        state, _ = _review_of(store, key)
        after = request.review_state
        pinned = replace(request, build=key)
        refused = ""
        if request.action == "reject" and not request.reason:
            refused = "a rejection needs its reason, so whoever deployed the build can act on it: give it below"
        held = channels.pointing_to(store, key)
        if held and after == "rejected":
            warnings.append(
                f"{', '.join(held)} still point(s) to {key[:12]}: rejecting moves no channel; roll back after"
            )
        if state == after:
            warnings.append(f"{key[:12]} is already {after}: the run adds this decision to its history")
        change = {
            "what": f"the review of build {key[:12]}",
            "before": state,
            "after": after,
            "before_href": "",
            "after_href": "",
            "since": "",
        }
    return {
        "describe": _sentence(pinned.describe()),
        "change": change,
        "warnings": warnings,
        "refused": _sentence(refused) if refused else "",
        "conf": json.dumps(pinned.to_json(), indent=2, ensure_ascii=False),
        "request": pinned.to_json(),
    }


@app.get("/release", response_class=HTMLResponse)
def release_page(
    action: str | None = Query(None),
    model: str | None = Query(None),
    profile: str | None = Query(None),
    channel: str | None = Query(None),
    build: str | None = Query(None),
    from_channel: str | None = Query(None),
    steps: str | None = Query(None),
    to: str | None = Query(None),
    reason: str | None = Query(None),
) -> HTMLResponse:
    """The confirmation of one release action: what will change, before and after, and the way to
    Airflow's trigger form of the release DAG with the request (nothing changes from this page)."""
    from neuronforge.common.errors import InvalidInput, NeuronforgeError

    fields = {
        "action": _text("action", action),
        "model": _text("model", model),
        "profile": _text("profile", profile),
        "channel": _text("channel", channel),
        "build": _text("build", build),
        "from_channel": _text("from_channel", from_channel),
        "steps": _text("steps", steps),
        "to": _text("to", to),
        "reason": _text("reason", reason, REASON_LIMIT),
    }
    request = _release_request(fields)
    store = _store()
    try:
        plan = _plan(store, request)
    except InvalidInput as exc:
        raise HTTPException(status_code=400, detail=_store_sentence(store, exc)) from None
    except NeuronforgeError as exc:
        log.warning("neuronforge catalog: reading %s for a release confirmation failed: %s", store.root_uri, exc)
        raise HTTPException(status_code=503, detail=UNREADABLE) from None
    page_html = _render(
        "release.html.j2",
        title=f"confirm: {request.action} — neuronforge",
        store_uri=store.root_uri,
        action=request.action,
        plan=plan,
        dag=RELEASE_DAG,
        trigger_href=f"/dags/{RELEASE_DAG}",
        hidden=[(k, v) for k, v in plan["request"].items() if k != "reason" and v not in ("", None)],
        reason=request.reason,
        reason_limit=REASON_LIMIT,
    )
    return ShownHTML(page_html)


# -- compile leases (read-only: `neuronforge lease break` frees one) ----------------------------------
LEASE_STATE_WORDS = {
    "live": "its holder renews it",
    "stale": "not renewed within its TTL: the next run takes it over",
    "dead-on-this-host": "its holder's process is gone on the catalog's host: the next run there takes it over",
    "released": "its run ended",
    "unreadable": "not a lease",
}


def _after_key(value: str | None) -> str:
    """`start_after`: a cache key or a start of one (lower-cased hex, up to 64), else 400."""
    value = _text("start_after", value, 64)
    if value is None:
        return ""
    lowered = value.lower()
    if not re.fullmatch(r"[0-9a-f]{1,64}", lowered):
        raise HTTPException(
            status_code=400,
            detail=f"start_after = {_shown(value)} is not a cache key: give the previous page's last key.",
        )
    return lowered


def _plain(text: Any) -> str:
    """Stored text as a page or JSON shows it: credentials masked, what cannot be encoded escaped."""
    return mask_credentials(str(text)).encode("utf-8", "backslashreplace").decode("utf-8")


def _lease_page(start_after: str, limit: int) -> tuple[Any, list[Any]]:
    """One page of the store's leases (one listing of `locks/` and one read per lease shown)."""
    from neuronforge.artifacts import leases
    from neuronforge.common.errors import NeuronforgeError

    store = _store()
    try:
        return store, leases.listing(store, start_after=start_after, limit=limit)
    except NeuronforgeError as exc:
        log.warning("neuronforge catalog: the leases cannot be listed: %s", exc)
        raise HTTPException(status_code=503, detail=UNREADABLE) from None


def _lease_json(listed: Any) -> dict[str, Any]:
    return {k: _plain(v) if isinstance(v, str) else v for k, v in listed.row().items()}


def _lease_view(listed: Any) -> dict[str, Any]:
    import time as clock

    def at(epoch: float | None) -> str:
        return clock.strftime("%Y-%m-%dT%H:%M:%SZ", clock.gmtime(epoch)) if epoch else "-"

    lease = listed.lease
    owner = lease.owner if lease is not None else None
    holder = "-"
    if lease is not None:
        holder = f"{owner.host.hostname}:{owner.pid}" if owner is not None and owner.pid is not None else lease.holder
    known = owner is not None
    every = lease.heartbeat_s if lease is not None else None
    return {
        "key": _plain(listed.key),
        "short_key": _plain(listed.key[:12]),
        "href": _artifact_href(listed.key) if re.fullmatch(r"[0-9a-f]{64}", listed.key) else "",
        "state": listed.state,
        "css": re.sub(r"[^a-z-]", "", listed.state),
        "meaning": LEASE_STATE_WORDS.get(listed.state, ""),
        "holder": _plain(holder),
        "holder_id": _plain(lease.holder) if lease else "",
        "started": at(lease.started if lease is not None else None),
        "heartbeat": at(lease.heartbeat if lease is not None else None),
        "every": f"every {every:g} s" if every else ("" if known else "not recorded"),
        "problem": _plain(listed.problem),
    }


@app.get("/leases", response_class=HTMLResponse)
def leases_page(
    start_after: str | None = Query(None, description="list the leases after this key"),
    per_page: str | None = Query(None, description=f"leases per page (default {PER_PAGE}, at most {MAX_PER_PAGE})"),
) -> HTMLResponse:
    """The store's compile leases, a page at a time: who builds which key, and each lease's state."""
    after = _after_key(start_after)
    size = _whole("per_page", per_page, PER_PAGE, 1, MAX_PER_PAGE)
    store, page = _lease_page(after, size)
    counts = {s: sum(1 for listed in page if listed.state == s) for s in LEASE_STATE_WORDS}
    more = {"start_after": page[-1].key, **({"per_page": size} if size != PER_PAGE else {})}
    page_html = _render(
        "leases.html.j2",
        title="compile leases — neuronforge",
        store_uri=store.root_uri,
        summary=", ".join(f"{n} {s}" for s, n in counts.items() if n) or "no leases",
        rows=[_lease_view(listed) for listed in page],
        next_href=f"{PREFIX}/leases?{urlencode(more)}" if len(page) == size and _is_hex(page[-1].key) else "",
        first_href=f"{PREFIX}/leases" if after else "",
        api_href=f"{PREFIX}/api/leases?" + urlencode({"limit": size, **({"start_after": after} if after else {})}),
        states=LEASE_STATE_WORDS,
    )
    return HTMLResponse(page_html)


def _is_hex(key: str) -> bool:
    return re.fullmatch(r"[0-9a-f]{1,64}", key) is not None


@app.get("/api/leases")
def leases_api(
    start_after: str | None = Query(None, description="list the leases after this key"),
    limit: str | None = Query(None, description=f"leases per answer (default {API_LIMIT}, at most {MAX_API_LIMIT})"),
) -> dict[str, Any]:
    """A page of the store's compile leases as JSON: each one's key, state, holder, host, pid and times."""
    after = _after_key(start_after)
    size = _whole("limit", limit, API_LIMIT, 1, MAX_API_LIMIT)
    _, page = _lease_page(after, size)
    last = page[-1].key if len(page) == size and _is_hex(page[-1].key) else None
    return {"leases": [_lease_json(listed) for listed in page], "next_start_after": last}


class NeuronforgeCatalogPlugin(AirflowPlugin):
    name = "neuronforge_catalog"
    fastapi_apps: ClassVar[list[dict[str, Any]]] = [
        {"app": app, "url_prefix": PREFIX, "name": "neuronforge artifact catalog"}
    ]
    external_views: ClassVar[list[dict[str, Any]]] = [
        {
            "name": "Artifact catalog",
            "href": f"{PREFIX}/",
            "destination": "nav",
            "url_route": "neuronforge-catalog",
            "category": "browse",
        }
    ]
