"""What a consumer's start-up re-trace found (`ServingProfile.retrace`): the published cache keys it
read, the ones it would have compiled, or why it could not run.

The re-trace is the consumer's own start-up path in its toolchain's interpreter, compiling forbidden,
against the published cache: `neuronforge verify --retrace` turns the result into problem lines, and a
`re-verify` attestation (`farm.attest`) keeps the keys themselves — found, and missing, which decide
whether a build kept at a newer SDK release is attested or rebuilt.

A consumer whose compiling-forbidden switch raises at the first graph it does not find (the vLLM Neuron
plugin: `VLLM_NEURON_DISABLE_WARMUP_COMPILE` makes `compile()` raise on the first local miss) stops
there: the first missing key is known, the graphs after it were never traced (`stopped`), so more may
be missing.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Retrace:
    found: tuple[str, ...] = ()  # published keys the trace read (the manifest's entries it hit)
    missing: tuple[str, ...] = ()  # keys the trace would have compiled (the cache lacks them)
    stopped: bool = False  # the trace stopped at its first miss: the graphs after it were not traced
    published: int = 0  # the entries the build's cache manifest lists
    said: str = ""  # the consumer's own line about the miss (its error), when it stopped
    problem: str = ""  # why the trace could not run (the cache did not sync, the child failed otherwise)

    @property
    def hit(self) -> bool:
        """Every graph the trace made was found in the published cache."""
        return not self.problem and not self.missing

    def problems(self) -> list[str]:
        """`verify --retrace`'s lines: none when every key was found."""
        if self.problem:
            return [self.problem]
        if self.stopped:
            return [f"re-trace of the serving command in CPU-compile mode, compiling forbidden, failed: {self.said}"]
        if self.missing:
            return [f"re-trace compiled {len(self.missing)} graph(s) the cache lacks ({', '.join(self.missing)})"]
        return []

    def sentence(self) -> str:
        """One line: what the trace found and lacked (an attestation's detail)."""
        if self.problem:
            return self.problem
        found = f"found {len(self.found)} of the {self.published} published key(s)"
        if not self.missing:
            return f"re-trace {found}, compiling forbidden: every graph is in the published cache"
        more = " (it stops at the first miss: more may follow)" if self.stopped else ""
        return f"re-trace {found}; missing {', '.join(self.missing)}{more}"
