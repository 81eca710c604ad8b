"""One artifact's page, `GET /neuronforge/artifacts/{key or 12-hex prefix}` (what each matrix cell and row
links to), from `farm.farm_row` and its launch files: status, compiler, hosts, verify status, copyable
URIs, deploy files inline up to 64 KiB, where optimum-neuron's lookup finds it; for a published build its
release section: the channels pointing to it, its review with who / when / why and the earlier decisions,
its attestations at newer SDK releases, and the buttons approve, reject, promote to each channel of its
model and profile line, roll a channel back to it (each to a confirmation page)."""

from __future__ import annotations

import shlex
from typing import Any
from urllib.parse import quote

from fastapi.responses import HTMLResponse

from neuronforge.artifacts import attestations, channels
from neuronforge.common import deployment_names as names
from neuronforge.common.errors import NeuronforgeError
from neuronforge.common.stored_text import shown
from neuronforge.records.base import RecordError
from neuronforge.spec.source import model_name

from .base import ShownHTML, Store, app, log, said
from .params import cache_key
from .reads import channels_of, found_row, review_of, snippets
from .render import PREFIX, channels_href, model_ref, ms, release_href, release_view, render_page, review_view

COMPILE_DAG = names.COMPILE_DAG  # a build's run links to its page in the Airflow UI


def _registry_view(manifest: Any) -> dict[str, Any] | None:
    """The manifest's `hub_registry` part as `artifact.html.j2` shows it, with the consumer's own lookup command."""
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


def _detail_view(row: Any, manifest: Any, launch: dict[str, str]) -> dict[str, Any]:
    """One artifact as `artifact.html.j2` shows it."""

    if row.incomplete is None:
        verify = "not checked"
    elif row.incomplete:
        verify = "INCOMPLETE: " + "; ".join(row.incomplete)
    else:
        verify = "complete (sizes match the manifest)"
    latency = None
    if row.ttft_ms is not None or row.per_token_ms is not None:
        latency = {"ttft": ms(row.ttft_ms), "per_token": ms(row.per_token_ms)}
    hosts = manifest.hosts.describe() if manifest is not None and row.manifest_uri else []
    return {
        "short_key": row.key[:12],
        "key": row.key,
        "model": model_ref(row.model, row.revision),
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
        "launch": [{"name": n, "uri": u, "text": launch.get(n)} for n, u in sorted(row.launch.items())],
        "registry": _registry_view(manifest) if row.manifest_uri else None,
        "consumer_versions": " · ".join(f"{k} {v}" for k, v in (manifest.consumer_versions or {}).items())
        if manifest is not None and row.manifest_uri
        else "",
    }


@app.get("/artifacts/{key}", response_class=HTMLResponse)
def artifact_page(opened: Store, key: str) -> HTMLResponse:
    """One artifact's page (what a matrix cell or row links to)."""
    key = cache_key(key)
    store = opened()
    row, manifest = found_row(store, key)
    page_html = render_page(
        "artifact.html.j2",
        title=f"{model_ref(row.model, row.revision)} · {row.target} — neuronforge",
        store_uri=store.root_uri,
        a=_detail_view(row, manifest, snippets(store, row, manifest)),
        release=_artifact_release(store, row, manifest),
    )
    return ShownHTML(page_html)


def _attestations_view(store: Any, key: str) -> list[dict[str, Any]]:
    """A build's attestations at newer SDK releases, newest first (one read; a record that does not
    validate shows none, logged)."""
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
    if manifest is None or row.status not in ("published", "stale"):
        return None
    state, review = review_of(store, row.key)
    # as `channels.pointing_to` names it; shown: it goes into links and the page (a name that is not
    # UTF-8 has no channels a link could name)
    model = shown(model_name(manifest.source.model_dump()))
    line = manifest.profile.name if manifest.profile is not None else ""
    try:
        records, damaged = channels_of(store, model) if line else ([], [])
        unread = "; ".join(damaged)  # what reads still shows; each record that does not is said
    except NeuronforgeError as exc:  # the build's page still shows; its channels part says why
        records, unread = [], said(exc, store.root_uri, f"the channels of {model}")[1]
    view = _artifact_release_view(row.key, model, line, state, review, records, unread)
    return {**view, "attestations": _attestations_view(store, row.key)}


def _artifact_release_view(
    key: str, model: str, line: str, state: str, review: Any, records: list[Any], unread: str
) -> dict[str, Any]:
    """A published build's release section as `_release.html.j2` shows it: the channels of its model
    and profile line that point to it, its review, and its buttons."""
    same_line = [r for r in records if r.profile_line == line]
    pointing = [r.channel for r in same_line if r.current.build.key == key]
    actions = []
    if state != "approved":
        actions.append({"label": "approve", "href": release_href(action="approve", build=key)})
    if state != "rejected":
        actions.append({"label": "reject", "href": release_href(action="reject", build=key)})
    ref = {"model": model, "profile": line}
    for r in same_line:
        if r.current.build.key == key:
            continue
        actions.append(
            {
                "label": f"promote to {r.channel} (now {r.current.build.key[:12]})",
                "href": release_href(action="promote", **ref, channel=r.channel, build=key),
            }
        )
        if any(b.key == key for b in channels.earlier_builds(r)):
            actions.append(
                {
                    "label": f"roll {r.channel} back to this build",
                    "href": release_href(action="rollback", **ref, channel=r.channel, build=key),
                }
            )
    return {
        **release_view(pointing, state),
        "review": review_view(state, review),
        "pointing": [f"{model} · {line} · {c}" for c in pointing],
        "unread": unread,
        "actions": actions if line else [],
        "new_channel": {"model": model, "profile": line, "build": key} if line else None,
        "channels_href": channels_href(model),
        "attestations": [],  # `_artifact_release` reads them (`_attestations_view`)
    }
