"""ONNX Runtime backend (the embedded default).

One `InferenceSession` is shared by all worker threads: ORT documents `Run()` as thread-safe.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engines.engine import BatchRange, EngineError, TensorSpec


@dataclass(frozen=True)
class OrtConfig:
    providers: tuple[str, ...] = ("cpu",)
    intra_op_threads: int = 0  # 0 = ORT default
    inter_op_threads: int = 1
    max_batch: int = 32
    device_id: int = 0


_PROVIDER_NAMES = {
    "cpu": "CPUExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider",
}


def _dims(shape: list[int | str | None]) -> tuple[int | str | None, ...]:
    return tuple(shape)


class OrtEngine:
    def __init__(self, model: Path | bytes, config: OrtConfig = OrtConfig(), name: str | None = None) -> None:
        import onnxruntime as ort

        self._name = name or (model.stem if isinstance(model, Path) else "onnx")
        opts = ort.SessionOptions()
        if config.intra_op_threads:
            opts.intra_op_num_threads = config.intra_op_threads
        opts.inter_op_num_threads = config.inter_op_threads
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        providers = [_PROVIDER_NAMES[p] for p in config.providers]
        available = set(ort.get_available_providers())
        missing = [p for p in providers if p not in available]
        if missing:
            raise EngineError(f"ONNX Runtime providers not available here: {', '.join(missing)} "
                              f"(have {', '.join(sorted(available))}; GPU needs `pip install 'livefuse[gpu]'`)")
        src = str(model) if isinstance(model, Path) else model
        try:
            self._session = ort.InferenceSession(src, sess_options=opts, providers=providers)
        except Exception as e:  # ORT raises its own exception types
            raise EngineError(f"{self._name}: cannot load model: {e}") from None
        self._inputs = tuple(TensorSpec(i.name, i.type, _dims(i.shape)) for i in self._session.get_inputs())
        self._outputs = tuple(TensorSpec(o.name, o.type, _dims(o.shape)) for o in self._session.get_outputs())
        dim0 = self._inputs[0].shape[0] if self._inputs and self._inputs[0].shape else 1
        fixed = dim0 if isinstance(dim0, int) and dim0 > 0 else None
        self._batch = BatchRange(fixed, fixed) if fixed else BatchRange(1, config.max_batch)
        self._closed = False
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self._name

    @property
    def inputs(self) -> tuple[TensorSpec, ...]:
        return self._inputs

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        return self._outputs

    @property
    def batch(self) -> BatchRange:
        return self._batch

    def infer(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if self._closed:
            raise EngineError(f"{self._name}: engine is closed")
        try:
            results = self._session.run(None, inputs)
        except Exception as e:
            raise EngineError(f"{self._name}: inference failed: {e}") from None
        return {spec.name: np.asarray(r) for spec, r in zip(self._outputs, results, strict=True)}

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            del self._session
