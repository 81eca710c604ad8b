"""`neuronforge compare` and the promotion gate as a release manager runs them, on hand-made builds whose
smoke results carry a measurement (`tests.releases.measured`): the verdicts, the refusal of a regression
by a gated channel with its numbers, `--accept-regression` and what the history keeps of it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuronforge.artifacts import channels
from neuronforge.interfaces.cli import main
from neuronforge.stores import open_store
from tests.releases.builds import MODEL, publish
from tests.releases.measured import measured

STABLE = channels.ChannelRef.parse(MODEL, "cpu", "stable")
WHY = "batch 2 doubles throughput; per-token latency is the price"


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("NEURONFORGE_STORE", f"file://{tmp_path / 'store'}")
    for var in ("NEURONFORGE_REGRESSION_GATES", "NEURONFORGE_NUMERICS_TOLERANCE"):
        monkeypatch.delenv(var, raising=False)
    return open_store(f"file://{tmp_path / 'store'}")


def _approved(store, n: int, **smoke) -> str:
    key = publish(store, n, smoke=measured(**smoke))
    assert main(["approve", key[:12]]) == 0
    return key


def _serving(store, capsys: pytest.CaptureFixture, **smoke) -> str:
    """A build on stable whose per-token latency is 10 ms (2 % spread), unless `smoke` says otherwise."""
    key = _approved(store, 1, **smoke)
    assert main(["promote", MODEL, "--profile", "cpu", "--channel", "stable", "--build", key]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith("(new channel)")  # a first move compares nothing
    return key


def _record_bytes(store) -> bytes:
    return store.get_bytes(STABLE.record_key)


# -- compare ----------------------------------------------------------------------------------------------
def test_compare_calls_a_slowdown_beyond_noise_a_regression_and_within_noise_none(
    store, capsys: pytest.CaptureFixture
) -> None:
    base = publish(store, 1, smoke=measured(0.010, 0.02))
    slower = publish(store, 2, smoke=measured(0.012, 0.02))
    noisy = publish(store, 3, smoke=measured(0.0103, 0.05))
    capsys.readouterr()

    assert main(["compare", base[:12], slower[:12]]) == 3
    out = capsys.readouterr().out.splitlines()
    per_token = next(line for line in out if line.startswith("per output token"))
    assert "10.00 ms" in per_token and "12.00 ms" in per_token and "+20.0 %" in per_token
    assert per_token.endswith("worse  REGRESSION") and "±2.0 %" in per_token
    assert out[-1].startswith(f"{slower[:12]} against {base[:12]}: regression: per output token")

    assert main(["compare", base[:12], noisy[:12]]) == 0  # +3 % against a 5 % spread: noise
    out = capsys.readouterr().out.splitlines()
    assert next(line for line in out if line.startswith("per output token")).endswith("within noise")
    assert out[-1] == (
        f"{noisy[:12]} against {base[:12]}: no regression (no figure worse by more than 5 % beyond the noise; "
        "tokens equal and logits within 0.05)"
    )

    assert main(["compare", base, slower, "--json"]) == 3
    data = json.loads(capsys.readouterr().out)
    assert (data["base"], data["candidate"], data["verdict"]) == (base, slower, "regression")


def test_compare_of_builds_measured_on_other_hosts_says_what_would_make_it_possible(
    store, capsys: pytest.CaptureFixture
) -> None:
    base = publish(store, 1, smoke=measured(instance="inf2.xlarge", runtime="neuronx-runtime 2.29"))
    other = publish(store, 2, smoke=measured(0.02, instance="inf2.8xlarge", runtime="neuronx-runtime 2.29"))
    bare = publish(store, 3)  # published before the protocol: no measurement
    capsys.readouterr()
    assert main(["compare", base[:12], other[:12]]) == 0  # nothing judged, nothing refused
    said = capsys.readouterr().out.splitlines()[-1]
    assert said == (
        f"{other[:12]} against {base[:12]}: not comparable: base measured on inf2.xlarge with neuronx-runtime 2.29, "
        "candidate on inf2.8xlarge with neuronx-runtime 2.29: smoke the candidate on inf2.xlarge with neuronx-runtime "
        "2.29 (or compare builds measured on one instance type and runtime line)"
    )
    assert main(["compare", base[:12], bare[:12]]) == 0
    said = capsys.readouterr().out
    assert f"build {bare[:12]} has no measurement (published before the protocol): rebuild it" in said


def test_compare_with_what_a_channel_serves_and_its_usage_errors(store, capsys: pytest.CaptureFixture) -> None:
    serving = _serving(store, capsys)
    slower = publish(store, 2, smoke=measured(0.012))
    argv = ["compare", MODEL, "--profile", "cpu", "--channel", "stable", "--build", slower[:12]]
    assert main(argv) == 3
    assert capsys.readouterr().out.splitlines()[-1].startswith(f"{slower[:12]} against {serving[:12]}: regression")
    assert main(["compare", serving[:12]]) == 2
    assert main(["compare", serving[:12], slower[:12], "--build", slower[:12]]) == 2
    assert main(["compare", MODEL, "--channel", "stable", "--build", slower[:12]]) == 2
    assert main(["compare", "zzzzzz", slower[:12]]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("error: compare: give two builds (KEY_A KEY_B: the base, then the candidate)")
    assert err[2] == "error: compare --channel C: give the model, its --profile and the candidate's --build"
    assert err[3].startswith("error: 'zzzzzz' is not a cache key") and len(err) == 4


# -- the gate ---------------------------------------------------------------------------------------------
def test_a_regression_is_refused_by_stable_with_its_numbers_and_the_channel_is_unchanged(
    store, capsys: pytest.CaptureFixture
) -> None:
    serving = _serving(store, capsys)
    slower = _approved(store, 2, per_token=0.012)
    before = _record_bytes(store)
    capsys.readouterr()
    assert main(["promote", MODEL, "--profile", "cpu", "--channel", "stable", "--build", slower[:12]]) == 3
    out, err = capsys.readouterr()
    assert any(line.startswith("per output token") and line.endswith("REGRESSION") for line in out.splitlines())
    assert err == (
        "error: refused: channel stable is gated (no figure worse by more than 5 % beyond the noise; tokens equal "
        f"and logits within 0.05): {slower[:12]} against {serving[:12]}: regression: per output token, at the "
        "target's batch size +20.0 % (noise ±2.0 %); tokens per second, at the target's batch size +16.7 % (noise "
        f"±2.0 %); `neuronforge compare {MODEL} --profile cpu --channel stable --build {slower[:12]}` shows every "
        f"figure; `neuronforge promote {MODEL} --profile cpu --channel stable --build {slower[:12]} "
        "--accept-regression REASON` promotes it anyway, REASON (why) kept in the channel's history\n"
    )
    assert _record_bytes(store) == before


def test_accept_regression_moves_it_and_history_and_channels_show_the_reason_and_the_comparison(
    store, capsys: pytest.CaptureFixture
) -> None:
    serving = _serving(store, capsys)
    slower = _approved(store, 2, per_token=0.012)
    capsys.readouterr()
    argv = ["promote", MODEL, "--profile", "cpu", "--channel", "stable", "--build", slower[:12]]
    assert main([*argv, "--accept-regression", WHY, "--reason", "weekly release"]) == 0
    compared = f"{slower[:12]} against {serving[:12]}: regression: per output token"
    said = capsys.readouterr().out.splitlines()[-1]
    moved = f"{MODEL} · cpu · stable: promote to {slower[:12]} (was {serving[:12]})"
    assert said.startswith(f"{moved}; compared: {compared}")
    assert said.endswith(f"; regression accepted: {WHY}")
    move = channels.get(store, STABLE).current
    assert move.accepted_regression == WHY and move.comparison.startswith(compared) and move.reason == "weekly release"

    assert main(["history", MODEL, "--profile", "cpu", "--channel", "stable"]) == 0
    newest, first = capsys.readouterr().out.splitlines()
    assert f": weekly release; compared: {compared}" in newest and newest.endswith(f"; regression accepted: {WHY}")
    assert "compared" not in first  # the first move compared nothing
    assert main(["channels", MODEL]) == 0
    assert f"regression accepted: {WHY}" in capsys.readouterr().out
    assert main(["history", MODEL, "--profile", "cpu", "--channel", "stable", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["current"]["accepted_regression"] == WHY

    # A rollback goes back to what production ran: not compared, even though the older build is "faster".
    assert main(["rollback", MODEL, "--profile", "cpu", "--channel", "stable"]) == 0
    assert channels.get(store, STABLE).current.comparison == ""


def test_a_reason_to_accept_is_one_line_of_text(store, capsys: pytest.CaptureFixture) -> None:
    _serving(store, capsys)
    slower = _approved(store, 2, per_token=0.012)
    argv = ["promote", MODEL, "--profile", "cpu", "--channel", "stable", "--build", slower[:12], "--accept-regression"]
    for reason in ("  ", "two\nlines"):
        with pytest.raises(SystemExit) as refused:  # the parser's one text rule, before anything is read
            main([*argv, reason])
        assert refused.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("neuronforge promote: error: argument --accept-regression: '  ' is empty")
    assert err[1].startswith("neuronforge promote: error: argument --accept-regression: 'two\\nlines' holds a")
    assert len(err) == 2
    assert channels.get(store, STABLE).current.build.key != slower


def test_an_ungated_channel_takes_it_and_compares_nothing(store, capsys: pytest.CaptureFixture) -> None:
    fast, slower = _approved(store, 1), _approved(store, 2, per_token=0.012)
    for key in (fast, slower):
        assert main(["promote", MODEL, "--profile", "cpu", "--channel", "candidate", "--build", key]) == 0
    move = channels.get(store, STABLE.sibling("candidate")).current
    assert (move.build.key, move.comparison, move.accepted_regression) == (slower, "", "")


def test_numerics_that_differ_are_refused_as_a_regression_is(store, capsys: pytest.CaptureFixture) -> None:
    _serving(store, capsys)
    drifted = _approved(store, 2, logits=(9.3, 8.0, 7.0))
    capsys.readouterr()
    assert main(["promote", MODEL, "--profile", "cpu", "--channel", "stable", "--build", drifted[:12]]) == 3
    assert "numerics differ: numerics: logits differ by up to 0.3 (tolerance 0.05)" in capsys.readouterr().err


def test_a_comparison_that_is_not_possible_refuses_nothing_and_is_kept(store, capsys: pytest.CaptureFixture) -> None:
    serving = _serving(store, capsys, instance="inf2.xlarge")
    elsewhere = _approved(store, 2, per_token=0.05, instance="trn1.2xlarge")
    capsys.readouterr()
    assert main(["promote", MODEL, "--profile", "cpu", "--channel", "stable", "--build", elsewhere[:12]]) == 0
    (said,) = capsys.readouterr().out.splitlines()  # no table: the move's line says why not
    assert f"compared: {elsewhere[:12]} against {serving[:12]}: not comparable: base measured on inf2.xlarge" in said
    assert "smoke the candidate on inf2.xlarge" in channels.get(store, STABLE).current.comparison


def test_the_gates_come_from_the_settings(store, capsys: pytest.CaptureFixture, monkeypatch) -> None:
    _serving(store, capsys)
    slower = _approved(store, 2, per_token=0.012)
    argv = ["promote", MODEL, "--profile", "cpu", "--channel", "stable", "--build", slower[:12]]
    monkeypatch.setenv("NEURONFORGE_REGRESSION_GATES", "stable=x")
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        "error: NEURONFORGE_REGRESSION_GATES='stable=x' is not channel=percent pairs (0 to 1000) separated by commas, "
        "or - for none: unset it, or set e.g. stable=5\n"
    )
    monkeypatch.setenv("NEURONFORGE_REGRESSION_GATES", "stable=25,candidate=1")  # 20 % slower is within 25 %
    assert channels.gate("candidate").slower_pct == 1.0 and channels.gate("nightly") is None
    capsys.readouterr()
    assert main(["config"]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("NEURONFORGE_REGRESSION_GATES")]
    assert line.split()[1:] == ["candidate=1,stable=25", "env", "NEURONFORGE_REGRESSION_GATES"]
    assert main(argv) == 0
    move = channels.get(store, STABLE).current
    assert move.build.key == slower and "no regression (no figure worse by more than 25 %" in move.comparison


def test_no_gate_at_all(store, capsys: pytest.CaptureFixture, monkeypatch) -> None:
    _serving(store, capsys)
    monkeypatch.setenv("NEURONFORGE_REGRESSION_GATES", "-")
    slower = _approved(store, 2, per_token=0.02)
    assert main(["promote", MODEL, "--profile", "cpu", "--channel", "stable", "--build", slower[:12]]) == 0
    assert channels.get(store, STABLE).current.comparison == ""
