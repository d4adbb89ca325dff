"""Dynamic-batch copies of fixed-batch-1 models, made once and cached beside the original.

Published exports (FaceMesh as converted, inswapper_128) declare batch 1; cross-frame batching needs N. The
rewrite (engines.onnx_batch) is checked item-by-item against the original before it is trusted, and the cache
name carries the source's sha256 so a re-provisioned model never meets a stale rewrite.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)


def dynamic_batch_model(path: Path) -> Path:
    """A dynamic-batch copy of a fixed-batch-1 model, cached beside it; the original when the rewrite fails.

    The cache name carries the source's sha256, so a re-provisioned model never meets a stale rewrite.
    """
    from engines.models.store import sha256_file

    digest = sha256_file(path)[:16]
    cached = path.with_name(f"{path.stem}.dynbatch-{digest}.onnx")
    if cached.exists():
        return cached
    try:
        from engines.onnx_batch import make_batch_dynamic_bytes, verify_batch_equivalence
    except ImportError:
        return path
    original = path.read_bytes()
    if not _fixed_batch_one(original):
        return path
    try:
        rewritten = make_batch_dynamic_bytes(original)
        verify_batch_equivalence(original, rewritten, (1, 3))
    except Exception as e:  # the rewrite is an optimisation: any failure keeps the working original
        log.warning("%s: dynamic-batch rewrite failed (%s); faces run one at a time", path.name, e)
        return path
    fd, tmp = tempfile.mkstemp(prefix=cached.name, suffix=".part", dir=path.parent)
    with os.fdopen(fd, "wb") as f:
        f.write(rewritten)
    os.replace(tmp, cached)
    return cached


def _fixed_batch_one(data: bytes) -> bool:
    """True when a graph input declares batch 1 (the only case the rewrite is for)."""
    import onnx

    model = onnx.load_from_string(data)
    for value in model.graph.input:
        dims = value.type.tensor_type.shape.dim
        if dims and dims[0].HasField("dim_value") and dims[0].dim_value == 1:
            return True
    return False
