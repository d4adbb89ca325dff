"""The retransmission budget applied to a real aiortc `RTCRtpSender`
(gateway.webrtc.congestion.retransmit_limit): the
NACKed packets it resends, those it refuses, and the keyframe it asks for when it refuses too many."""

from __future__ import annotations

from aiortc import RTCRtpSender
from aiortc.rtcrtpsender import RTP_HISTORY_SIZE
from aiortc.rtp import RtpPacket

from gateway.webrtc.congestion.retransmit_budget import RetransmitBudget
from gateway.webrtc.congestion.retransmit_limit import limit_retransmissions


class _Transport:
    state = "new"


def _sender_with_history(count: int) -> tuple[RTCRtpSender, list[int]]:
    """A real sender whose history holds packets 0..count-1 (988-byte payloads), and what it resent. Call
    it on a running loop: aiortc's sender takes the current loop when built."""
    sender = RTCRtpSender("video", _Transport())
    history = sender._RTCRtpSender__rtp_history  # type: ignore[attr-defined]
    for seq in range(count):
        history[seq % RTP_HISTORY_SIZE] = RtpPacket(payload_type=96, sequence_number=seq, payload=b"x" * 988)
    resent: list[int] = []

    async def original(sequence_number: int) -> None:
        resent.append(sequence_number)

    sender._retransmit = original  # type: ignore[method-assign]
    return sender, resent


async def test_a_nack_storm_after_a_fall_is_cut_to_the_budget_and_repaired_with_one_keyframe() -> None:
    sender, resent = _sender_with_history(120)
    budget = RetransmitBudget()
    keyframes: list[int] = []
    assert limit_retransmissions(sender, budget, lambda: 160_000.0, lambda: 0.2, lambda: keyframes.append(1))

    async def nack(sequences: range) -> None:
        for seq in sequences:
            await sender._retransmit(seq)

    await nack(range(100))  # ~100 packets dropped at once, the target now 160 kbit/s
    assert len(resent) == 20  # one second of the target: 20 packets of 1000 bytes
    # 11 refused are more than half a second of the budget: a keyframe instead, and every packet sent
    # before it (up to 119, the newest in the history) is given up
    assert keyframes == [1]
    assert budget.counters() == {
        "sent": 20,
        "skipped_budget": 11,
        "skipped_repeat": 0,
        "skipped_given_up": 69,
        "repair_keyframes": 1,
    }
    await nack(range(20, 120))  # NACKed again before the keyframe arrived: given up
    assert len(resent) == 20 and keyframes == [1]
    assert budget.counters()["skipped_given_up"] == 169
    await nack(range(5000, 5001))  # not in the history: skipped as aiortc would
    assert len(resent) == 20


def test_an_aiortc_without_the_internals_is_left_alone() -> None:
    class Bare:
        pass

    assert not limit_retransmissions(Bare(), RetransmitBudget(), lambda: 1.0)  # type: ignore[arg-type]
