"""Fetch stage: local, S3 and (offline) Hub sources into file and S3 stores."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from neuronforge.artifacts import layout
from neuronforge.common.errors import CheckpointError, InvalidInput
from neuronforge.pipeline.stages.fetch import FetchRequest, fetch
from neuronforge.spec.source import files_digest, scan_folder
from neuronforge.stores import open_store
from tests.checkpoints import make_tiny_llama

SHA = "0123456789abcdef0123456789abcdef01234567"


def _fetch(source: str, store_uri: str, work: Path, **kw):
    """As the CLI and the DAG fetch: the store opened at the edge, then handed to the stage."""
    return fetch(FetchRequest(source=source, work_dir=work, **kw), open_store(store_uri))


def test_local_fetch_verifies_writes_manifest_and_mirrors_to_store(tiny_llama: Path, tmp_path: Path) -> None:
    store_uri = f"file://{tmp_path / 'store'}"
    result = _fetch(str(tiny_llama), store_uri, tmp_path / "work")
    assert not result.reused
    assert result.source.resolved_revision == files_digest(scan_folder(tiny_llama))
    prefix = f"checkpoints/local/tiny-llama/{result.source.resolved_revision}"
    assert result.store_prefix == prefix
    store = open_store(store_uri)
    manifest = store.read_json(f"{prefix}/MANIFEST.json")
    assert manifest["architecture"] == "LlamaForCausalLM"
    assert {f["path"] for f in manifest["files"]} == {"config.json", "generation_config.json", "model.safetensors"}
    stored = {o.key.rsplit("/", 1)[-1] for o in store.list(prefix)}
    assert stored == {"config.json", "generation_config.json", "model.safetensors", "MANIFEST.json"}
    assert (result.local_dir / "model.safetensors").read_bytes() == (tiny_llama / "model.safetensors").read_bytes()


def test_second_fetch_is_a_no_op_that_checks_the_manifest(tiny_llama: Path, tmp_path: Path) -> None:
    store_uri = f"file://{tmp_path / 'store'}"
    first = _fetch(str(tiny_llama), store_uri, tmp_path / "work")
    mtime = (first.local_dir / "model.safetensors").stat().st_mtime_ns
    second = _fetch(str(tiny_llama), store_uri, tmp_path / "work")
    assert second.reused and second.local_dir == first.local_dir
    assert (second.local_dir / "model.safetensors").stat().st_mtime_ns == mtime


def test_concurrent_fetches_on_one_host_download_once(tiny_llama: Path, tmp_path: Path, monkeypatch) -> None:
    """A run's mapped fetch tasks start together on one worker: the second waits for the first and
    reuses its mirror (tests/deployment's two-target run counts the source bytes read)."""
    import threading
    import time

    from neuronforge.pipeline.stages import fetch as fetch_stage

    downloads: list[str] = []
    real = fetch_stage._download_into

    def slow_download(*args, **kwargs):
        downloads.append(threading.current_thread().name)
        time.sleep(0.5)  # both tasks are past their store lookup before this one publishes
        return real(*args, **kwargs)

    monkeypatch.setattr(fetch_stage, "_download_into", slow_download)
    store_uri = f"file://{tmp_path / 'store'}"
    results: list = []
    threads = [
        threading.Thread(target=lambda: results.append(_fetch(str(tiny_llama), store_uri, tmp_path / "work")))
        for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(downloads) == 1, downloads
    assert sorted(r.reused for r in results) == [False, True]
    assert results[0].local_dir == results[1].local_dir


def test_worker_without_local_copy_gets_the_checkpoint_from_the_store(tiny_llama: Path, tmp_path: Path) -> None:
    store_uri = f"file://{tmp_path / 'store'}"
    first = _fetch(str(tiny_llama), store_uri, tmp_path / "work-a")
    second = _fetch(str(tiny_llama), store_uri, tmp_path / "work-b")
    assert second.reused
    assert (second.local_dir / "model.safetensors").read_bytes() == (first.local_dir / "model.safetensors").read_bytes()


def test_a_corrupted_local_copy_is_replaced_from_the_store(tiny_llama: Path, tmp_path: Path) -> None:
    store_uri = f"file://{tmp_path / 'store'}"
    first = _fetch(str(tiny_llama), store_uri, tmp_path / "work")
    good = (first.local_dir / "model.safetensors").read_bytes()
    (first.local_dir / "model.safetensors").write_bytes(b"\0" * len(good))
    again = _fetch(str(tiny_llama), store_uri, tmp_path / "work")
    assert (again.local_dir / "model.safetensors").read_bytes() == good


def test_broken_checkpoint_publishes_nothing(tiny_llama: Path, tmp_path: Path) -> None:
    f = tiny_llama / "model.safetensors"
    f.write_bytes(f.read_bytes()[:-10])
    store_uri = f"file://{tmp_path / 'store'}"
    with pytest.raises(CheckpointError, match="truncated"):
        _fetch(str(tiny_llama), store_uri, tmp_path / "work")
    assert open_store(store_uri).list() == []
    assert not (tmp_path / "work" / "checkpoints").exists()


def test_pickle_only_folder_is_refused_before_copying(tiny_llama: Path, tmp_path: Path) -> None:
    import torch
    from safetensors.torch import load_file

    torch.save(load_file(tiny_llama / "model.safetensors"), tiny_llama / "pytorch_model.bin")
    (tiny_llama / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match="only pickle weights"):
        _fetch(str(tiny_llama), f"file://{tmp_path / 'store'}", tmp_path / "work")
    result = _fetch(str(tiny_llama), f"file://{tmp_path / 'store'}", tmp_path / "work", allow_pickle=True)
    assert [f.path for f in result.files] == ["config.json", "generation_config.json", "model.safetensors"]


def test_s3_source_into_s3_store(tiny_llama: Path, tmp_path: Path, s3_bucket: str) -> None:
    src = open_store(f"s3://{s3_bucket}/models/tiny")
    src.put_tree(tiny_llama, "x")
    src.put_bytes(b"not part of a checkpoint", "x/README.md")
    result = _fetch(f"s3://{s3_bucket}/models/tiny/x", f"s3://{s3_bucket}/store", tmp_path / "work")
    # Pinned from the listing (keys, sizes, ETags), not from downloaded bytes.
    assert result.source.resolved_revision.startswith("s3-")
    assert {f.path: f.sha256 for f in result.files} == {e.path: e.sha256 for e in scan_folder(tiny_llama)}
    assert result.source.org_name == ("s3", f"{s3_bucket}--x")
    store = open_store(f"s3://{s3_bucket}/store")
    manifest = store.read_json(f"{result.store_prefix}/MANIFEST.json")
    assert "README.md" not in {f["path"] for f in manifest["files"]}
    assert result.manifest_uri == f"s3://{s3_bucket}/store/{result.store_prefix}/MANIFEST.json"


def _hub_cache(cache: Path, repo: str, sha: str, folder: Path, ref: str = "main") -> None:
    """Lay out a Hugging Face hub cache entry the way huggingface_hub writes it."""
    base = cache / f"models--{repo.replace('/', '--')}"
    (base / "refs").mkdir(parents=True)
    (base / "refs" / ref).write_text(sha)
    shutil.copytree(folder, base / "snapshots" / sha)


def test_hub_source_offline_from_the_local_cache(tiny_llama: Path, tmp_path: Path, monkeypatch) -> None:
    cache = tmp_path / "hf-cache"
    _hub_cache(cache, "tiny-org/tiny-llama", SHA, tiny_llama)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    store_uri = f"file://{tmp_path / 'store'}"
    result = _fetch("tiny-org/tiny-llama", store_uri, tmp_path / "work")
    assert result.source.resolved_revision == SHA  # "main" pinned to the commit sha
    assert result.store_prefix == f"checkpoints/tiny-org/tiny-llama/{SHA}"
    assert open_store(store_uri).exists(f"{result.store_prefix}/{layout.MANIFEST}")
    pinned = _fetch(f"hf://tiny-org/tiny-llama@{SHA}", store_uri, tmp_path / "work")
    assert pinned.reused


def test_hub_source_missing_from_offline_cache_is_a_clear_error(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    with pytest.raises(InvalidInput, match="not in the local Hugging Face cache and HF_HUB_OFFLINE is set"):
        _fetch("tiny-org/absent@main", f"file://{tmp_path / 'store'}", tmp_path / "work")


def test_hub_pickle_only_repo_is_refused_before_downloading_weights(tiny_llama: Path, tmp_path: Path, monkeypatch):
    import torch
    from safetensors.torch import load_file

    torch.save(load_file(tiny_llama / "model.safetensors"), tiny_llama / "pytorch_model.bin")
    (tiny_llama / "model.safetensors").unlink()
    cache = tmp_path / "hf-cache"
    _hub_cache(cache, "tiny-org/pickled", SHA, tiny_llama)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    with pytest.raises(CheckpointError, match="only pickle weights"):
        _fetch("tiny-org/pickled", f"file://{tmp_path / 'store'}", tmp_path / "work")


def test_different_content_gets_a_different_revision(tmp_path: Path) -> None:
    a = make_tiny_llama(tmp_path / "a", seed=1)
    b = make_tiny_llama(tmp_path / "b", seed=2)
    store_uri = f"file://{tmp_path / 'store'}"
    ra = _fetch(str(a), store_uri, tmp_path / "work")
    rb = _fetch(str(b), store_uri, tmp_path / "work")
    assert ra.source.resolved_revision != rb.source.resolved_revision
    manifest = json.loads((rb.local_dir / "MANIFEST.json").read_text())
    assert manifest["source"]["revision"] == rb.source.resolved_revision


def _count_gets(store) -> list[str]:
    """Keys of the GetObject calls the store's (shared, real) boto3 client makes from now on."""
    seen: list[str] = []
    store.client.meta.events.register(
        "provide-client-params.s3.GetObject", lambda params, **_: seen.append(params["Key"])
    )
    return seen


def test_s3_source_is_pinned_from_its_listing_without_downloading(tiny_llama: Path, s3_bucket: str) -> None:
    from neuronforge.pipeline.stages.resolve import resolve_source

    src = open_store(f"s3://{s3_bucket}/models")
    src.put_tree(tiny_llama, "m")
    gets = _count_gets(src)
    first = resolve_source(f"s3://{s3_bucket}/models/m")
    assert gets == [] and first.resolved_revision.startswith("s3-")
    assert resolve_source(f"s3://{s3_bucket}/models/m").resolved_revision == first.resolved_revision
    # Other content under the same key (another ETag) is another revision.
    src.put_bytes((tiny_llama / "config.json").read_bytes() + b"\n", "m/config.json")
    assert resolve_source(f"s3://{s3_bucket}/models/m").resolved_revision != first.resolved_revision


def test_an_s3_source_that_changed_after_its_pin_is_refused(tiny_llama: Path, tmp_path: Path, s3_bucket: str) -> None:
    from neuronforge.pipeline.stages.resolve import resolve_source

    src = open_store(f"s3://{s3_bucket}/models")
    src.put_tree(tiny_llama, "m")
    pinned = resolve_source(f"s3://{s3_bucket}/models/m")
    src.put_bytes(b"{}", "m/extra.json")  # a checkpoint file added after the run pinned it
    req = FetchRequest(pinned, tmp_path / "work")
    with pytest.raises(CheckpointError, match="changed since the run pinned it"):
        fetch(req, open_store(f"file://{tmp_path / 'store'}"))
    assert open_store(f"file://{tmp_path / 'store'}").list() == []


def test_s3_fetch_downloads_each_file_once(tiny_llama: Path, tmp_path: Path, s3_bucket: str) -> None:
    src = open_store(f"s3://{s3_bucket}/models")
    src.put_tree(tiny_llama, "m")
    gets = _count_gets(src)
    _fetch(f"s3://{s3_bucket}/models/m", f"file://{tmp_path / 'store'}", tmp_path / "work")
    assert sorted(gets) == sorted(f"models/m/{p.name}" for p in tiny_llama.iterdir())
    gets.clear()
    _fetch(f"s3://{s3_bucket}/models/m", f"file://{tmp_path / 'store'}", tmp_path / "work")
    assert gets == []  # the store has it and this host verified it: nothing downloaded


def test_hf_transfer_asked_for_but_missing_is_said_and_the_download_runs(
    fake_hub, served_llama: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request, caplog
) -> None:
    """huggingface_hub 0.36 with HF_HUB_ENABLE_HF_TRANSFER=1 and no hf_transfer package raises on every
    download not stored in Xet: the fetch says so once and downloads without it."""
    from huggingface_hub import constants

    from neuronforge.pipeline.stages.resolve import hub_snapshot, resolve_hub
    from neuronforge.spec.source import ModelSource
    from tests.fakes.hub import online

    online(fake_hub, monkeypatch, request)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setattr(constants, "HF_HUB_ENABLE_HF_TRANSFER", True)
    monkeypatch.setitem(sys.modules, "hf_transfer", None)  # not installed (None: `import` raises ImportError)
    fake_hub.add_model("tiny-org/tiny-llama", served_llama)
    source = resolve_hub(ModelSource.parse("tiny-org/tiny-llama"))
    folder = hub_snapshot(source, source.resolved_revision, None, None)
    assert (folder / "config.json").read_bytes() == (served_llama / "config.json").read_bytes()
    (line,) = [r.getMessage() for r in caplog.records if "HF_HUB_ENABLE_HF_TRANSFER" in r.getMessage()]
    assert "the hf_transfer package is not installed" in line and "unset it, or pip install hf_transfer" in line
    assert constants.HF_HUB_ENABLE_HF_TRANSFER is False


def test_a_hub_download_is_measured_with_the_bytes_it_fetched_and_a_cached_one_is_not(
    fake_hub, served_llama: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request
) -> None:
    """`hub_snapshot` of named files records one download (the files the local Hugging Face cache lacked,
    their bytes, huggingface_hub's version and whether hf_xet is used); asked again, nothing moves."""
    from neuronforge.common import transfers
    from neuronforge.pipeline.stages.resolve import hub_snapshot, resolve_hub
    from neuronforge.spec.source import ModelSource
    from tests.fakes.hub import online

    online(fake_hub, monkeypatch, request)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    fake_hub.add_model("tiny-org/tiny-llama", served_llama)
    source = resolve_hub(ModelSource.parse("tiny-org/tiny-llama"))
    names = ["config.json", "model.safetensors"]
    with transfers.collecting() as seen:
        hub_snapshot(source, source.resolved_revision, names, None)
        hub_snapshot(source, source.resolved_revision, names, None)
    (t,) = seen
    assert (t.direction, t.files, t.bytes) == ("download", 2, sum((served_llama / n).stat().st_size for n in names))
    assert t.where == f"hf://tiny-org/tiny-llama@{source.resolved_revision[:12]}"
    assert t.client.startswith("huggingface_hub ") and t.concurrency == 8
