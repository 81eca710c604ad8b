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

`run` is the stage's adapter (what it reads from the `BuildState`, what it writes back) and `STAGE`
its declaration, listed in `neuronforge.pipeline.runner.STAGES`.
"""

from __future__ import annotations

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
from neuronforge.pipeline.buildstate import BuildState, QuantizedRef
from neuronforge.pipeline.stage import Context, Stage
from neuronforge.pipeline.stages.quantize_request import QuantizeRequest
from neuronforge.records.base import RecordError
from neuronforge.records.checkpoint import CheckpointManifest
from neuronforge.records.local import read_local
from neuronforge.records.quantized import (
    QuantizedManifest,
    TensorReport,
)
from neuronforge.stores import ArtifactStore

log = logging.getLogger(__name__)


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
