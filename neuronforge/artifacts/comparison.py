"""Two builds' smoke results compared: speed figure by figure against the noise of each measurement,
and numerics token by token — what `neuronforge compare`, the promotion gate, the release DAG, the
upgrade report and the catalog's confirmation page all show, from this one function.

The rules (docs/releasing.md, "Comparing builds"):
- Two measurements compare only when taken by one protocol on comparable hosts: the same instance
  type and the same runtime line, both real or both synthetic. Otherwise the comparison says why not
  and what would make it possible, and judges nothing.
- A figure's change is relative to the base (the build the channel serves): positive is worse (slower,
  or fewer tokens per second). It is *beyond the noise* when larger than either side's spread
  ((p90 - p10) / median): a 3 % change is no regression when either side varies by 5 %.
- A regression is a gated figure (`RegressionPolicy.figures`) worse by more than the policy's
  threshold **and** beyond the noise. A figure with fewer than 3 samples (the cold load) has no noise
  estimate: it is shown, never judged.
- Numerics differ when, for a prompt both builds ran, a generated token disagrees or a logit of a
  token both kept differs by more than the tolerance (before the first disagreement).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from neuronforge.records.smoke import (
    FIGURE_TITLES,
    FIGURES,
    HIGHER_IS_BETTER,
    LOAD,
    Figure,
    Measurement,
    Numerics,
    SmokeRecord,
)

DEFAULT_SLOWER_PCT = 5.0
DEFAULT_LOGIT_TOLERANCE = 0.05
GATED: tuple[str, ...] = tuple(f for f in FIGURES if f != LOAD)  # one cold load per smoke: no noise estimate

Verdict = Literal["regression", "numerics differ", "no regression", "not comparable"]


@dataclass(frozen=True)
class RegressionPolicy:
    """What a channel refuses: a gated figure worse by more than `slower_pct` % beyond the noise, or
    numerics beyond `logit_tolerance` (or a token that disagrees)."""

    slower_pct: float = DEFAULT_SLOWER_PCT
    logit_tolerance: float = DEFAULT_LOGIT_TOLERANCE
    figures: tuple[str, ...] = GATED

    def describe(self) -> str:
        return (
            f"no figure worse by more than {self.slower_pct:g} % beyond the noise; "
            f"tokens equal and logits within {self.logit_tolerance:g}"
        )


@dataclass(frozen=True)
class FigureChange:
    name: str
    title: str
    base: Figure | None
    candidate: Figure | None
    change: float | None = None  # relative; positive is worse
    noise: float | None = None  # the larger spread of the two; None: not known (fewer than 3 samples)
    verdict: Literal["worse", "better", "within noise", "not judged", "missing"] = "missing"
    regression: bool = False

    def cells(self) -> tuple[str, str, str, str]:
        """The figure as every table shows it: base, candidate (median and p10–p90), change, noise."""
        return (
            _figure(self.name, self.base),
            _figure(self.name, self.candidate),
            _pct(self.change),
            _pct(self.noise, sign=False, pre="±"),
        )

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        for side in ("base", "candidate"):
            figure = getattr(self, side)
            out[side] = figure.model_dump(mode="json") if figure is not None else None
        return out


@dataclass(frozen=True)
class NumericsChange:
    prompts: int = 0  # the prompts both builds ran
    token_agreement: float | None = None  # share of equal tokens among the first K of each prompt
    max_logit_diff: float | None = None  # over the tokens both kept, before the first disagreement
    differ: bool = False
    reason: str = ""


@dataclass(frozen=True)
class Comparison:
    base_key: str
    candidate_key: str
    comparable: bool
    why_not: str = ""  # when not comparable: why, and what would make it possible
    synthetic: bool = False
    host: str = ""  # what both were measured on (instance type, runtime line)
    figures: list[FigureChange] = field(default_factory=list)
    numerics: NumericsChange = field(default_factory=NumericsChange)
    policy: RegressionPolicy = field(default_factory=RegressionPolicy)

    @property
    def regressions(self) -> list[FigureChange]:
        return [f for f in self.figures if f.regression]

    @property
    def verdict(self) -> Verdict:
        if not self.comparable:
            return "not comparable"
        if self.regressions:
            return "regression"
        return "numerics differ" if self.numerics.differ else "no regression"

    @property
    def refuses(self) -> bool:
        """What the promotion gate refuses: a regression or a numerics difference."""
        return self.verdict in ("regression", "numerics differ")

    def summary(self) -> str:
        """One sentence: the verdict and the numbers behind it."""
        a, b = self.base_key[:12], self.candidate_key[:12]
        if not self.comparable:
            return f"{b} against {a}: not comparable: {self.why_not}"
        said = [f"{f.title} {_pct(f.change)} (noise ±{_pct(f.noise, sign=False)})" for f in self.regressions]
        if self.numerics.differ:
            said.append(f"numerics: {self.numerics.reason}")
        synthetic = " (synthetic numbers)" if self.synthetic else ""
        if not said:
            return f"{b} against {a}{synthetic}: no regression ({self.policy.describe()})"
        return f"{b} against {a}{synthetic}: {self.verdict}: " + "; ".join(said)

    def lines(self) -> list[str]:
        """The side-by-side table as text: what the CLI, the DAG's log and the report print (two builds that
        do not compare: only the sentence saying why, and what would make them)."""
        if not self.comparable:
            return [self.summary()]
        rows = [("figure", f"base {self.base_key[:12]}", f"candidate {self.candidate_key[:12]}", "change", "noise")]
        rows += [(f.title, *f.cells()) for f in self.figures]
        widths = [max(len(r[i]) for r in rows) for i in range(5)]

        def line(row: tuple[str, ...]) -> str:  # the title left, the numbers right, each column as wide as its widest
            return "  ".join([row[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True))])

        out = [line(rows[0]) + "  verdict"]
        for f, row in zip(self.figures, rows[1:], strict=True):
            out.append(f"{line(row)}  {f.verdict}" + ("  REGRESSION" if f.regression else ""))
        if self.numerics_line():
            out.append(self.numerics_line())
        out.append(self.summary())
        return out

    def numerics_line(self) -> str:
        """The numerics as the table's last line says them ("" when there is nothing to say)."""
        n = self.numerics
        if n.prompts:
            agreement = "?" if n.token_agreement is None else f"{n.token_agreement:.0%}"
            diff = "not recorded" if n.max_logit_diff is None else f"{n.max_logit_diff:.4g}"
            return f"numerics: {n.prompts} prompt(s), tokens agree {agreement}, max logit diff {diff}"
        return f"numerics: {n.reason}" if n.reason else ""

    def to_json(self) -> dict[str, Any]:
        return {
            "base": self.base_key,
            "candidate": self.candidate_key,
            "comparable": self.comparable,
            "why_not": self.why_not,
            "synthetic": self.synthetic,
            "host": self.host,
            "verdict": self.verdict,
            "summary": self.summary(),
            "policy": asdict(self.policy),
            "figures": [f.to_json() for f in self.figures],
            "numerics": asdict(self.numerics),
        }


def _pct(value: float | None, *, sign: bool = True, pre: str = "") -> str:
    if value is None:
        return "–"
    return f"{pre}{value * 100:+.1f} %" if sign else f"{pre}{value * 100:.1f} %"


def _figure(name: str, figure: Figure | None) -> str:
    if figure is None:
        return "–"
    if name in HIGHER_IS_BETTER:
        return f"{figure.median:.1f} ({figure.p10:.1f}–{figure.p90:.1f})"
    return f"{figure.median * 1e3:.2f} ms ({figure.p10 * 1e3:.2f}–{figure.p90 * 1e3:.2f})"


def _where(m: Measurement) -> str:
    return f"{m.host.instance_type or '?'} with {m.host.runtime_line or 'an unrecorded runtime'}"


def _not_comparable(base: Measurement | None, cand: Measurement | None, base_key: str, cand_key: str) -> str:
    """Why two measurements do not compare, and what would make them ("" when they do)."""
    for key, m in ((base_key, base), (cand_key, cand)):
        if m is None:
            return f"build {key[:12]} has no measurement (published before the protocol): rebuild it to measure it"
    assert base is not None and cand is not None
    if base.protocol != cand.protocol:
        return f"measured by protocols {base.protocol} and {cand.protocol}: rebuild the older to measure it again"
    if base.synthetic != cand.synthetic:
        return "one measurement is synthetic (a fake consumer's) and the other real: measure both on a Neuron host"
    if (base.host.instance_type, base.host.runtime_line) != (cand.host.instance_type, cand.host.runtime_line):
        return (
            f"base measured on {_where(base)}, candidate on {_where(cand)}: smoke the candidate on "
            f"{_where(base)} (or compare builds measured on one instance type and runtime line)"
        )
    return ""


def _figure_change(name: str, base: Figure | None, cand: Figure | None, policy: RegressionPolicy) -> FigureChange:
    title = FIGURE_TITLES[name]
    if base is None or cand is None or base.median == 0:
        return FigureChange(name, title, base, cand)
    change = (cand.median - base.median) / abs(base.median)
    if name in HIGHER_IS_BETTER:
        change = -change
    if base.spread is None or cand.spread is None:
        return FigureChange(name, title, base, cand, change, None, "not judged")
    noise = max(base.spread, cand.spread)
    verdict = "within noise" if abs(change) <= noise else ("worse" if change > 0 else "better")
    regression = name in policy.figures and verdict == "worse" and change * 100 > policy.slower_pct
    return FigureChange(name, title, base, cand, change, noise, verdict, regression)


def _numerics(base: Numerics | None, cand: Numerics | None, policy: RegressionPolicy) -> NumericsChange:
    if base is None or cand is None:
        return NumericsChange(reason="not recorded for both builds")
    theirs = {tuple(p.prompt_ids): p for p in base.prompts}
    pairs = [(theirs[tuple(p.prompt_ids)], p) for p in cand.prompts if tuple(p.prompt_ids) in theirs]
    if not pairs:
        return NumericsChange(reason="the builds ran no prompt in common (another tokenizer or prompt set)")
    same = total = 0
    worst: float | None = None
    for b, c in pairs:
        k = min(len(b.tokens), len(c.tokens))
        agree = next((i for i in range(k) if b.tokens[i] != c.tokens[i]), k)
        same, total = same + sum(b.tokens[i] == c.tokens[i] for i in range(k)), total + k
        for step in range(min(max(1, agree), len(b.top_ids), len(c.top_ids))):
            mine = dict(zip(c.top_ids[step], c.top_logits[step], strict=False))
            for token, logit in zip(b.top_ids[step], b.top_logits[step], strict=False):
                if token in mine:
                    diff = abs(mine[token] - logit)
                    worst = diff if worst is None else max(worst, diff)
    agreement = same / total if total else None
    reasons = []
    if agreement is not None and agreement < 1:
        reasons.append(f"{total - same} of {total} tokens disagree")
    if worst is not None and worst > policy.logit_tolerance:
        reasons.append(f"logits differ by up to {worst:.4g} (tolerance {policy.logit_tolerance:g})")
    return NumericsChange(len(pairs), agreement, worst, bool(reasons), "; ".join(reasons))


def compare(
    base: SmokeRecord,
    candidate: SmokeRecord,
    *,
    base_key: str,
    candidate_key: str,
    policy: RegressionPolicy | None = None,
) -> Comparison:
    """`candidate` against `base` (the build a channel serves) under `policy` (module doc)."""
    policy = policy or RegressionPolicy()
    mb, mc = base.measurement, candidate.measurement
    why_not = _not_comparable(mb, mc, base_key, candidate_key)
    if why_not:
        return Comparison(base_key, candidate_key, False, why_not, policy=policy)
    assert mb is not None and mc is not None
    figures = [_figure_change(name, mb.figures.get(name), mc.figures.get(name), policy) for name in FIGURES]
    return Comparison(
        base_key,
        candidate_key,
        True,
        synthetic=mb.synthetic,
        host=_where(mb),
        figures=figures,
        numerics=_numerics(base.numerics, candidate.numerics, policy),
        policy=policy,
    )
