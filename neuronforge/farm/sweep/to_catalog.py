"""`neuronforge sweep --to-catalog FILE`: the valid configurations as catalog targets, so the
recompile schedule keeps them compiled for the sweep's serving profile.

The catalog is a file people edit and comment, so it is extended as text, never re-dumped: targets
of a model already listed go right under its `targets:` line, a new model is appended as one entry.
The result is checked with the catalog's own loader before it replaces the file; a target the
catalog would refuse, or one already there, is reported and left out.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import yaml

from neuronforge.common.errors import InvalidInput
from neuronforge.farm.catalog import load_catalog
from neuronforge.farm.sweep.space import Candidate
from neuronforge.spec.target import TargetSpec


def catalog_targets(valid: list[Candidate], instance: str, profile: str, dtype: str) -> list[dict[str, Any]]:
    return [
        {
            "instance_type": instance,
            "tp_degree": c.tensor_parallel_size,
            "batch_size": c.batch_size,
            "sequence_length": c.sequence_length,
            "dtype": dtype,
            "profile": profile,
        }
        for c in valid
    ]


def add_to_catalog(
    path: Path, source: str, targets: list[dict[str, Any]], config: Path | None = None
) -> tuple[int, list[str]]:
    """Add `targets` for `source` to the catalog at `path` (created if absent); returns how many were
    added and a note for each left out. A new entry gets `config:` when the sweep read a config.json
    file (relative when under the catalog's folder), so `catalog check` plans it without the Hub."""
    notes: list[str] = []
    existing: set[str] = set()
    text = path.read_text(encoding="utf-8") if path.exists() else None
    if text is not None:
        report = load_catalog(path)
        if report.problems:
            raise InvalidInput(f"catalog {path} has problems; fix them first: {report.problems[0]}")
        for entry in report.entries:
            if entry.source == source:
                existing |= {t.spec.slug for t in entry.targets}
    fresh = []
    for t in targets:
        try:
            slug = TargetSpec.parse(t).slug
        except InvalidInput as exc:
            notes.append(f"left out {t}: the catalog would refuse it ({exc})")
            continue
        if slug in existing:
            notes.append(f"already in the catalog: {slug}")
            continue
        existing.add(slug)
        fresh.append(t)
    if not fresh:
        return 0, notes
    lines = [_flow(t) for t in fresh]
    config_ref = _config_ref(config, path.expanduser().resolve().parent) if config is not None else None
    if text is None:
        new = "# Written by neuronforge sweep --to-catalog (see neuronforge/farm/catalog.py for the format).\n"
        new += "models:\n"
        new += _entry(source, lines, indent=2, config=config_ref)
    else:
        new = _insert(text, source, lines, config=config_ref)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    tmp.write_text(new, encoding="utf-8")
    try:
        report = load_catalog(tmp)
        if report.problems:
            raise InvalidInput(f"adding the sweep's targets would break catalog {path}: {report.problems[0]}")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return len(fresh), notes


def _config_ref(config: Path, catalog_dir: Path) -> str:
    """How the catalog names the config file: relative when it lies under the catalog's folder
    (the two move together), else absolute."""
    config = config.resolve()
    return config.relative_to(catalog_dir).as_posix() if config.is_relative_to(catalog_dir) else str(config)


def _flow(target: dict[str, Any]) -> str:
    return yaml.safe_dump(target, default_flow_style=True, sort_keys=False, width=10**6).strip()


def _entry(source: str, lines: list[str], indent: int, config: str | None = None) -> str:
    pad = " " * indent
    body = "".join(f"{pad}    - {line}\n" for line in lines)
    config_line = f"{pad}  config: {json.dumps(config)}\n" if config else ""
    return f"{pad}- source: {json.dumps(source)}\n{config_line}{pad}  targets:\n{body}"


def _insert(text: str, source: str, lines: list[str], config: str | None = None) -> str:
    root = yaml.compose(text)
    models = next(v for k, v in root.value if k.value == "models")
    rows = text.splitlines(keepends=True)
    if not rows[-1].endswith("\n"):
        rows[-1] += "\n"
    for entry in models.value:
        fields = {k.value: v for k, v in entry.value}
        if fields["source"].value == source:
            first = fields["targets"].value[0].start_mark
            at, col = first.line, first.column  # the first target item: insert before it, same column
            item_indent = " " * (col - 2) if rows[at][: col - 2].strip() == "" else " " * col
            rows[at:at] = [f"{item_indent}- {line}\n" for line in lines]
            return "".join(rows)
    indent = models.value[0].start_mark.column - 2 if models.value else 2
    return "".join(rows) + _entry(source, lines, max(indent, 0), config)
