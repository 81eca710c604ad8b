"""FAKE Hugging Face Hub: the Hub API as huggingface_hub 0.36.2 calls it, served on 127.0.0.1 for tests.

A fake is a claim about the real thing: each route answers what huggingface_hub 0.36.2's client sends and
reads, no more (each handler in `server.py` cites the client code it serves, `HH/<file>:<line>`).
`tests/fakes/hub/test_fake_hub.py` drives it only through that client (`HfApi(endpoint=..., token=...)`,
`hf_hub_download`), plus optimum-neuron 0.4.5's own Hub cache lookup in a subprocess.

Routes:
- `GET /api/whoami-v2` (HfApi.whoami);
- `GET /api/models/{org}/{name}[/revision/{rev}]` (model_info, repo_info, repo_exists; `blobs=True`);
- `GET /api/models/{org}/{name}/tree/{rev}[/{path as one %-encoded segment}]?recursive=&expand=False`
  (list_repo_tree, list_repo_files), paginated with a `Link: <...>; rel="next"` header (`page_size`);
- `HEAD`/`GET /{org}/{name}/resolve/{rev}/{path}` (file_exists, get_hf_file_metadata, hf_hub_download),
  with `X-Repo-Commit`, `ETag` (git blob sha1, or sha256 for an LFS file), `Content-Length`, `Range` (206);
- `POST /api/repos/create` (create_repo; 409 when it exists);
- `POST /api/validate-yaml` (create_commit checks a committed README.md's metadata first): accepts a README
  without a metadata block, refuses one with (the fake does not validate model card metadata);
- `POST /api/models/{org}/{name}/preupload/{rev}` ("lfs" for a NUL byte in the 512-byte sample or >= 10 MiB);
- `POST /{org}/{name}.git/info/lfs/objects/batch` and `.../verify`, `PUT /.lfs-upload/<ticket>` (basic LFS
  transfer: the object is stored by its sha256, checked on upload);
- `POST /api/models/{org}/{name}/commit/{rev}` (create_commit, upload_file, upload_folder: NDJSON lines
  file / lfsFile / deletedFile / deletedFolder, applied all or nothing).
Anything else: 404 with a JSON error naming the method and path.

Errors as the Hub sends them (huggingface_hub/utils/_http.py:405-475 turns them into its exceptions): a
missing repo, or a private one the caller may not read, is 401 without a token and 404 with one, both with
`X-Error-Code: RepoNotFound`; a missing file or folder is 404 `EntryNotFound` (resolve adds `X-Repo-Commit`);
an unknown token is 401 "Invalid credentials in Authorization header" on every route; writing without a
token is 401, to a namespace the token's user does not own (its name or its orgs) 403.

Narrower than the real Hub: model repos only, with an `org/name` id; one branch, `main` (a revision is
`main` or the current commit id; no tags, refs, pull requests or `create_pr`); no Xet storage (the batch
answer is always "basic", single-part: no multipart, no hf_transfer); which files are LFS follows the rule
above, not `.gitattributes`; `gitIgnore` is not applied (`shouldIgnore` is always false); no `expand`
(lastCommit, security), no copies between revisions, no commit history (only the current commit id, which
changes on every commit), no gated or disabled repos, no rate limits; an LFS file is served directly (the
Hub redirects to a CDN with `X-Linked-Etag`); folder `oid`s are stable content hashes, not git tree ids;
symlinks planted in the tree are never served or listed.
"""

from __future__ import annotations

import pytest

from tests.fakes.hub.server import FakeHub, LoggedRequest, upload_mode

__all__ = ["FakeHub", "LoggedRequest", "online", "upload_mode"]


def online(hub: FakeHub, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> FakeHub:
    """Point this process's huggingface_hub (bare `HfApi()`, `hf_hub_download`) at `hub`, online, for the
    rest of the test (tests/hubdown.py `hub_at`). A subprocess needs `HF_ENDPOINT` instead: huggingface_hub
    reads it at import."""
    from huggingface_hub import constants, file_download

    from tests.hubdown import hub_at

    hub_at(hub.endpoint, monkeypatch, request)
    # hf_hub_url builds from this template, fixed at import from the endpoint of the time, and swaps in an
    # `endpoint=` argument only if the URL starts with constants.ENDPOINT (HH/file_download.py:252-257)
    template = hub.endpoint + "/{repo_id}/resolve/{revision}/{filename}"
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", template)
    monkeypatch.setattr(file_download, "HUGGINGFACE_CO_URL_TEMPLATE", template)
    return hub
