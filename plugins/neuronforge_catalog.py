"""The artifact catalog in the Airflow UI: what the compile farm's store holds, per model and
(serving profile, target), and how to deploy each artifact.

A FastAPI app mounted on the api-server at `/neuronforge` (`fastapi_apps`), with a navigation entry
(`external_views`, shown inside the UI). Every route depends on Airflow's own `get_user` (the
`Authorization: Bearer` JWT or the UI's `_token` cookie), so access follows Airflow's
authentication: an unauthenticated request is answered 401. The data comes from
`neuronforge.farm` (the store read through the core's own readers); this module only renders it.

    GET /neuronforge/                       the page: matrix, filters, latency plot, details
    GET /neuronforge/api/artifacts          rows as JSON (filters: model, profile, instance, status)
    GET /neuronforge/api/artifacts/{key}    one row with its manifest and deploy snippets
"""

from __future__ import annotations

import html
from typing import Any, ClassVar

from airflow.api_fastapi.core_api.security import get_user
from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends, FastAPI, HTTPException, Query
from fastapi.responses import HTMLResponse

PREFIX = "/neuronforge"
COMPILE_DAG = "neuronforge_compile_publish"
SNIPPET_LIMIT = 64 * 1024  # a launch file larger than this is linked, not inlined

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


def _rows(model: str | None, profile: str | None, instance: str | None, status: str | None):
    from neuronforge.farm import farm_rows, filter_rows

    store = _store()
    return store, filter_rows(farm_rows(store), model=model, profile=profile, instance=instance, status=status)


@app.get("/api/artifacts")
def artifacts(
    model: str | None = Query(None),
    profile: str | None = Query(None),
    instance: str | None = Query(None),
    status: str | None = Query(None),
) -> list[dict[str, Any]]:
    _, rows = _rows(model, profile, instance, status)
    return [r.to_json() for r in rows]


def _detail(store: Any, row: Any) -> dict[str, Any]:
    out = row.to_json()
    out["snippets"] = {}
    out["manifest"] = None
    if row.manifest_uri:
        prefix = row.artifact_uri.removeprefix(store.root_uri).strip("/")
        out["manifest"] = store.read_json(f"{prefix}/manifest.json")
        for name in row.launch:
            data = store.get_bytes(f"{prefix}/launch/{name}")
            if len(data) <= SNIPPET_LIMIT:
                out["snippets"][name] = data.decode("utf-8", errors="replace")
    return out


@app.get("/api/artifacts/{key}")
def artifact(key: str) -> dict[str, Any]:
    from neuronforge.farm import farm_rows

    store = _store()
    matches = [r for r in farm_rows(store) if r.key == key or (len(key) >= 12 and r.key.startswith(key))]
    if len(matches) != 1:
        raise HTTPException(status_code=404, detail=f"no single build with key {key!r} in {store.root_uri}")
    return _detail(store, matches[0])


# -- the page -----------------------------------------------------------------------------------
STYLE = """
body{font-family:system-ui,sans-serif;margin:1rem;color:#1f2937}
table{border-collapse:collapse;margin:.5rem 0}td,th{border:1px solid #d1d5db;padding:.3rem .5rem;vertical-align:top}
th{background:#f3f4f6;font-weight:600;text-align:left}
.published{background:#dcfce7}.stale{background:#fef9c3}.smoke-failed{background:#fee2e2}
.failed{background:#fecaca}.building{background:#dbeafe}.empty{color:#9ca3af}
code,pre{font-size:.85rem}pre{background:#f9fafb;border:1px solid #e5e7eb;padding:.5rem;overflow:auto}
.detail{border-top:1px solid #e5e7eb;margin-top:1rem;padding-top:.5rem}
button{font-size:.8rem}form label{margin-right:.8rem}
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _select(name: str, choices: list[str], chosen: str | None) -> str:
    opts = ['<option value="">all</option>'] + [
        f'<option value="{_e(c)}"{" selected" if c == chosen else ""}>{_e(c)}</option>' for c in choices
    ]
    return f'<label>{name} <select name="{name}" id="filter-{name}">{"".join(opts)}</select></label>'


def _copy(text: str, label: str) -> str:
    return (
        f'<code>{_e(text)}</code> <button type="button" class="copy" data-copy="{_e(text)}" '
        f'aria-label="copy {_e(label)}">copy</button>'
    )


def _plot(rows: list[Any]) -> str:
    """Smoke latency per target (time to first token), as an inline SVG bar chart."""
    timed = [r for r in rows if r.ttft_ms is not None][:30]
    if not timed:
        return ""
    top = max(r.ttft_ms for r in timed) or 1.0
    bar, width = 18, 420
    parts = []
    for i, r in enumerate(timed):
        w = max(1.0, width * r.ttft_ms / top)
        y = i * (bar + 4)
        parts.append(
            f'<text x="0" y="{y + 13}" font-size="11">{_e(r.target[:48])}</text>'
            f'<rect x="300" y="{y}" width="{w:.1f}" height="{bar}" fill="#60a5fa"><title>{_e(r.target)}: '
            f"{r.ttft_ms} ms first token, {r.per_token_ms} ms/token</title></rect>"
            f'<text x="{305 + w:.1f}" y="{y + 13}" font-size="11">{r.ttft_ms} ms</text>'
        )
    height = len(timed) * (bar + 4)
    return (
        f'<h2>Smoke latency: time to first token</h2><svg id="latency-plot" width="{300 + width + 80}" '
        f'height="{height}" role="img" aria-label="time to first token per target">{"".join(parts)}</svg>'
    )


def _detail_html(store: Any, row: Any) -> str:
    from neuronforge.hosts import describe

    run = (
        f'<a href="/dags/{COMPILE_DAG}/runs/{_e(row.run_id)}" target="_top">{_e(row.run_id)}</a>'
        if row.run_id
        else "(CLI)"
    )
    lines = [
        f'<div class="detail" id="artifact-{_e(row.key[:12])}"><h3>{_e(row.model)} · {_e(row.target)}</h3>',
        f"<p>status <b class='{_e(row.status)}'>{_e(row.status)}</b> {_e(row.message)} · profile "
        f"{_e(row.profile)} · compiler {_e(row.compiler_version or '-')} · {_e(row.at)} · run {run}</p>",
    ]
    if row.manifest_uri:
        verify = (
            "complete (sizes match the manifest)" if not row.incomplete else "INCOMPLETE: " + "; ".join(row.incomplete)
        )
        lines.append(
            f"<p>verify: {_e(verify)} — full re-hash: <code>neuronforge verify {_e(row.artifact_uri)}</code></p>"
        )
        detail = _detail(store, row)
        hosts = describe((detail["manifest"] or {}).get("hosts"))
        if hosts:
            lines.append(f'<p class="hosts">hosts: {_e(hosts[0])}<br><small>{_e(hosts[1])}</small></p>')
        lines.append(
            f"<p>manifest {_copy(row.manifest_uri, 'manifest URI')} "
            f'(<a href="{PREFIX}/api/artifacts/{_e(row.key)}">JSON</a>)</p><ul>'
        )
        lines += [f"<li>{_e(fmt)}: {_copy(uri, fmt)}</li>" for fmt, uri in sorted(row.uris.items())]
        lines.append("</ul>")
        for name, text in sorted(detail["snippets"].items()):
            lines.append(
                f'<p>{_e(name)} <button type="button" class="copy" data-copy="{_e(text)}" '
                f'aria-label="copy {_e(name)}">copy</button></p><pre class="snippet">{_e(text)}</pre>'
            )
    lines.append("</div>")
    return "".join(lines)


SCRIPT = """
for (const b of document.querySelectorAll('button.copy')) {
  b.addEventListener('click', async () => {
    try { await navigator.clipboard.writeText(b.dataset.copy); b.textContent = 'copied'; }
    catch (e) { b.textContent = 'select and copy'; }
  });
}
"""


@app.get("/", response_class=HTMLResponse)
def page(
    model: str | None = Query(None),
    profile: str | None = Query(None),
    instance: str | None = Query(None),
    status: str | None = Query(None),
) -> str:
    from neuronforge.farm import STATUSES, farm_rows
    from neuronforge.profiles import profile_names

    store = _store()
    every = farm_rows(store)
    _, rows = _rows(model, profile, instance, status)
    columns = sorted({(r.profile, r.target) for r in rows})
    models = sorted({r.model for r in rows})
    cell = {(r.model, r.profile, r.target): r for r in rows}
    head = "".join(f"<th>{_e(p)}<br><small>{_e(t)}</small></th>" for p, t in columns)
    body = []
    for m in models:
        cells = []
        for p, t in columns:
            r = cell.get((m, p, t))
            if r is None:
                cells.append('<td class="empty">—</td>')
                continue
            extra = f"<br><small>{r.ttft_ms} ms / {r.per_token_ms} ms/tok</small>" if r.ttft_ms is not None else ""
            cells.append(
                f'<td class="{_e(r.status)}" data-status="{_e(r.status)}"><a href="#artifact-{_e(r.key[:12])}">'
                f"{_e(r.status)}</a>{(' · ' + _e(r.stage)) if r.stage else ''}{extra}</td>"
            )
        body.append(f"<tr><th>{_e(m)}</th>{''.join(cells)}</tr>")
    counts = {s: sum(r.status == s for r in every) for s in STATUSES}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    filters = (
        f'<form method="get" id="filters"><label>model <input name="model" value="{_e(model or "")}"></label>'
        + _select("profile", profile_names(), profile)
        + _select("instance", sorted({r.instance for r in every if r.instance}), instance)
        + _select("status", list(STATUSES), status)
        + '<button type="submit">filter</button></form>'
    )
    table = (
        f'<table id="matrix"><tr><th>model</th>{head}</tr>{"".join(body)}</table>'
        if rows
        else "<p id='matrix'>nothing matches</p>"
    )
    details = "".join(_detail_html(store, r) for r in rows)
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>neuronforge artifact catalog</title>"
        f"<style>{STYLE}</style></head><body><h1>neuronforge artifact catalog</h1>"
        f"<p>store {_copy(store.root_uri, 'store URI')} · {_e(summary or 'empty')} · "
        f'<a href="{PREFIX}/api/artifacts">JSON</a></p>{filters}{table}{_plot(rows)}{details}'
        f"<script>{SCRIPT}</script></body></html>"
    )


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
