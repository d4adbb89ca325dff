"""loadgen.publisher_encoder: aiortc's VP8 encoder with the denoiser the run asks for. What it sends must be
what aiortc sends (VP8 payloads a receiver depacketizes and decodes, re-created when the REMB target moves by
more than 10 %, keyframes on request), and with the denoiser off every stamp of the loop must survive."""

from __future__ import annotations

import os
from fractions import Fraction

import av
import pytest
from aiortc import RTCPeerConnection
from aiortc.codecs.vpx import VpxPayloadDescriptor, vp8_depayload

from loadgen.media import default_media_dir
from loadgen.publisher_encoder import PublisherVp8Encoder, use_publisher_encoder
from loadgen.stamp import read_stamp
from loadgen.synth import SynthConfig, build_loop


def _frame(loop: object, i: int) -> av.VideoFrame:
    frame = loop.frame(i)  # type: ignore[attr-defined]
    frame.pts, frame.time_base = i * 6000, Fraction(1, 90000)
    return frame


@pytest.fixture(scope="module")
def loop() -> object:
    try:
        return build_loop(SynthConfig(320, 240, 15.0), default_media_dir(os.environ))
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"test media not provisioned: {exc}")


def test_what_it_sends_decodes_and_every_stamp_survives_without_the_denoiser(loop: object) -> None:
    encoder = PublisherVp8Encoder(noise_sensitivity=0)
    encoder.target_bitrate = 1_000_000
    decoder = av.CodecContext.create("vp8", "r")
    read, keyframes = [], 0
    for i in range(1, 121):
        payloads, timestamp = encoder.encode(_frame(loop, i), force_keyframe=i == 60)
        assert timestamp == i * 6000 and payloads
        descriptor, _ = VpxPayloadDescriptor.parse(payloads[0])
        assert descriptor.partition_start == 1 and descriptor.partition_id == 0
        data = b"".join(vp8_depayload(p) for p in payloads)
        keyframes += not data[0] & 1  # VP8 frame tag: bit 0 clear = keyframe
        for decoded in decoder.decode(av.Packet(data)):
            read.append(read_stamp(decoded.to_ndarray(format="yuv420p")[:240]))
    assert read == list(range(1, 121))
    assert keyframes == 2  # the first frame and the one asked for


def test_a_target_moved_by_more_than_10_percent_makes_a_new_encoder(loop: object) -> None:
    encoder = PublisherVp8Encoder()
    encoder.encode(_frame(loop, 1))
    first = encoder.codec
    encoder.target_bitrate = int(encoder.target_bitrate * 1.08)  # within 10 %: kept, as aiortc does
    encoder.encode(_frame(loop, 2))
    assert encoder.codec is first
    encoder.target_bitrate = int(encoder.target_bitrate * 1.2)
    encoder.encode(_frame(loop, 3))
    assert encoder.codec is not first and encoder.codec.bit_rate == encoder.target_bitrate  # type: ignore[union-attr]
    assert encoder.noise_sensitivity == 0
    # libvpx took every option it was given (FFmpeg leaves the ones it did not know in `options`)
    assert not set(encoder.codec.options) & {"noise-sensitivity", "cpu-used", "static-thresh"}  # type: ignore[union-attr]


async def test_installed_for_vp8_only_and_only_before_the_sender_made_its_own() -> None:
    pc = RTCPeerConnection()
    try:
        sender = pc.addTransceiver("video", direction="sendonly").sender
        assert not use_publisher_encoder(sender, "video/H264", 0)  # not VP8: aiortc's
        assert not use_publisher_encoder(sender, "video/VP8", 4)  # aiortc's own setting: nothing to do
        assert sender._RTCRtpSender__encoder is None  # type: ignore[attr-defined]  # noqa: SLF001
        assert use_publisher_encoder(sender, "video/VP8", 0)
        installed = sender._RTCRtpSender__encoder  # type: ignore[attr-defined]  # noqa: SLF001
        assert isinstance(installed, PublisherVp8Encoder) and installed.noise_sensitivity == 0
        with pytest.raises(RuntimeError, match="already made its encoder"):
            use_publisher_encoder(sender, "video/VP8", 1)
    finally:
        await pc.close()
    with pytest.raises(ValueError, match="0..6"):
        PublisherVp8Encoder(noise_sensitivity=9)
