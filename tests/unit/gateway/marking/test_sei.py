"""The statements beside the mark: the H.264 SEI message on every keyframe (parsed back from the encoder's
own output), the header value, the visible label (readable: its band is drawn at 320x240)."""

from __future__ import annotations

import av
import numpy as np

from gateway.marking.config import DIGITAL_SOURCE_TYPE, MarkingConfig, disclosure_headers
from gateway.marking.label import draw_label, draw_label_i420
from gateway.marking.sei import _escaped, _unescaped, find_statement, sei_nal
from gateway.media.fanout import FanoutEncoder
from gateway.media.planes import plane_views


def test_sei_round_trips_and_escapes_start_code_emulation() -> None:
    config = MarkingConfig(key=b"k" * 32)
    statement = find_statement(sei_nal(config) + b"\x00\x00\x00\x01\x65\x88")
    assert statement is not None
    assert statement["synthetic"] is True and statement["digital_source_type"] == DIGITAL_SOURCE_TYPE
    assert statement["key_id"] == config.key_id and statement["mark"] == "on"
    raw = bytes([0, 0, 1, 0, 0, 0, 7, 0, 0, 3])
    assert b"\x00\x00\x01" not in _escaped(raw)[:-1] and _unescaped(_escaped(raw)) == raw
    assert find_statement(b"\x00\x00\x00\x01\x65\x88\x84") is None


def test_every_h264_keyframe_carries_the_statement_and_vp8_is_untouched() -> None:
    image = np.full((240, 320, 3), 100, np.uint8)
    h264 = FanoutEncoder(bitrate=300_000, codec="H264")
    h264.keyframe_prefix = sei_nal(MarkingConfig())
    packets = [p for k in range(3) for p in h264.encode(image, k * 6000)]
    h264.request_keyframe()
    packets += h264.encode(image, 18000)
    keyframes = [p for p in packets if p.is_keyframe]
    assert len(keyframes) == 2 and all(find_statement(bytes(p)) is not None for p in keyframes)
    assert all(find_statement(bytes(p)) is None for p in packets if not p.is_keyframe)
    decoder = av.CodecContext.create("h264", "r")
    decoded = [f for p in packets for f in decoder.decode(av.Packet(bytes(p)))]
    assert len(decoded) == 4  # still a valid stream
    vp8 = FanoutEncoder(bitrate=300_000, codec="VP8")
    vp8.keyframe_prefix = sei_nal(MarkingConfig())
    assert all(find_statement(bytes(p)) is None for p in vp8.encode(image, 0))


def test_header_says_synthetic_and_whether_marked() -> None:
    value = disclosure_headers(MarkingConfig(key=b"k" * 32))["Livefuse-Synthetic-Content"]
    assert "trainedAlgorithmicMedia" in value and "mark=on" in value and "key-id=" in value
    assert "mark=off" in disclosure_headers(MarkingConfig(enabled=False))["Livefuse-Synthetic-Content"]


def test_label_is_drawn_in_a_band_with_text_on_i420_and_rgb() -> None:
    frame = av.VideoFrame.from_ndarray(np.full((360, 320), 128, np.uint8), format="yuv420p")
    draw_label_i420(frame, "AI-generated")
    y, u, _ = plane_views(frame)
    band = y[:20, :100]
    assert (band == 16).mean() > 0.4 and (band > 200).sum() > 30  # dark band, bright strokes
    assert (u[:10, :50] == 128).all() and (y[100:] == 128).all()  # neutral chroma; the rest untouched
    rgb = draw_label(np.full((240, 320, 3), 128, np.uint8), "AI-generated")
    assert (rgb[:20, :100] > 200).any() and (rgb[100:] == 128).all()
