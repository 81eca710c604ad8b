"""The `Backend` interface: what turns a checkpoint into compiled graphs, and loads them to generate.

A backend is a compiler front end (AOTInductor on the CPU, optimum-neuron's exporter, NxD
Inference). It knows how to detect its toolchain, compile one target through the persistent compile
cache, and load its own output to generate tokens for the smoke test. It knows nothing about who
serves the result: that is the serving profile's job (`neuronforge.profiles`), which picks a
backend and hands it the backend-specific `settings` it must compile with (e.g. the NeuronConfig a
vLLM scheduler needs). Heavy toolchains are imported inside the methods (or in child processes),
so every backend module imports anywhere.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from neuronforge.errors import InvalidInput
from neuronforge.request import Toolchain
from neuronforge.toolchain import detect_runtime, installed_version

if TYPE_CHECKING:
    from neuronforge.compile_cache import CompileCache
    from neuronforge.target import TargetSpec


@dataclass
class CompileJob:
    """One compile: the inputs the stage materialized on this host and the profile's settings."""

    checkpoint_dir: Path  # what the compiler reads (the cpu backend: dequantized when quantized)
    model_type: str
    target: TargetSpec
    out: Path  # a fresh, empty folder: the build
    cache: CompileCache
    flags: tuple[str, ...]
    timeout_s: float
    work_dir: Path
    settings: dict[str, Any] = field(default_factory=dict)  # from the profile (`compile_settings`)
    preseed: list[str] | None = None  # cache entries a compile of the same graph set recorded
    quantized_dir: Path | None = None  # the quantize stage's output (NxD Inference format)


@dataclass
class CompileResult:
    graphs: list[dict[str, Any]] = field(default_factory=list)  # name, entry, cached, seconds
    compiler_invocations: int = 0


@dataclass
class GenerateJob:
    """Load a build the way its consumer does, in a separate process, and generate greedily."""

    build_dir: Path
    checkpoint_dir: Path
    model_type: str
    prompt_ids: list[list[int]]
    max_new_tokens: int
    timeout_s: float
    settings: dict[str, Any] = field(default_factory=dict)
    # Backends that load from the persistent cache (`Backend.loads_from_cache`): a cache holding only
    # the entries the compile recorded, pulled from the store. Anything the load adds to it is a compile.
    cache: CompileCache | None = None


# What `Backend.generate` returns: {"load_s": float | None, "rows": [{"prompt_ids", "tokens",
# "ttft", "tpot", optional "logits" (a [steps, vocab] tensor)}], optional "compiled": [cache entries
# the load had to compile — its consumer would compile them at start-up: the smoke test fails]}.
Generation = dict[str, Any]


class Backend(ABC):
    """One compiler front end. Subclasses set the class attributes and the three methods."""

    name: ClassVar[str]  # the toolchain's `backend` field
    library: ClassVar[str | None] = None  # the pip package whose version is the backend's version
    compiler: ClassVar[str] = "neuronxcc"  # also names the compile-cache folder (`neuronxcc-<ver>`)
    packages: ClassVar[tuple[str, ...]] = ()  # versions recorded in the toolchain (and the key)
    architectures: ClassVar[frozenset[str]] = frozenset()  # model types it can compile
    # model type -> the installed library's module holding its modeling code (asked on the worker)
    modeling_modules: ClassVar[dict[str, str]] = {}
    uses_neuron: ClassVar[bool] = True  # runs on Neuron workers and takes NeuronCores
    # Reads a quantized checkpoint itself (NxD Inference); the others compile the dequantized weights.
    reads_quantized: ClassVar[bool] = False
    # Quantizes the original weights itself while loading (transformers-neuronx `load_in_8bit`): it
    # compiles from, and its consumer loads, the unquantized checkpoint.
    quantizes_at_load: ClassVar[bool] = False
    # Its consumer finds the NEFFs in the persistent compile cache at load time (transformers-neuronx
    # behind LMI's `compiled_graph_path`), not in the build: the smoke test loads through a cache
    # holding only the entries the compile recorded (`GenerateJob.cache`).
    loads_from_cache: ClassVar[bool] = False

    def detect_toolchain(self, compiler_flags: str | tuple[str, ...] = ()) -> Toolchain:
        """The toolchain installed in this Python environment (the Neuron ones exist only on
        Neuron workers; the profile compares what is found with its pins)."""
        packages = {p: v for p in self.packages if (v := installed_version(p))}
        missing = [p for p in (self.library, "neuronx-cc") if p and p not in packages]
        if missing:
            raise InvalidInput(
                f"backend {self.name!r} needs {', '.join(missing)} from the AWS Neuron repository (worker "
                "image docker/neuron-worker.Dockerfile, built for the profile's SDK release)"
            )
        worker = {"runtime": detect_runtime(), "architectures": self.installed_architectures()}
        return Toolchain(
            self.name,
            packages[self.library] if self.library else "",
            self.compiler,
            packages["neuronx-cc"],
            packages,
            compiler_flags,
            worker,
        )

    def installed_architectures(self) -> list[str] | None:
        """Model types whose modeling code the installed library has (None: no library to ask).
        Runs on the worker that will compile."""
        import importlib.util

        if not self.modeling_modules:
            return None
        found = []
        for model_type, module in self.modeling_modules.items():
            try:
                if importlib.util.find_spec(module) is not None:
                    found.append(model_type)
            except (ImportError, ValueError):
                pass
        return sorted(found)

    @abstractmethod
    def compile(self, job: CompileJob) -> CompileResult: ...

    @abstractmethod
    def generate(self, job: GenerateJob) -> Generation: ...
