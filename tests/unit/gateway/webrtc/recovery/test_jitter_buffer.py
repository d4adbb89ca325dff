"""Marker release on real RTP packets: a VP8 frame encoded and packetized by aiortc's own codec."""

from __future__ import annotations

import random
from fractions import Fraction

import numpy as np
import pytest
from aiortc.codecs import depayload, get_decoder, get_encoder
from aiortc.jitterbuffer import JitterBuffer, JitterFrame
from aiortc.rtcrtpparameters import RTCRtpCodecParameters
from aiortc.rtp import RtpPacket
from av import VideoFrame

from gateway.webrtc.install import create_peer_connection
from gateway.webrtc.interop.ice import IceConfig
from gateway.webrtc.recovery.jitter_buffer import MarkerJitterBuffer, apply_low_latency_receive

VP8 = RTCRtpCodecParameters(mimeType="video/VP8", clockRate=90000, payloadType=96)


def _frames(count: int, width: int = 320, height: int = 240) -> list[list[RtpPacket]]:
    """`count` consecutive VP8 frames as RTP packet lists (marker on each frame's last packet)."""
    encoder = get_encoder(VP8)
    rng = np.random.default_rng(1)
    seq = 1000
    out: list[list[RtpPacket]] = []
    for i in range(count):
        image = rng.integers(0, 255, (height, width, 3), dtype=np.uint8)  # noisy -> several packets per frame
        frame = VideoFrame.from_ndarray(image, format="rgb24")
        frame.pts = i * 3000
        frame.time_base = Fraction(1, 90000)
        payloads, timestamp = encoder.encode(frame)
        packets = []
        for j, payload in enumerate(payloads):
            p = RtpPacket(
                payload_type=96,
                sequence_number=seq,
                timestamp=timestamp,
                marker=j == len(payloads) - 1,
                payload=payload,
            )
            p._data = depayload(VP8, payload)  # type: ignore[attr-defined]
            packets.append(p)
            seq += 1
        out.append(packets)
    return out


def test_frame_released_on_marker_packet() -> None:
    frames = _frames(2)
    assert len(frames[0]) > 1, "test needs a multi-packet frame"
    marker_buffer = MarkerJitterBuffer()
    stock = JitterBuffer(capacity=512, is_video=True)
    released: list[JitterFrame] = []
    for packet in frames[0]:
        _, stock_frame = stock.add(packet)
        assert stock_frame is None  # stock aiortc waits for the next frame's first packet
        _, frame = marker_buffer.add(packet)
        if frame is not None:
            assert packet.marker, "released before the frame was complete"
            released.append(frame)
    assert len(released) == 1
    # the stock buffer emits the same bytes only once the next frame starts
    _, late = stock.add(frames[1][0])
    assert late is not None and late.data == released[0].data
    decoded = get_decoder(VP8).decode(released[0])
    assert decoded and decoded[0].width == 320 and decoded[0].height == 240  # type: ignore[attr-defined]


def test_reordered_packets_release_when_gap_fills() -> None:
    frames = _frames(1)
    packets = frames[0]
    assert len(packets) >= 3
    order = [packets[0], packets[-1], *packets[1:-1]]  # marker arrives before the middle packets
    buffer = MarkerJitterBuffer()
    outs = [buffer.add(p)[1] for p in order]
    assert all(o is None for o in outs[:-1])
    assert outs[-1] is not None
    assert outs[-1].data == b"".join(p._data for p in packets)  # type: ignore[attr-defined]


def test_missing_packet_holds_frame_and_frames_stay_in_order() -> None:
    frames = _frames(3)
    buffer = MarkerJitterBuffer()
    lost = frames[0][1]
    emitted: list[int] = []
    for packets in frames:
        for p in packets:
            if p is lost:
                continue
            _, f = buffer.add(p)
            if f is not None:
                emitted.append(f.timestamp)
    assert emitted == []  # never a corrupt frame, never out of order
    _, f = buffer.add(lost)  # retransmission arrives
    assert f is not None and f.timestamp == frames[0][0].timestamp
    assert buffer.completed_at(0) is not None


def test_many_frames_each_released_on_its_marker() -> None:
    frames = _frames(6, 160, 120)
    buffer = MarkerJitterBuffer()
    got = []
    for packets in frames:
        for p in packets:
            _, f = buffer.add(p)
            if f is not None:
                got.append((f.timestamp, p is packets[-1]))
    assert [t for t, _ in got] == [p[0].timestamp for p in frames]
    assert all(on_marker for _, on_marker in got)


@pytest.mark.asyncio
async def test_apply_is_per_connection_and_idempotent() -> None:
    pc = create_peer_connection(IceConfig.loopback_only())
    other = create_peer_connection(IceConfig.loopback_only(), low_latency_receive=False)
    try:
        pc.addTransceiver("video", direction="recvonly")
        other.addTransceiver("video", direction="recvonly")
        assert apply_low_latency_receive(pc)
        ours = pc.getTransceivers()[0].receiver._RTCRtpReceiver__jitter_buffer  # type: ignore[attr-defined]
        theirs = other.getTransceivers()[0].receiver._RTCRtpReceiver__jitter_buffer  # type: ignore[attr-defined]
        assert isinstance(ours, MarkerJitterBuffer)
        assert not isinstance(theirs, MarkerJitterBuffer)
        audio = pc.addTransceiver("audio", direction="recvonly")
        assert not isinstance(audio.receiver._RTCRtpReceiver__jitter_buffer, MarkerJitterBuffer)  # type: ignore
    finally:
        await pc.close()
        await other.close()


def test_random_order_never_emits_partial() -> None:
    frames = _frames(2, 160, 120)
    rng = random.Random(3)
    first, rest = frames[0][0], [p for f in frames for p in f][1:]
    rng.shuffle(rest)  # the buffer's origin is the first packet it sees (as in stock aiortc)
    packets = [first, *rest]
    buffer = MarkerJitterBuffer()
    complete = {f[0].timestamp: b"".join(p._data for p in f) for f in frames}  # type: ignore[attr-defined]
    for p in packets:
        _, out = buffer.add(p)
        if out is not None:
            assert out.data == complete[out.timestamp]
