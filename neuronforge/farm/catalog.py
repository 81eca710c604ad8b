"""The model catalog: which models the recompile schedule keeps compiled, for which targets.

`catalog/models.yaml` (or `NEURONFORGE_CATALOG`):

    models:
      - source: meta-llama/Llama-3.1-8B@<revision>     # Hub id[@rev], s3:// prefix or folder
        config: configs/meta-llama--Llama-3.1-8B.json  # optional: plan offline from this config
        pin: {compilers: ["2.21.33363.0+82129205"]}     # optional: keep these compiler versions
        targets:
          - {instance_type: inf2.xlarge, tp_degree: 2, sequence_length: 4096, dtype: bf16,
             profile: vllm-neuron}                       # newest registered version
          - {instance_type: inf2.xlarge, tp_degree: 2, sequence_length: 4096, dtype: bf16,
             profile: optimum-neuron@2.26.1}             # this version only

A target names the serving `profile` it is kept built for. A bare name follows the newest
registered version, so registering a new version (a new Neuron SDK release) makes the target stale
until the recompile schedule rebuilds it; `name@version` stays on that version. The profile decides
what is published, so a target has no `publish_formats`, and no `backend` (the profile fixes it).

`check_catalog` reports every problem with its line: unknown fields, invalid targets (the removed
`backend` and `publish_formats` with what replaces them), duplicate entries, and targets the
planner rejects (run at check time, so an entry that can never fit is reported before it is ever
scheduled).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from neuronforge.common import advice
from neuronforge.common.errors import InvalidInput
from neuronforge.common.spelling import did_you_mean
from neuronforge.profiles.registry import pin as pin_profile
from neuronforge.spec.target import LEGACY_BACKENDS, TargetSpec

ENTRY_FIELDS = {"source", "config", "pin", "targets"}
PIN_FIELDS = {"compilers"}
# A catalog a person writes: thousands of models fit in a few MiB. Larger is not a catalog.
MAX_BYTES = 8 * 1024 * 1024
# YAML nodes once every alias is expanded: anchors for shared targets stay far below it; a nest of
# aliases (each a list of the one before: a "billion laughs") would expand into memory exhaustion.
MAX_NODES = 200_000
CONFIG_MAX_BYTES = 16 * 1024 * 1024  # a model's config.json: a few KiB (`config:` may name anything)


def default_path() -> Path:
    from neuronforge.common import settings

    return settings.current().catalog


@dataclass
class CatalogTarget:
    spec: TargetSpec  # its `profile` as written: a bare name follows the newest version (pinned when used)
    line: int


@dataclass
class CatalogEntry:
    source: str
    line: int
    targets: list[CatalogTarget] = field(default_factory=list)
    config: Path | None = None
    pinned_compilers: tuple[str, ...] = ()


@dataclass
class CatalogReport:
    path: Path
    entries: list[CatalogEntry] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # "<file>:<line>: message"
    notes: list[str] = field(default_factory=list)  # e.g. an entry that could not be planned offline
    unplanned: int = 0  # targets the planner could not check (their model's config.json unavailable)

    @property
    def ok(self) -> bool:
        return not self.problems


def _line(node: yaml.Node) -> int:
    return node.start_mark.line + 1


def _mapping(node: yaml.Node) -> dict[str, tuple[yaml.Node, yaml.Node]]:
    return {k.value: (k, v) for k, v in node.value} if isinstance(node, yaml.MappingNode) else {}


def read_text(path: Path, max_bytes: int, what: str) -> str:
    """A file a person wrote, as strict UTF-8 text of at most `max_bytes` bytes: InvalidInput naming
    the file and the problem otherwise (a folder, a device, another encoding, too large)."""
    try:
        with path.open("rb") as f:
            raw = f.read(max_bytes + 1)
    except FileNotFoundError:
        raise InvalidInput(f"{what} {path} does not exist") from None
    except IsADirectoryError:
        raise InvalidInput(f"{what} {path} is a folder; name a file") from None
    except OSError as exc:
        raise InvalidInput(f"{what} {path} cannot be read: {exc.strerror or exc}") from None
    if len(raw) > max_bytes:
        raise InvalidInput(f"{what} {path} is larger than {max_bytes // (1024 * 1024)} MiB; it is not one")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{what} {path} is not UTF-8 text (byte {exc.start}); save it as UTF-8") from None


def _expanded(root: yaml.Node) -> int:
    """How many nodes `root` holds with every alias expanded (a shared node counted each time it is
    used), counted without expanding anything."""
    sizes: dict[int, int] = {}

    def size(node: yaml.Node) -> int:
        if id(node) in sizes:
            return sizes[id(node)]
        sizes[id(node)] = 1  # a recursive alias counts once
        if isinstance(node, yaml.SequenceNode):
            n = 1 + sum(size(c) for c in node.value)
        elif isinstance(node, yaml.MappingNode):
            n = 1 + sum(size(k) + size(v) for k, v in node.value)
        else:
            n = 1
        sizes[id(node)] = min(n, MAX_NODES + 1)
        return sizes[id(node)]

    return size(root)


def _duplicates(root: yaml.Node) -> list[tuple[int, str]]:
    """(line, key) of every key given twice in one mapping (YAML would keep the last, silently)."""
    out, seen, todo = [], set(), [root]
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            keys: set[str] = set()
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.tag != "tag:yaml.org,2002:merge":
                    if k.value in keys:
                        out.append((_line(k), k.value))
                    keys.add(k.value)
                todo += [k, v]
        elif isinstance(node, yaml.SequenceNode):
            todo += node.value
    return sorted(out)


def _text_node(node: yaml.Node) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:str" and bool(node.value.strip())


def load_catalog(path: Path) -> CatalogReport:
    """Parse and validate the catalog's structure and targets (no planning)."""
    report = CatalogReport(path)
    where = path.name

    def problem(line: int, message: str) -> None:
        report.problems.append(f"{where}:{line}: {message}")

    text = read_text(path, MAX_BYTES, "catalog")
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem(mark.line + 1 if mark else 1, f"not valid YAML: {getattr(exc, 'problem', exc)}")
        return report
    if root is not None and _expanded(root) > MAX_NODES:
        problem(1, f"expands to more than {MAX_NODES} YAML nodes through its aliases; write it without nested anchors")
        return report
    for line, key in _duplicates(root) if root is not None else ():
        problem(line, f"{key!r} is given twice in one mapping (YAML would silently keep the last); keep one")
    top = _mapping(root)
    if set(top) != {"models"} or not isinstance(top["models"][1], yaml.SequenceNode):
        problem(_line(root) if root else 1, "the catalog is a mapping with one key, `models:`, holding a list")
        return report
    seen: dict[tuple[str, str], int] = {}
    for entry_node in top["models"][1].value:
        fields = _mapping(entry_node)
        line = _line(entry_node)
        for name, (key_node, _) in fields.items():
            if name not in ENTRY_FIELDS:
                problem(
                    _line(key_node),
                    f"unknown field {name!r}{did_you_mean(name, ENTRY_FIELDS)}; an entry has {sorted(ENTRY_FIELDS)}",
                )
        if "source" not in fields or not _text_node(fields["source"][1]):
            problem(line, "an entry needs `source:` (Hub id[@revision], s3:// prefix or folder)")
            continue
        entry = CatalogEntry(fields["source"][1].value, line)
        if "config" in fields:
            if _text_node(fields["config"][1]):
                entry.config = (path.parent / fields["config"][1].value).resolve()
            else:
                problem(_line(fields["config"][1]), "config: the path of a config.json file (text)")
        if "pin" in fields:
            pin = yaml.safe_load(yaml.serialize(fields["pin"][1]))
            unknown = set(pin or {}) - PIN_FIELDS if isinstance(pin, dict) else {"<not a mapping>"}
            compilers = pin.get("compilers", []) if isinstance(pin, dict) else []
            if unknown:
                problem(_line(fields["pin"][1]), f"pin: unknown field(s) {sorted(unknown)}; use `compilers: [...]`")
            elif not isinstance(compilers, list) or not all(isinstance(v, str) and v.strip() for v in compilers):
                problem(_line(fields["pin"][1]), 'pin.compilers: a list of compiler versions, e.g. ["2.21.33363.0"]')
            else:
                entry.pinned_compilers = tuple(compilers)
        target_nodes = fields.get("targets", (None, None))[1]
        if not isinstance(target_nodes, yaml.SequenceNode) or not target_nodes.value:
            problem(line, f"{entry.source}: `targets:` must be a non-empty list")
            continue
        for t_node in target_nodes.value:
            raw = yaml.safe_load(yaml.serialize(t_node))
            if not isinstance(raw, dict):
                problem(_line(t_node), "a target is a mapping (instance_type, tp_degree, ...)")
                continue
            removed = _removed_fields(raw)
            if removed:
                problem(_line(t_node), f"{entry.source}: " + "; ".join(removed))
                continue
            try:
                spec = TargetSpec.parse(raw)
                pin_profile(spec)  # the profile must be registered; the entry keeps it as written
            except InvalidInput as exc:
                problem(_line(t_node), f"{entry.source}: {exc}")
                continue
            twin = seen.get((entry.source, spec.slug))
            if twin is not None:
                problem(_line(t_node), f"{entry.source} {spec.slug}: duplicate of the target at line {twin}")
                continue
            seen[(entry.source, spec.slug)] = _line(t_node)
            entry.targets.append(CatalogTarget(spec, _line(t_node)))
        report.entries.append(entry)
    return report


def _removed_fields(raw: dict[str, Any]) -> list[str]:
    """Fields of earlier catalogs, each with what replaces it: catalogs outlive releases, and a bare
    "unknown field" would not say that the serving profile took over both."""
    out = []
    if "backend" in raw:
        legacy = LEGACY_BACKENDS.get(str(raw["backend"]))
        fix = f"write `profile: {legacy}`" if legacy else f"name a `profile` ({advice.command('profiles')} lists them)"
        out.append(f"`backend: {raw['backend']}` was replaced by `profile` (it fixes the backend and toolchain); {fix}")
    if "publish_formats" in raw:
        out.append(
            "`publish_formats` was removed: the target's profile decides what is published "
            f"({advice.command('profiles')} shows what each publishes); drop the field"
        )
    return out


def config_for(entry: CatalogEntry) -> dict[str, Any] | str:
    """The model's config.json: the entry's `config:`, a local folder's, the built-in model's
    (generated on this host on first use), or the Hub's — else why it is unavailable here (the
    Hub unreachable, a folder of another host, an s3:// source). A malformed source raises."""
    from neuronforge.common.errors import NeuronforgeError
    from neuronforge.pipeline.stages.resolve import hub_file, local_folder
    from neuronforge.spec.source import ModelSource

    if entry.config is not None:
        config = json.loads(read_text(entry.config, CONFIG_MAX_BYTES, "config"))
        if not isinstance(config, dict):
            raise InvalidInput(
                f"config {entry.config} holds a JSON {type(config).__name__}, not a model's config object"
            )
        return config
    source = ModelSource.parse(entry.source)
    if source.kind == "builtin":
        return json.loads((local_folder(source) / "config.json").read_text(encoding="utf-8"))
    if source.kind == "local":
        config = Path(source.location) / "config.json"
        return (
            json.loads(config.read_text(encoding="utf-8"))
            if config.is_file()
            else f"{config} does not exist on this host"
        )
    if source.kind == "s3":
        return "an s3:// source's config.json is not read at check time"
    try:
        return json.loads(hub_file(source, "config.json").read_text(encoding="utf-8"))
    except NeuronforgeError as exc:
        return str(exc)


def check_catalog(path: Path | None = None) -> CatalogReport:
    """Structure, targets, duplicates, and the planner on every target."""
    from neuronforge.pipeline.planner import plan
    from neuronforge.spec.modelconfig import ModelArch

    path = path or default_path()
    report = load_catalog(path)
    for entry in report.entries:
        try:
            config = config_for(entry)
        except InvalidInput as exc:  # a malformed source, an unknown built-in model
            report.problems.append(f"{path.name}:{entry.line}: {exc}")
            continue
        except (OSError, ValueError) as exc:
            report.problems.append(f"{path.name}:{entry.line}: {entry.source}: config unreadable: {exc}")
            continue
        if isinstance(config, str):
            report.unplanned += len(entry.targets)
            report.notes.append(
                f"{path.name}:{entry.line}: {entry.source}: {len(entry.targets)} target(s) not planned: "
                f"config.json unavailable ({config}); add `config:` to plan it offline"
            )
            continue
        try:
            arch = ModelArch.from_config(config, where=entry.source)
        except InvalidInput as exc:
            report.problems.append(f"{path.name}:{entry.line}: {exc}")
            continue
        for target in entry.targets:
            result = plan(arch, target.spec)
            if not result.ok:
                report.problems.append(
                    f"{path.name}:{target.line}: {entry.source} {target.spec.slug}: the planner rejects it: "
                    + "; ".join(result.problems)
                )
    return report
