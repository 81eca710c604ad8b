"""Stage `quantize`: a verified checkpoint → the quantized checkpoint NxD Inference loads through
`quantized_checkpoints_path`, streamed tensor by tensor with bounded memory.

NxD Inference's own `save_quantized_state_dict` loads the whole model into host memory to quantize
it (compile hosts get OOM-killed on large models). Here each tensor is read in row chunks with
plain file reads at the offsets its safetensors header gives (no mmap, whose touched pages would
count as our resident memory) and written straight into its planned place in the output shards
(`formats/safetensors_stream.py`), so memory stays around one chunk's float32 copy whatever the
model size. The input files are hashed on a second thread meanwhile, against the fetch manifest.
The numbers are NxD's (`neuronforge/checkpoints/quantization.py`, bit-identical).

Output, `quantized/<org>/<name>/<revision>/<quant>-<dtype>[-keep<hash>][-fp8max240]/` in the store:
- each quantized linear as `<p>.weight` (int8 / float8_e4m3fn / float8_e5m2) and `<p>.scale`
  (float32, [1] per tensor or [out, 1] per channel), biases kept; every other tensor (embeddings,
  norms, lm_head always, and the linears `modules_to_not_convert` names) cast to the target dtype;
  an entry names every linear whose NxD Inference module path contains it, exactly as NxD's
  `convert` decides which layers to build quantized (`neuronforge.checkpoints.quantized_names.neuron_modules`), so
  the checkpoint holds unquantized weights for exactly the layers NxD Inference builds unquantized;
  NxD names: decoder keys without `model.`, `lm_head.*` kept;
- HF-style shards (≤ 10 GB) + `model.safetensors.index.json`, `config.json` and tokenizer files;
- `MANIFEST.json` last: files with sha256, the inputs' sha256, per-tensor relative error of the
  dequantized weights (‖w − deq(q)‖ / ‖w‖), the `modules_to_not_convert` list NeuronConfig must be
  given, the modules it kept, and the fp8 bound the scales were computed for.
Bad input (an already-quantized checkpoint, a non-2D tensor to quantize, NaN/Inf weights, a
checkpoint whose files change under us) fails before anything reaches the final location.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from neuronforge.artifacts import layout
from neuronforge.artifacts.localcache import (
    StoredObjects,
    TreeRef,
    adopt,
    materialize,
    publish_tree,
    ref_of,
    stored_objects,
)
from neuronforge.checkpoints.quantized_names import (
    FP8_BOUNDS,
    module_name,
)
from neuronforge.common import settings
from neuronforge.pipeline.buildstate import BuildState, QuantizedRef
from neuronforge.pipeline.stage import Context, Stage
from neuronforge.records.base import RecordError
from neuronforge.records.checkpoint import CheckpointManifest
from neuronforge.records.local import read_local
from neuronforge.records.quantized import (
    QuantizedManifest,
    TensorReport,
)
from neuronforge.spec.source import ModelSource
from neuronforge.spec.target import Quantization
from neuronforge.stores import ArtifactStore

log = logging.getLogger(__name__)
MIB = 1024**2


@dataclass
class QuantizeRequest:
    checkpoint_dir: Path  # verified (fetch stage); its MANIFEST.json holds the expected sha256
    source: ModelSource  # pinned: names the store prefix
    quantization: Quantization
    dtype: str  # what the tensors left unquantized are cast to: bf16 | fp16 | fp32
    work_dir: Path
    # Added to `quantization.modules_to_not_convert` (the CLI passes them here); see `not_converted`.
    modules_to_not_convert: tuple[str, ...] = ()
    max_shard_bytes: int = 10 * 10**9
    # float32 bytes of one chunk of rows: small enough that the eager operations' passes stay in
    # the CPU caches (8 MiB ran 3.5x faster than 44 MiB here), big enough to amortize per-op costs
    chunk_bytes: int = 8 * MIB
    # "compiled" (TorchInductor fused loop; ~6 s to import and compile, cached on disk after the
    # first time), "eager", or "auto": compiled once the weights to quantize repay that
    kernel: str = field(default_factory=lambda: settings.current().quant_kernel)

    @property
    def not_converted(self) -> tuple[str, ...]:
        """Every entry left unquantized, in NxD's form (no `model.` prefix), sorted, with `lm_head`
        (never quantized here; NxD Inference converts it unless told). NeuronConfig must be given
        exactly this list: what the quantizer keeps and what NxD Inference builds unquantized are
        then the same modules."""
        names = {*self.quantization.modules_to_not_convert, *self.modules_to_not_convert, "lm_head"}
        return tuple(sorted({module_name(m) for m in names}))

    @property
    def variant(self) -> str:
        """What else changes the files (`layout.quantized_prefix`): the dtype kept tensors are cast
        to; the kept list (hashed with its matching rule, so a list matched the old way — substrings
        of HF names — never reuses a checkpoint matched the new way); the e4m3 bound (checkpoints
        scaled to the OCP ±448 must not be reused)."""
        v = self.dtype
        if self.not_converted != ("lm_head",):  # lm_head alone: the files every earlier version wrote
            material = {"modules_to_not_convert": self.not_converted, "match": "nxd-module-path-substring"}
            v += "-keep" + hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:8]
        if self.quantization.dtype == "f8e4m3":
            v += f"-fp8max{FP8_BOUNDS['f8e4m3']:g}"
        return v


@dataclass
class QuantizeResult:
    local_dir: Path
    prefix: str | None
    manifest: QuantizedManifest
    reused: bool
    seconds: float = 0.0
    tensors: dict[str, TensorReport] = field(default_factory=dict)
    ref: TreeRef | None = None  # the store copy later stages (on any host) materialize


def _complete(folder: Path) -> QuantizedManifest | None:
    """The folder's manifest if every file it lists is there with its size."""
    try:
        manifest = read_local(QuantizedManifest, folder / layout.MANIFEST)
    except (OSError, RecordError):
        return None
    ok = all((folder / f.path).is_file() and (folder / f.path).stat().st_size == f.size for f in manifest.files)
    return manifest if ok else None


def _checkpoint_objects(req: QuantizeRequest) -> StoredObjects:
    """The store's mirror of the checkpoint by content, from the verified folder's MANIFEST.json: the
    config and tokenizer files copied into the quantized checkpoint are copied inside the store."""
    try:
        manifest = read_local(CheckpointManifest, req.checkpoint_dir / layout.MANIFEST)
    except (OSError, RecordError):
        return {}
    return stored_objects(manifest.files, layout.checkpoint_prefix(req.source))


def quantize(req: QuantizeRequest, store: ArtifactStore | None = None) -> QuantizeResult:
    """The quantized checkpoint for the request: materialized from the store when it holds it
    complete (any host may have built it), else built in a unique staging folder and uploaded
    (MANIFEST.json last; the first complete upload wins). Without a store: the work dir's copy."""
    started = time.monotonic()
    prefix = layout.quantized_prefix(req.source, req.quantization, req.variant)
    if store is not None and (ref := ref_of(store, prefix)) is not None:
        local = materialize(store, ref, req.work_dir)
        manifest = read_local(QuantizedManifest, local / layout.MANIFEST)
        log.info("quantized checkpoint reused from %s", store.uri(prefix))
        elapsed = round(time.monotonic() - started, 3)
        return QuantizeResult(local, prefix, manifest, True, elapsed, manifest.tensors, ref)
    final = req.work_dir / prefix
    if store is None and (found := _complete(final)) is not None:
        return QuantizeResult(final, prefix, found, True, 0.0, found.tensors)
    staging = final.with_name(f".{final.name}.{uuid.uuid4().hex[:8]}")
    try:
        from neuronforge.pipeline.stages.quantize_tensors import write_quantized

        manifest = write_quantized(req, staging, progress=lambda name: log.debug("quantized %s", name))
        ref = None
        if store is not None:
            ref = publish_tree(store, staging, prefix, manifest, stored=_checkpoint_objects(req))
            final = adopt(staging, ref, req.work_dir)
        else:
            shutil.rmtree(final, ignore_errors=True)
            staging.rename(final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log.info(
        "quantized %d tensors (%s), max relative error %.2e, in %.1fs",
        len(manifest.tensors),
        req.quantization.slug,
        manifest.max_rel_error,
        manifest.seconds,
    )
    elapsed = round(time.monotonic() - started, 3)
    return QuantizeResult(final, prefix, manifest, False, elapsed, manifest.tensors, ref)


def run(state: BuildState, ctx: Context) -> BuildState:
    """The quantized checkpoint (shared by every target asking for the same quantization and
    dtype); a pass-through for targets that do not quantize."""
    if not state.target.quantization.enabled:
        return state
    checkpoint = materialize(ctx.store, state.need("checkpoint"), ctx.work_dir)
    t = state.target
    result = quantize(
        QuantizeRequest(checkpoint, state.pinned_source(), t.quantization, t.dtype, ctx.work_dir), ctx.store
    )
    info = {
        "uri": ctx.store.uri(result.prefix),
        "reused": result.reused,
        "max_rel_error": result.manifest.max_rel_error,
        "tensors_quantized": len(result.manifest.tensors),
    }
    log.info("quantized checkpoint %s: %s", t.quantization.slug, info)
    return state.model_copy(update={"quantized": QuantizedRef(checkpoint=result.ref, info=info)})


# `quantized` is written only for a target that asks for quantization: not declared as always written.
STAGE = Stage(
    "quantize_weights",
    run,
    "quantized checkpoint, when the target asks for one",
    reads=("source", "checkpoint"),
)
