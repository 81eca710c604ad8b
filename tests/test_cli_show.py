"""`ls` prints a key column `show` and `verify` take: a full cache key, a unique prefix (found with one
listing of `index/<prefix>`, never a scan), or a manifest URI as before."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from neuronforge.artifacts.published import find_key
from neuronforge.interfaces.cli import ExitCode, main
from neuronforge.stores import open_store
from neuronforge.stores.file import FileStore
from tests.conftest import Compiled


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def store(compiled: Compiled, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A copy of the session's published store, made the default one (NEURONFORGE_STORE)."""
    copy = tmp_path / "store"
    shutil.copytree(Path(compiled.store.root_uri.removeprefix("file://")), copy)
    monkeypatch.setenv("NEURONFORGE_STORE", f"file://{copy}")
    return f"file://{copy}"


def test_ls_has_a_header_a_profile_column_and_keys_show_takes(capsys, compiled: Compiled, store: str) -> None:
    code, out, _ = run(capsys, "ls")  # the default store: no argument
    assert code == ExitCode.OK
    header, row, *_ = out.splitlines()
    assert header.split() == ["KEY", "PUBLISHED", "PROFILE", "TARGET", "MODEL"]
    key = compiled.first.key
    assert row.split()[0] == key[:12] and row.split()[2].startswith("cpu@")
    assert header.index("PROFILE") == row.index(row.split()[2]) and header.index("TARGET") == row.index(row.split()[3])

    code, out, _ = run(capsys, "show", row.split()[0])  # exactly what ls printed
    assert code == ExitCode.OK and f"cache key  {key}" in out and "smoke      passed" in out
    measured = compiled.first.published.manifest.smoke.measurement  # the smoke protocol's figures, readably
    assert measured is not None and f"measured   {measured.repetitions} repetition(s) after 1 warm-up" in out
    per_token = measured.figures["per_token_s"]
    assert f"per output token, at the target's batch size: {per_token.median * 1e3:.2f} ms (p10–p90 " in out
    assert "SYNTHETIC" not in out  # a real (cpu) measurement
    for ref in (key, key[:6], key[:6].upper()):
        assert run(capsys, "show", ref, "--json")[0] == ExitCode.OK
    assert json.loads(run(capsys, "show", key, "--json")[1])["smoke"]["measurement"] == measured.model_dump(mode="json")
    code, by_uri, _ = run(capsys, "show", compiled.first.published.manifest_uri.replace(compiled.store.root_uri, store))
    assert code == ExitCode.OK and by_uri == out  # the same text by key as by URI

    # outputs: names and their URIs in this store, never a relative path twice
    lines = out.splitlines()
    outputs = [line.split() for line in lines[next(i for i, line in enumerate(lines) if line.startswith("outputs ")) :]]
    assert all(len(o) == 2 + (i == 0) for i, o in enumerate(outputs)), out  # [outputs] NAME URI
    uris = [o[-1] for o in outputs]
    assert all(u.startswith(f"{store}/artifacts/") for u in uris), out
    for uri in uris:
        assert Path(uri.removeprefix("file://")).exists(), uri

    code, out, _ = run(capsys, "verify", key[:8], "--work-dir", str(Path(store.removeprefix("file://")).parent / "v"))
    assert code == ExitCode.OK and "ok: the files match" in out


def _index_only_store(root: Path, keys: list[str]) -> FileStore:
    store = open_store(f"file://{root}")
    for k in keys:
        store.write_json(f"index/{k}.json", {"manifest": f"artifacts/x/{k[:12]}/manifest.json", "prefix": "x"})
    return store  # type: ignore[return-value]


def test_show_by_prefix_one_line_errors(capsys, tmp_path: Path) -> None:
    store = _index_only_store(tmp_path / "s", ["abcdef01" + "0" * 56, "abcdef02" + "0" * 56, "abcdff" + "1" * 58])
    code, _, err = run(capsys, "show", "abcdef", "--store", store.root_uri)
    assert code == ExitCode.USAGE and err.count("\n") == 1
    assert "ambiguous" in err and "abcdef0100000000" in err and "abcdef0200000000" in err and "abcdff" not in err
    code, _, err = run(capsys, "show", "123456", "--store", store.root_uri)
    assert code == ExitCode.USAGE and err.count("\n") == 1 and "no artifact in" in err and "123456" in err
    code, _, err = run(capsys, "show", "abcde", "--store", store.root_uri)
    assert code == ExitCode.USAGE and err.count("\n") == 1 and "at least 6 hex characters" in err
    # a unique prefix resolves; its manifest is missing here: a damaged artifact, one line
    code, _, err = run(capsys, "show", "abcdff", "--store", store.root_uri)
    assert code == ExitCode.REJECTED and err.count("\n") == 1 and "Traceback" not in err and "manifest gone" in err


@pytest.mark.parametrize("command", ["show", "verify"])
def test_a_word_that_is_neither_hex_nor_a_path_is_a_bad_key(
    capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    """`show zzzzzz` was opened as the store folder ./zzzzzz ("store ... does not exist"): a bare word that
    names no file here is refused as the key it was meant to be, in one line with what to give instead; a
    folder of that name, or a path with a `/`, is still opened as an artifact's folder."""
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, command, "zzzzzz")
    assert code == ExitCode.USAGE and err.count("\n") == 1, err
    assert "'zzzzzz' is not a cache key" in err and "`neuronforge ls` prints 12" in err and "store" not in err
    (tmp_path / "zzzzzz").mkdir()
    code, _, err = run(capsys, command, "zzzzzz")  # an existing folder: an artifact's folder, as before
    assert code != ExitCode.OK and "is not a cache key" not in err
    code, _, err = run(capsys, command, "./nothing-here")
    assert "does not exist" in err and "is not a cache key" not in err


class CountingStore(FileStore):
    """Records listings; a listing of anything but `index` (a scan) fails the test."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.pages: list[tuple[str, str, int]] = []

    def list(self, prefix: str = ""):
        assert prefix == "index", f"scanned {prefix!r}"
        return super().list(prefix)

    def list_page(self, prefix: str, start_after: str = "", limit: int = 1000):
        self.pages.append((prefix, start_after, limit))
        return super().list_page(prefix, start_after, limit)


def test_find_key_is_one_listing_that_starts_at_the_prefix(tmp_path: Path) -> None:
    keys = [f"{i:02x}" + "a" * 62 for i in range(40)] + ["c0ffee" + "b" * 58]
    _index_only_store(tmp_path / "s", keys)
    store = CountingStore(tmp_path / "s")
    assert find_key(store, "C0FFEE") == "c0ffee" + "b" * 58
    assert store.pages == [("index", "index/c0ffee", 11)]
    assert find_key(store, keys[3]) == keys[3]  # a full key: itself


def test_one_model_name_in_ls_show_the_catalog_and_channels(capsys, compiled: Compiled, store: str) -> None:
    """`ls` said `builtin:tiny-llama@cdd9…`, the catalog `builtin:tiny-llama`, `show` `tiny-llama @ cdd9…`
    (64 digits): one build's model is `spec.source.model_ref` everywhere, `org/name@rev12`."""
    from neuronforge.farm.rows import farm_row
    from neuronforge.spec.source import model_name, model_ref
    from tests.plugins.conftest import load_plugin

    source = compiled.first.published.manifest.source
    name, revision = model_name(source.model_dump()), source.revision
    expected = model_ref(name, revision)
    assert expected == f"{name}@{revision[:12]}" and len(revision) > 12

    _, out, _ = run(capsys, "ls")
    assert out.splitlines()[1].split()[-1] == expected
    _, out, _ = run(capsys, "show", compiled.first.key[:12])
    assert f"model      {expected}\n" in out

    plugin = load_plugin("neuronforge_catalog")
    found = farm_row(open_store(store), compiled.first.key)
    assert found is not None
    row, manifest = found
    assert plugin.pages.index._row_view(row)["model"] == expected
    assert plugin.pages.artifact._detail_view(row, manifest, {})["model"] == expected

    assert run(capsys, "approve", compiled.first.key[:12], "--by", "a")[0] == ExitCode.OK
    code, _, err = run(
        capsys, "promote", name, "--profile", "cpu", "--channel", "candidate", "--build", compiled.first.key
    )
    assert code == ExitCode.OK, err
    _, out, _ = run(capsys, "channels", name)
    assert out.startswith(f"{model_ref(name)} · cpu · candidate: ")  # a channel spans revisions: no revision
