"""Preflight for --engine torch: judged by torch, not by ONNX Runtime's providers (the GPU machine this
backend is for has a CPU-only onnxruntime)."""

from __future__ import annotations

import pytest

from engines.factory import EngineConfig
from gateway.preflight import PreflightError, check_engine

torch = pytest.importorskip("torch")


def test_torch_on_cpu_passes_and_cuda_is_checked_against_torch() -> None:
    check_engine(EngineConfig(backend="torch", providers=("cpu",)))
    if torch.cuda.is_available():
        check_engine(EngineConfig(backend="torch", providers=("cuda",)))
        return
    with pytest.raises(PreflightError, match="sees 0 CUDA device") as err:
        check_engine(EngineConfig(backend="torch", providers=("cuda",)))
    assert "ONNX Runtime" not in str(err.value) and "\n" not in str(err.value)


def test_torch_with_an_ort_only_provider_is_one_line() -> None:
    with pytest.raises(PreflightError, match="cpu or cuda"):
        check_engine(EngineConfig(backend="torch", providers=("tensorrt",)))


def test_torch_cuda_with_cuda_torch_passes_although_ort_has_no_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    import onnxruntime as ort

    monkeypatch.setattr(ort, "get_available_providers", lambda: ["CPUExecutionProvider"])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    check_engine(EngineConfig(backend="torch", providers=("cuda",)))
