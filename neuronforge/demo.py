"""`make demo`: the whole pipeline on the embedded default, driven by Airflow.

1. initialises a private Airflow home (SQLite) under `.neuronforge/airflow`,
2. generates the embedded default model (a tiny seeded Llama + tokenizer; no network),
3. runs the DAG `neuronforge_compile_publish` with `airflow dags test` (resolve, fetch, plan,
   compile on the CPU ahead-of-time backend, compile-cache sync, smoke test, publish),
4. runs it again: a cache hit that compiles nothing,
5. prints the published artifact, and what the planner says about a real Llama-3.1-8B on inf2.

Store: `NEURONFORGE_STORE` (default `.neuronforge/store`); work dir: `NEURONFORGE_HOME` (default `.neuronforge`).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from neuronforge import local_airflow, settings
from neuronforge.errors import InvalidInput
from neuronforge.modelconfig import ModelArch
from neuronforge.planner import plan
from neuronforge.target import TargetSpec

DAG_ID = "neuronforge_compile_publish"
DEMO_TARGET = settings.DEFAULT_TARGET
# meta-llama/Llama-3.1-8B config.json (architecture fields as published)
LLAMA_3_1_8B = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
    "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 8, "max_position_embeddings": 131072, "vocab_size": 128256,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}  # fmt: skip


def airflow(*args: str, log: Path | None = None) -> int:
    return local_airflow.run_airflow(*args, env=local_airflow.airflow_env(), log=log)


def main() -> int:
    home = settings.home()
    print(f"Airflow home {local_airflow.default_home()} (SQLite); store {settings.store_uri()}")
    try:
        # the cluster policy, the database, the neuron_cores pool: as `neuronforge airflow` has them
        local_airflow.init_home(local_airflow.default_home(), local_airflow.airflow_env())
    except InvalidInput as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    conf = json.dumps({"model": settings.DEFAULT_MODEL, "targets": [DEMO_TARGET]})

    for attempt in (1, 2):
        log = home / "airflow" / f"demo-run-{attempt}.log"
        started = time.monotonic()
        rc = airflow("dags", "test", DAG_ID, "--conf", conf, log=log)
        seconds = time.monotonic() - started
        text = log.read_text()
        if rc != 0 or "state=success" not in text:
            print(f"error: the DAG run failed (exit {rc}); log: {log}", file=sys.stderr)
            return 1
        cold = "no published artifact for key" in text  # logged by the prepare task on an index miss
        kind = "compiled and published" if cold else "cache hit: nothing fetched or compiled"
        print(f"\nrun {attempt}: {kind} in {seconds:.0f}s (airflow dags test; log {log})")

    from neuronforge.cli import main as cli

    print()
    cli(["ls", settings.store_uri()])
    from neuronforge.farm import FarmQuery, farm_page
    from neuronforge.stores import open_store

    store = open_store(settings.store_uri())
    latest = max(farm_page(store, FarmQuery(published_only=True)).rows, key=lambda r: r.at)
    print()
    cli(["show", latest.manifest_uri])
    print("\nIts consumer's load-time rules, re-checked on a downloaded copy:")
    cli(["verify", latest.manifest_uri])
    print("\nThe serving profiles (the Neuron ones compile on Neuron workers):")
    cli(["profiles"])

    big = ModelArch.from_config(LLAMA_3_1_8B)
    print("\nThe planner on a real config (meta-llama/Llama-3.1-8B, bf16, 4096 tokens):")
    for tp in (1, 2):
        t = TargetSpec.parse(
            {"instance_type": "inf2.xlarge", "tp_degree": tp, "sequence_length": 4096, "profile": "vllm-neuron"}
        )
        memory = next(c for c in plan(big, t).checks if c.name == "memory")
        print(f"  tp={tp}: {memory.message}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
