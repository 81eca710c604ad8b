"""The catalog's JSON API, behind the same login as the pages:

    GET /neuronforge/api/artifacts?offset=&limit=   (default 100, at most 1000; the pages' filters)
        {"rows": [...], "total": n or null, "offset": o, "limit": l, "counts": {status: n}}; `total` is
        null when a filtered read stopped once it had its rows
    GET /neuronforge/api/artifacts/{key}            one row with its `manifest` and `snippets`; 404 when
                                                    no single build has that key
    GET /neuronforge/api/leases?start_after=&limit= a page of the compile leases, and `next_start_after`

Errors are `{"detail": one sentence}` with the error class's HTTP status (`base.explained`)."""

from __future__ import annotations

from typing import Any

from fastapi import Query

from neuronforge.artifacts import leases
from neuronforge.common.stored_text import shown_json
from neuronforge.farm.rows import farm_page

from .base import Store, app
from .params import API_LIMIT, MAX_API_LIMIT, Filters, after_key, cache_key, is_hex, whole
from .reads import found_row, snippets
from .render import plain


@app.get("/api/artifacts")
def artifacts(
    opened: Store,
    query: Filters,
    offset: str | None = Query(None, description="rows to skip (default 0)"),
    limit: str | None = Query(None, description=f"rows to return (default {API_LIMIT}, at most {MAX_API_LIMIT})"),
) -> dict[str, Any]:
    skip = whole("offset", offset, 0, 0)
    count = whole("limit", limit, API_LIMIT, 1, MAX_API_LIMIT)
    shown = farm_page(opened(), query, skip, count)
    return {
        "rows": [r.to_json() for r in shown.rows],
        "total": shown.total,
        "offset": shown.offset,
        "limit": count,
        "counts": shown.counts,
    }


@app.get("/api/artifacts/{key}")
def artifact(opened: Store, key: str) -> dict[str, Any]:
    key = cache_key(key)
    store = opened()
    row, manifest = found_row(store, key)
    out = row.to_json()
    out["manifest"] = manifest.as_stored() if manifest is not None else None  # as the store holds it
    out["snippets"] = snippets(store, row, manifest)
    return shown_json(out)


def _lease_json(listed: Any) -> dict[str, Any]:
    return {k: plain(v) if isinstance(v, str) else v for k, v in listed.row().items()}


@app.get("/api/leases")
def leases_api(
    opened: Store,
    start_after: str | None = Query(None, description="list the leases after this key"),
    limit: str | None = Query(None, description=f"leases per answer (default {API_LIMIT}, at most {MAX_API_LIMIT})"),
) -> dict[str, Any]:
    """A page of the store's compile leases as JSON: each one's key, state, holder, host, pid and times."""
    after = after_key(start_after)
    size = whole("limit", limit, API_LIMIT, 1, MAX_API_LIMIT)
    page = leases.listing(opened(), start_after=after, limit=size)
    last = page[-1].key if len(page) == size and is_hex(page[-1].key) else None
    return {"leases": [_lease_json(listed) for listed in page], "next_start_after": last}
