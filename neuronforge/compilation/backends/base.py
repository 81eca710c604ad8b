"""The `Backend` interface: what turns a checkpoint into compiled graphs, and loads them to generate.

A backend is a compiler front end (AOTInductor on the CPU, optimum-neuron's exporter, NxD
Inference). It knows how to detect its toolchain, compile one target through the persistent compile
cache, and load its own output to generate tokens for the smoke test. It knows nothing about who
serves the result: that is the serving profile's job (`neuronforge.profiles`), which picks a
backend and hands it the backend-specific `settings` it must compile with (e.g. the NeuronConfig a
vLLM scheduler needs). Heavy toolchains are imported inside the methods (or in child processes),
so every backend module imports anywhere.

The Neuron backends never import their SDK in this process at all: the SDK lives in its image's own
interpreter, where `neuronforge_toolchain` runs it (`neuronforge.compilation.backends.interpreter`); `python` in
the jobs below names that interpreter.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from neuronforge.common.errors import InvalidInput
from neuronforge.compilation.backends.child import cache_graphs, generation_rows
from neuronforge.compilation.detect import detect_runtime
from neuronforge.compilation.graph_env import graph_env
from neuronforge.spec.toolchain import Toolchain

if TYPE_CHECKING:
    from neuronforge.compilation.backends.interpreter import ToolchainPython
    from neuronforge.compilation.compile_cache import CacheUse, CompileCache
    from neuronforge.spec.target import TargetSpec


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
    python: ToolchainPython | None = None  # the toolchain's interpreter (Neuron backends)
    # The graph-shaping variables the compile ran with (`graph_env`), for the manifest's compile record.
    graph_env: dict[str, str] = field(default_factory=dict)


@dataclass
class CompileResult:
    graphs: list[dict[str, Any]] = field(default_factory=list)  # name, entry, cached, seconds
    compiler_invocations: int = 0


@dataclass
class GenerateJob:
    """Load a published payload the way its consumer does, in a fresh process, and generate greedily.

    `model_dir` is the payload's model folder, the one the consumer's launch files point it at, and
    the load reads nothing else. `cache` is the persistent compile cache the load is given: holding
    only the entries the launch files name (none for consumers that read no cache), so anything the
    load adds to it is a graph its consumer would compile at start-up."""

    model_dir: Path
    prompt_ids: list[list[int]]
    max_new_tokens: int
    timeout_s: float
    cache: CompileCache
    settings: dict[str, Any] = field(default_factory=dict)  # what the launch files tell the consumer
    python: ToolchainPython | None = None
    # The measurement protocol's request, run after the correctness generation in the same process
    # (`neuronforge_toolchain.measure`); None: generate only.
    measure: dict[str, Any] | None = None


# What `Backend.generate` returns: {"load_s": float | None, "rows": [{"prompt_ids", "tokens",
# "ttft", "tpot", optional "logits" (a [steps, vocab] tensor)}], optional "compiled": [what the
# load had to compile that the payload should have held: the smoke test fails], optional
# "measurement": {"samples": {figure: [seconds]}, "synthetic", "runtime"} when `measure` was asked}.
Generation = dict[str, Any]


class Backend:
    """One compiler front end. Subclasses set the class attributes; a Neuron backend says what its
    toolchain-side module is told (`compile_request`, `generate_request`) and finishes the build
    (`finish_build`); the cpu backend, which runs here, overrides `compile` and `generate`."""

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
    # Its `generate` returns each step's logits (the smoke test reports the largest difference).
    returns_logits: ClassVar[bool] = False
    # The toolchain-side module (`neuronforge_toolchain.<name>`) that runs its SDK.
    toolchain_module: ClassVar[str | None] = None
    DETECT_TIMEOUT_S: ClassVar[float] = 300.0

    def detect_toolchain(
        self, compiler_flags: str | tuple[str, ...] = (), python: ToolchainPython | None = None
    ) -> Toolchain:
        """The toolchain the interpreter `python` has (the Neuron SDKs exist only in their images;
        the profile compares what is found with its pins). Asked of that interpreter, never of this
        process: the worker's own site-packages are not the SDK's."""
        from neuronforge.compilation.backends.interpreter import run_toolchain

        if python is None:
            raise InvalidInput(f"backend {self.name!r} runs in its SDK's own interpreter; none was named")
        spec = {"packages": list(self.packages), "modeling_modules": dict(self.modeling_modules)}
        found, _ = run_toolchain(
            python, "detect", spec, timeout_s=self.DETECT_TIMEOUT_S, what=f"{self.name} toolchain detection"
        )
        packages = dict(found.get("packages") or {})
        missing = [p for p in (self.library, "neuronx-cc") if p and p not in packages]
        if missing:
            raise InvalidInput(
                f"backend {self.name!r} needs {', '.join(missing)} from the AWS Neuron repository in {python.path} "
                f"({python.source}; worker image docker/neuron-worker.Dockerfile, built for the profile's SDK release)"
            )
        architectures = found.get("architectures")
        worker = {
            "runtime": detect_runtime(),
            "architectures": sorted(architectures) if architectures is not None else None,
            "python": found.get("python"),
            "interpreter": python.path,
            "neuron_devices": found.get("neuron_devices"),
        }
        return Toolchain(
            self.name,
            packages[self.library] if self.library else "",
            self.compiler,
            packages["neuronx-cc"],
            packages,
            compiler_flags,
            worker,
        )

    def run(
        self,
        python: ToolchainPython | None,
        action: str,
        spec: dict[str, Any],
        *,
        env: dict[str, str],
        timeout_s: float,
        what: str,
    ) -> tuple[dict[str, Any], list[str]]:
        """One action of this backend's toolchain-side module, in the toolchain's interpreter."""
        from neuronforge.compilation.backends.interpreter import run_toolchain

        if python is None or self.toolchain_module is None:
            raise InvalidInput(f"backend {self.name!r} runs in its SDK's own interpreter; none was named")
        return run_toolchain(
            python, action, spec, toolchain=self.toolchain_module, env=env, timeout_s=timeout_s, what=what
        )

    # -- compile and load in the toolchain's interpreter (the Neuron backends) ----------------------
    def compile(self, job: CompileJob) -> CompileResult:
        """Compile through the persistent cache in the toolchain's interpreter, then finish the build
        in this process (`finish_build`)."""
        use = self.compile_use(job)
        self.finish_build(job, use)
        return CompileResult(cache_graphs(use), len(use.created))

    def compile_use(self, job: CompileJob) -> CacheUse:
        """Pre-seed, run the toolchain's `compile` (`compile_request`) and tell which cache entries it
        created and reused."""
        from neuronforge.compilation.compile_cache import compile_through_cache

        spec, env = self.compile_request(job)
        env = self.compile_env(job, env)
        job.out.mkdir(parents=True, exist_ok=True)

        def child() -> list[str]:
            what = f"{self.name} compile {job.target.slug}"
            return self.run(job.python, "compile", spec, env=env, timeout_s=job.timeout_s, what=what)[1]

        return compile_through_cache(job.cache, child, job.preseed)

    def compile_env(self, job: CompileJob, env: dict[str, str]) -> dict[str, str]:
        """The environment a compile's child runs with, `env` as the backend declares it, checked
        against the stray-environment rule (`neuronforge.compilation.graph_env`): a graph-shaping
        variable set on the worker and not declared here is refused before compiling; the declared
        ones are recorded for the manifest (`job.graph_env`). Every Neuron backend's `compile` calls
        it before starting the toolchain."""
        job.graph_env = graph_env(env)
        return env

    def compile_request(self, job: CompileJob) -> tuple[dict[str, Any], dict[str, str]]:
        """The toolchain-side `compile` spec and environment for a job."""
        raise NotImplementedError(f"backend {self.name!r} does not compile in a toolchain interpreter")

    def finish_build(self, job: CompileJob, use: CacheUse) -> None:
        """What the build needs beside the toolchain's output (e.g. the tokenizer). Default: nothing."""

    def generate(self, job: GenerateJob) -> Generation:
        """Load the payload's model folder in the toolchain's interpreter and generate greedily."""
        spec, env = self.generate_request(job)
        result, _ = self.run(
            job.python, "generate", spec, env=env, timeout_s=job.timeout_s, what=f"{self.name} smoke load"
        )
        return self.generation(job, result)

    def generate_request(self, job: GenerateJob) -> tuple[dict[str, Any], dict[str, str]]:
        """The toolchain-side `generate` spec and environment. Default: the model folder alone, the
        cache the job names (it must stay as it is)."""
        spec = {
            "model_dir": str(job.model_dir),
            "prompt_ids": job.prompt_ids,
            "max_new_tokens": job.max_new_tokens,
            "measure": job.measure,
        }
        return spec, {"NEURON_COMPILE_CACHE_URL": str(job.cache.root)}

    def generation(self, job: GenerateJob, result: dict[str, Any]) -> Generation:
        """The toolchain's `generate` result as the smoke judge reads it."""
        return generation_rows(result)


def neuron_compile_env(target: TargetSpec, cache_root: Path, flags: tuple[str, ...]) -> dict[str, str]:
    """A Neuron compile's environment: the persistent cache's ROOT (the compiler appends
    `neuronxcc-<version>/`), the flags (their md5 names every entry), and the compilation target
    named explicitly (inf2 and trn1n compile for trn1, as optimum-neuron maps them), so the compile
    needs no Neuron device and never guesses the target from the host it happens to run on:
    optimum-neuron's export checks the override against its target (optimum/neuron/utils/instance.py
    `align_compilation_target` @ v0.4.5) and NxD Inference sets it from the host only when unset."""
    return {
        "NEURON_COMPILE_CACHE_URL": str(cache_root),
        "NEURON_CC_FLAGS": " ".join(flags),
        "NEURON_PLATFORM_TARGET_OVERRIDE": target.instance.compile_target,
    }
