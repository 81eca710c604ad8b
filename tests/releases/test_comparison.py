"""`artifacts.comparison`: the noise rule, the regression threshold, comparability and numerics."""

from __future__ import annotations

from neuronforge.artifacts.comparison import RegressionPolicy, compare
from neuronforge.records.smoke import PER_TOKEN, TOKENS_PER_S, SmokeRecord
from tests.releases.measured import smoke


def test_a_slowdown_beyond_threshold_and_noise_is_a_regression() -> None:
    c = compare(smoke(0.010), smoke(0.012), base_key="a" * 64, candidate_key="b" * 64)
    per = next(f for f in c.figures if f.name == PER_TOKEN)
    assert (per.verdict, per.regression, round(per.change, 3)) == ("worse", True, 0.2)
    tps = next(f for f in c.figures if f.name == TOKENS_PER_S)
    assert tps.regression and tps.change > 0  # fewer tokens per second is worse
    assert c.verdict == "regression" and c.refuses and "+20.0 %" in c.summary()
    assert any("REGRESSION" in line for line in c.lines())


def test_a_change_within_either_sides_spread_is_noise_not_a_regression() -> None:
    c = compare(smoke(0.010, 0.05), smoke(0.0103, 0.02), base_key="a" * 64, candidate_key="b" * 64)
    per = next(f for f in c.figures if f.name == PER_TOKEN)
    assert per.verdict == "within noise" and not per.regression and c.verdict == "no regression"


def test_a_slowdown_under_the_threshold_is_shown_not_refused() -> None:
    c = compare(smoke(0.010, 0.01), smoke(0.0104, 0.01), base_key="a" * 64, candidate_key="b" * 64)
    assert next(f for f in c.figures if f.name == PER_TOKEN).verdict == "worse" and c.verdict == "no regression"
    strict = RegressionPolicy(slower_pct=2.0)
    assert compare(smoke(0.010, 0.01), smoke(0.0104, 0.01), base_key="a", candidate_key="b", policy=strict).refuses


def test_the_cold_load_is_shown_never_judged() -> None:
    c = compare(smoke(), smoke(), base_key="a", candidate_key="b")
    load = next(f for f in c.figures if f.name == "load_s")
    assert load.verdict == "not judged" and load.noise is None and not load.regression


def test_other_hosts_or_a_missing_measurement_are_not_comparable_and_say_what_would_be() -> None:
    c = compare(smoke(instance="inf2.xlarge"), smoke(instance="inf2.8xlarge"), base_key="a", candidate_key="b")
    assert c.verdict == "not comparable" and not c.refuses and "smoke the candidate on inf2.xlarge" in c.why_not
    c = compare(smoke(synthetic=True), smoke(), base_key="a", candidate_key="b")
    assert "synthetic" in c.why_not
    c = compare(SmokeRecord(passed=True), smoke(), base_key="a" * 64, candidate_key="b")
    assert "build aaaaaaaaaaaa has no measurement" in c.why_not


def test_numerics_differ_on_a_token_or_a_logit_beyond_tolerance() -> None:
    same = compare(smoke(), smoke(logits=(9.01, 8.0, 7.0)), base_key="a", candidate_key="b")
    assert not same.numerics.differ and same.numerics.token_agreement == 1.0
    assert round(same.numerics.max_logit_diff, 4) == 0.01
    drift = compare(smoke(), smoke(logits=(9.2, 8.0, 7.0)), base_key="a", candidate_key="b")
    assert drift.verdict == "numerics differ" and "logits differ by up to 0.2" in drift.numerics.reason
    token = compare(smoke(), smoke(tokens=(5, 6, 9)), base_key="a", candidate_key="b")
    assert token.numerics.differ and "1 of 3 tokens disagree" in token.numerics.reason


def test_the_json_holds_what_the_text_shows() -> None:
    data = compare(smoke(0.010), smoke(0.012), base_key="a", candidate_key="b").to_json()
    assert data["verdict"] == "regression" and data["figures"][0]["base"]["samples"] == 1
    assert {f["name"] for f in data["figures"] if f["regression"]} == {PER_TOKEN, TOKENS_PER_S}


def test_builds_that_do_not_compare_print_only_why_not_no_empty_table() -> None:
    c = compare(smoke(instance="inf2.xlarge"), smoke(instance="inf2.8xlarge"), base_key="a", candidate_key="b")
    assert c.lines() == [c.summary()] and "not comparable" in c.summary()
