"""The artifact catalog in the Airflow UI: what the compile farm's store holds, per model and
(serving profile, target), and how to deploy each artifact.

A FastAPI app mounted on the api-server at `/neuronforge` (`fastapi_apps`), with a navigation entry
(`external_views`, shown inside the UI in a same-origin iframe). Every route depends on Airflow's
own `get_user` (the `Authorization: Bearer` JWT or the UI's `_token` cookie), so access follows
Airflow's authentication: a request without a valid, unexpired token is answered 401 or 403. The
data comes from `neuronforge.farm.rows` (the store read through its farm index); this module only
renders it.

    GET /neuronforge/[?page=&per_page=]     one page of the farm: matrix, filters, latency plot, rows
    GET /neuronforge/artifacts/{key}        one artifact: URIs, verify status, deploy snippets
    GET /neuronforge/api/artifacts          a page of rows as JSON (offset, limit; same filters)
    GET /neuronforge/api/artifacts/{key}    one row with its manifest and deploy snippets
    GET /neuronforge/static/{name}          the pages' catalog.css and catalog.js

The store is treated as hostile: every string it holds (model ids, failure messages, run ids,
launch files, URIs) reaches the page through Jinja2 templates with autoescape on
(`neuronforge_catalog_templates/`, next to this file); an `href` built from data is a link only
when it is relative to this server or http(s); every response carries a Content-Security-Policy
that allows no inline script or style (script and style are the files of `neuronforge_catalog_static/`);
a key must be 12 to 64 hex characters and a launch file a plain name before the store is read;
error bodies are one sentence without local paths or tracebacks (the detail goes to the log).

A page view costs the farm index's head, tail and the pages it shows (`farm.farm_page`, called once:
its counts and instances make the summary and the instance filter); an artifact's own page costs
its index pointer, manifest and folder listing (`farm.farm_row`) and its launch files.
"""

from __future__ import annotations

import json
import logging
import math
import re
import unicodedata
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

log = logging.getLogger(__name__)

PREFIX = "/neuronforge"
COMPILE_DAG = "neuronforge_compile_publish"
SNIPPET_LIMIT = 64 * 1024  # a launch file larger than this is linked, not inlined
PER_PAGE, MAX_PER_PAGE = 50, 500  # rows per page view
API_LIMIT, MAX_API_LIMIT = 100, 1000  # rows per JSON answer
TEXT_LIMIT = 256  # characters of a filter (model substring, profile, instance, status) or a number

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

app = FastAPI(
    title="neuronforge artifact catalog",
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
    if _is_page(request):
        page = _render("error.html.j2", title="neuronforge artifact catalog", message=sentence)
        return HTMLResponse(page, status_code=status, headers=headers)
    return JSONResponse({"detail": sentence}, status_code=status, headers=headers)


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
        return JSONResponse({"detail": UNEXPECTED}, status_code=500, headers=SECURITY_HEADERS)


# -- parameters -----------------------------------------------------------------------------------
def _shown(value: str) -> str:
    """A refused value as the sentence quotes it: at most 80 characters, in JSON quotes."""
    return json.dumps(value[:80] + ("..." if len(value) > 80 else ""))


def _text(name: str, value: str | None) -> str | None:
    """A text query parameter of at most TEXT_LIMIT characters (absent or empty: None), else 400."""
    if value is None or value == "":
        return None
    if len(value) > TEXT_LIMIT:
        raise HTTPException(
            status_code=400,
            detail=f"{name} is {len(value)} characters long; give at most {TEXT_LIMIT}.",
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


def _store():
    """The store NEURONFORGE_STORE names (read, never created: a mistyped one is an error)."""
    from neuronforge.common import settings
    from neuronforge.common.errors import NeuronforgeError
    from neuronforge.stores import open_store

    try:
        return open_store(settings.store_uri(None), must_exist=True)
    except NeuronforgeError as exc:
        log.warning("neuronforge catalog: the store cannot be opened: %s", exc)
        raise HTTPException(status_code=503, detail=UNREADABLE) from None


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
    ones: left out; a larger one unread when the manifest gives its size)."""
    from neuronforge.common.errors import StoreError

    prefix = _artifact_prefix(store, row) if row.launch else None
    if prefix is None:
        return {}
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
    out["manifest"] = manifest.as_stored() if manifest is not None else None  # as the store holds it
    out["snippets"] = _snippets(store, row, manifest)
    return out


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
    than one when the model has builds of several revisions for that target: each is reachable)."""
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
                    "rev": r.revision[:8] if len(found) > 1 and r.revision else "",
                    "href": _artifact_href(r.key),
                    "status": r.status,
                    "stage": r.stage,
                    **_latency_view(r),
                }
                for r in found
            ]
            cells.append({"status": found[0].status, "entries": entries})
        lines.append({"model": m, "cells": cells})
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


def _row_view(r: Any) -> dict[str, Any]:
    return {
        "short_key": r.key[:12],
        "href": _artifact_href(r.key),
        "model": r.model,
        "profile": r.profile,
        "target": r.target,
        "status": r.status,
        "stage": r.stage,
        "message": r.message,
        "at": r.at,
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
    return HTMLResponse(page_html)


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
        "model": row.model,
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
        title=f"{row.model} · {row.target} — neuronforge",
        store_uri=store.root_uri,
        a=_detail_view(row, manifest, snippets),
    )
    return HTMLResponse(page_html)


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
