"""A Hugging Face cache repository as optimum-neuron's lookup reads it, and how a build goes into it.

optimum-neuron v0.4.5 (optimum/neuron/cache/hub_cache.py) keeps, in one Hub model repository:

    neuronxcc-<full compiler version>/MODULE_<hlo hash>+<flags hash>/...     the NEFFs (the compile cache)
    neuronxcc-<ver>/0_REGISTRY/<optimum ver>/<arch digest>/<entry hash>.json  the registry entry
    neuronxcc-<ver>/0_REGISTRY/<optimum ver>/<model_type>/<org>/<name>/<entry hash>.json   its alias

(`REGISTRY_FOLDER`, `hub_neuronx_cache`, `get_hub_cached_entries`, `get_hub_cached_models`). Its own
export writes the alias as a symlink and `synchronize` uploads the folder following links, so on the
Hub the alias is a copy of the same JSON: that is what is uploaded here. The NEFF folders are the
build's own persistent-cache entries, byte for byte as the store holds them.

One commit per build: NEFFs, entry and alias together. A Hub commit is atomic, so the entry is never
visible before its NEFFs, and re-running commits nothing when everything is there already (entry
paths are content hashes). A new repository is created private: a team's cache.

Credentials, in order: the run's connection (an Airflow connection, `Settings.hub_registry_conn_id`:
host = endpoint, password = token), else the environment (`HF_ENDPOINT`; `HF_TOKEN` or the token
`hf auth login` stored, as huggingface_hub reads them). A token is held only here, never in a build
state, a record, a message or a log line.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuronforge.artifacts import layout
from neuronforge.common.errors import InvalidInput, NeuronforgeError, ServiceUnreachable
from neuronforge.common.hub_ids import is_repo_id
from neuronforge.common.secrets import mask_credentials

log = logging.getLogger(__name__)

DEFAULT_ENDPOINT = "https://huggingface.co"
DONE = layout.ENTRY_DONE


class HubRefused(NeuronforgeError):
    """The Hub answered, and refused: the token, the rights on the repository, the request. Nothing
    a retry changes; the fix is in the connection or the repository's settings."""


def check_repo_id(value: str, what: str = "--hub-registry") -> str:
    """`value` as a cache repository id (org/name), or a one-line refusal."""
    value = value.strip()
    if is_repo_id(value):
        return value
    raise InvalidInput(
        f"{what} {value!r} is not a Hub repository id: give org/name (letters, digits, - _ .), e.g. my-org/neuron-cache"
    )


@dataclass(frozen=True)
class HubCredentials:
    """An endpoint and a token, and where they came from (named in messages; the token never is)."""

    endpoint: str | None = None
    token: str | None = field(default=None, repr=False)
    source: str = "the environment (HF_ENDPOINT, HF_TOKEN)"


# (conn_id) -> credentials of that connection, or None when there is none: the Airflow layer passes its
# connection reader (neuronforge_airflow); the CLI passes none and the environment speaks.
ConnectionReader = Callable[[str], HubCredentials | None]


@dataclass(frozen=True)
class CacheRepo:
    """A cache repository to write to: its id, endpoint and token."""

    repo_id: str
    endpoint: str
    token: str | None = field(default=None, repr=False)
    source: str = ""

    @classmethod
    def open(cls, repo_id: str, conn_id: str, reader: ConnectionReader | None = None) -> CacheRepo:
        """The repository `repo_id` with the credentials of connection `conn_id` when the reader has
        one, else of the environment."""
        found = (reader(conn_id) if reader is not None else None) or HubCredentials()
        endpoint = (found.endpoint or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")
        token = found.token or _environment_token()
        return cls(check_repo_id(repo_id), endpoint, token, found.source)

    @property
    def shown_endpoint(self) -> str:
        return mask_credentials(self.endpoint)

    def api(self) -> Any:
        from huggingface_hub import HfApi

        return HfApi(endpoint=self.endpoint, token=self.token or False)

    def env(self) -> dict[str, str]:
        """What a child that reads this repository with huggingface_hub needs in its environment
        (optimum's lookup: bare `HfApi()` calls read HF_ENDPOINT at import, and `get_token()`)."""
        env = {"HF_ENDPOINT": self.endpoint, "HF_HUB_OFFLINE": "0", "CUSTOM_CACHE_REPO": self.repo_id}
        if self.token:
            env["HF_TOKEN"] = self.token
        return env


def _environment_token() -> str | None:
    from huggingface_hub import get_token

    return get_token()


def registry_paths(
    compiler_dir: str, registry_folder: str, arch_digest: str, model_type: str, model_id: str, entry_hash: str
) -> tuple[str, str]:
    """(entry path, alias path) of an entry, as `hub_neuronx_cache` lays them out (hub_cache.py)."""
    for what, value in (("arch digest", arch_digest), ("entry hash", entry_hash), ("model type", model_type)):
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", value) or value.startswith("."):
            raise InvalidInput(f"registry entry: {what} {value!r} cannot be a path component")
    check_repo_id(model_id, "the model id")
    base = f"{compiler_dir}/{registry_folder}"
    return f"{base}/{arch_digest}/{entry_hash}.json", f"{base}/{model_type}/{model_id}/{entry_hash}.json"


@dataclass
class Committed:
    """What one build's commit did."""

    commit: str = ""  # "" when nothing was missing
    uploaded_files: int = 0
    uploaded_bytes: int = 0
    present_modules: list[str] = field(default_factory=list)  # complete in the repository already


@contextlib.contextmanager
def hub_errors(repo: CacheRepo, doing: str) -> Iterator[None]:
    """The Hub's failures as one line each: unreachable (retryable), refused (not)."""
    import requests
    from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

    where = f"the Hub at {repo.shown_endpoint}"
    try:
        yield
    except (requests.ConnectionError, requests.Timeout) as exc:
        raise ServiceUnreachable(
            f"cannot reach {where} ({doing} {repo.repo_id}): {type(exc).__name__}; check the endpoint "
            f"({repo.source or 'HF_ENDPOINT'}) and the network, or run again later"
        ) from None
    except RepositoryNotFoundError:
        raise HubRefused(
            f"{where} has no repository {repo.repo_id} this token can see ({doing}); check the repository id "
            f"and the token's rights ({repo.source or 'HF_TOKEN'})"
        ) from None
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else None
        if status in (401, 403):
            raise HubRefused(
                f"{where} refused {doing} {repo.repo_id} (HTTP {status}): give a token with write access to it "
                f"({repo.source or 'HF_TOKEN'})"
            ) from None
        if (status is not None and status >= 500) or status == 429:
            raise ServiceUnreachable(
                f"{where} answered HTTP {status} to {doing} {repo.repo_id}; run again later"
            ) from None
        raise HubRefused(f"{where} refused {doing} {repo.repo_id} (HTTP {status}): {_first_line(exc)}") from None


def _first_line(exc: BaseException) -> str:
    return mask_credentials(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)[:200]


def commit_build(
    repo: CacheRepo,
    compiler_dir: str,
    modules: dict[str, Path],
    entry_path: str,
    alias_path: str,
    entry_json: str,
    message: str,
) -> Committed:
    """Put a build's NEFF folders (`modules`: MODULE_* name -> local folder), its entry and alias into
    the repository in ONE commit, skipping what is there already; create the repository (private) first
    when it does not exist."""
    from huggingface_hub import CommitOperationAdd

    api = repo.api()
    done = Committed()
    with hub_errors(repo, "creating"):
        api.create_repo(repo.repo_id, private=True, exist_ok=True)
    ops = []
    with hub_errors(repo, "reading"):
        for name, folder in sorted(modules.items()):
            if api.file_exists(repo.repo_id, f"{compiler_dir}/{name}/{DONE}"):
                done.present_modules.append(name)
                continue
            files = sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.endswith(".lock"))
            # model.done last within the folder: a reader of the commit's file list sees it complete
            files.sort(key=lambda p: (p.name == DONE, p.relative_to(folder).as_posix()))
            for f in files:
                path = f"{compiler_dir}/{name}/{f.relative_to(folder).as_posix()}"
                ops.append(CommitOperationAdd(path_in_repo=path, path_or_fileobj=str(f)))
                done.uploaded_bytes += f.stat().st_size
        have_entry = api.file_exists(repo.repo_id, entry_path) and api.file_exists(repo.repo_id, alias_path)
    if not ops and have_entry:
        return done
    body = entry_json.encode()
    for path in (entry_path, alias_path):
        ops.append(CommitOperationAdd(path_in_repo=path, path_or_fileobj=body))
        done.uploaded_bytes += len(body)
    done.uploaded_files = len(ops)
    with hub_errors(repo, "committing to"):
        info = api.create_commit(repo.repo_id, operations=ops, commit_message=message)
    done.commit = str(getattr(info, "oid", "") or "")
    return done
