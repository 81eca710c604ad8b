"""Stage `resolve`: pin a model source to an immutable revision before anything is keyed on it.

- Hub: a 40-hex revision is already immutable; otherwise ask the Hub (`HfApi.model_info`) for the
  commit sha the branch or tag points at now, or, with `HF_HUB_OFFLINE=1`, read it from the local
  Hugging Face cache.
- local folder: `files_digest` over the checkpoint files (path, size, sha256).
- built-in (`builtin:tiny-llama`): generated on this host (same bytes on every host), digested
  like a local folder.
- S3 prefix: pinned from one listing (key, size, ETag of the checkpoint objects; `listing_digest`)
  without downloading anything; the fetch stage downloads each file once and checks that the
  listing still says the same.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from neuronforge.common import progress, transfers
from neuronforge.common.errors import CheckpointError, InvalidInput, ServiceUnreachable
from neuronforge.spec.source import (
    HUB_SHA,
    ModelSource,
    files_digest,
    list_relative,
    listing_digest,
    scan_folder,
    select_checkpoint_files,
)
from neuronforge.stores.base import ObjectInfo, is_safe_relpath, is_utf8

log = logging.getLogger(__name__)


def hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def hub_cache_dir() -> str | None:
    return os.environ.get("HF_HUB_CACHE") or None


def one_hub_log_handler() -> None:
    """huggingface_hub gives its loggers a stderr handler of their own and lets them propagate to
    the application's too (the CLI's, Airflow's task log), so each of its warnings (a retry, say)
    printed twice. Its own handler goes; the application's logging prints each message once."""
    hub = logging.getLogger("huggingface_hub")
    for handler in list(hub.handlers):
        if type(handler) is logging.StreamHandler:
            hub.removeHandler(handler)


@contextmanager
def hub_errors(repo: str, revision: str) -> Iterator[None]:
    """The Hub's failures as one line naming the repo and the fix: gated, missing, private, a
    revision that does not exist, the Hub unreachable (network, HF_ENDPOINT) or answering an error,
    and, offline, a snapshot the local cache lacks. Tokens never appear (the Hub's messages do not
    carry them, and these lines do not quote the request)."""
    import requests
    from huggingface_hub import constants
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    unreachable = (
        f"cannot reach the Hugging Face Hub at {constants.ENDPOINT} for {repo}@{revision}; check the network "
        "or HF_ENDPOINT, or set HF_HUB_OFFLINE=1 to use what the local Hugging Face cache holds"
    )
    one_hub_log_handler()
    try:
        yield
    except GatedRepoError:
        raise InvalidInput(
            f"{repo} is gated: accept its license on the Hub and provide a token (HF_TOKEN or the Airflow connection)"
        ) from None
    except RevisionNotFoundError:
        raise InvalidInput(f"{repo} has no revision {revision!r}") from None
    except RepositoryNotFoundError:
        raise InvalidInput(f"{repo} does not exist on the Hub (or is private: provide a token)") from None
    except LocalEntryNotFoundError:
        if hub_offline():
            raise InvalidInput(
                f"{repo}@{revision} is not in the local Hugging Face cache and HF_HUB_OFFLINE is set"
            ) from None
        raise ServiceUnreachable(unreachable) from None  # what snapshot_download raises when the Hub is down
    except OfflineModeIsEnabled:
        raise InvalidInput(
            f"{repo}@{revision}: huggingface_hub is in offline mode (HF_HUB_OFFLINE) and cannot ask the Hub; "
            "unset it, or give a 40-hex revision that is in the local Hugging Face cache"
        ) from None
    except (requests.ConnectionError, requests.Timeout):
        raise ServiceUnreachable(unreachable) from None
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else "?"
        raise ServiceUnreachable(
            f"the Hugging Face Hub at {constants.ENDPOINT} answered HTTP {status} for {repo}@{revision}; retry "
            "later, check HF_ENDPOINT, or set HF_HUB_OFFLINE=1 to use what the local Hugging Face cache holds"
        ) from None


def hub_transfer_check() -> None:
    """`HF_HUB_ENABLE_HF_TRANSFER` as this huggingface_hub takes it. From 1.0 it is ignored (downloads go
    through hf_xet): said once, so nobody waits for a speed-up that is not there. Before 1.0 it makes
    every download that is not Xet-backed raise when the `hf_transfer` package is missing
    (huggingface_hub/file_download.py `http_get`): said once, and turned off for this process so that
    the download runs at the speed huggingface_hub has without it."""
    from huggingface_hub import __version__, constants

    if not constants.HF_HUB_ENABLE_HF_TRANSFER:
        return
    if int(__version__.split(".")[0]) >= 1:
        log.warning(
            "HF_HUB_ENABLE_HF_TRANSFER is set, but huggingface_hub %s ignores it: Hub downloads use hf_xet", __version__
        )
        return
    try:
        import hf_transfer  # noqa: F401
    except ImportError:
        log.warning(
            "HF_HUB_ENABLE_HF_TRANSFER is set, but the hf_transfer package is not installed (huggingface_hub %s would "
            "fail every download not stored in Xet): downloading without it; unset it, or pip install hf_transfer",
            __version__,
        )
        constants.HF_HUB_ENABLE_HF_TRANSFER = False


def hub_snapshot(source: ModelSource, revision: str, allow_patterns: list[str] | None, token: str | None) -> Path:
    """Download (or, offline, find in the cache) a Hub snapshot; returns its cache folder.
    huggingface_hub draws its own byte bars on a terminal; elsewhere (task logs, pipes) they are
    turned off and the step's heartbeats say it is alive."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.utils import disable_progress_bars

    reporter = progress.current()
    if not reporter.terminal:
        disable_progress_bars()
    hub_transfer_check()
    files = f"{len(allow_patterns)} file(s) of " if allow_patterns else ""
    what = f"downloading {files}{source.location}@{revision[:12]} from the Hub"
    # the named files the local cache lacks: what this call downloads (measured, for the manifest)
    fetched = [] if hub_offline() or not allow_patterns else _not_cached(source.location, revision, allow_patterns)
    started = transfers.CLOCK()
    with hub_errors(source.location, revision), reporter.step(what, own_bars=True):
        snapshot = Path(
            snapshot_download(
                repo_id=source.location,
                revision=revision,
                allow_patterns=allow_patterns,
                cache_dir=hub_cache_dir(),
                token=token,
                local_files_only=hub_offline(),
                max_workers=HUB_WORKERS,
            )
        )
    if fetched:
        nbytes = sum((snapshot / name).stat().st_size for name in fetched if (snapshot / name).is_file())
        seconds = max(transfers.CLOCK() - started, 0.0)
        where = f"hf://{source.location}@{revision[:12]}"
        transfers.record(
            transfers.Transfer(transfers.DOWNLOAD, where, nbytes, len(fetched), seconds, hub_client(), HUB_WORKERS)
        )
    return snapshot


# snapshot_download's files in parallel (its default)
HUB_WORKERS = 8


def _not_cached(repo: str, revision: str, names: list[str]) -> list[str]:
    from huggingface_hub import try_to_load_from_cache

    return [
        n
        for n in names
        if not isinstance(try_to_load_from_cache(repo, n, cache_dir=hub_cache_dir(), revision=revision), str)
    ]


def hub_client() -> str:
    """How Hub downloads run here, as a transfer records it: huggingface_hub's version, and hf_xet
    when it is used (installed and not disabled: chunked parallel downloads of Xet-backed files)."""
    import importlib.util

    from huggingface_hub import __version__, constants

    xet = importlib.util.find_spec("hf_xet") is not None and not constants.HF_HUB_DISABLE_XET
    return f"huggingface_hub {__version__}" + (" + hf_xet" if xet else "")


def resolve_hub(source: ModelSource, token: str | None = None) -> ModelSource:
    rev = source.revision or "main"
    if HUB_SHA.match(rev):
        return source.pinned(rev)
    if hub_offline():
        # The cache's snapshot folder is named after the commit sha the ref points at.
        snapshot = hub_snapshot(source, rev, allow_patterns=["config.json"], token=None)
        return source.pinned(snapshot.name)
    from huggingface_hub import HfApi

    with hub_errors(source.location, rev):
        info = HfApi(token=token).model_info(source.location, revision=rev)
    return source.pinned(info.sha)


def hub_file(source: ModelSource, filename: str, token: str | None = None) -> Path:
    """One small file of a Hub model (its config.json), failing within a second or so when the Hub
    cannot be reached, with one line saying so.

    `hf_hub_download` retries a refused connection five times with backoff (about 25 s) before it
    falls back to the local cache. So the revision is asked of the Hub first with one
    `HfApi.model_info` request, which is not retried: when the Hub does not answer, the local
    Hugging Face cache's copy of that revision is used if it has one, else the Hub's failure is
    raised at once. With `HF_HUB_OFFLINE` only the cache is read; a 40-hex revision the cache holds
    needs no request at all."""
    from huggingface_hub import constants, hf_hub_download, try_to_load_from_cache

    repo, rev = source.location, source.revision or "main"
    cached = try_to_load_from_cache(repo, filename, cache_dir=hub_cache_dir(), revision=rev)
    if not hub_offline() and not (HUB_SHA.match(rev) and isinstance(cached, str)):
        from huggingface_hub import HfApi

        try:
            with hub_errors(repo, rev):
                info = HfApi(token=token).model_info(repo, revision=rev, timeout=constants.HF_HUB_ETAG_TIMEOUT)
            rev = info.sha or rev
        except InvalidInput:
            raise  # gated, missing, no such revision: the cache would not make it right
        except ServiceUnreachable:  # unreachable, or answering an error
            if not isinstance(cached, str):
                raise
            log.warning("the Hugging Face Hub did not answer; using the local cache's %s of %s@%s", filename, repo, rev)
            return Path(cached)
    with hub_errors(repo, rev):
        return Path(
            hf_hub_download(
                repo, filename, revision=rev, cache_dir=hub_cache_dir(), token=token, local_files_only=hub_offline()
            )
        )


def s3_listing(source: ModelSource, allow_pickle: bool, store_kwargs: dict | None = None) -> list[ObjectInfo]:
    """The checkpoint objects under an s3:// source prefix (keys relative to it), from one listing."""
    from neuronforge.stores import open_location

    objects = {o.key: o for o in open_location(source.location, **(store_kwargs or {})).list()}
    # Folder markers ("sub/", as the S3 console creates) hold nothing; any other key must be a path
    # that stays inside the download folder.
    unsafe = sorted(k for k in objects if not k.endswith("/") and not is_safe_relpath(k))
    if unsafe:
        raise CheckpointError(
            f"{source.location} holds objects whose keys cannot be file names inside a folder "
            f"({', '.join(repr(k) for k in unsafe[:3])}: a leading or doubled '/', '.' or '..' parts, or "
            "bytes that are not UTF-8); rename or remove them, or copy the checkpoint to a clean prefix"
        )
    objects = {k: o for k, o in objects.items() if not k.endswith("/")}
    chosen = select_checkpoint_files(objects, allow_pickle)
    if not chosen:
        raise CheckpointError(f"{source.location} holds no checkpoint files (config.json, *.safetensors)")
    return [objects[k] for k in chosen]


def s3_revision(objects: list[ObjectInfo]) -> str:
    return listing_digest((o.key, o.size, o.etag) for o in objects)


def local_folder(source: ModelSource) -> Path:
    """The folder a local or built-in source reads on this host (built-in: generated on first use)."""
    if source.kind == "builtin":
        from neuronforge.spec import builtin

        return builtin.builtin_model(source.location)
    folder = Path(source.location)
    if folder.exists() and not folder.is_dir():
        raise InvalidInput(
            f"model path {folder} is a file, not a folder: give the folder that holds config.json and the weights"
        )
    if not folder.is_dir():
        raise InvalidInput(f"model folder {folder} does not exist on this host")
    return folder


def resolve_source(
    source: ModelSource | str,
    *,
    work_dir: Path | None = None,
    allow_pickle: bool = False,
    token: str | None = None,
    store_kwargs: dict | None = None,
) -> ModelSource:
    """Return `source` pinned to an immutable revision (see the module docstring)."""
    if isinstance(source, str):
        source = ModelSource.parse(source)
    if source.is_resolved:
        return source
    if source.kind == "hf":
        return resolve_hub(source, token)
    if source.kind == "s3":
        return source.pinned(s3_revision(s3_listing(source, allow_pickle, store_kwargs)))
    folder = local_folder(source)
    if source.kind == "local" and not (folder / "config.json").is_file():  # before walking what may be a whole disk
        raise CheckpointError(f"{source.location} holds no config.json: give the folder of a checkpoint")
    # Names going up are checked like keys coming down: one that is not UTF-8 can be no S3 key.
    bad = [r for r in select_checkpoint_files(list_relative(folder), allow_pickle) if not is_utf8(r)]
    if bad:
        raise CheckpointError(
            f"{source.location} holds files whose names are not valid UTF-8 "
            f"({', '.join(repr(r) for r in bad[:3])}); rename them"
        )
    entries = scan_folder(folder, allow_pickle)
    if not entries:
        raise CheckpointError(f"{source.location} holds no checkpoint files (config.json, *.safetensors)")
    return source.pinned(files_digest(entries))
