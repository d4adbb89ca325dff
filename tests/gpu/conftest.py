"""GPU tests: marked `gpu` and skipped, with the reason, where TensorRT, cuda-python or a GPU is missing."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest


@functools.cache
def gpu_missing() -> str | None:
    """Why GPU tests cannot run here, or None when they can."""
    try:
        import tensorrt  # noqa: F401
        from cuda.bindings import runtime as cudart
    except ImportError:
        return "needs TensorRT and cuda-python (`pip install 'livefuse[gpu]'`)"
    err, count = cudart.cudaGetDeviceCount()
    if err != cudart.cudaError_t.cudaSuccess or count < 1:
        return "no CUDA device"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.gpu)
            reason = gpu_missing()
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))
