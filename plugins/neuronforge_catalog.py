"""The artifact catalog in the Airflow UI: what the compile farm's store holds, per model and
(serving profile, target), and how to deploy each artifact.

A FastAPI app mounted on the api-server at `/neuronforge` (`fastapi_apps`), with a navigation entry
(`external_views`, shown inside the UI). Every route depends on Airflow's own `get_user` (the
`Authorization: Bearer` JWT or the UI's `_token` cookie), so access follows Airflow's
authentication: an unauthenticated request is answered 401. The data comes from
`neuronforge.farm` (the store read through its farm index); this module only renders it.

    GET /neuronforge/[?page=&per_page=]     one page of the farm: matrix, filters, latency plot, rows
    GET /neuronforge/artifacts/{key}        one artifact: URIs, verify status, deploy snippets
    GET /neuronforge/api/artifacts          a page of rows as JSON (offset, limit; same filters)
    GET /neuronforge/api/artifacts/{key}    one row with its manifest and deploy snippets

A page view costs the farm index's head, tail and the pages it shows (`farm.farm_page`, called once:
its counts and instances make the summary and the instance filter); an artifact's own page costs
its index pointer, manifest and folder listing (`farm.farm_row`) and its launch files. Filters:
model (substring), profile, instance, status; a bad value of any parameter is answered 400 with
one sentence.
"""

from __future__ import annotations

import html
import json
import math
import re
from typing import Any, ClassVar
from urllib.parse import urlencode

from airflow.api_fastapi.core_api.security import get_user
from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends, FastAPI, HTTPException, Query
from fastapi.responses import HTMLResponse

PREFIX = "/neuronforge"
COMPILE_DAG = "neuronforge_compile_publish"
SNIPPET_LIMIT = 64 * 1024  # a launch file larger than this is linked, not inlined
PER_PAGE, MAX_PER_PAGE = 50, 500  # rows per page view
API_LIMIT, MAX_API_LIMIT = 100, 1000  # rows per JSON answer

app = FastAPI(title="neuronforge artifact catalog", dependencies=[Depends(get_user)])


def _store():
    """The store NEURONFORGE_STORE names (read, never created: a mistyped one is an error)."""
    from neuronforge import settings
    from neuronforge.errors import NeuronforgeError
    from neuronforge.stores import open_store

    try:
        return open_store(settings.store_uri(None), must_exist=True)
    except NeuronforgeError as exc:
        raise HTTPException(status_code=503, detail=f"the store cannot be read: {exc}") from None


def _sentence(text: Any) -> str:
    """A message as one sentence on one line."""
    text = " ".join(str(text).split())
    return text if text.endswith(".") else f"{text}."


def _whole(name: str, value: str | None, default: int, lo: int, hi: int | None = None) -> int:
    """A whole-number query parameter (absent or empty: `default`), else 400."""
    if value is None or value.strip() == "":
        return default
    try:
        n: int | None = int(value.strip())
    except ValueError:
        n = None
    if n is None or n < lo or (hi is not None and n > hi):
        shown = value.strip() if value.strip().lstrip("-").isdigit() else json.dumps(value[:80])
        span = f"from {lo} to {hi}" if hi is not None else f"from {lo} up"
        raise HTTPException(status_code=400, detail=f"{name} = {shown} is not allowed; use a whole number {span}.")
    return n


def _query(model: str | None, profile: str | None, instance: str | None, status: str | None):
    """The filters as a `FarmQuery` (empty values: no filter); an unknown status is a 400."""
    from neuronforge.errors import InvalidInput
    from neuronforge.farm import FarmQuery

    try:
        return FarmQuery(model=model or None, profile=profile or None, instance=instance or None, status=status or None)
    except InvalidInput as exc:
        raise HTTPException(status_code=400, detail=_sentence(exc)) from None


def _farm_page(store: Any, query: Any, offset: int, limit: int):
    from neuronforge.errors import InvalidInput, NeuronforgeError
    from neuronforge.farm import farm_page

    try:
        return farm_page(store, query, offset=offset, limit=limit)
    except InvalidInput as exc:
        raise HTTPException(status_code=400, detail=_sentence(exc)) from None
    except NeuronforgeError as exc:
        raise HTTPException(status_code=503, detail=f"the store cannot be read: {exc}") from None


def _farm_row(store: Any, key: str) -> tuple[Any, dict[str, Any] | None]:
    """One artifact's row and manifest (`farm.farm_row`), else 404."""
    from neuronforge.errors import NeuronforgeError
    from neuronforge.farm import farm_row

    try:
        found = farm_row(store, key)
    except NeuronforgeError as exc:
        raise HTTPException(status_code=503, detail=f"the store cannot be read: {exc}") from None
    if found is None:
        raise HTTPException(status_code=404, detail=f"no single build with key {key!r} in {store.root_uri}")
    return found


def _snippets(store: Any, row: Any, manifest: dict[str, Any] | None) -> dict[str, str]:
    """The artifact's launch files up to SNIPPET_LIMIT, as text (larger or missing ones: left out,
    a larger one unread when the manifest gives its size)."""
    from neuronforge.errors import StoreError

    if not row.launch:
        return {}
    prefix = row.artifact_uri.removeprefix(store.root_uri).strip("/")
    sizes = {str(f.get("path")): f.get("size") for f in (manifest or {}).get("files") or () if isinstance(f, dict)}
    out = {}
    for name in sorted(row.launch):
        size = sizes.get(f"launch/{name}")
        if isinstance(size, int) and size > SNIPPET_LIMIT:
            continue
        try:
            data = store.get_bytes(f"{prefix}/launch/{name}")
        except StoreError:  # missing: the verify line says so
            continue
        if len(data) <= SNIPPET_LIMIT:
            out[name] = data.decode("utf-8", errors="replace")
    return out


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
    store = _store()
    row, manifest = _farm_row(store, key)
    out = row.to_json()
    out["manifest"] = manifest
    out["snippets"] = _snippets(store, row, manifest)
    return out


# -- the pages ----------------------------------------------------------------------------------
STYLE = """
body{font-family:system-ui,sans-serif;margin:1rem;color:#1f2937}
table{border-collapse:collapse;margin:.5rem 0;max-width:100%}
td,th{border:1px solid #d1d5db;padding:.3rem .5rem;vertical-align:top;overflow-wrap:anywhere}
th{background:#f3f4f6;font-weight:600;text-align:left}
code,h2,p,li,small{overflow-wrap:anywhere}
.cell+.cell{margin-top:.3rem;border-top:1px dashed #d1d5db;padding-top:.3rem}
#latency-plot{width:100%;table-layout:fixed}
#latency-plot td,#latency-plot th{border:none;border-bottom:1px solid #f3f4f6}
#latency-plot .label{width:34%}.meter{display:flex;align-items:center;gap:.3rem}
.track{flex:1;height:1.1rem;min-width:0}.bar{height:100%;border-radius:2px}
.bar.ttft{background:#60a5fa}.bar.per-token{background:#a78bfa}
.value{flex:none;width:4.5rem;font-size:.8rem;white-space:nowrap}
.axis{position:relative;height:1rem;font-size:.7rem;color:#6b7280;margin-right:4.8rem;font-weight:400}
.axis span{position:absolute;white-space:nowrap;transform:translateX(-50%)}
.axis span:first-child{transform:none}.axis span:last-child{transform:translateX(-100%)}
.published{background:#dcfce7}.stale{background:#fef9c3}.smoke-failed{background:#fee2e2}
.failed{background:#fecaca}.building{background:#dbeafe}.empty{color:#9ca3af}
code,pre{font-size:.85rem}pre{background:#f9fafb;border:1px solid #e5e7eb;padding:.5rem;overflow:auto}
.detail{border-top:1px solid #e5e7eb;margin-top:1rem;padding-top:.5rem}
#pager{margin:.5rem 0}#pager a{margin:0 .4rem}
button{font-size:.8rem}form label{margin-right:.8rem}
"""

SCRIPT = """
for (const b of document.querySelectorAll('button.copy')) {
  b.addEventListener('click', async () => {
    try { await navigator.clipboard.writeText(b.dataset.copy); b.textContent = 'copied'; }
    catch (e) { b.textContent = 'select and copy'; }
  });
}
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


SEPARATORS = re.compile(r"(?<=[/\-_@:?&=])")


def _w(value: Any) -> str:
    """`value` escaped, with a line-break opportunity (`<wbr>`) after each `/`, `-`, `_`, `@`, `:`,
    `?`, `&`, `=`: a URI or a target's slug wraps at its separators instead of overflowing its box."""
    return "<wbr>".join(_e(part) for part in SEPARATORS.split(str(value)))


def _ms(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.3g} ms" if value < 100 else f"{value:,.0f} ms"


def _short_target(profile: str, target: str) -> str:
    """A target's slug without its profile's name (the column or line already names the profile)."""
    name = profile.partition("@")[0]
    return target.removeprefix(f"{name}-") if name else target


def _html(title: str, body: str) -> str:
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{_e(title)}</title>"
        f"<style>{STYLE}</style></head><body>{body}<script>{SCRIPT}</script></body></html>"
    )


def _refused(exc: HTTPException) -> HTMLResponse:
    """An HTML route's 400 / 404 / 503: the sentence, and the way back."""
    body = (
        f"<h1>neuronforge artifact catalog</h1><p id='error'>{_e(exc.detail)}</p>"
        f'<p><a href="{PREFIX}/" id="back">the catalog</a></p>'
    )
    return HTMLResponse(_html("neuronforge artifact catalog", body), status_code=exc.status_code)


def _select(name: str, choices: list[str], chosen: str | None) -> str:
    opts = ['<option value="">all</option>'] + [
        f'<option value="{_e(c)}"{" selected" if c == chosen else ""}>{_e(c)}</option>' for c in choices
    ]
    return f'<label>{name} <select name="{name}" id="filter-{name}">{"".join(opts)}</select></label>'


def _copy(text: str, label: str) -> str:
    return (
        f'<code>{_w(text)}</code> <button type="button" class="copy" data-copy="{_e(text)}" '
        f'aria-label="copy {_e(label)}">copy</button>'
    )


def _artifact_href(key: str) -> str:
    return f"{PREFIX}/artifacts/{_e(key)}"


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


def _axis(scale: tuple[float, float]) -> str:
    """The scale's decades in ms; beyond three, every other one (labels of a narrow column must not
    run into each other)."""
    lo, hi = scale
    decades = round(math.log10(hi / lo))
    step = 1 if decades <= 3 else 2
    ticks = [lo * 10**k for k in range(0, decades + 1, step)]
    if ticks[-1] != hi:
        ticks.append(hi)
    spans = "".join(f'<span style="left:{_width(t, scale):.1f}%">{_tick(t)}</span>' for t in ticks)
    return f'<div class="axis">{spans}</div>'


def _plot(rows: list[Any]) -> str:
    """Smoke latency per artifact: time to first token and per output token, each on its own log
    scale, as bars in an HTML table (labels wrap like the rest of the page; no fixed-width SVG)."""
    timed = [r for r in rows if (r.ttft_ms or 0) > 0 or (r.per_token_ms or 0) > 0]
    if not timed:
        return ""
    shown = timed[:PLOT_ROWS]
    scales = {}
    for attr, _, _ in METRICS:
        values = [getattr(r, attr) for r in shown if (getattr(r, attr) or 0) > 0]
        scales[attr] = _log_scale(values) if values else None
    head = "".join(
        f'<th class="{css}">{_e(title)} <small>(ms, log scale)</small>'
        + (_axis(scales[attr]) if scales[attr] else "")
        + "</th>"
        for attr, css, title in METRICS
    )
    lines = []
    for r in shown:
        cells = []
        for attr, css, title in METRICS:
            v = getattr(r, attr)
            if not v or v <= 0 or scales[attr] is None:
                cells.append('<td class="empty">—</td>')
                continue
            w = _width(v, scales[attr])
            cells.append(
                f'<td><div class="meter" title="{_e(title)}: {_e(_ms(v))}"><div class="track"><div class="bar {css}" '
                f'style="width:{w:.1f}%" data-ms="{v}"></div></div><span class="value">{_e(_ms(v))}</span></div></td>'
            )
        lines.append(
            f'<tr class="timed"><td class="label">{_w(r.model)}<br><small>{_w(r.profile)} · '
            f"{_w(_short_target(r.profile, r.target))}</small></td>{''.join(cells)}</tr>"
        )
    more = f" (the first {PLOT_ROWS} of this page's {len(timed)})" if len(timed) > PLOT_ROWS else ""
    return (
        f"<h2>Smoke latency{_e(more)}</h2>"
        f'<table id="latency-plot" aria-label="smoke latency per artifact: time to first token and per output '
        f'token"><tr><th class="label">artifact</th>{head}</tr>{"".join(lines)}</table>'
    )


def _latency(r: Any) -> str:
    if r.ttft_ms is None and r.per_token_ms is None:
        return ""
    return f"<br><small>first token {_e(_ms(r.ttft_ms))} · {_e(_ms(r.per_token_ms))}/token</small>"


def _matrix(rows: list[Any], past_the_end: bool = False) -> str:
    """Model × (profile, target) of the page's rows; each cell links to its artifacts' pages (more
    than one when the model has builds of several revisions for that target: each is reachable)."""
    if not rows:
        return f"<p id='matrix'>{'no rows on this page' if past_the_end else 'nothing matches'}</p>"
    columns = sorted({(r.profile, r.target) for r in rows})
    models = sorted({r.model for r in rows})
    cell: dict[tuple[str, str, str], list[Any]] = {}
    for r in rows:
        cell.setdefault((r.model, r.profile, r.target), []).append(r)
    head = "".join(f'<th class="target">{_w(p)}<br><small>{_w(_short_target(p, t))}</small></th>' for p, t in columns)
    body = []
    for m in models:
        cells = []
        for p, t in columns:
            found = cell.get((m, p, t))
            if not found:
                cells.append('<td class="empty">—</td>')
                continue
            status = found[0].status
            parts = []
            for r in found:
                rev = f"rev {_e(r.revision[:8])}: " if len(found) > 1 and r.revision else ""
                parts.append(
                    f'<div class="cell">{rev}<a href="{_artifact_href(r.key)}">{_e(r.status)}</a>'
                    f"{(' · ' + _e(r.stage)) if r.stage else ''}{_latency(r)}</div>"
                )
            cells.append(f'<td class="{_e(status)}" data-status="{_e(status)}">{"".join(parts)}</td>')
        body.append(f"<tr><th>{_w(m)}</th>{''.join(cells)}</tr>")
    return f'<table id="matrix"><tr><th>model</th>{head}</tr>{"".join(body)}</table>'


def _row_list(rows: list[Any]) -> str:
    """The page's rows, one line each, linking to each artifact's page."""
    if not rows:
        return ""
    lines = [
        f'<tr id="artifact-{_e(r.key[:12])}" class="row"><td><a href="{_artifact_href(r.key)}">'
        f"<code>{_e(r.key[:12])}</code></a></td><td>{_w(r.model)}</td><td>{_w(r.profile)}</td>"
        f'<td>{_w(r.target)}</td><td class="{_e(r.status)}">{_e(r.status)}'
        f"{(' · ' + _e(r.stage)) if r.stage else ''}{('<br><small>' + _e(r.message) + '</small>') if r.message else ''}"
        f"</td><td>{_e(r.at)}</td></tr>"
        for r in rows
    ]
    return (
        '<h2>Artifacts</h2><table id="rows"><tr><th>key</th><th>model</th><th>profile</th><th>target</th>'
        f"<th>status</th><th>when</th></tr>{''.join(lines)}</table>"
    )


def _page_href(filters: dict[str, str | None], page: int, per_page: int) -> str:
    params: dict[str, Any] = {k: v for k, v in filters.items() if v}
    if page > 1:
        params["page"] = page
    if per_page != PER_PAGE:
        params["per_page"] = per_page
    return f"{PREFIX}/" + (f"?{urlencode(params)}" if params else "")


def _pager(filters: dict[str, str | None], page: int, per_page: int, shown: Any) -> str:
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
    parts = []
    if page > 1:
        parts.append(f'<a id="prev" rel="prev" href="{_e(_page_href(filters, page - 1, per_page))}">← previous</a>')
    parts.append(f"<span>{_e(where)}</span>")
    if more:
        parts.append(f'<a id="next" rel="next" href="{_e(_page_href(filters, page + 1, per_page))}">next →</a>')
    return f'<nav id="pager">{"".join(parts)}</nav>'


def _detail_html(row: Any, manifest: dict[str, Any] | None, snippets: dict[str, str]) -> str:
    """One artifact: status, profile, compiler, run, hosts, verify status, copyable URIs, deploy files."""
    from neuronforge.hosts import describe

    run = (
        f'<a href="/dags/{COMPILE_DAG}/runs/{_e(row.run_id)}" target="_top">{_e(row.run_id)}</a>'
        if row.run_id
        else "(CLI)"
    )
    size = f" · {row.size_bytes / 1e6:.1f} MB" if isinstance(row.size_bytes, (int, float)) else ""
    stage = f" in stage {_e(row.stage)}:" if row.stage else ""
    lines = [
        f'<div class="detail" id="artifact-{_e(row.key[:12])}"><h2>{_w(row.model)} · {_w(row.target)}</h2>',
        f"<p>status <b class='{_e(row.status)}'>{_e(row.status)}</b>{stage} "
        f"{_e(row.message)} · profile {_e(row.profile)} · compiler {_e(row.compiler_version or '-')}{size} · "
        f"{_e(row.at)} · run {run}</p>",
        f"<p>key {_copy(row.key, 'cache key')}</p>",
    ]
    if row.ttft_ms is not None or row.per_token_ms is not None:
        lines.append(
            f'<p class="latency">smoke latency: time to first token {_e(_ms(row.ttft_ms))} · '
            f"{_e(_ms(row.per_token_ms))} per output token</p>"
        )
    if row.manifest_uri:
        if row.incomplete is None:
            verify = "not checked"
        elif row.incomplete:
            verify = "INCOMPLETE: " + "; ".join(row.incomplete)
        else:
            verify = "complete (sizes match the manifest)"
        lines.append(
            f"<p>verify: {_e(verify)} — full re-hash: <code>neuronforge verify {_w(row.artifact_uri)}</code></p>"
        )
        hosts = describe((manifest or {}).get("hosts"))
        if hosts:
            lines.append(f'<p class="hosts">hosts: {_e(hosts[0])}<br><small>{_e(hosts[1])}</small></p>')
        lines.append(
            f"<p>manifest {_copy(row.manifest_uri, 'manifest URI')} "
            f'(<a href="{PREFIX}/api/artifacts/{_e(row.key)}">JSON</a>)</p><ul>'
        )
        lines += [f"<li>{_e(fmt)}: {_copy(uri, fmt)}</li>" for fmt, uri in sorted(row.uris.items())]
        lines.append("</ul>")
        for name, uri in sorted(row.launch.items()):
            text = snippets.get(name)
            if text is None:  # larger than SNIPPET_LIMIT, or missing (the verify line says which)
                lines.append(f"<p>{_e(name)}: {_copy(uri, name)} (not shown inline)</p>")
                continue
            lines.append(
                f'<p>{_e(name)} <button type="button" class="copy" data-copy="{_e(text)}" '
                f'aria-label="copy {_e(name)}">copy</button></p><pre class="snippet">{_e(text)}</pre>'
            )
    lines.append("</div>")
    return "".join(lines)


@app.get("/", response_class=HTMLResponse)
def catalog_page(
    model: str | None = Query(None),
    profile: str | None = Query(None),
    instance: str | None = Query(None),
    status: str | None = Query(None),
    page: str | None = Query(None, description="1-based page number (default 1)"),
    per_page: str | None = Query(None, description=f"rows per page (default {PER_PAGE}, at most {MAX_PER_PAGE})"),
) -> HTMLResponse:
    try:
        return HTMLResponse(_catalog_html(model, profile, instance, status, page, per_page))
    except HTTPException as exc:
        return _refused(exc)


def _catalog_html(
    model: str | None,
    profile: str | None,
    instance: str | None,
    status: str | None,
    page: str | None,
    per_page: str | None,
) -> str:
    from neuronforge.farm import STATUSES
    from neuronforge.profiles import profile_names

    number = _whole("page", page, 1, 1)
    size = _whole("per_page", per_page, PER_PAGE, 1, MAX_PER_PAGE)
    query = _query(model, profile, instance, status)
    store = _store()
    shown = _farm_page(store, query, (number - 1) * size, size)
    filters = {"model": model, "profile": profile, "instance": instance, "status": status}
    summary = ", ".join(f"{n} {s}" for s, n in shown.counts.items() if n)
    form = (
        f'<form method="get" id="filters"><label>model <input name="model" value="{_e(model or "")}"></label>'
        + _select("profile", profile_names(), profile)
        + _select("instance", list(shown.instances), instance)
        + _select("status", list(STATUSES), status)
        + (f'<input type="hidden" name="per_page" value="{size}">' if size != PER_PAGE else "")
        + '<button type="submit">filter</button></form>'
    )
    api = f"{PREFIX}/api/artifacts?" + urlencode(
        {**{k: v for k, v in filters.items() if v}, "offset": (number - 1) * size, "limit": size}
    )
    pager = _pager(filters, number, size, shown)
    body = (
        f"<h1>neuronforge artifact catalog</h1>"
        f"<p>store {_copy(store.root_uri, 'store URI')} · {_e(summary or 'empty')} · "
        f'<a href="{_e(api)}">JSON</a></p>{form}{pager}{_matrix(shown.rows, number > 1)}{_plot(shown.rows)}'
        f"{_row_list(shown.rows)}{pager if shown.rows else ''}"
    )
    return _html("neuronforge artifact catalog", body)


@app.get("/artifacts/{key}", response_class=HTMLResponse)
def artifact_page(key: str) -> HTMLResponse:
    """One artifact's page (what a matrix cell or row links to)."""
    try:
        store = _store()
        row, manifest = _farm_row(store, key)
        snippets = _snippets(store, row, manifest)
    except HTTPException as exc:
        return _refused(exc)
    body = (
        f'<h1>neuronforge artifact catalog</h1><p><a href="{PREFIX}/" id="back">the catalog</a> · '
        f"store {_copy(store.root_uri, 'store URI')}</p>{_detail_html(row, manifest, snippets)}"
    )
    return HTMLResponse(_html(f"{row.model} · {row.target} — neuronforge", body))


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
