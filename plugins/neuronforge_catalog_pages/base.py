"""What every page of the catalog shares: the FastAPI app behind Airflow's login, the security headers,
the one exception handler, and the store a request reads.

Errors follow the project's one error policy: a page raises the error of ours that says what went wrong
(`InvalidInput` for a bad parameter, `NotFound` for a key that names no build, a store's own error), and
`explained` answers with the class's `http_status` (`neuronforge.common.errors`) — the HTML error page on
a page route, `{"detail": ...}` on /api/ and /static/. No page writes an `HTTPException` of its own.
"""

from __future__ import annotations

import json
import logging
import shlex
from collections.abc import Callable
from http import HTTPStatus
from typing import Annotated, Any

from airflow.api_fastapi.core_api.security import get_user
from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from neuronforge.common.errors import NeuronforgeError, StoreError
from neuronforge.common.secrets import mask_credentials, mask_logs
from neuronforge.common.stored_text import SHOWN
from neuronforge.records.base import RecordError
from neuronforge.stores import REMOTE_STORES
from neuronforge.stores.base import NotFound

from .params import shown_value
from .render import PLUGINS, render_page, sentence

log = logging.getLogger("neuronforge_catalog")
mask_logs()  # the api-server's log lines of ours and Airflow's, masked (common.secrets)

STATIC = PLUGINS / "neuronforge_catalog_static"
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
UNREADABLE = "the store NEURONFORGE_STORE names cannot be read; the api-server's log says why."


class ShownJSON(JSONResponse):
    """A JSON answer in which text that cannot be encoded is `stored_text.shown` (never a 500)."""

    def render(self, content: Any) -> bytes:
        text = json.dumps(content, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":"))
        return text.encode("utf-8", SHOWN)


class ShownHTML(HTMLResponse):
    """A page in which text that cannot be encoded is `stored_text.shown` (never a 500)."""

    def render(self, content: Any) -> bytes:
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


# -- the store a request reads --------------------------------------------------------------------
# A remote store, once open (its bucket checked), is kept for the api-server's life: a page view costs
# the reads it shows, not a bucket check each time. A bucket gone since is said by the next read (503).
_OPEN_REMOTE: dict[str, Any] = {}


def open_configured() -> Any:
    """The deployment's store (`NeuronforgeStoreHook`: the Connection neuronforge_default, else
    NEURONFORGE_STORE; read, never created: a mistyped one is an error). It is the server's, never the
    request's: whatever keeps it from opening is answered 503 (an error of another status, a usage or a
    not-found one, raised as the `StoreError` it is here)."""
    from neuronforge_airflow.hooks.store import NeuronforgeStoreHook

    try:
        hook = NeuronforgeStoreHook()
        uri = hook.store_uri(None)
        if uri in _OPEN_REMOTE:
            return _OPEN_REMOTE[uri]
        store = hook.get_conn(uri, must_exist=True)
    except NeuronforgeError as exc:
        if exc.http_status == HTTPStatus.SERVICE_UNAVAILABLE:
            raise
        raise StoreError(f"the deployment's store cannot be used: {exc}") from exc
    if uri.partition("://")[0] in REMOTE_STORES:
        _OPEN_REMOTE[uri] = store
    return store


def store_opener() -> Callable[[], Any]:
    """The dependency every page's store comes from (`open_configured`; a test overrides it)."""
    return open_configured


class StoreAccess:
    """The store of one request, opened when its page first reads it (after the parameters are
    checked: a bad one is refused before the store is touched); its root, once known, is what an
    error's sentence names "the store"."""

    def __init__(self, opener: Callable[[], Any]) -> None:
        self.opener = opener
        self.root: str | None = None

    def __call__(self) -> Any:
        store = self.opener()
        self.root = store.root_uri
        return store


def store_access(request: Request, opener: Annotated[Callable[[], Any], Depends(store_opener)]) -> StoreAccess:
    access = request.state.store = StoreAccess(opener)
    return access


Store = Annotated[StoreAccess, Depends(store_access)]  # a route's `opened: Store`; `opened()` opens it


# -- errors ---------------------------------------------------------------------------------------
def said(exc: NeuronforgeError, root: str | None, where: str) -> tuple[int, str]:
    """An explained error as the catalog answers it: the class's `http_status`, and a 4xx's message
    (or a stored record's that does not read: which record, what to do) as one sentence with the store's
    root said as "the store"; any other 5xx one generic sentence, its detail in the log (a store's own
    message may hold a local path or an endpoint). `where` names what failed, for the log."""
    status = int(exc.http_status)
    if status < 500 or isinstance(exc, RecordError):
        text = str(exc)
        if root:  # a command it suggests loses its `--store ROOT`: the page is about the store it serves
            text = text.replace(f" --store {shlex.quote(root)}", "").replace(root, "the store")
        return status, sentence(text)
    log.warning("neuronforge catalog: %s: %s: %s", where, type(exc).__name__, exc)
    return status, UNREADABLE if isinstance(exc, StoreError) else UNEXPECTED


def _is_page(request: Request) -> bool:
    """An HTML route (errors as the HTML page), not /api/ or /static/ (errors as JSON)."""
    root = request.scope.get("root_path", "")
    path = request.scope.get("path", "")
    path = path[len(root) :] if root and path.startswith(root) else path
    return not (path.startswith("/api/") or path == "/api" or path.startswith("/static/"))


def _error(request: Request, status: int, text: str, headers: dict[str, str] | None = None) -> Response:
    """Every error page and JSON error: the sentence masked here, once (`common.secrets`)."""
    text = mask_credentials(text)
    if _is_page(request):
        html = render_page("error.html.j2", title="neuronforge artifact catalog", message=text)
        return ShownHTML(html, status_code=status, headers=headers)
    return ShownJSON({"detail": text}, status_code=status, headers=headers)


@app.exception_handler(NeuronforgeError)
async def explained(request: Request, exc: NeuronforgeError) -> Response:
    """The one mapping of our errors to HTTP: `said`."""
    access = getattr(request.state, "store", None)
    status, text = said(exc, access.root if access is not None else None, f"{request.method} {request.url.path}")
    return _error(request, status, text)


@app.exception_handler(StarletteHTTPException)
async def _refused(request: Request, exc: StarletteHTTPException) -> Response:
    """A 401 / 403 / 404 / 405 of Airflow's `get_user` or the router: its one sentence, as the HTML
    error page on a page route and `{"detail": ...}` on /api/ and /static/."""
    return _error(request, exc.status_code, sentence(exc.detail), getattr(exc, "headers", None))


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


@app.get("/static/{name}")
def static(name: str) -> Response:
    """The pages' style sheet and script (files, not inline: the CSP allows 'self' only)."""
    if name not in ASSETS:
        raise NotFound(f"no static file {shown_value(name)}; there are {', '.join(ASSETS)}.")
    return Response((STATIC / name).read_bytes(), media_type=ASSETS[name])
