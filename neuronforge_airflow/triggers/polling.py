"""The one polling loop of the DAGs' deferrable waits (`build_claim.BuildFinishedTrigger`,
`recompile.RebuildsSettledTrigger`): the triggerer runs `run`, which asks the subclass's `poll` —
a blocking look at the store, run on a thread so the triggerer's event loop never waits on it —
every `poll_s` seconds until it answers, or until the optional `deadline` passes.

A subclass declares the constructor arguments it is rebuilt from (`FIELDS`) and its one check
(`poll`); `serialize` names the subclass by its own module and class, the classpath the triggerer
imports a deferred task's trigger by (so a subclass keeps its name and module across releases).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any, ClassVar

from airflow.triggers.base import BaseTrigger, TriggerEvent


class PollingTrigger(BaseTrigger):
    """Polls `poll()` every `poll_s` seconds; fires with its answer, or with `at_deadline()` once
    `deadline` (a `time.time()` value; None: no deadline) has passed."""

    FIELDS: ClassVar[tuple[str, ...]]  # the constructor's arguments, read back from the attributes
    poll_s: float
    deadline: float | None = None

    def serialize(self) -> tuple[str, dict[str, Any]]:
        cls = type(self)
        return f"{cls.__module__}.{cls.__qualname__}", {name: getattr(self, name) for name in self.FIELDS}

    def poll(self) -> dict[str, Any] | None:
        """The event's payload once the wait is over; None to look again after `poll_s`. Blocking
        calls are fine here (it runs on a thread)."""
        raise NotImplementedError

    def at_deadline(self) -> dict[str, Any]:
        """The event's payload when the deadline passed first."""
        raise NotImplementedError

    async def run(self) -> AsyncIterator[TriggerEvent]:
        while True:
            payload = await asyncio.to_thread(self.poll)  # store calls block
            if payload is not None:
                yield TriggerEvent(payload)
                return
            if self.deadline is None:
                await asyncio.sleep(self.poll_s)
                continue
            left = self.deadline - time.time()
            if left <= 0:
                yield TriggerEvent(self.at_deadline())
                return
            await asyncio.sleep(min(self.poll_s, left))
