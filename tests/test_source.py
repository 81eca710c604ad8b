"""ModelSource parsing and content digests."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuronforge.common.errors import CheckpointError, InvalidInput
from neuronforge.spec.source import FileEntry, ModelSource, files_digest, scan_folder, select_checkpoint_files


@pytest.mark.parametrize(
    ("text", "kind", "location", "revision"),
    [
        ("meta-llama/Llama-3.1-8B", "hf", "meta-llama/Llama-3.1-8B", None),
        ("meta-llama/Llama-3.1-8B@main", "hf", "meta-llama/Llama-3.1-8B", "main"),
        ("hf://Qwen/Qwen2.5-7B@v1.0", "hf", "Qwen/Qwen2.5-7B", "v1.0"),
        ("gpt2", "hf", "gpt2", None),
        ("s3://my-bucket/models/llama/", "s3", "s3://my-bucket/models/llama", None),
        ("s3://my-bucket", "s3", "s3://my-bucket", None),
    ],
)
def test_parse_remote_sources(text: str, kind: str, location: str, revision: str | None) -> None:
    src = ModelSource.parse(text)
    assert (src.kind, src.location, src.revision) == (kind, location, revision)
    assert not src.is_resolved


def test_parse_local_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "org" / "model").mkdir(parents=True)
    assert ModelSource.parse(str(tmp_path)).kind == "local"
    assert ModelSource.parse(f"file://{tmp_path}").location == str(tmp_path)
    monkeypatch.chdir(tmp_path)
    # An existing folder wins over a Hub id of the same spelling (as transformers does).
    src = ModelSource.parse("org/model")
    assert (src.kind, src.location) == ("local", str(tmp_path / "org" / "model"))
    assert ModelSource.parse("./org").org_name == ("local", "org")


@pytest.mark.parametrize("text", ["", "a/b/c", "org/name@", "s3://ab", "org/na me"])
def test_parse_rejects_malformed_sources(text: str, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInput):
        ModelSource.parse(text)


def test_org_name_is_path_safe() -> None:
    assert ModelSource.parse("s3://bucket-x/a/My Model").org_name == ("s3", "bucket-x--My-Model")
    assert ModelSource.parse("gpt2").org_name == ("hf", "gpt2")


def test_files_digest_depends_on_content_not_order() -> None:
    a = [FileEntry("a", 1, "x"), FileEntry("b", 2, "y")]
    assert files_digest(a) == files_digest(list(reversed(a)))
    assert files_digest(a) != files_digest([FileEntry("a", 1, "x"), FileEntry("b", 2, "z")])
    assert files_digest(a) != files_digest([FileEntry("a", 1, "x"), FileEntry("c", 2, "y")])


def test_scan_folder_takes_only_checkpoint_files(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"x")
    (tmp_path / "README.md").write_text("hi")
    (tmp_path / ".cache").mkdir()
    (tmp_path / ".cache" / "x.json").write_text("{}")
    (tmp_path / "pytorch_model.bin").write_bytes(b"p")
    assert [e.path for e in scan_folder(tmp_path)] == ["config.json", "model.safetensors"]


def test_select_files_refuses_pickle_only_unless_allowed() -> None:
    with pytest.raises(CheckpointError, match="only pickle weights found"):
        select_checkpoint_files(["config.json", "pytorch_model.bin"], allow_pickle=False)
    assert select_checkpoint_files(["config.json", "pytorch_model.bin"], True) == ["config.json", "pytorch_model.bin"]
    # With safetensors present, pickle copies are ignored either way.
    assert select_checkpoint_files(["a.safetensors", "b.bin"], True) == ["a.safetensors"]


@pytest.mark.parametrize(
    ("given", "name"),
    [
        ("builtin:tiny-llama", "builtin:tiny-llama"),
        ({"kind": "builtin", "location": "tiny-llama", "revision": "abc"}, "builtin:tiny-llama"),
        ("hf://org/model@main", "org/model"),
        ("org/model", "org/model"),
        ({"kind": "hf", "location": "org/model"}, "org/model"),
        ("s3://bucket/models/x/", "s3://bucket/models/x"),
        ("not a source!", "not a source!"),
        ("L" * 100_000, "L" * 100_000),  # no file system names it (was an OSError: name too long)
        ("nul\x00byte", "nul\x00byte"),  # nor a NUL
    ],
)
def test_one_canonical_model_name(given, name: str) -> None:
    """Manifests keep (kind, location); failure records and builds in progress keep what the user
    typed: `model_name` gives both the one name the farm index and the catalog show."""
    from neuronforge.spec.source import model_name

    assert model_name(given) == name


@pytest.mark.parametrize("text", ["L" * 100_000, "nul\x00byte"])
def test_text_no_file_system_names_is_refused_in_one_sentence(text: str) -> None:
    """A model source too long for a path, or holding a NUL, is not a Hub id: InvalidInput, not an
    OSError from asking the file system whether it exists."""
    with pytest.raises(InvalidInput, match="is not a Hub id"):
        ModelSource.parse(text)
