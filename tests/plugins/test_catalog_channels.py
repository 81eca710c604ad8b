"""The catalog's release channels, routes in this process (FastAPI's test client, Airflow's `get_user`
overridden) over a store moved and reviewed by the real `farm.releases.run` (tests/plugins/release_store.py):
the rows show each build's channels and review state from the farm index (no request per row), a
rejected build a channel points to is said in words; a build's page shows its channels and its
decisions; a model's channels page its channels, their builds, state and last moves from one listing of
that model's folder; every button leads to a confirmation that names the change (before -> after) and
whose request, run by the release DAG's `run`, makes exactly that change; and hostile text in channel
and review records stays text."""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any
from urllib.parse import urlencode

import pytest

from neuronforge.artifacts import channels, reviews
from neuronforge.artifacts.farm_index import read_damage
from neuronforge.farm.releases import ReleaseRequest, run
from neuronforge.stores import open_store
from tests.plugins.conftest import read_from
from tests.plugins.release_store import IMG, JS, MODEL, ODD_MODEL, SCRIPT, TEMPLATE, Releases, seed
from tests.plugins.test_catalog_pages import Counting, _error

STABLE = f"{MODEL} · cpu · stable"
CANDIDATE = f"{MODEL} · cpu · candidate"


class Listing(Counting):
    """A counting store that also records the prefixes it lists."""

    def __init__(self, store: Any) -> None:
        super().__init__(store)
        self.listed: list[str] = []

    def __getattr__(self, name: str) -> Any:
        found = super().__getattr__(name)
        if name != "list":
            return found

        def listing(prefix: str, *args: Any, **kwargs: Any) -> Any:
            self.listed.append(prefix)
            return found(prefix, *args, **kwargs)

        return listing


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Releases]:
    root = tmp_path_factory.mktemp("channels") / "store"
    return root, seed(open_store(f"file://{root}"), tmp_path_factory.mktemp("channels-work"))


@pytest.fixture
def keys(seeded: tuple[Path, Releases]) -> Releases:
    return seeded[1]


def _client(plugin: ModuleType, root: Path, monkeypatch: pytest.MonkeyPatch):
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    store = Listing(open_store(f"file://{root}", must_exist=True))
    read_from(plugin, lambda: store)
    plugin.app.dependency_overrides[get_user] = lambda: None
    client = TestClient(plugin.app)
    client.store = store
    return client


@pytest.fixture
def client(plugin: ModuleType, seeded: tuple[Path, Releases], monkeypatch: pytest.MonkeyPatch):
    """The seeded store, read only."""
    yield _client(plugin, seeded[0], monkeypatch)
    plugin.app.dependency_overrides.clear()


@pytest.fixture
def mutable(plugin: ModuleType, seeded: tuple[Path, Releases], monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """A copy of the seeded store that a test may move channels in."""
    root = tmp_path / "store"
    shutil.copytree(seeded[0], root)
    yield _client(plugin, root, monkeypatch)
    plugin.app.dependency_overrides.clear()


def _get(client: Any, url: str) -> str:
    client.store.requests, client.store.listed[:] = 0, []
    response = client.get(url)
    assert response.status_code == 200, response.text
    return response.text


def _text(page: str, element_id: str) -> str:
    """The text of the element with `element_id` (tags dropped, entities read)."""
    found = re.search(rf'<(\w+)[^>]* id="{element_id}"[^>]*>(.*?)</\1>', page, re.S)
    assert found is not None, f"no #{element_id} in the page"
    return html.unescape(re.sub(r"<[^>]+>", "", found[2]))


def _row(page: str, key: str) -> str:
    found = re.search(rf'<tr id="artifact-{key[:12]}".*?</tr>', page, re.S)
    assert found is not None
    return html.unescape(re.sub(r"<[^>]+>", " ", found[0]))


def _links(page: str) -> dict[str, str]:
    """The page's action buttons: label -> href (relative to the app)."""
    found = re.findall(r'<a class="action[^"]*" href="([^"]+)">([^<]+)</a>', page)
    return {html.unescape(label): html.unescape(href).removeprefix("/neuronforge") for href, label in found}


def _conf(page: str) -> dict[str, Any]:
    found = re.search(r'<pre class="snippet" id="conf">(.*?)</pre>', page, re.S)
    assert found is not None, "no request to copy on the page"
    conf = json.loads(html.unescape(found[1]))
    trigger = re.search(r'<a id="trigger" class="[^"]*" href="([^"]+)" target="_top" data-copy="([^"]*)"', page)
    assert trigger is not None and trigger[1] == "/dags/neuronforge_release"
    assert json.loads(html.unescape(trigger[2])) == conf  # the button copies what the page shows
    return conf


# -- the rows ---------------------------------------------------------------------------------------
def test_rows_show_channels_and_review_from_the_index(client, keys: Releases) -> None:
    page = _get(client, f"/?{urlencode({'model': MODEL})}")
    assert client.store.requests == 3  # head, tail, the one page: no request per row for channels
    a, b, c = _row(page, keys.a), _row(page, keys.b), _row(page, keys.c)
    assert "stable" in a and "rejected" in a
    assert "REJECTED (wrong tokenizer), still on stable: roll back or promote another build" in a
    assert "candidate" in b and "pending" in b and "REJECTED" not in b
    assert "pending" in c and "stable" not in c and "candidate" not in c
    # the matrix says it too, and each model links to its channels
    cell = re.search(rf'href="/neuronforge/artifacts/{keys.a}">published</a>.*?</div>', page, re.S)
    assert cell is not None and "REJECTED (wrong tokenizer), still on stable" in html.unescape(cell[0])
    assert f'href="/neuronforge/channels?{html.escape(urlencode({"model": MODEL}))}">channels</a>' in page
    answer = client.get(f"/api/artifacts?{urlencode({'model': MODEL})}").json()
    by_key = {r["key"]: r for r in answer["rows"]}
    assert by_key[keys.a]["channels"] == ["stable"] and by_key[keys.a]["review"] == "rejected"
    assert by_key[keys.a]["review_reason"] == "wrong tokenizer" and by_key[keys.c]["review"] == "pending"


# -- a build's page ---------------------------------------------------------------------------------
def test_a_builds_page_shows_its_channels_review_and_buttons(client, keys: Releases) -> None:
    page = _get(client, f"/artifacts/{keys.a[:12]}")
    release = _text(page, "release")
    assert STABLE in release and CANDIDATE not in release.split("review:")[0]
    assert "⚠ REJECTED, still on stable" in release
    assert "review: rejected by dave at " in release and ": wrong tokenizer" in release
    assert re.search(r"approved by bob at \S+: smoke and evals ok", release)  # the earlier decision
    assert _links(page) == {
        "approve": f"/release?action=approve&build={keys.a}",
        f"promote to candidate (now {keys.b[:12]})": (
            f"/release?action=promote&model=org%2Fchan-model&profile=cpu&channel=candidate&build={keys.a}"
        ),
        "roll candidate back to this build": (
            f"/release?action=rollback&model=org%2Fchan-model&profile=cpu&channel=candidate&build={keys.a}"
        ),
    }
    # its model's channels: one listing of that model's folder
    assert client.store.listed.count("channels/org/chan-model") == 1
    assert not [p for p in client.store.listed if p.startswith("channels") and p != "channels/org/chan-model"]
    page = _get(client, f"/artifacts/{keys.c[:12]}")
    assert "none point to this build" in _text(page, "release") and "REJECTED" not in page
    assert set(_links(page)) == {
        "approve",
        "reject",
        f"promote to candidate (now {keys.b[:12]})",
        f"promote to stable (now {keys.a[:12]})",
    }


# -- a model's channels -----------------------------------------------------------------------------
def test_a_models_channels_page(client, keys: Releases) -> None:
    page = _get(client, f"/channels?{urlencode({'model': MODEL})}")
    folders = [json.loads(client.store._store.get_bytes(f"index/{k}.json"))["prefix"] for k in (keys.b, keys.a)]
    # one listing of the model's folder, then per channel (candidate, stable) one of its build's folder
    assert client.store.listed == ["channels/org/chan-model", *folders]
    # the listing, the two records, their builds' reviews; per channel its build's damage record, index
    # entry, manifest and folder listing (`channels.pointer`): a few reads per channel shown, never a scan;
    # the speed charts: the farm index's head, tail and the page holding the model's rows
    assert client.store.requests == 1 + 2 + 2 + 2 * 4 + 3
    stable, candidate = _text(page, "channel-cpu-stable"), _text(page, "channel-cpu-candidate")
    assert "build ok" in stable and "build ok" in candidate and 'id="channel-cpu-stable-pointer"' not in page
    assert f"points to {keys.a[:12]}" in stable and "review rejected by dave" in stable
    assert "⚠ REJECTED by dave at " in stable and "wrong tokenizer. This channel still points to it" in stable
    assert "requires approval" in stable and "no approval required" in candidate
    assert f"points to {keys.b[:12]}" in candidate and "review pending" in candidate and "REJECTED" not in candidate
    # the last moves: who, when, which build, what it was, why
    section = re.search(r'<section class="channel" id="channel-cpu-candidate">.*?</section>', page, re.S)
    assert section is not None
    moves = re.findall(r'<tr class="move[^"]*">(.*?)</tr>', section[0], re.S)
    cells = [[html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<td>(.*?)</td>", m, re.S)] for m in moves]
    assert [c[1:6] for c in cells] == [
        ["alice@ci", "promote (now)", keys.b[:12], keys.a[:12], "rebuilt for SDK 2.21"],
        ["alice@ci", "promote", keys.a[:12], "—", "first build"],
    ]
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", c[0]) for c in cells)
    links = _links(page)
    line = "model=org%2Fchan-model&profile=cpu"
    assert links[f"roll back to {keys.a[:12]}"] == f"/release?action=rollback&{line}&channel=candidate&build={keys.a}"
    assert links[f"promote candidate's {keys.b[:12]} here"] == (
        f"/release?action=promote&{line}&channel=stable&build={keys.b}&reason=from+candidate"
    )
    assert links[f"approve {keys.a[:12]}"] == f"/release?action=approve&build={keys.a}"
    assert f"reject {keys.b[:12]}" in links and f"reject {keys.a[:12]}" not in links  # already rejected
    page = _get(client, "/channels?model=org/no-channels")
    assert "no channel of this model yet" in page


def test_a_channel_whose_build_became_damaged_or_unreadable_is_flagged(mutable, keys: Releases) -> None:
    store = mutable.store._store
    manifest = json.loads(store.get_bytes(f"index/{keys.a}.json"))["manifest"]
    store.delete_prefix(manifest)  # stable's build: its manifest gone
    store.delete_prefix(f"index/{keys.b}.json")  # candidate's: no longer published
    page = _get(mutable, f"/channels?{urlencode({'model': MODEL})}")
    stable, candidate = _text(page, "channel-cpu-stable"), _text(page, "channel-cpu-candidate")
    assert "build damaged" in stable and "build unreadable" in candidate
    found = read_damage(store, keys.a)
    assert found is not None and found.by == "catalog"  # found here, recorded for every listing
    assert _text(page, "channel-cpu-stable-pointer") == (
        f"⚠ DAMAGED (manifest gone: {manifest}; found by catalog at {found.at}): rebuild it, or roll back or "
        "promote another build."
    )
    assert _text(page, "channel-cpu-candidate-pointer") == (
        f"⚠ UNREADABLE (build {keys.b[:12]} is not published in {store.root_uri} (no index entry)): a move onto it "
        "would be refused now; roll back or promote another build."
    )


def test_a_confirmation_on_a_channel_record_that_is_no_record_is_one_sentence(mutable, keys: Releases) -> None:
    store = mutable.store._store
    record = channels.ChannelRef.parse(MODEL, "cpu", "candidate").record_key
    store.put_bytes(b"[]", record)
    response = mutable.get(f"/release?action=rollback&model={MODEL}&profile=cpu&channel=candidate")
    assert response.status_code == 503
    assert _error(response.text) == (
        "the store/" + record + " is not a release channel record (not a release channel (a JSON object was "
        "expected, found list)): move it away, or restore the channel's record from a copy; a promote then starts "
        "the channel afresh."
    )


def test_a_channel_record_that_is_no_record_costs_its_own_row_not_the_page(mutable, keys: Releases) -> None:
    """One damaged record among a model's channels is said in its place; the others still show, with
    their buttons, and so does the build page's release section."""
    store = mutable.store._store
    record = channels.ChannelRef.parse(MODEL, "cpu", "candidate").record_key
    store.put_bytes(b"[]", record)
    page = _get(mutable, f"/channels?{urlencode({'model': MODEL})}")
    assert "channel-cpu-stable" in page and "channel-cpu-candidate" not in page
    (said,) = re.findall(r'<p class="loud damaged-record" role="alert">(.*?)</p>', page, re.S)
    assert html.unescape(said) == (
        "⚠ the store/" + record + " is not a release channel record (not a release channel (a JSON object was "
        "expected, found list)): move it away, or restore the channel's record from a copy; a promote then "
        "starts the channel afresh."
    )
    build = _get(mutable, f"/artifacts/{keys.a}")
    assert "not every channel of the model can be shown: the store/" + record in html.unescape(build)


# -- confirmations ----------------------------------------------------------------------------------
def _follow(client: Any, page: str, label: str) -> str:
    return _get(client, _links(page)[label])


def test_a_promotion_names_the_change_and_its_request_makes_it(mutable, keys: Releases) -> None:
    store = mutable.store._store
    page = _follow(mutable, _get(mutable, f"/channels?model={MODEL}"), f"promote candidate's {keys.b[:12]} here")
    assert _text(page, "describe") == f"point {STABLE} at build {keys.b[:12]}."
    assert _text(page, "before").startswith(keys.a[:12]) and "promote by carol at" in _text(page, "before")
    assert _text(page, "after") == f"→ {keys.b[:12]}"
    # stable takes approved builds only: not offered, and said why
    assert "requires an approved build and " + keys.b[:12] + " is pending" in _text(page, "refused")
    assert 'id="trigger"' not in page
    run(store, ReleaseRequest(action="approve", build=keys.b), by="erin")
    page = _follow(mutable, _get(mutable, f"/channels?model={MODEL}"), f"promote candidate's {keys.b[:12]} here")
    conf = _conf(page)
    assert conf == {
        "action": "promote",
        "model": MODEL,
        "profile": "cpu",
        "channel": "stable",
        "build": keys.b,
        "from_channel": "",
        "steps": 1,
        "reason": "from candidate",
        "accept_regression": "",  # the release request's field: a gated promote's reason to take a regression
    }
    # what the release DAG does with that conf: exactly the change the page named
    outcome = run(store, ReleaseRequest.from_json(conf), by="erin")
    assert (outcome.previous, outcome.key) == (keys.a, keys.b) and outcome.changed
    assert channels.pointing_to(store, keys.b) == [CANDIDATE, STABLE]


def test_a_link_with_the_old_name_of_a_rollbacks_build_confirms_the_same_request(mutable, keys: Releases) -> None:
    """A bookmark made before a rollback's build was `build` (`&to=KEY`) asks the same as `&build=KEY`."""
    candidate = {"model": MODEL, "profile": "cpu", "channel": "candidate"}
    run(mutable.store._store, ReleaseRequest(action="promote", **candidate, build=keys.c), by="x")
    line = f"action=rollback&model={MODEL}&profile=cpu&channel=candidate"
    old = _conf(_get(mutable, f"/release?{line}&to={keys.b}"))
    assert old == _conf(_get(mutable, f"/release?{line}&build={keys.b}")) and old["build"] == keys.b
    assert "to" not in old


def test_a_request_by_channel_or_steps_is_pinned_to_the_build_it_names(mutable, keys: Releases) -> None:
    """A promote `--from` and a rollback by steps resolve when the run starts: the confirmation's
    request names the key the page showed, so a move in between cannot change what it does."""
    store = mutable.store._store
    page = _get(mutable, f"/release?action=promote&model={MODEL}&profile=cpu&channel=beta&from_channel=candidate")
    assert _text(page, "before").startswith("nothing (a new channel)") and _text(page, "after") == f"→ {keys.b[:12]}"
    beta = _conf(page)
    assert (beta["build"], beta["from_channel"]) == (keys.b, "")
    page = _get(mutable, f"/release?action=rollback&model={MODEL}&profile=cpu&channel=candidate&steps=1")
    assert _text(page, "describe") == f"point {CANDIDATE} back at build {keys.a[:12]}."
    assert f"build {keys.a[:12]} is rejected" in _text(page, "refused")  # where it would go back to: not offered
    candidate = {"model": MODEL, "profile": "cpu", "channel": "candidate"}
    run(store, ReleaseRequest(action="promote", **candidate, build=keys.c), by="x")
    page = _get(mutable, f"/release?action=rollback&model={MODEL}&profile=cpu&channel=candidate&steps=1&reason=bad")
    back = _conf(page)
    assert (back["build"], back["steps"], back["reason"]) == (keys.b, 1, "bad")
    assert _text(page, "before").startswith(keys.c[:12]) and _text(page, "after") == f"→ {keys.b[:12]}"
    # Someone else rolls candidate back first: one step back is now c again, the request still says b.
    run(store, ReleaseRequest(action="rollback", **candidate, steps=1), by="someone else")
    outcome = run(store, ReleaseRequest.from_json(back))
    assert (outcome.key, outcome.changed) == (keys.b, False)
    # and beta gets what candidate pointed to when its confirmation was shown
    run(store, ReleaseRequest(action="promote", **candidate, build=keys.c), by="x")
    assert run(store, ReleaseRequest.from_json(beta)).key == keys.b


def test_a_rejection_asks_its_reason_and_warns_of_the_channels_on_it(mutable, keys: Releases) -> None:
    page = _follow(mutable, _get(mutable, f"/channels?model={MODEL}"), f"reject {keys.b[:12]}")
    assert _text(page, "before") == "pending" and _text(page, "after") == "→ rejected"
    assert "a rejection needs its reason" in _text(page, "refused") and 'id="trigger"' not in page
    assert '<input name="reason" value="" maxlength="500" size="60" required>' in page
    form = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', page))
    assert form == {"action": "reject", "build": keys.b, "steps": "1"}
    page = _get(mutable, f"/release?{urlencode({**form, 'reason': 'crashes on long prompts'})}")
    assert _text(page, "describe") == f"mark build {keys.b[:12]} rejected (crashes on long prompts)."
    assert f"⚠ {CANDIDATE} still point(s) to {keys.b[:12]}: rejecting moves no channel" in page
    conf = _conf(page)
    run(mutable.store._store, ReleaseRequest.from_json(conf), by="frank")
    assert reviews.state_of(mutable.store._store, keys.b) == "rejected"


def test_the_reason_field_takes_what_a_request_takes(plugin: ModuleType) -> None:
    from neuronforge.common.one_line import MAX_CHARS as REASON_MAX

    assert plugin.pages.params.REASON_LIMIT == REASON_MAX


def test_nothing_to_change_is_not_offered(client, keys: Releases) -> None:
    page = _get(client, f"/release?action=promote&model={MODEL}&profile=cpu&channel=stable&build={keys.a[:12]}")
    assert f"{STABLE} already points to {keys.a[:12]}: nothing would change" in _text(page, "refused")
    page = _get(client, f"/release?action=approve&build={keys.c}")
    assert _conf(page)["build"] == keys.c and _text(page, "after") == "→ approved"


@pytest.mark.parametrize(
    ("query", "sentence"),
    [
        ({}, "give the action: promote, rollback, approve or reject."),
        ({"action": "delete"}, "release action 'delete': one of promote, rollback, approve, reject."),
        (
            {"action": "promote", "model": MODEL, "profile": "cpu", "channel": "Stable!", "build": "ab" * 6},
            "channel 'Stable!': use lower-case letters, digits, '.', '_' and '-' (at most 63), e.g. stable.",
        ),
        (
            {"action": "promote", "model": MODEL, "channel": "x"},
            "promote: give the model, the serving profile and the channel.",
        ),
        (
            {"action": "promote", "model": MODEL, "profile": "cpu", "channel": "x", "build": "0" * 12},
            "no artifact in the store has a cache key starting with 000000000000 (`neuronforge ls` lists them).",
        ),
        (
            {"action": "rollback", "model": MODEL, "profile": "cpu", "channel": "stable"},
            f"{STABLE} has pointed at no other build (…): there is nothing to roll back to; promote another build: "
            f"`neuronforge promote {MODEL} --profile cpu --channel stable --build KEY` (KEY: a build "
            f"`neuronforge ls --model {MODEL} --profile cpu` lists).",
        ),
        (
            {"action": "rollback", "model": MODEL, "profile": "cpu", "channel": "nope"},
            f"no channel {MODEL} · cpu · nope in the store: nothing to roll back.",
        ),
        (
            {"action": "approve", "build": JS},
            f"{JS.lower()!r} is not a cache key: give its hex digits (`neuronforge ls` prints the first 12).",
        ),
        (
            {"action": "approve", "steps": "two", "build": "ab" * 6},
            "release request: steps 'two' is not a whole number.",
        ),
        (
            {"action": "reject", "build": "ab" * 6, "reason": "r" * 501},
            "reason is 501 characters long; give at most 500.",
        ),
        (
            {"action": "approve", "build": "ab" * 6, "reason": "two\nlines"},
            "reason 'two\\nlines' holds a line break or control character; give one line of text.",
        ),
    ],
)
def test_a_bad_request_is_one_sentence(client, query: dict[str, str], sentence: str) -> None:
    response = client.get(f"/release?{urlencode(query)}")
    pattern = ".*".join(re.escape(part) for part in sentence.split("…"))  # `…`: the part that names a key
    assert response.status_code == 400 and re.fullmatch(pattern, _error(response.text)), _error(response.text)


@pytest.mark.parametrize(
    ("url", "sentence"),
    [
        (
            "/channels",
            "give the model: channels?model=org/name (the catalog's matrix links each model to it).",
        ),
        ("/channels?model=org/name@main", None),
        ("/channels?model=" + "m" * 300, "model is 300 characters long; give at most 256."),
    ],
)
def test_a_bad_model_is_one_sentence(client, url: str, sentence: str | None) -> None:
    response = client.get(url)
    if sentence is None:  # a revision: the channels of the model (they span its revisions)
        assert response.status_code == 200 and "<title>org/name · channels" in response.text
    else:
        assert response.status_code == 400 and _error(response.text) == sentence


# -- hostile records --------------------------------------------------------------------------------
MARKUP = ("<script>", "<img src=x", 'onerror="')


def _clean(page: str) -> None:
    """Nothing of the hostile text became markup or a link; each is on the page as escaped text."""
    assert not any(m in page for m in MARKUP), [m for m in MARKUP if m in page]
    assert 'href="javascript:' not in page.replace("&#34;", '"') and "tpl49end" not in page


def test_hostile_text_in_channel_and_review_records_stays_text(client, keys: Releases) -> None:
    page = _get(client, f"/channels?{urlencode({'model': ODD_MODEL})}")
    _clean(page)
    section = _text(page, "channel-cpu-stable")
    for text in (SCRIPT, IMG, TEMPLATE, f"by {IMG} at {TEMPLATE}: {SCRIPT}"):  # move, build, review
        assert text in section, text
    assert JS in html.unescape(page)  # the forged URI and key: text, not links
    assert "REJECTED by" in section
    page = _get(client, f"/artifacts/{keys.hostile}")
    _clean(page)
    assert f"rejected by {IMG} at {TEMPLATE}: {SCRIPT}" in _text(page, "release")
    page = _get(client, "/?model=org/hostile-model")
    _clean(page)
    row = _row(page, keys.hostile)
    assert SCRIPT in row and IMG in row and f"REJECTED ({SCRIPT}), still on {IMG}, {SCRIPT}" in row
    odd = _row(page, keys.odd_state)
    assert "pending" in odd and SCRIPT not in odd  # a state that is none of the three is no state
    answer = client.get("/api/artifacts?model=org/hostile-model").json()
    assert {r["key"]: r["review"] for r in answer["rows"]}[keys.odd_state] == "pending"


def test_hostile_text_in_a_confirmation_stays_text(client, keys: Releases) -> None:
    query = {"action": "approve", "build": keys.hostile, "reason": SCRIPT + IMG + TEMPLATE}
    page = _get(client, f"/release?{urlencode(query)}")
    _clean(page)
    assert _conf(page)["reason"] == SCRIPT + IMG + TEMPLATE  # copied exactly
    page = client.get(f"/release?{urlencode({'action': SCRIPT})}").text
    _clean(page)
    page = client.get(f"/channels?{urlencode({'model': SCRIPT})}").text
    _clean(page)


def test_the_release_templates_escape_a_hostile_string_in_every_slot(plugin: ModuleType) -> None:
    """Every text a channel or review record holds (a forged record may hold markup in its model,
    line and channel too), and every string of a confirmation, rendered as text in every slot."""
    from markupsafe import escape

    from neuronforge.interfaces.latency_chart import target_charts
    from neuronforge.records.channel import ChannelBuild, ChannelMove, ChannelRecord
    from neuronforge.records.review import ReviewDecision, ReviewRecord
    from tests.plugins.test_catalog_security import HOSTILE, _assert_inert, _hostile_row

    figure = {"median": 0.01, "p10": 0.009, "p90": 0.011}
    measured = {
        "synthetic": True,
        "instance_type": HOSTILE,
        "runtime_line": HOSTILE,
        "figures": {"per_token_s": figure},
    }

    def move(key: str) -> ChannelMove:
        build = ChannelBuild(
            key=key,
            artifact_prefix=HOSTILE,
            artifact_uri=HOSTILE,
            manifest=HOSTILE,
            manifest_sha256=HOSTILE,
            target=HOSTILE,
            profile=HOSTILE,
            smoke={"host": HOSTILE},
            toolchain={"compiler_version": HOSTILE},
            published_at=HOSTILE,
        )
        return ChannelMove(
            action="promote",
            build=build,
            previous=HOSTILE,
            by=HOSTILE,
            at=HOSTILE,
            reason=HOSTILE,
            comparison=HOSTILE,  # what the regression gate compared, and the reason it was accepted
            accepted_regression=HOSTILE,
        )

    record = ChannelRecord(
        model=HOSTILE, profile_line=HOSTILE, channel=HOSTILE, current=move(HOSTILE), history=[move(HOSTILE + "2")]
    )
    sibling = record.model_copy(update={"channel": HOSTILE + "3", "current": move(HOSTILE + "3")})
    decision = ReviewDecision(state="rejected", by=HOSTILE, at=HOSTILE, reason=HOSTILE)
    review = ReviewRecord(key=HOSTILE, current=decision, history=[decision])
    view = plugin.pages.channels._channel_view(record, "rejected", review, [record, sibling])
    assert len(view["actions"]) == 2 and view["history"][0]["rollback"]  # every button rendered below
    page = plugin.pages.render.render_page(
        "channels.html.j2",
        title=HOSTILE,
        store_uri=HOSTILE,
        model=HOSTILE,
        catalog_href=HOSTILE,
        channels=[view],
        damaged=[HOSTILE],  # a record that is not a channel's: its sentence names what the store holds
        charts=target_charts([_hostile_row(at="1", measured=measured), _hostile_row(at="2")], {HOSTILE: [HOSTILE]}),
        charts_note=HOSTILE,
    )
    _assert_inert(page)
    assert page.count(str(escape(HOSTILE))) >= 40
    release = plugin.pages.artifact._artifact_release_view(
        HOSTILE, HOSTILE, HOSTILE, HOSTILE, review, [record, sibling], HOSTILE
    )
    assert release["pointing"] == [f"{HOSTILE} · {HOSTILE} · {HOSTILE}"]
    assert len(release["actions"]) == 3  # approve, reject, promote to the channel not on it
    detail = plugin.pages.render.render_page(
        "artifact.html.j2",
        title=HOSTILE,
        store_uri=HOSTILE,
        a=plugin.pages.artifact._detail_view(SimpleNamespace(**{**vars(_hostile_row()), "key": HOSTILE}), None, {}),
        release={**release, "loud": HOSTILE},
    )
    _assert_inert(detail)
    assert detail.count(str(escape(HOSTILE))) >= 15
    plan = {
        "describe": HOSTILE,
        "change": dict.fromkeys(("what", "before", "after", "since"), HOSTILE)
        | {"before_href": plugin.pages.render.artifact_href(HOSTILE), "after_href": HOSTILE},
        "warnings": [HOSTILE],
        "refused": "",
        "comparison": {
            "channel": HOSTILE,
            "base": HOSTILE,
            "verdict": HOSTILE,
            "css": "verdict-bad",
            "summary": HOSTILE,
            "rows": [{"title": HOSTILE, "cells": [HOSTILE] * 4, "verdict": HOSTILE, "regression": True}],
            "numerics": HOSTILE,
            "gated": True,
            "refuses": True,
        },
        "conf": json.dumps({"reason": HOSTILE}),
        "request": {"reason": HOSTILE},
    }
    confirm = plugin.pages.render.render_page(
        "release.html.j2",
        title=HOSTILE,
        store_uri=HOSTILE,
        action=HOSTILE,
        plan=plan,
        dag=HOSTILE,
        trigger_href="/dags/x",
        hidden=[(HOSTILE, HOSTILE)],
        reason=HOSTILE,
        reason_limit=1,
    )
    _assert_inert(confirm)
    assert confirm.count(str(escape(HOSTILE))) >= 20
