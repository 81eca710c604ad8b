"""`ModelSource`: where a checkpoint comes from, and the immutable revision it resolves to.

Accepted spellings: `org/name`, `org/name@revision`, `hf://org/name@rev` (Hugging Face Hub),
`s3://bucket/prefix`, `builtin:tiny-llama` (the embedded default, generated on each host), and
local folders (absolute, `./relative`, `~/…`, `file://…`, or any path that exists). Resolution pins
what was meant *now*, so that everything derived from it is
content-addressed: the Hub commit sha for Hub sources; for local and built-in sources a digest over
(relative path, size, sha256) of the checkpoint files (`files_digest`); for S3 sources a digest over
what the listing says of them (key, size, ETag: `listing_digest`), so pinning downloads nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from neuronforge.common.errors import InvalidInput, NeuronforgeError

HUB_SHA = re.compile(r"^[0-9a-f]{40}$")
_HUB_ID = re.compile(r"^(?:[A-Za-z0-9][\w.-]{0,95}/)?[A-Za-z0-9][\w.-]{0,95}$")
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")

# Files a checkpoint consists of. Everything else in a repo or folder (READMEs, images, other
# frameworks' weights) is neither fetched nor part of the digest.
CHECKPOINT_PATTERNS = (
    "*.safetensors",
    "*.json",
    "tokenizer.model",
    "*.tiktoken",
    "merges.txt",
    "vocab.txt",
)
PICKLE_PATTERNS = ("*.bin", "*.pt", "*.pth")


def is_checkpoint_file(relpath: str, allow_pickle: bool = False) -> bool:
    name = relpath.rsplit("/", 1)[-1]
    if any(part.startswith(".") for part in relpath.split("/")):
        return False
    patterns = CHECKPOINT_PATTERNS + (PICKLE_PATTERNS if allow_pickle else ())
    return any(fnmatch(name, p) for p in patterns)


def is_pickle_file(relpath: str) -> bool:
    return any(fnmatch(relpath.rsplit("/", 1)[-1], p) for p in PICKLE_PATTERNS)


def select_checkpoint_files(relpaths: Iterable[str], allow_pickle: bool) -> list[str]:
    """The files that make up a checkpoint. Pickle weights count only when there are no safetensors
    weights and the caller allowed them; a pickle-only checkpoint without permission is refused here,
    before anything is downloaded."""
    relpaths = sorted(relpaths)
    chosen = [p for p in relpaths if is_checkpoint_file(p)]
    if any(p.endswith(".safetensors") for p in chosen):
        return chosen
    pickles = [p for p in relpaths if is_checkpoint_file(p, allow_pickle=True) and is_pickle_file(p)]
    if pickles and not allow_pickle:
        from neuronforge.common.errors import CheckpointError

        raise CheckpointError(
            f"only pickle weights found ({', '.join(pickles)}): loading pickle can run arbitrary code, "
            "so neuronforge refuses it. Convert the checkpoint to safetensors, or pass allow_pickle=True "
            "(CLI: --allow-pickle) to load it with torch.load(weights_only=True) and convert it"
        )
    return sorted(chosen + pickles)


def model_name(source: str | ModelSource | dict[str, Any]) -> str:
    """`ModelSource.name` of a source as given (`builtin:tiny-llama`, `hf://org/name@main`, a
    relative folder), or of a manifest's `source` record (`kind`, `location`). Text that does not
    parse is returned as given: a record names what it can."""
    if isinstance(source, ModelSource):
        return source.name
    if isinstance(source, dict):
        kind, location = str(source.get("kind") or ""), str(source.get("location") or "")
        return ModelSource(kind, location).name if kind and location else location
    try:
        return ModelSource.parse(str(source)).name
    except NeuronforgeError:
        return str(source)


REVISION_SHOWN = 12  # hex digits of a revision shown, as of a cache key (`ls`'s KEY column)


def model_ref(name: str, revision: str | None = None) -> str:
    """One build's model as every listing and page shows it — `ls`, `show`, the catalog's rows and
    artifact pages, `channels`: `ModelSource.name` and the revision it was built from, shortened,
    `org/name@0123456789ab` (`builtin:tiny-llama@cdd9979b3a0b`); the name alone where no revision is
    meant (a channel spans revisions) or none was recorded."""
    revision = (revision or "").strip()
    return f"{name}@{revision[:REVISION_SHOWN]}" if revision else name


def _existing_path(text: str) -> bool:
    """Whether `text` names something on this host. Text no file system can name (a component
    over 255 bytes, a NUL) names nothing: it is refused as a Hub id, not an OSError's traceback."""
    try:
        return Path(text).expanduser().exists()
    except (OSError, ValueError):
        return False


def safe_component(text: str) -> str:
    """A store path component: letters, digits, `.`, `_`, `-` only."""
    cleaned = _SAFE.sub("-", text).strip("-.")
    return cleaned or "unnamed"


@dataclass(frozen=True)
class ModelSource:
    kind: str  # "hf" | "s3" | "local" | "builtin"
    location: str  # repo id, s3://bucket/prefix, absolute folder path, or built-in model name
    revision: str | None = None  # what the user asked for (branch, tag, sha); Hub only
    resolved_revision: str | None = None  # immutable: Hub commit sha or files digest

    @classmethod
    def parse(cls, text: str) -> ModelSource:
        text = text.strip()
        if not text:
            raise InvalidInput("model source is empty; give org/name[@revision], s3://bucket/prefix or a path")
        if "://" in text:
            from neuronforge.stores.base import refuse_credentials

            refuse_credentials(text, "model source")
        if text.startswith("s3://"):
            bucket, _, prefix = text[5:].partition("/")
            if len(bucket) < 3:
                raise InvalidInput(f"model source {text!r}: S3 bucket name missing or too short")
            return cls("s3", f"s3://{bucket}/{prefix.strip('/')}".rstrip("/"))
        if text.startswith("builtin:"):
            # The embedded models (neuronforge.spec.builtin): generated on each host, same bytes.
            name = text.removeprefix("builtin:").strip("/")
            if not _HUB_ID.match(name) or "/" in name:
                raise InvalidInput(f"model source {text!r}: use builtin:<name>, e.g. builtin:tiny-llama")
            return cls("builtin", name)
        if text.startswith("file://"):
            return cls("local", str(Path(text[7:]).expanduser().resolve()))
        if text.startswith("hf://"):
            return cls._parse_hub(text[5:], original=text)
        if text.startswith(("/", "./", "../", "~")) or _existing_path(text):
            return cls("local", str(Path(text).expanduser().resolve()))
        return cls._parse_hub(text, original=text)

    @classmethod
    def _parse_hub(cls, text: str, original: str) -> ModelSource:
        repo, sep, revision = text.partition("@")
        if not _HUB_ID.match(repo) or ".." in repo or (sep and not revision):
            raise InvalidInput(
                f"model source {original!r} is not a Hub id (org/name[@revision]), an s3:// URI "
                "or an existing local folder"
            )
        return cls("hf", repo, revision or None)

    # -- identity used in store paths ------------------------------------------------------------
    @property
    def org_name(self) -> tuple[str, str]:
        if self.kind == "hf":
            org, _, name = self.location.rpartition("/")
            return (org or "hf", name)
        if self.kind == "s3":
            bucket, _, prefix = self.location[5:].partition("/")
            return ("s3", safe_component(f"{bucket}--{prefix.rsplit('/', 1)[-1]}" if prefix else bucket))
        if self.kind == "builtin":
            return ("builtin", safe_component(self.location))
        return ("local", safe_component(Path(self.location).name))

    @property
    def name(self) -> str:
        """The model's one name wherever it is shown or matched (manifests' readers, failure records,
        the farm index, the catalog page): the source as the user spells it, without a revision —
        `org/name`, `s3://bucket/prefix`, an absolute folder, `builtin:tiny-llama`."""
        return f"builtin:{self.location}" if self.kind == "builtin" else self.location

    @property
    def ref(self) -> str:
        """`model_ref` of this source: its name and (resolved) revision, shortened."""
        return model_ref(self.name, self.resolved_revision or self.revision)

    @property
    def is_resolved(self) -> bool:
        return self.resolved_revision is not None

    def pinned(self, resolved_revision: str) -> ModelSource:
        return replace(self, resolved_revision=resolved_revision)

    def __str__(self) -> str:
        base = {"hf": f"hf://{self.location}", "builtin": f"builtin:{self.location}"}.get(self.kind, self.location)
        rev = self.resolved_revision or self.revision
        return f"{base}@{rev}" if rev and self.kind == "hf" else base


@dataclass(frozen=True)
class FileEntry:
    path: str  # relative, '/'-separated
    size: int
    sha256: str

    def to_json(self) -> dict:
        return {"path": self.path, "size": self.size, "sha256": self.sha256}


def sha256_file(path: Path, chunk: int = 8 * 1024 * 1024) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def files_digest(entries: Iterable[FileEntry]) -> str:
    """Content digest of a checkpoint: sha256 over the canonical JSON list of (path, size, sha256),
    sorted by path. Independent of where the files live, so a copy resolves to the same revision."""
    rows = sorted([e.path, e.size, e.sha256] for e in entries)
    return hashlib.sha256(json.dumps(rows, separators=(",", ":")).encode()).hexdigest()


def listing_digest(rows: Iterable[tuple[str, int, str]]) -> str:
    """Revision of an S3 checkpoint from its listing: sha256 over (relative key, size, ETag), sorted.
    An object rewritten with other content gets another ETag, so the revision changes with it."""
    canon = sorted([path, int(size), etag] for path, size, etag in rows)
    return "s3-" + hashlib.sha256(json.dumps(canon, separators=(",", ":")).encode()).hexdigest()[:56]


def scan_folder(folder: Path, allow_pickle: bool = False) -> list[FileEntry]:
    """Size and sha256 of every checkpoint file under `folder` (see `select_checkpoint_files`)."""
    return [
        FileEntry(rel, contained(folder, rel).stat().st_size, sha256_file(folder / rel))
        for rel in select_checkpoint_files(list_relative(folder), allow_pickle)
    ]


def contained(folder: Path, rel: str) -> Path:
    """`folder/rel`, refusing a link that leads outside `folder`: a model folder must not make
    neuronforge read (and publish) a file from elsewhere on the host."""
    path = folder / rel
    target = path.resolve()
    if not target.is_relative_to(folder.resolve()):
        from neuronforge.common.errors import CheckpointError

        raise CheckpointError(
            f"{path} is a link to {target}, outside the model folder; copy the file into the folder "
            "instead of linking to it"
        )
    return path


def list_relative(folder: Path) -> list[str]:
    """Relative '/'-paths of the files under `folder`, hidden folders skipped."""
    out = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        out += [(Path(root) / name).relative_to(folder).as_posix() for name in files]
    return sorted(out)
