"""The store reads more than one page makes: one build's row, its launch files, a model's channels, a
build's review. What cannot be read raises the error that says so (answered by `base.explained`); what a
page shows in place of a record that does not read is decided here, once."""

from __future__ import annotations

import unicodedata
from typing import Any

from neuronforge.artifacts import channels, reviews
from neuronforge.common.errors import StoreError
from neuronforge.farm.rows import farm_row
from neuronforge.records.base import RecordError
from neuronforge.stores.base import NotFound, is_safe_relpath

from .base import log
from .render import sentence

SNIPPET_LIMIT = 64 * 1024  # a launch file larger than this is linked, not inlined


def found_row(store: Any, key: str) -> tuple[Any, Any]:
    """One artifact's row and manifest (`farm.farm_row`); `NotFound` when no single build has `key`."""
    found = farm_row(store, key)
    if found is None:
        raise NotFound(f"no single build with key '{key}' in the store.")
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
    if not row.artifact_uri.startswith(store.root_uri):
        return None
    prefix = row.artifact_uri.removeprefix(store.root_uri).strip("/")
    return prefix if is_safe_relpath(prefix) else None


def snippets(store: Any, row: Any, manifest: Any) -> dict[str, str]:
    """The artifact's launch files up to SNIPPET_LIMIT, as text (larger, missing or oddly named
    ones: left out; a larger one unread when the manifest gives its size). From the manifest's own
    record of them (`launch_text`: no request); a manifest published before it recorded them has the
    files read, one request each."""
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


def channels_of(store: Any, model: str) -> tuple[list[Any], list[str]]:
    """The model's channels (`channels.listing`: one listing of its channels/ folder and one read per
    channel), and a sentence for each record there that is not a channel's (shown in its place: the
    others still show). A model that does not parse, or a store that cannot be read, raises."""
    found = channels.listing(store, model)
    for exc in found.damaged:
        log.warning("neuronforge catalog: a channel record of %s does not read: %s", model, exc)
    return found.records, [sentence(str(exc).replace(store.root_uri, "the store")) for exc in found.damaged]


def review_of(store: Any, key: str) -> tuple[str, Any]:
    """A build's review state and record (None: pending); a record that does not validate is shown
    as `unreadable`, never as a state it may not hold."""
    try:
        record = reviews.review_of(store, key)
    except RecordError as exc:
        log.warning("neuronforge catalog: the review record of %s does not validate: %s", key[:12], exc)
        return "unreadable", None
    return (record.state if record is not None else reviews.PENDING), record
