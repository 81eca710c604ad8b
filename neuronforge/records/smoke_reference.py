"""The smoke test's reference: `smoke/expected.json` in the payload (and so in the artifact).

Computed on the compile host (transformers eager on the CPU, greedy) and written into the payload by
`stages.smoke.write_expected`; the smoke test, on the host that loads the payload, generates from the
same prompt ids and compares its tokens with these. A payload whose reference does not read fails its
smoke test with that one line.
"""

from __future__ import annotations

import json
from typing import ClassVar

from pydantic import Field, StrictInt, StrictStr

from neuronforge.records.base import StoredRecord
from neuronforge.records.parts import Text

TokenIds = list[list[StrictInt]]


class SmokeReference(StoredRecord):
    KIND: ClassVar[str] = "smoke reference"
    SCHEMA: ClassVar[int] = 1
    MAX_BYTES: ClassVar[int] = 16 * 1024 * 1024  # 32 prompts of 4096 characters, their ids and tokens

    # In the order the file has always listed them (the payload's bytes, hashed in its manifest).
    reference: Text = ""  # what computed it: "transformers <version> eager on the CPU, <dtype>, greedy"
    prompts: list[StrictStr]
    prompt_ids: TokenIds
    max_new_tokens: StrictInt = Field(ge=1)
    tokens: TokenIds  # the reference's generated ids, per prompt
    unquantized_tokens: TokenIds | None = None  # a quantized target: the original weights' ids (reported)

    def to_bytes(self) -> bytes:
        """In its fields' order, unsorted, as the file has always been written."""
        return (json.dumps(self.stored_json(), indent=2) + "\n").encode()
