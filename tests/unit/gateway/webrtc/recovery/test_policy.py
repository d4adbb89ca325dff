"""Receive-side loss recovery: the pure policy (gateway.webrtc.recovery.policy) and the jitter buffer that
uses it."""

from __future__ import annotations

from aiortc.rtp import RtpPacket

from gateway.webrtc.recovery.jitter_buffer import MarkerJitterBuffer
from gateway.webrtc.recovery.policy import LossRecovery, RecoveryConfig, is_keyframe

KEY = b"\x10\x02\x00\x9d\x01\x2a"  # VP8 frame tag with the inverted key-frame bit clear
INTER = b"\x31\x02\x00"


def test_nacks_repeat_on_their_interval_a_bounded_number_of_times() -> None:
    recovery = LossRecovery(RecoveryConfig(nack_interval_s=0.1, nack_retries=2))
    recovery.on_packet(10, 0.0)
    recovery.on_packet(13, 0.0)  # 11 and 12 missing; aiortc NACKed them once already
    assert recovery.nacks_due(0.05) == []
    assert recovery.nacks_due(0.1) == [11, 12]
    recovery.on_packet(11, 0.15)  # the retransmission arrived
    assert recovery.nacks_due(0.2) == [12]
    assert recovery.nacks_due(0.3) == []  # retries spent
    assert recovery.counters.nacks_resent == 3


def test_no_nack_storm_on_a_congested_link() -> None:
    recovery = LossRecovery(RecoveryConfig(max_nack_list=4))
    recovery.on_packet(0, 0.0)
    recovery.on_packet(10, 0.0)
    assert recovery.nacks_due(1.0) == []


def test_keyframe_wait_repeats_pli_and_gives_up_after_a_while() -> None:
    recovery = LossRecovery(RecoveryConfig(pli_interval_s=0.5, max_keyframe_wait_s=3.0))
    recovery.skipped(1.0, at_keyframe=False)
    assert recovery.pli_due(1.0) and not recovery.pli_due(1.2) and recovery.pli_due(1.5)
    assert recovery.release(is_keyframe=False, now=2.0) is False
    assert recovery.release(is_keyframe=True, now=2.1) is True and not recovery.pli_due(3.0)
    recovery.skipped(5.0, at_keyframe=False)
    assert recovery.release(is_keyframe=False, now=8.5) is True  # the sender never answered: decode on


def test_is_keyframe() -> None:
    assert is_keyframe(KEY) and not is_keyframe(INTER) and not is_keyframe(b"")
    assert is_keyframe(b"\x00\x00\x00\x01\x67\x42" + b"\x00\x00\x00\x01\x65\x88")  # SPS + IDR
    assert not is_keyframe(b"\x00\x00\x00\x01\x41\x9a")  # non-IDR slice


def _packet(seq: int, ts: int, data: bytes, marker: bool) -> RtpPacket:
    packet = RtpPacket(payload_type=96, sequence_number=seq, timestamp=ts)
    packet.marker = int(marker)
    packet._data = data  # type: ignore[attr-defined]
    return packet


def test_a_lost_frame_is_skipped_and_the_buffer_jumps_to_the_newest_keyframe(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    clock = [0.0]
    monkeypatch.setattr("gateway.webrtc.recovery.jitter_buffer.time.monotonic", lambda: clock[0])
    buffer = MarkerJitterBuffer(capacity=128, recovery=RecoveryConfig(give_up_s=0.5))
    nacked: list[list[int]] = []
    buffer.send_nack = lambda ssrc, seqs: nacked.append(seqs)
    assert buffer.add(_packet(1, 1000, KEY, True))[1] is not None
    # packet 2 (a whole frame) is lost for good; inter frames pile up behind it, then a 2-packet keyframe
    released = []
    for seq, (data, marker) in enumerate(
        [(INTER, True), (INTER, True), (KEY, False), (b"k2", True)], start=3
    ):
        clock[0] += 0.2
        pli, frame = buffer.add(_packet(seq, 1000 + min(seq, 5) * 10, data, marker))
        released.append(frame)
    assert nacked and nacked[0] == [2]  # asked again before giving up
    assert released[:3] == [None, None, None]  # blocked behind the hole (0.2, 0.4 s), keyframe incomplete
    assert released[3] is not None and released[3].data == KEY + b"k2"  # skipped to the keyframe, decoded
    assert buffer.recovery.counters.gaps_skipped == 1 and not buffer.recovery.awaiting_keyframe


def test_a_stream_that_starts_on_an_inter_frame_asks_for_a_keyframe_at_once() -> None:
    recovery = LossRecovery(RecoveryConfig(max_keyframe_wait_s=3.0))
    recovery.start(is_keyframe=False, now=1.0)
    assert recovery.pli_due(1.0)  # no wait for the publisher's next scheduled keyframe
    assert recovery.release(is_keyframe=False, now=1.0) is False  # undecodable: held back
    assert recovery.release(is_keyframe=True, now=1.1) is True
    recovery.start(is_keyframe=False, now=2.0)  # only the first frame starts the stream
    assert not recovery.pli_due(2.0) and recovery.counters.keyframe_requests == 1


def test_a_stream_that_starts_on_a_keyframe_asks_for_nothing() -> None:
    buffer = MarkerJitterBuffer(capacity=128)
    pli, frame = buffer.add(_packet(1, 1000, KEY, True))
    assert frame is not None and not pli and buffer.recovery.started


def test_the_buffer_asks_for_a_keyframe_when_the_first_frame_is_not_one() -> None:
    buffer = MarkerJitterBuffer(capacity=128)
    pli, frame = buffer.add(_packet(1, 1000, INTER, True))
    assert pli and frame is None  # a PLI goes out with this packet; the inter frame is not decoded
    pli, frame = buffer.add(_packet(2, 1010, KEY, True))
    assert frame is not None and frame.data == KEY and not pli
