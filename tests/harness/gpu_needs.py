"""What each GPU test needs, and why it cannot run here: tests/gpu skips per test, not all at once.

A GPU machine may have PyTorch with CUDA and no TensorRT (the one this project is proven on), or TensorRT and
no onnxruntime-gpu: each test declares what it needs (`@pytest.mark.needs("torch_cuda")`) and runs wherever
that is present. A test that declares nothing needs a CUDA device.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable

NEEDS = ("cuda", "torch_cuda", "tensorrt", "ort_gpu", "nvenc")


def skip_reason(needs: Iterable[str], probe: Callable[[str], str | None]) -> str | None:
    """The first missing need's reason (None when all are met); unknown names are an error, not a skip."""
    wanted = list(needs) or ["cuda"]
    unknown = [n for n in wanted if n not in NEEDS]
    if unknown:
        raise ValueError(f"unknown GPU test need(s) {unknown}; known: {', '.join(NEEDS)}")
    for need in wanted:
        reason = probe(need)
        if reason:
            return reason
    return None


@functools.cache
def probe(need: str) -> str | None:
    """Why `need` is missing on this machine, or None."""
    if need == "torch_cuda":
        try:
            import torch
        except ImportError:
            return "needs PyTorch with CUDA (`pip install 'livefuse[torch]'`)"
        return None if torch.cuda.is_available() else f"torch {torch.__version__} sees no CUDA device"
    if need == "tensorrt":
        try:
            import tensorrt  # noqa: F401
        except ImportError:
            return "needs TensorRT (`pip install 'livefuse[gpu]'`)"
        return probe("cuda")
    if need == "nvenc":
        from gateway.webrtc.codecs import hw_encode

        return hw_encode.probe()
    if need == "ort_gpu":
        import onnxruntime as ort

        if "CUDAExecutionProvider" not in ort.get_available_providers():
            return "needs onnxruntime-gpu (`pip install 'livefuse[gpu]'`)"
        return probe("cuda")
    try:
        from cuda.bindings import runtime as cudart
    except ImportError:
        if probe("torch_cuda") is None:
            return None
        return "no CUDA device (neither cuda-python nor torch sees one)"
    err, count = cudart.cudaGetDeviceCount()
    return None if err == cudart.cudaError_t.cudaSuccess and count >= 1 else "no CUDA device"
