"""The native TensorRT backend's context pool (GPU-free) and its import guard."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pytest

from engines.backends.trt_planning import BatchProfile
from engines.engine import EngineError


@dataclass
class Slot:
    profile: BatchProfile
    name: str


def test_pool_hands_each_thread_its_own_context() -> None:
    from engines.backends.tensorrt_engine import ContextPool

    pool = ContextPool([Slot(BatchProfile(1, 4, 8), "a"), Slot(BatchProfile(1, 4, 8), "b")], timeout_s=5)
    in_use: set[str] = set()
    overlap: list[str] = []
    peak = [0]
    both = threading.Condition()

    def work() -> None:
        with pool.take(3) as slot:
            with both:
                if slot.name in in_use:
                    overlap.append(slot.name)
                in_use.add(slot.name)
                peak[0] = max(peak[0], len(in_use))
                both.notify_all()
                # hold the context until a second thread holds the other one (the pool has two): waits for
                # that event, not for a thread to start within some milliseconds
                both.wait_for(lambda: peak[0] >= 2, timeout=5.0)
                in_use.discard(slot.name)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert not overlap
    assert peak[0] == 2


def test_pool_picks_a_context_whose_profile_holds_the_batch() -> None:
    from engines.backends.tensorrt_engine import ContextPool

    small, big = Slot(BatchProfile(1, 1, 2), "small"), Slot(BatchProfile(1, 8, 16), "big")
    pool = ContextPool([small, big], timeout_s=0.2)
    with pool.take(10) as slot:
        assert slot is big
        with pytest.raises(EngineError, match="no free execution context"):
            with pool.take(12):
                pass
        with pool.take(2) as other:
            assert other is small
    with pytest.raises(EngineError, match="fits no"):
        with pool.take(17):
            pass


def test_drain_closes_the_pool() -> None:
    from engines.backends.tensorrt_engine import ContextPool

    slots = [Slot(BatchProfile(1, 1, 4), "a")]
    pool = ContextPool(slots, timeout_s=1)
    assert pool.drain(1) == slots
    with pytest.raises(EngineError, match="closed"):
        with pool.take(1):
            pass


def test_trt_engine_without_tensorrt_is_one_line() -> None:
    try:
        import tensorrt  # noqa: F401

        pytest.skip("tensorrt is installed here")
    except ImportError:
        pass
    from engines.backends.tensorrt_engine import TrtEngine

    with pytest.raises(EngineError) as err:
        TrtEngine(b"plan")
    assert str(err.value) == "TensorRT backend needs an NVIDIA GPU and `pip install 'livefuse[gpu]'`"
