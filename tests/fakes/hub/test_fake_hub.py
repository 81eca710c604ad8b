"""The FAKE Hub (tests/fakes/hub) against huggingface_hub 0.36.2's own client, the only way these tests
talk to it (`HfApi(endpoint=..., token=...)`, `hf_hub_download`, `get_hf_file_metadata`, `http_get`), and
against optimum-neuron 0.4.5's Hub cache lookup run in a subprocess with `HF_ENDPOINT`."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi, hf_hub_download, hf_hub_url
from huggingface_hub.file_download import get_hf_file_metadata, http_get
from huggingface_hub.utils import (
    BadRequestError,
    EntryNotFoundError,
    HfHubHTTPError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from requests import HTTPError

from tests.fakes.hub import FakeHub, online

COMPILER_DIR = "neuronxcc-2.21.33363.0+82129205"  # a `+` in a folder name, as the compile cache writes it
MODULE = f"{COMPILER_DIR}/MODULE_ab+cd"
NEFF = b"\0NEFF" + bytes(range(256)) * 4  # binary: the NUL byte makes it LFS
TEXT = b'{"compiler": "neuronx-cc"}\n'


@pytest.fixture
def hub(fake_hub: FakeHub, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> FakeHub:
    return online(fake_hub, monkeypatch, request)


def api(hub: FakeHub, token: str | bool = "hf_writer") -> HfApi:
    return HfApi(endpoint=hub.endpoint, token=token)


def _cache_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "upload"
    (folder / MODULE).mkdir(parents=True)
    (folder / MODULE / "model.neff").write_bytes(NEFF)
    (folder / MODULE / "compile_flags.json").write_bytes(TEXT)
    (folder / "README.md").write_text("# cache\n")
    return folder


def _download(hub: FakeHub, repo_id: str, filename: str, tmp_path: Path, token: str | bool = "hf_writer") -> bytes:
    path = hf_hub_download(repo_id, filename, endpoint=hub.endpoint, token=token, cache_dir=tmp_path / "hf-cache")
    return Path(path).read_bytes()


def test_whoami_names_the_tokens_user_and_an_unknown_token_is_refused(hub: FakeHub) -> None:
    me = api(hub).whoami()
    assert me["name"] == "me" and [o["name"] for o in me["orgs"]] == ["my-org"]
    with pytest.raises(HTTPError, match="Invalid user token"):
        api(hub, "hf_nobody").whoami()


def test_create_repo_private_and_exist_ok(hub: FakeHub) -> None:
    url = api(hub).create_repo("my-org/cache", private=True)
    assert url.repo_id == "my-org/cache" and url.endpoint == hub.endpoint
    with pytest.raises(HfHubHTTPError) as again:
        api(hub).create_repo("my-org/cache", private=True)
    assert again.value.response.status_code == 409
    assert api(hub).create_repo("my-org/cache", private=True, exist_ok=True).repo_id == "my-org/cache"
    info = api(hub).model_info("my-org/cache")
    assert info.private is True and len(info.sha) == 40 and info.siblings == []


def test_upload_folder_sends_the_binary_file_through_lfs(hub: FakeHub, tmp_path: Path) -> None:
    api(hub).create_repo("my-org/cache", private=True)
    before = api(hub).model_info("my-org/cache").sha
    mark = len(hub.requests)
    commit = api(hub).upload_folder(repo_id="my-org/cache", folder_path=_cache_folder(tmp_path))
    sent = [(r.method, r.path.split("?")[0], r.status) for r in hub.requests[mark:]]
    assert ("POST", "/api/validate-yaml", 200) in sent  # the README.md (no metadata block), first
    sent = [s for s in sent if s[1] != "/api/validate-yaml"]
    assert sent[:2] == [
        ("POST", "/api/models/my-org/cache/preupload/main", 200),
        ("POST", "/my-org/cache.git/info/lfs/objects/batch", 200),
    ]
    assert sent[2][:1] == ("PUT",) and sent[2][1].startswith("/.lfs-upload/")  # one LFS object: the NEFF
    assert sent[3:] == [
        ("POST", "/my-org/cache.git/info/lfs/objects/verify", 200),
        ("POST", "/api/models/my-org/cache/commit/main", 200),
    ]
    assert all("hf_writer" not in str(r) for r in hub.requests)  # the log never holds a token

    info = api(hub).model_info("my-org/cache", files_metadata=True)
    assert commit.oid == info.sha != before
    files = {s.rfilename: s for s in info.siblings}
    assert set(files) == {"README.md", f"{MODULE}/compile_flags.json", f"{MODULE}/model.neff"}
    assert files[f"{MODULE}/model.neff"].lfs.sha256 == hashlib.sha256(NEFF).hexdigest()
    assert files[f"{MODULE}/compile_flags.json"].lfs is None

    assert _download(hub, "my-org/cache", f"{MODULE}/model.neff", tmp_path) == NEFF
    assert _download(hub, "my-org/cache", f"{MODULE}/compile_flags.json", tmp_path) == TEXT
    neff = get_hf_file_metadata(
        hf_hub_url("my-org/cache", f"{MODULE}/model.neff", endpoint=hub.endpoint), token="hf_writer"
    )
    assert (neff.etag, neff.size, neff.commit_hash) == (hashlib.sha256(NEFF).hexdigest(), len(NEFF), info.sha)
    flags = get_hf_file_metadata(
        hf_hub_url("my-org/cache", f"{MODULE}/compile_flags.json", endpoint=hub.endpoint), token="hf_writer"
    )
    assert flags.etag == hashlib.sha1(b"blob %d\0" % len(TEXT) + TEXT).hexdigest()  # git's blob id


def test_an_unchanged_upload_makes_no_commit_and_a_commit_id_is_a_revision(hub: FakeHub, tmp_path: Path) -> None:
    api(hub).create_repo("my-org/cache")
    folder = _cache_folder(tmp_path)
    first = api(hub).upload_folder(repo_id="my-org/cache", folder_path=folder)
    mark = len(hub.requests)
    again = api(hub).upload_folder(repo_id="my-org/cache", folder_path=folder)
    sent = [(r.method, r.path, r.status) for r in hub.requests[mark:]]
    # preupload names the files already there by oid; the client drops them and reads the head commit
    assert again.oid == first.oid
    assert ("GET", "/api/models/my-org/cache/revision/main", 200) in sent
    assert not [s for s in sent if "/commit/" in s[1] or s[0] == "PUT"]
    path = hf_hub_download(
        "my-org/cache",
        f"{MODULE}/model.neff",
        revision=first.oid,
        endpoint=hub.endpoint,
        token="hf_writer",
        cache_dir=tmp_path / "hf-cache",
    )
    assert Path(path).read_bytes() == NEFF


def test_list_repo_tree_direct_children_and_all_descendants(hub: FakeHub, tmp_path: Path) -> None:
    api(hub).create_repo("my-org/cache")
    api(hub).upload_folder(repo_id="my-org/cache", folder_path=_cache_folder(tmp_path))
    top = [(e.path, type(e).__name__) for e in api(hub).list_repo_tree("my-org/cache")]
    assert top == [(COMPILER_DIR, "RepoFolder"), ("README.md", "RepoFile")]
    # the path is one %-encoded segment (`/` -> %2F, `+` -> %2B), trailing slash kept, as optimum sends it
    module = list(api(hub).list_repo_tree("my-org/cache", path_in_repo=f"{MODULE}/"))
    assert [e.path for e in module] == [f"{MODULE}/compile_flags.json", f"{MODULE}/model.neff"]
    assert module[1].size == len(NEFF) and module[1].lfs.sha256 == hashlib.sha256(NEFF).hexdigest()
    everything = [e.path for e in api(hub).list_repo_tree("my-org/cache", path_in_repo=COMPILER_DIR, recursive=True)]
    assert everything == [MODULE, f"{MODULE}/compile_flags.json", f"{MODULE}/model.neff"]
    assert sorted(api(hub).list_repo_files("my-org/cache")) == sorted(["README.md", *everything[1:]])
    with pytest.raises(EntryNotFoundError):
        list(api(hub).list_repo_tree("my-org/cache", path_in_repo=f"{COMPILER_DIR}/MODULE_missing"))
    with pytest.raises(RevisionNotFoundError):
        list(api(hub).list_repo_tree("my-org/cache", revision="v1.0"))


def test_list_repo_tree_follows_the_link_header_to_every_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    files = {f"{MODULE}/file{i}.txt": f"{i}\n" for i in range(7)} | {"README.md": "# cache\n"}
    with FakeHub(tmp_path / "hub", page_size=3) as small:
        online(small, monkeypatch, request)
        small.add_model("my-org/cache", files)
        listed = [e.path for e in api(small, False).list_repo_tree("my-org/cache", recursive=True)]
        pages = [r for r in small.requests if "/tree/" in r.path]
    # folders before files at each level, a folder's content after it: 10 items, none twice
    assert listed == [COMPILER_DIR, MODULE, *(f"{MODULE}/file{i}.txt" for i in range(7)), "README.md"]
    assert len(pages) == 4 and all(r.status == 200 for r in pages)


def test_file_exists_and_partial_downloads(hub: FakeHub, tmp_path: Path) -> None:
    hub.add_model("my-org/tiny", {"config.json": TEXT, "weights.bin": NEFF})
    assert api(hub).file_exists("my-org/tiny", "config.json")
    assert not api(hub).file_exists("my-org/tiny", "tokenizer.json")
    assert not api(hub).file_exists("my-org/missing", "config.json")
    with pytest.raises(EntryNotFoundError):
        _download(hub, "my-org/tiny", "tokenizer.json", tmp_path)
    # a resumed download asks for the rest with `Range: bytes=<resume>-`
    url = hf_hub_url("my-org/tiny", "weights.bin", endpoint=hub.endpoint)
    buffer = io.BytesIO(NEFF[:100])
    buffer.seek(100)
    http_get(url, buffer, resume_size=100, expected_size=len(NEFF))
    assert buffer.getvalue() == NEFF
    assert [r.status for r in hub.requests if r.method == "GET" and r.path.endswith("/weights.bin")] == [206]


def test_a_private_repo_reads_like_a_missing_one_without_a_token(hub: FakeHub, tmp_path: Path) -> None:
    hub.add_model("my-org/secret", {"config.json": TEXT}, private=True)
    hub.add_model("my-org/open", {"config.json": TEXT})
    assert api(hub).repo_exists("my-org/secret") and api(hub).repo_exists("my-org/open")
    assert not api(hub, False).repo_exists("my-org/secret") and api(hub, False).repo_exists("my-org/open")
    assert _download(hub, "my-org/open", "config.json", tmp_path, token=False) == TEXT
    assert _download(hub, "my-org/secret", "config.json", tmp_path) == TEXT
    with pytest.raises(RepositoryNotFoundError) as anonymous:
        _download(hub, "my-org/secret", "config.json", tmp_path / "anonymous", token=False)
    assert anonymous.value.response.status_code == 401
    assert anonymous.value.response.headers["X-Error-Code"] == "RepoNotFound"
    assert not api(hub, False).file_exists("my-org/secret", "config.json")
    with pytest.raises(RepositoryNotFoundError) as authenticated:
        api(hub).model_info("nobody/missing")
    assert authenticated.value.response.status_code == 404
    with pytest.raises(HfHubHTTPError, match="Invalid credentials in Authorization header"):
        api(hub, "hf_stolen").model_info("my-org/open")


def test_writes_need_a_token_with_rights_on_the_namespace(tmp_path: Path, monkeypatch, request) -> None:
    tokens = {"hf_writer": ("me", ["my-org"]), "hf_other": "other"}
    with FakeHub(tmp_path / "hub", tokens=tokens) as two:
        online(two, monkeypatch, request)
        sha = two.add_model("my-org/open", {"config.json": TEXT})
        add = [CommitOperationAdd("evil.txt", b"x")]
        with pytest.raises(HfHubHTTPError) as anonymous:
            api(two, False).create_commit("my-org/open", add, commit_message="x")
        assert anonymous.value.response.status_code == 401
        with pytest.raises(HfHubHTTPError) as other:
            api(two, "hf_other").create_commit("my-org/open", add, commit_message="x")
        assert other.value.response.status_code == 403
        with pytest.raises(HfHubHTTPError) as namespace:
            api(two, "hf_other").create_repo("my-org/other-repo")
        assert namespace.value.response.status_code == 403
        assert api(two, "hf_other").create_repo("other/own").repo_id == "other/own"
        assert api(two).model_info("my-org/open").sha == sha
        assert not api(two).repo_exists("my-org/other-repo")


def test_a_commit_naming_a_never_uploaded_lfs_object_changes_nothing(hub: FakeHub) -> None:
    sha = hub.add_model("my-org/cache", {"keep.txt": TEXT, "old/a.txt": TEXT})
    tree = [(e.path, getattr(e, "blob_id", None)) for e in api(hub).list_repo_tree("my-org/cache", recursive=True)]
    ghost = CommitOperationAdd("model.neff", NEFF)
    # what preupload_lfs_files leaves behind once an object is uploaded; here it never was
    ghost._upload_mode, ghost._should_ignore, ghost._is_uploaded = "lfs", False, True
    operations = [
        CommitOperationAdd("new.txt", b"new\n"),
        CommitOperationDelete("keep.txt"),
        CommitOperationDelete("old/", is_folder=True),
        ghost,
    ]
    with pytest.raises(BadRequestError, match="never uploaded"):
        api(hub).create_commit("my-org/cache", operations, commit_message="half a commit")
    assert api(hub).model_info("my-org/cache").sha == sha
    assert [
        (e.path, getattr(e, "blob_id", None)) for e in api(hub).list_repo_tree("my-org/cache", recursive=True)
    ] == tree


def test_deletions_and_their_missing_targets(hub: FakeHub) -> None:
    hub.add_model("my-org/cache", {"a.txt": TEXT, f"{MODULE}/model.neff": NEFF})
    api(hub).delete_folder(f"{MODULE}/", repo_id="my-org/cache")
    assert [e.path for e in api(hub).list_repo_tree("my-org/cache", recursive=True)] == [COMPILER_DIR, "a.txt"]
    with pytest.raises(EntryNotFoundError, match="A file with this name doesn't exist"):
        api(hub).delete_file("missing.txt", repo_id="my-org/cache")
    api(hub).delete_file("a.txt", repo_id="my-org/cache")
    assert api(hub).list_repo_files("my-org/cache") == []


def test_paths_never_escape_the_repo_folder(hub: FakeHub, tmp_path: Path) -> None:
    hub.add_model("my-org/open", {"config.json": TEXT})
    hub.add_model("my-org/secret", {"token.txt": "hf_secret"}, private=True)
    outside = tmp_path / "outside.txt"
    outside.write_text("outside")
    (hub.root / "my-org" / "open" / "link.txt").symlink_to(outside)
    (hub.root / "my-org" / "open" / "peek").symlink_to(hub.root / "my-org" / "secret")
    anonymous = api(hub, False)
    for path in ("../secret", "/etc", "a/../../secret"):
        with pytest.raises(BadRequestError, match="Invalid path"):
            list(anonymous.list_repo_tree("my-org/open", path_in_repo=path))
    with pytest.raises(EntryNotFoundError):
        list(anonymous.list_repo_tree("my-org/open", path_in_repo="peek"))
    assert [e.path for e in anonymous.list_repo_tree("my-org/open", recursive=True)] == ["config.json"]
    # urllib3 drops `..` segments from a resolve URL before sending it (here: revision "secret");
    # list_repo_tree's one %-encoded segment above is what reaches the server with them
    for name in ("link.txt", "peek/token.txt", "../secret/token.txt"):
        assert not anonymous.file_exists("my-org/open", name), name
        with pytest.raises((EntryNotFoundError, HfHubHTTPError)):
            _download(hub, "my-org/open", name, tmp_path, token=False)
    # nor does a commit act through a planted symlink
    with pytest.raises(EntryNotFoundError):
        api(hub).delete_file("peek/token.txt", repo_id="my-org/open")
    with pytest.raises(BadRequestError, match="is a file"):
        api(hub).upload_file(path_or_fileobj=b"x", path_in_repo="peek/new.txt", repo_id="my-org/open")
    assert api(hub).list_repo_files("my-org/secret") == ["token.txt"]
    escapes = [r for r in hub.requests if "my-org/open" in r.path and ("secret" in r.path or "peek" in r.path)]
    assert escapes and all(r.status in (400, 401, 404) for r in escapes)


def test_an_unknown_route_names_itself(hub: FakeHub) -> None:
    hub.add_model("my-org/open", {"config.json": TEXT})
    with pytest.raises(HfHubHTTPError, match="FakeHub has no route for GET /api/models/my-org/open/refs"):
        api(hub).list_repo_refs("my-org/open")


# optimum-neuron 0.4.5's Hub cache lookup, in a fresh interpreter: huggingface_hub reads HF_ENDPOINT at
# import, and optimum's bare `HfApi()` calls (hub_cache.py hub_registry_path, get_hub_cached_models) use it.
_BUILD_ENTRY = """
import json, sys, torch
from pathlib import Path
from transformers import AutoConfig, LlamaConfig
from optimum.neuron.cache.entries.single_model import SingleModelCacheEntry
from optimum.neuron.cache.hub_cache import REGISTRY_FOLDER
from optimum.neuron.configuration_utils import _KEY_FOR_NEURON_CONFIG
from optimum.neuron.models.inference.backend.config import NxDNeuronConfig
from optimum.neuron.version import __version__

out, model_id, compiler_dir = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
# the checkpoint's dtype is the build's: optimum's lookup digests the Hub config as is, the export after
# setting its dtype (research notes: the dtype pitfall)
LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, vocab_size=1000, torch_dtype="bfloat16").save_pretrained(out / "model")
config = AutoConfig.from_pretrained(out / "model").get_text_config()
nc = NxDNeuronConfig(checkpoint_id=model_id, checkpoint_revision=None, batch_size=4, sequence_length=4096,
                     tp_degree=2, torch_dtype="bfloat16", target="trn1")
config.torch_dtype = nc.torch_dtype  # as pretrained_model.py _export does before building the entry
# NeuronConfig.to_dict() needs neuronx-cc installed; this is what it serialises
neuron = {k: str(v).split(".")[1] if isinstance(v, torch.dtype) else v for k, v in vars(nc).items()}
neuron.update(_serialized_key=_KEY_FOR_NEURON_CONFIG[type(nc)], optimum_neuron_version=__version__,
              neuronxcc_version=compiler_dir.removeprefix("neuronxcc-"))
entry = SingleModelCacheEntry(model_id, "text-generation", config, neuron_config=neuron)
registry = out / "cache" / compiler_dir / REGISTRY_FOLDER
for folder in (registry / entry.arch_digest(), registry / entry.model_type / entry.model_id):
    folder.mkdir(parents=True)
    (folder / f"{entry.hash}.json").write_text(entry.serialize())
print(json.dumps({"neuron": neuron, "digest": entry.arch_digest(), "hash": entry.hash}))
"""

_LOOKUP = """
import json, sys
from optimum.neuron.cache.hub_cache import get_hub_cached_entries, get_hub_cached_models
repo, model_id = sys.argv[1], sys.argv[2]
models = sorted(get_hub_cached_models(cache_repo_id=repo))
entries = get_hub_cached_entries(model_id, task="text-generation", cache_repo_id=repo)
print(json.dumps({"models": models, "entries": entries}))
"""


def _python(code: str, *args: str, env: dict[str, str] | None = None) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_optimum_neurons_cache_lookup_reads_the_fake(hub: FakeHub, tmp_path: Path) -> None:
    model_id, cache_repo = "my-org/tiny-llama", "me/neuron-cache"
    built = _python(_BUILD_ENTRY, str(tmp_path / "built"), model_id, COMPILER_DIR)
    (tmp_path / "built" / "cache" / MODULE).mkdir(parents=True)
    (tmp_path / "built" / "cache" / MODULE / "model.neff").write_bytes(NEFF)
    api(hub).create_repo(model_id)
    api(hub).upload_folder(repo_id=model_id, folder_path=tmp_path / "built" / "model")
    api(hub).create_repo(cache_repo, private=True)  # read with HF_TOKEN by optimum's bare HfApi()
    api(hub).upload_folder(repo_id=cache_repo, folder_path=tmp_path / "built" / "cache")

    mark = len(hub.requests)
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_TOKEN", "CUSTOM_CACHE_REPO")}
    env |= {"HF_ENDPOINT": hub.endpoint, "HF_TOKEN": "hf_writer", "HF_HOME": str(tmp_path / "hf-home")}
    found = _python(_LOOKUP, cache_repo, model_id, env=env)
    assert found["models"] == [["llama", "my-org", "tiny-llama"]]
    assert found["entries"] == [built["neuron"]]
    hit = found["entries"][0]
    assert (hit["batch_size"], hit["sequence_length"], hit["tp_degree"], hit["torch_dtype"], hit["target"]) == (
        4,
        4096,
        2,
        "bfloat16",
        "trn1",
    )
    sent = [(r.method, r.path, r.status) for r in hub.requests[mark:]]
    assert all(status == 200 for _, _, status in sent), sent
    registry = f"{COMPILER_DIR}/0_REGISTRY/0.4.5".replace("+", "%2B").replace("/", "%2F")
    assert ("GET", f"/api/models/{cache_repo}/tree/main?recursive=False&expand=False", 200) in sent
    assert ("GET", f"/api/models/{cache_repo}/tree/main/{registry}?recursive=True&expand=False", 200) in sent
    assert ("HEAD", f"/{model_id}/resolve/main/config.json", 200) in sent
    entry = f"{COMPILER_DIR.replace('+', '%2B')}/0_REGISTRY/0.4.5/{built['digest']}/{built['hash']}.json"
    assert ("GET", f"/{cache_repo}/resolve/main/{entry}", 200) in sent
