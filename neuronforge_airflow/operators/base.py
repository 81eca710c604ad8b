"""`NeuronforgeOperator`: the base of neuronforge's class-based operators, as `AwsBaseOperator` is the
Amazon provider's: the store hook and the error policy are declared here once.

- `hook`: a `NeuronforgeStoreHook` on the operator's `neuronforge_conn_id` (default `neuronforge_default`);
  `self.hook.get_conn(uri)` opens the store a task was handed, with the Connection's identity.
- `execute` runs the subclass's `run(context)` under `error_policy.by_policy`: an error of ours is its one
  line, retried only when it may pass; a deferral (`self.defer`) and Airflow's own exceptions pass as
  they are. A method a trigger resumes runs its body `with self.policy():` the same way.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from functools import cached_property
from typing import Any

from airflow.sdk import BaseOperator

from neuronforge_airflow.hooks.store import NeuronforgeStoreHook
from neuronforge_airflow.operators.error_policy import by_policy


class NeuronforgeOperator(BaseOperator):
    def __init__(self, *, neuronforge_conn_id: str = NeuronforgeStoreHook.default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.neuronforge_conn_id = neuronforge_conn_id

    @cached_property
    def hook(self) -> NeuronforgeStoreHook:
        return NeuronforgeStoreHook(self.neuronforge_conn_id)

    def policy(self) -> AbstractContextManager[None]:
        """The error policy, for a method other than `execute` (a resume after a deferral)."""
        return by_policy()

    def execute(self, context: Any) -> Any:
        with self.policy():
            return self.run(context)

    def run(self, context: Any) -> Any:
        """The operator's work (what `execute` would be), under the error policy."""
        raise NotImplementedError
