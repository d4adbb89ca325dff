"""The copy of a model the engines load: batch made dynamic, PRelu made cheap, checked, cached beside it.

Two rewrites, each applied only where it does something:
- a fixed batch of 1 (FaceMesh as converted, inswapper_128) becomes a dynamic batch (engines.onnx.batch), for
  cross-frame batching;
- PRelu with constant slopes becomes Relu/Mul/Add (engines.onnx.prelu): ONNX Runtime's CPU PRelu is slow
  (docs/BENCHMARKS.md "Pipeline").
The result is checked item by item against the original (`verify_batch_equivalence`) before it is trusted,
and the cache name carries the source's sha256 and the rewrite version, so a re-provisioned model never meets
a stale rewrite. Any failure keeps the working original.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import onnx

log = logging.getLogger(__name__)

# bump when a rewrite changes, so caches made by an older one are not reused
REWRITE_VERSION = 2


def serving_model(path: Path) -> Path:
    """The rewritten copy of `path` (see module docs), cached beside it; `path` itself when no rewrite applies
    or a rewrite fails its check."""
    from engines.models.store import sha256_file

    digest = sha256_file(path)[:16]
    cached = path.with_name(f"{path.stem}.serve{REWRITE_VERSION}-{digest}.onnx")
    if cached.exists():
        return cached
    try:
        import onnx

        from engines.onnx.batch import make_batch_dynamic, verify_batch_equivalence
        from engines.onnx.prelu import constant_prelu_count, prelu_as_relu
    except ImportError:
        return path
    original = path.read_bytes()
    model = onnx.load_from_string(original)
    fixed_one = _fixed_batch_one(model)
    steps: list[str] = []
    if fixed_one:
        try:
            model = make_batch_dynamic(model)
            steps.append("dynamic batch")
        except Exception as e:  # an optimisation: without it faces run one at a time
            log.warning("%s: dynamic-batch rewrite failed (%s); faces run one at a time", path.name, e)
    prelus = constant_prelu_count(model)
    if prelus:
        model = prelu_as_relu(model)
        steps.append(f"{prelus} PRelu as Relu")
    if not steps:
        return path
    rewritten = model.SerializeToString()
    batches = (1,) if fixed_one and "dynamic batch" not in steps else (1, 3)
    try:
        verify_batch_equivalence(original, rewritten, batches)
    except Exception as e:  # the rewrite is an optimisation: any failure keeps the working original
        log.warning(
            "%s: rewrite (%s) failed its check (%s); using the original", path.name, ", ".join(steps), e
        )
        return path
    try:
        fd, tmp = tempfile.mkstemp(prefix=cached.name, suffix=".part", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(rewritten)
        os.replace(tmp, cached)
    except OSError as e:  # a read-only model directory (a mounted volume, a read-only root file system)
        log.warning("%s: cannot keep the rewritten copy beside it (%s); using the original", path.name, e)
        return path
    log.info("%s: serving copy %s (%s)", path.name, cached.name, ", ".join(steps))
    _remove_stale_copies(path, keep=cached)
    return cached


def _remove_stale_copies(path: Path, keep: Path) -> None:
    """Delete copies of `path` made by older rewrites or from an earlier file (they are never read again)."""
    for pattern in (f"{path.stem}.dynbatch-*.onnx", f"{path.stem}.serve*-*.onnx"):
        for old in path.parent.glob(pattern):
            if old != keep:
                old.unlink(missing_ok=True)


def _fixed_batch_one(model: onnx.ModelProto) -> bool:
    """True when a graph input declares batch 1 (the only case the batch rewrite is for)."""
    for value in model.graph.input:
        dims = value.type.tensor_type.shape.dim
        if dims and dims[0].HasField("dim_value") and dims[0].dim_value == 1:
            return True
    return False
