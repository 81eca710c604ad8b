"""The smoke test's result as a build records it: the manifest's `smoke` part, the payload's `smoke.json`
and the `smoke` of a channel's build (the same object in each).

Three things a release manager reads from it:
- whether the published payload loaded as its consumer loads it, compiling nothing, and generated what
  the eager reference generates (`passed`, `reason`, `prompts`);
- how fast it ran, measured by one protocol for every build (`Measurement`): warm-up, then R
  repetitions of each figure, summarized as median, p10/p90 and spread, with the host it ran on and
  the runtime it loaded with, so that two builds can be compared and the noise of each is known
  (`neuronforge.artifacts.comparison`);
- what it computed (`Numerics`): per fixed prompt the first K tokens and the top-k logits of each
  step, so that two builds of one model can be compared for token agreement and logit difference.

Every part is tolerant (`parts`): a manifest written before the protocol existed reads with
`measurement` and `numerics` None, and a forged one costs that part, never the manifest.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, ClassVar

from pydantic import BeforeValidator, Field, StrictBool, StrictInt

from neuronforge.records.parts import AnyObject, Count, Part, Seconds, Text, WrittenPart, _number, or_default

PROTOCOL = 1  # the measurement protocol's version: two measurements compare only under one protocol

# The figures the protocol measures, in the order every view lists them, and which way is better.
LOAD = "load_s"
TTFT_SHORT = "ttft_short_s"
TTFT_LONG = "ttft_long_s"
PER_TOKEN = "per_token_s"
TOKENS_PER_S = "tokens_per_s"
FIGURES: tuple[str, ...] = (LOAD, TTFT_SHORT, TTFT_LONG, PER_TOKEN, TOKENS_PER_S)
HIGHER_IS_BETTER = frozenset({TOKENS_PER_S})
FIGURE_TITLES = {
    LOAD: "load (cold, from the published payload)",
    TTFT_SHORT: "time to first token, short prompt",
    TTFT_LONG: "time to first token, long prompt",
    PER_TOKEN: "per output token, at the target's batch size",
    TOKENS_PER_S: "tokens per second, at the target's batch size",
}

# A finite number of any sign a measurement holds (a median, a logit): not a boolean, not text.
Number = Annotated[float, BeforeValidator(_number), Field(allow_inf_nan=False, ge=-1e12, le=1e12)]
NUMERICS_TOKENS = 8  # K: the first tokens of each prompt whose logits are kept
NUMERICS_TOP = 5  # k: the logits kept per step, the largest first


class Figure(Part):
    """One figure over the protocol's repetitions. `spread` is (p90 - p10) / median: the noise a
    comparison must exceed before it calls a difference real; None with fewer than 3 samples (one cold
    load per smoke), whose difference is shown but never judged."""

    samples: Count
    median: Number
    p10: Number
    p90: Number
    spread: Number | None = None


class MeasureHost(Part):
    """Where a measurement ran: comparable hosts are one instance type and one runtime line."""

    instance_type: Text = ""  # the Neuron instance (neuron-ls); "cpu" on a CPU worker
    cores: Count = 0
    load_average: Number = 0.0  # the 1-minute load average when the measurement started
    runtime: dict[str, Text] = Field(default_factory=dict)  # package -> version the load ran with
    runtime_line: Text = ""  # the runtime's release line (e.g. "torch 2.9", "neuronx-runtime 2.29")


class Measurement(Part):
    """The protocol's result: `figures` by name (`FIGURES`), and the settings it ran with."""

    protocol: StrictInt = PROTOCOL
    synthetic: StrictBool = False  # a fake consumer's numbers: they prove the mechanism, not a device
    warmup: Count = 0
    repetitions: Count = 0
    batch_size: Count = 1
    short_prompt_tokens: Count = 0
    long_prompt_tokens: Count = 0
    new_tokens: Count = 0
    figures: Annotated[dict[str, Figure], or_default(dict)] = Field(default_factory=dict)
    host: Annotated[MeasureHost, or_default(MeasureHost)] = Field(default_factory=MeasureHost)


class PromptNumerics(Part):
    """One fixed prompt's first K generated tokens and, per step, the top-k token ids and logits."""

    prompt: Text = ""
    prompt_ids: list[StrictInt] = Field(default_factory=list)
    tokens: list[StrictInt] = Field(default_factory=list)
    top_ids: list[list[StrictInt]] = Field(default_factory=list)
    top_logits: list[list[Number]] = Field(default_factory=list)


class Numerics(Part):
    tokens: Count = NUMERICS_TOKENS
    top: Count = NUMERICS_TOP
    prompts: list[PromptNumerics] = Field(default_factory=list)


OptionalSeconds = Annotated[Seconds | None, or_default(lambda: None)]


class SmokeRecord(WrittenPart):
    """The smoke test's result (see the module doc). `load_s`, `time_to_first_token_s` and
    `per_token_s` are the single samples every build recorded before the protocol; they stay, so a
    reader of an older manifest and of a newer one reads the same names."""

    KIND: ClassVar[str] = "smoke result"

    passed: Annotated[StrictBool, or_default(lambda: False)] = False
    reason: Text = ""
    prompts: Annotated[list[AnyObject], or_default(list)] = Field(default_factory=list)
    load_s: OptionalSeconds = None
    time_to_first_token_s: OptionalSeconds = None
    per_token_s: OptionalSeconds = None
    seconds: Annotated[Seconds, or_default(lambda: 0.0)] = 0.0
    unquantized_agreement: Annotated[Number | None, or_default(lambda: None)] = None
    host: Annotated[dict[str, Any] | None, or_default(lambda: None)] = None  # neuron-ls's host; None: cpu
    measurement: Annotated[Measurement | None, or_default(lambda: None)] = None
    numerics: Annotated[Numerics | None, or_default(lambda: None)] = None

    def stored_json(self) -> dict[str, Any]:
        """As written: the fields given, in their order (`WrittenPart`)."""
        return self.model_dump(mode="json")

    to_json = stored_json

    def to_bytes(self) -> bytes:
        """`smoke.json` as the publish stage has always written it: indented, in the fields' order."""
        return (json.dumps(self.stored_json(), indent=2) + "\n").encode()


SmokePart = Annotated[SmokeRecord, or_default(SmokeRecord)]
