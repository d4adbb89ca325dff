"""The pacer's budget (gateway.media.pacer) and its place on the transport (gateway.rtc.pacing): a frame
within the burst leaves at once, a larger one is spread at the pacing rate, order is kept, and only the
paced sender's packets wait."""

from __future__ import annotations

import asyncio
import struct
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from gateway.media.pacer import PacingBudget, PacingConfig
from gateway.rtc.pacing import install_pacer

RATE = 400_000.0  # target: pacing at 1 Mbit/s (2.5x), a burst of 40 ms = 5000 bytes


def test_a_frame_within_the_burst_leaves_at_once() -> None:
    budget = PacingBudget(PacingConfig())
    assert [budget.depart(10.0, 1000, RATE) for _ in range(5)] == [10.0] * 5  # 5000 bytes: the burst
    assert budget.paced == 0


def test_a_larger_frame_is_spread_at_the_pacing_rate_in_order() -> None:
    budget = PacingBudget(PacingConfig())
    departs = [budget.depart(10.0, 1000, RATE) for _ in range(15)]  # a 15 kB keyframe
    assert departs[:6] == [10.0] * 6
    gaps = [b - a for a, b in zip(departs[5:], departs[6:], strict=False)]
    assert all(abs(g - 0.008) < 1e-9 for g in gaps)  # 1000 bytes at 1 Mbit/s
    assert departs[-1] == pytest.approx(10.0 + 14 * 0.008 - 0.040)  # its slot, less the burst
    assert budget.paced == 9


def test_the_budget_refills_while_nothing_is_sent() -> None:
    budget = PacingBudget(PacingConfig())
    for _ in range(15):
        budget.depart(10.0, 1000, RATE)
    assert budget.depart(10.5, 1000, RATE) == 10.5  # the backlog left long ago


def test_a_low_target_is_not_paced_below_the_floor() -> None:
    budget = PacingBudget(PacingConfig(min_rate_bps=300_000))
    first, second = (budget.depart(0.0, 1500, 50_000.0) for _ in range(2))
    budget2 = PacingBudget(PacingConfig(burst_s=0.0, min_rate_bps=300_000))
    a, b = budget2.depart(0.0, 1500, 50_000.0), budget2.depart(0.0, 1500, 50_000.0)
    assert (first, second, a) == (0.0, 0.0, 0.0)
    assert b == pytest.approx(1500 * 8 / 300_000)  # 300 kbit/s, not 2.5 x 50 kbit/s


def test_bad_config_is_refused() -> None:
    with pytest.raises(ValueError):
        PacingConfig(factor=0.5)


def _rtp(ssrc: int, size: int = 1000) -> bytes:
    return struct.pack("!BBHII", 0x80, 96, 1, 0, ssrc) + b"\0" * (size - 12)


@dataclass
class _Transport:
    sent: list[tuple[float, int]] = field(default_factory=list)

    async def _send_rtp(self, data: bytes) -> None:
        self.sent.append((time.monotonic(), struct.unpack_from("!I", data, 8)[0]))


@dataclass
class _Sender:
    transport: Any
    _ssrc: int = 1111
    _rtx_ssrc: int = 2222


async def test_only_the_senders_packets_wait_and_they_keep_their_order() -> None:
    transport = _Transport()
    budget = install_pacer(_Sender(transport), lambda: RATE)  # type: ignore[arg-type]
    assert budget is not None
    assert install_pacer(_Sender(transport), lambda: RATE) is None  # type: ignore[arg-type]  # once only
    start = time.monotonic()
    video = [transport._send_rtp(_rtp(1111)) for _ in range(12)]  # 12 kB: 7 kB past the burst
    await asyncio.gather(*video, transport._send_rtp(_rtp(3333)), transport._send_rtp(_rtp(2222)))
    order = [ssrc for _, ssrc in transport.sent]
    assert order.index(3333) < order.index(2222)  # audio (another SSRC) did not wait behind the frame
    assert order.count(1111) == 12 and order[-1] == 2222  # the retransmission keeps its turn
    last_video = max(t for t, ssrc in transport.sent if ssrc == 1111)
    assert last_video - start >= 0.045  # 7 kB at 1 Mbit/s, less the clock's slack
    assert budget.paced >= 7
