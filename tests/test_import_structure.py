"""The import structure: one-way layers, no cycle, and nothing heavy where a DAG file is parsed.

The dag-processor re-imports every DAG file on each loop, and every task re-parses its DAG file
before it runs; a DAG file that pulls torch in (it did: neuronforge_airflow.params → profiles →
backends.nxdi → quantization → torch) costs ~2 s per file per loop and per task. These checks run
in fresh interpreters, so what an earlier test imported cannot hide what a DAG file imports.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# What a DAG file, an operator or a profile declaration must not import when it is parsed: the
# ML stack, the AWS SDK (opened with the first s3:// store), and the Neuron SDK and its consumers.
HEAVY = (
    "torch",
    "transformers",
    "safetensors",
    "numpy",
    "huggingface_hub",
    "boto3",
    "botocore",
    "s3transfer",
    "neuronxcc",
    "torch_neuronx",
    "libneuronxla",
    "neuronx_distributed",
    "neuronx_distributed_inference",
    "transformers_neuronx",
    "optimum",
    "vllm",
    "vllm_neuron",
)

# Airflow's scheduler side, which a DAG file has no use for at parse (the Task SDK is what it builds
# with): `TriggerDagRunOperator`'s module pulled these in (~200 modules, 0.3-0.8 s per parse).
AIRFLOW_CORE = (
    "airflow.models.dagrun",
    "airflow.models.taskinstance",
    "airflow.models.dag",
    "airflow.models.serialized_dag",
    "airflow.models.xcom",
    "airflow.api",
    "airflow.jobs",
    "airflow.ti_deps",
    "airflow.serialization.serialized_objects",
)


def _fresh(code: str) -> dict:
    """Run `code` in a new interpreter at the repo root; it prints one JSON value last."""
    done = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(ROOT)!r})\n{code}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _prefixes() -> tuple[str, ...]:
    return tuple(f"{m}." for m in AIRFLOW_CORE)


def _loaded(prelude: str) -> dict:
    return _fresh(
        f"{prelude}\nimport json\n"
        f"heavy = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})\n"
        f"core = sorted(m for m in sys.modules if m in {AIRFLOW_CORE!r} or m.startswith({_prefixes()!r}))\n"
        "print(json.dumps({'heavy': heavy, 'core': core, 'modules': sorted(sys.modules)}))"
    )


@pytest.mark.parametrize("dag_file", sorted(p.name for p in (ROOT / "dags").glob("*.py")))
def test_a_dag_file_imports_nothing_heavy(dag_file: str) -> None:
    """What the dag-processor and every task do: import the DAG file (the DAG object built)."""
    found = _loaded(
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('dagfile', {str(ROOT / 'dags' / dag_file)!r})\n"
        "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)"
    )
    assert found["heavy"] == [], f"{dag_file} imports {found['heavy']} at parse time"
    assert found["core"] == [], f"{dag_file} imports Airflow's scheduler side at parse time: {found['core'][:8]}"
    assert "neuronforge.profiles.registry" in found["modules"]  # it did read the registry (the form's enum)


def test_operators_plugins_and_profile_declarations_import_nothing_heavy() -> None:
    """Every operator and plugin module, and every registered profile's declaration read in full
    (what the form, the routing and `neuronforge profiles` show)."""
    modules = sorted(
        f"{p.parent.name}.{p.stem}"
        for d in ("neuronforge_airflow", "plugins")
        for p in (ROOT / d).glob("*.py")
        if p.stem != "__init__"
    )
    found = _loaded(
        "".join(f"import {m}\n" for m in modules)
        + "from neuronforge.profiles import all_profiles\n"
        + "rows = [p.describe() for p in all_profiles()]\n"
        + "queues = [p.placement(k) for p in all_profiles() for k in (None, 'toolchain', 'compile', 'smoke')]\n"
    )
    assert found["heavy"] == []


def test_the_core_check_sees_the_standard_trigger_operator() -> None:
    """The check above can fail: the operator the recompile DAG used before `TriggerRunOperator` loads
    the scheduler's models."""
    found = _loaded("import airflow.sdk\nimport airflow.providers.standard.operators.trigger_dagrun")
    assert "airflow.models.dagrun" in found["core"]


def test_value_types_resolve_no_registry() -> None:
    """A target, a request's toolchain and a key's material are pure data: building and normalizing
    a target naming a Neuron profile imports neither the profiles nor the backends."""
    found = _loaded(
        "from neuronforge.spec.target import TargetSpec\n"
        "from neuronforge.spec.toolchain import Toolchain\n"
        "import neuronforge.compilation.detect\n"
        "t = TargetSpec.parse({'instance_type': 'inf2.xlarge', 'tp_degree': 2, 'sequence_length': 2048,"
        " 'profile': 'vllm-neuron', 'quantization': 'int8'})\n"
        "assert t.normalized().slug.startswith('vllm-neuron-inf2.xlarge-tp2')\n"
    )
    assert not [
        m for m in found["modules"] if m.startswith(("neuronforge.profiles", "neuronforge.compilation.backends"))
    ]
    assert found["heavy"] == []


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components of more than one module (iterative: no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_no_import_cycle() -> None:
    """Not between layers (the contract below) and not inside one either: every import, lazy ones
    included (grimp reads them all; TYPE_CHECKING imports are annotations)."""
    import grimp

    graph = grimp.build_graph("neuronforge", "neuronforge_airflow", cache_dir=None, exclude_type_checking_imports=False)
    edges = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    cycles = _strongly_connected(edges)
    detail = [
        f"{a} -> {b} (line {d['line_number']})"
        for cycle in cycles
        for a in cycle
        for b in sorted(edges[a] & set(cycle))
        for d in graph.get_import_details(importer=a, imported=b)[:1]
    ]
    assert cycles == [], "import cycles:\n" + "\n".join(detail)


def test_the_cycle_finder_finds_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert _strongly_connected(graph) == [["a", "b", "c"]]


def test_the_layers_contract_is_kept() -> None:
    """`lint-imports` with pyproject.toml's contracts: the core's layers, and no `operators` import
    from the Airflow-free core."""
    done = subprocess.run(
        [str(Path(sys.executable).with_name("lint-imports")), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:]
    assert "2 kept, 0 broken" in done.stdout
