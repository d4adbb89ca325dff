"""The loss-based cap on the REMB sent to publishers: counting, policy, the receiver it is installed on."""

from __future__ import annotations

from typing import Any

import pytest
from aiortc.rtp import (
    RTCP_PSFB_APP,
    RTCP_PSFB_PLI,
    RtcpPsfbPacket,
    RtpPacket,
    pack_remb_fci,
    unpack_remb_fci,
)

from gateway.webrtc.congestion import uplink_feedback
from gateway.webrtc.congestion.uplink_rate import (
    SequenceCounter,
    UplinkRateConfig,
    UplinkRatePolicy,
    UplinkWindow,
)
from gateway.webrtc.install import create_peer_connection
from gateway.webrtc.interop.ice import IceConfig
from gateway.webrtc.recovery.jitter_buffer import MarkerJitterBuffer

# --- counting -------------------------------------------------------------------------------------


def test_counter_expected_received_and_bytes() -> None:
    c = SequenceCounter()
    for seq in range(100, 150):
        if seq % 5 != 0:  # every 5th lost
            c.add(seq, 1000)
    w = c.take(1.0)
    assert (w.expected, w.received) == (49, 40)  # 101..149 span from the first packet seen (101)
    assert w.received_bps == 40 * 1000 * 8
    assert w.loss == pytest.approx(9 / 49)
    for seq in range(150, 160):
        c.add(seq, 10)
    w2 = c.take(0.5)
    assert (w2.expected, w2.received, w2.loss) == (10, 10, 0.0)  # the next window starts after 149


def test_counter_wraps_and_counts_retransmissions_as_late_not_received() -> None:
    c = SequenceCounter()
    for seq in [65530, 65531, 65533, 65534, 65535, 0, 1, 3, 4]:
        c.add(seq, 1)
    c.add(2, 1)  # late, after 3 and 4 (a retransmission): does not move the span back
    c.add(65532, 1)  # retransmission from before the wrap
    w = c.take(1.0)
    assert (w.expected, w.received, w.late) == (11, 9, 2)
    assert w.loss == pytest.approx(2 / 11)  # the first transmissions' loss: the congestion signal
    assert w.payload_bytes == 11  # but the link did carry the retransmissions


def test_counter_restarts_on_a_sequence_jump() -> None:
    c = SequenceCounter()
    for seq in range(10, 40):
        c.add(seq, 1)
    for seq in range(20000, 20010):  # the sender restarted its numbering
        c.add(seq, 1)
    w = c.take(1.0)
    assert (w.expected, w.received) == (10, 10)


def test_loss_never_negative_with_duplicates() -> None:
    assert UplinkWindow(expected=10, received=14, payload_bytes=0, seconds=1).loss == 0.0


# --- policy ---------------------------------------------------------------------------------------


def _window(
    loss: float, sent_bps: float = 1_000_000, seconds: float = 1.0, expected: int = 100
) -> UplinkWindow:
    received = round(expected * (1 - loss))
    return UplinkWindow(expected, received, int(sent_bps * (received / expected) * seconds / 8), seconds)


def test_heavy_loss_caps_below_what_was_sent_and_keeps_going_down_to_the_floor() -> None:
    policy = UplinkRatePolicy(UplinkRateConfig(min_bps=150_000))
    cap = policy.on_window(_window(0.4, sent_bps=1_000_000))
    assert cap == pytest.approx(1_000_000 * 0.8, rel=0.01)  # GCC: sent * (1 - 0.5 * loss)
    caps: list[float] = [cap or 0.0]
    for _ in range(12):  # a publisher that follows: it now sends what it was told
        caps.append(policy.on_window(_window(0.4, sent_bps=caps[-1])) or 0.0)
    assert all(b < a or b == 150_000 for a, b in zip(caps, caps[1:], strict=False))
    assert caps[-1] == 150_000
    assert policy.decreases == 13


def test_cap_never_rises_with_a_publisher_sending_more_while_lossy() -> None:
    policy = UplinkRatePolicy(UplinkRateConfig())
    first = policy.on_window(_window(0.3, sent_bps=600_000))
    second = policy.on_window(_window(0.3, sent_bps=2_000_000))  # ignored our REMB and sent more
    assert first is not None and second is not None and second < first


def test_moderate_loss_holds_and_low_loss_grows_then_releases() -> None:
    cfg = UplinkRateConfig(increase_per_s=0.08, max_bps=1_000_000)
    policy = UplinkRatePolicy(cfg)
    cap = policy.on_window(_window(0.5, sent_bps=800_000))
    assert cap is not None
    assert policy.on_window(_window(0.05)) == cap  # between loss_low and loss_high: hold
    grown = policy.on_window(_window(0.0, seconds=2.0))
    assert grown == pytest.approx(cap * 1.08**2)
    for _ in range(60):
        if policy.on_window(_window(0.0)) is None:
            break
    assert policy.cap_bps is None  # past max_bps: the delay-based estimate rules alone again
    assert policy.capped(1_234_567) == 1_234_567


def test_clean_stream_is_never_capped_and_thin_windows_decide_nothing() -> None:
    policy = UplinkRatePolicy(UplinkRateConfig(min_packets=20))
    assert policy.on_window(_window(0.0)) is None
    assert policy.on_window(_window(0.9, expected=10)) is None  # 10 packets: too few to judge
    assert policy.last_loss == 0.0


def test_a_standing_uplink_queue_caps_the_publisher_before_it_loses_anything() -> None:
    policy = UplinkRatePolicy(UplinkRateConfig())
    assert policy.on_window(_window(0.0, sent_bps=700_000), queue_s=0.01) is None
    assert policy.on_window(_window(0.0, sent_bps=700_000), queue_s=0.12) is None  # once: a burst
    cap = policy.on_window(_window(0.0, sent_bps=700_000), queue_s=0.15)  # twice, and growing
    assert cap == pytest.approx(700_000 * 0.85, rel=0.01) and policy.delay_decreases == 1
    assert policy.on_window(_window(0.0, sent_bps=590_000), queue_s=0.10) == cap  # draining: hold
    assert policy.on_window(_window(0.0, sent_bps=590_000), queue_s=0.05) == cap  # some queue: no growth
    assert (policy.on_window(_window(0.0, sent_bps=590_000), queue_s=0.0) or 0) > cap  # empty: grows again
    fresh = UplinkRatePolicy(UplinkRateConfig())
    assert fresh.on_window(_window(0.0, sent_bps=700_000), queue_s=0.2) is not None  # 2x the mark at once
    assert UplinkRatePolicy(UplinkRateConfig()).on_window(_window(0.0), queue_s=None) is None  # unmeasured


def test_config_is_checked() -> None:
    with pytest.raises(ValueError):
        UplinkRateConfig(delay_low_s=0.1, delay_high_s=0.05)
    with pytest.raises(ValueError):
        UplinkRateConfig(loss_low=0.2, loss_high=0.1)
    with pytest.raises(ValueError):
        UplinkRateConfig(min_bps=0)


# --- on a receiver --------------------------------------------------------------------------------


class _Receiver:
    """The two things `UplinkFeedback` uses of an aiortc receiver: its RTCP sender SSRC and `_send_rtcp`."""

    def __init__(self) -> None:
        self.sent: list[Any] = []
        self._RTCRtpReceiver__rtcp_ssrc = 4242

    async def send(self, packet: Any) -> None:
        self.sent.append(packet)


def _remb(bps: int, ssrcs: list[int]) -> RtcpPsfbPacket:
    return RtcpPsfbPacket(fmt=RTCP_PSFB_APP, ssrc=4242, media_ssrc=0, fci=pack_remb_fci(bps, ssrcs))


@pytest.mark.asyncio
async def test_rembs_leave_capped_and_the_cap_is_announced() -> None:
    rx = _Receiver()
    fb = uplink_feedback.UplinkFeedback(rx, UplinkRateConfig(), rx.send)  # type: ignore[arg-type]
    await fb.send_rtcp(_remb(1_500_000, [7]))  # no loss seen yet: unchanged
    assert unpack_remb_fci(rx.sent[-1].fci) == (1_500_000, [7])
    await fb.announce()  # no cap: nothing to say
    assert len(rx.sent) == 1
    for seq in range(1, 201):
        if seq % 2:  # half the packets lost
            fb.on_packet(RtpPacket(payload_type=96, sequence_number=seq, ssrc=7, payload=b"x" * 500))
    cap = fb.close_window(1.0)
    assert cap is not None and cap < 1_500_000
    await fb.send_rtcp(_remb(1_500_000, [7]))
    bitrate, ssrcs = unpack_remb_fci(rx.sent[-1].fci)
    assert bitrate == int(cap) and ssrcs == [7] and fb.rembs_capped == 1
    await fb.send_rtcp(RtcpPsfbPacket(fmt=RTCP_PSFB_PLI, ssrc=4242, media_ssrc=7))  # not a REMB: untouched
    assert rx.sent[-1].fmt == RTCP_PSFB_PLI
    await fb.announce()
    announced = rx.sent[-1]
    assert announced.fmt == RTCP_PSFB_APP and announced.ssrc == 4242
    assert unpack_remb_fci(announced.fci) == (int(cap), [7])
    stats = fb.stats()
    assert stats["cap_kbps"] == round(cap / 1000)
    assert stats["last_window"]["loss"] == pytest.approx(0.4975, abs=0.01)


@pytest.mark.asyncio
async def test_installed_on_a_gateway_video_receiver_only_when_enabled() -> None:
    pc = create_peer_connection(IceConfig.loopback_only())
    try:
        receiver = pc.addTransceiver("video", direction="recvonly").receiver
        assert uplink_feedback.install(receiver, UplinkRateConfig(enabled=False)) is None
        fb = uplink_feedback.install(receiver, UplinkRateConfig())
        assert fb is not None and uplink_feedback.install(receiver, UplinkRateConfig()) is fb
        buffer = receiver._RTCRtpReceiver__jitter_buffer  # type: ignore[attr-defined]
        assert isinstance(buffer, MarkerJitterBuffer) and buffer.packet_observer == fb.on_packet
        buffer.add(RtpPacket(payload_type=96, sequence_number=5, ssrc=9, payload=b"\x10\x00"))
        assert fb.close_window(1.0) is None and fb.last_window is not None
        assert fb.last_window["received"] == 1
        audio = pc.addTransceiver("audio", direction="recvonly").receiver
        assert uplink_feedback.install(audio, UplinkRateConfig()) is None  # no marker buffer on audio
    finally:
        await pc.close()
