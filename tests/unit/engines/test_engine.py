"""run_batched and batch_size_of against a fake engine that records the batches it is given."""

from __future__ import annotations

import numpy as np
import pytest

from engines.engine import BatchRange, Engine, EngineError, TensorSpec, batch_size_of, run_batched


class RecordingEngine:
    """Doubles its input; records each batch size; can be told to drop an item (a broken backend)."""

    def __init__(self, lo: int, hi: int, drop: bool = False) -> None:
        self.seen: list[int] = []
        self._batch = BatchRange(lo, hi)
        self._drop = drop

    name = "fake"
    inputs = (TensorSpec("x", "float32", (None, 2)),)
    outputs = (TensorSpec("y", "float32", (None, 2)),)

    @property
    def batch(self) -> BatchRange:
        return self._batch

    def infer(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        x = inputs["x"]
        assert self._batch.min <= len(x) <= self._batch.max
        self.seen.append(len(x))
        y = x * 2
        return {"y": y[:-1] if self._drop else y}

    def close(self) -> None:
        pass


def test_fake_engine_satisfies_protocol() -> None:
    assert isinstance(RecordingEngine(1, 4), Engine)


def test_run_batched_splits_above_max_and_keeps_order() -> None:
    eng = RecordingEngine(1, 4)
    x = np.arange(20, dtype=np.float32).reshape(10, 2)
    out = run_batched(eng, {"x": x})
    assert eng.seen == [4, 4, 2]
    assert out["y"].shape == (10, 2)
    np.testing.assert_array_equal(out["y"], x * 2)


def test_run_batched_pads_a_short_tail_to_min_and_cuts_results() -> None:
    eng = RecordingEngine(4, 4)
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    out = run_batched(eng, {"x": x})
    assert eng.seen == [4, 4]
    np.testing.assert_array_equal(out["y"], x * 2)


def test_run_batched_single_chunk() -> None:
    eng = RecordingEngine(1, 8)
    out = run_batched(eng, {"x": np.ones((3, 2), np.float32)})
    assert eng.seen == [3] and out["y"].shape == (3, 2)


def test_output_batch_mismatch_is_an_error() -> None:
    with pytest.raises(EngineError, match="expected 3"):
        run_batched(RecordingEngine(1, 8, drop=True), {"x": np.ones((3, 2), np.float32)})


def test_inputs_disagreeing_on_batch() -> None:
    with pytest.raises(EngineError, match="disagree"):
        batch_size_of({"a": np.zeros((2, 1)), "b": np.zeros((3, 1))})


def test_batch_range_validation() -> None:
    with pytest.raises(ValueError):
        BatchRange(2, 1)
    with pytest.raises(ValueError):
        BatchRange(0, 4)
