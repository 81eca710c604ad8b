"""`RebuildsSettledTrigger`: the recompile DAG's wait for the rebuild runs it triggered
(`operators.recompile`), in the triggerer, without a worker slot. Its classpath before this module was
`neuronforge_airflow.operators.recompile.RebuildsSettledTrigger`, which still imports it (a task deferred
by an earlier release is stored in the database under that path)."""

from __future__ import annotations

from typing import Any

from neuronforge_airflow.triggers.polling import PollingTrigger


def settle_states(store_uri: str, states: list[dict[str, Any]]) -> tuple[bool, list[dict[str, Any]]]:
    from neuronforge.farm import recompile
    from neuronforge_airflow.hooks.store import open_store

    parsed = [recompile.TargetState.from_json(s) for s in states]
    done = recompile.settle(open_store(store_uri), parsed)
    return done, [s.to_json() for s in parsed]


class RebuildsSettledTrigger(PollingTrigger):
    """Fires when every triggered rebuild has published or recorded a failure, or at the deadline."""

    FIELDS = ("store_uri", "states", "deadline", "poll_s")

    def __init__(self, store_uri: str, states: list[dict[str, Any]], deadline: float, poll_s: float = 60.0) -> None:
        super().__init__()
        self.store_uri, self.states, self.deadline, self.poll_s = store_uri, states, deadline, poll_s

    def poll(self) -> dict[str, Any] | None:
        done, _ = settle_states(self.store_uri, self.states)
        return {"settled": True} if done else None

    def at_deadline(self) -> dict[str, Any]:
        return {"settled": False}
