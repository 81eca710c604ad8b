"""The store's compile leases, `GET /neuronforge/leases[?start_after=&per_page=]`, a page at a time and
read-only (`neuronforge lease break` frees one): who builds which key, and each lease's state (live,
stale, its holder gone, released, unreadable). One listing of `locks/` and one read per lease shown."""

from __future__ import annotations

import re
import time
from typing import Any
from urllib.parse import urlencode

from fastapi import Query
from fastapi.responses import HTMLResponse

from neuronforge.artifacts import leases

from .base import ShownHTML, Store, app
from .params import MAX_PER_PAGE, PER_PAGE, after_key, is_hex, whole
from .render import PREFIX, artifact_href, plain, render_page

LEASE_STATE_WORDS = {
    "live": "its holder renews it",
    "stale": "not renewed within its TTL: the next run takes it over",
    "dead-on-this-host": "its holder's process is gone on the catalog's host: the next run there takes it over",
    "released": "its run ended",
    "unreadable": "not a lease",
}


def _lease_view(listed: Any) -> dict[str, Any]:
    def at(epoch: float | None) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch)) if epoch else "-"

    lease = listed.lease
    owner = lease.owner if lease is not None else None
    holder = "-"
    if lease is not None:
        holder = f"{owner.host.hostname}:{owner.pid}" if owner is not None and owner.pid is not None else lease.holder
    known = owner is not None
    every = lease.heartbeat_s if lease is not None else None
    return {
        "key": plain(listed.key),
        "short_key": plain(listed.key[:12]),
        "href": artifact_href(listed.key) if re.fullmatch(r"[0-9a-f]{64}", listed.key) else "",
        "state": listed.state,
        "css": re.sub(r"[^a-z-]", "", listed.state),
        "meaning": LEASE_STATE_WORDS.get(listed.state, ""),
        "holder": plain(holder),
        "holder_id": plain(lease.holder) if lease else "",
        "started": at(lease.started if lease is not None else None),
        "heartbeat": at(lease.heartbeat if lease is not None else None),
        "every": f"every {every:g} s" if every else ("" if known else "not recorded"),
        "problem": plain(listed.problem),
    }


@app.get("/leases", response_class=HTMLResponse)
def leases_page(
    opened: Store,
    start_after: str | None = Query(None, description="list the leases after this key"),
    per_page: str | None = Query(None, description=f"leases per page (default {PER_PAGE}, at most {MAX_PER_PAGE})"),
) -> HTMLResponse:
    """The store's compile leases, a page at a time: who builds which key, and each lease's state."""
    after = after_key(start_after)
    size = whole("per_page", per_page, PER_PAGE, 1, MAX_PER_PAGE)
    store = opened()
    page = leases.listing(store, start_after=after, limit=size)
    counts = {s: sum(1 for listed in page if listed.state == s) for s in LEASE_STATE_WORDS}
    more = {"start_after": page[-1].key, **({"per_page": size} if size != PER_PAGE else {})} if page else {}
    page_html = render_page(
        "leases.html.j2",
        title="compile leases — neuronforge",
        store_uri=store.root_uri,
        summary=", ".join(f"{n} {s}" for s, n in counts.items() if n) or "no leases",
        rows=[_lease_view(listed) for listed in page],
        next_href=f"{PREFIX}/leases?{urlencode(more)}" if len(page) == size and is_hex(page[-1].key) else "",
        first_href=f"{PREFIX}/leases" if after else "",
        api_href=f"{PREFIX}/api/leases?" + urlencode({"limit": size, **({"start_after": after} if after else {})}),
        states=LEASE_STATE_WORDS,
    )
    return ShownHTML(page_html)
