"""Hardware H.264 encode selection: which encoder runs, NVENC's settings, and the fall back to software when
NVENC cannot open or fails mid-stream. PyAV's codec open is faked: "present" hands FanoutEncoder a context
whose role is played by PyAV's software `libx264` (no GPU here), "missing" one that refuses to open. The
real NVENC run is part of scripts/gpu_proof.sh."""

from __future__ import annotations

from typing import Any

import av
import numpy as np
import pytest

from gateway.media.fanout import FanoutEncoder
from gateway.webrtc.codecs import hw_encode

REAL_CREATE = av.CodecContext.create


class _Nvenc:
    """h264_nvenc's context as FanoutEncoder sees it: what it is told is recorded, the work is libx264's."""

    made: list[_Nvenc] = []

    def __init__(self, open_error: Exception | None, fail_at: int | None) -> None:
        ctx = REAL_CREATE("libx264", "w")
        ctx.options = {"tune": "zerolatency", "preset": "ultrafast", "bframes": "0"}
        object.__setattr__(self, "ctx", ctx)
        object.__setattr__(self, "told", {})
        object.__setattr__(self, "open_error", open_error)
        object.__setattr__(self, "fail_at", fail_at)
        object.__setattr__(self, "encoded", 0)
        _Nvenc.made.append(self)

    def __setattr__(self, name: str, value: Any) -> None:
        self.told[name] = value
        if name not in ("options", "profile"):  # NVENC's own options mean nothing to libx264
            setattr(self.ctx, name, value)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.ctx, name)

    def open(self) -> None:
        if self.open_error is not None:
            raise self.open_error
        self.ctx.open()

    def encode(self, frame: av.VideoFrame) -> list[av.Packet]:
        object.__setattr__(self, "encoded", self.encoded + 1)
        if self.fail_at is not None and self.encoded >= self.fail_at:
            raise av.error.ExternalError(542398533, "nvenc: generic error in an external library")
        return list(self.ctx.encode(frame))


def _fake_av(
    monkeypatch: pytest.MonkeyPatch, open_error: Exception | None = None, fail_at: int | None = None
) -> list[str]:
    created: list[str] = []

    def create(name: str, mode: str = "r") -> Any:
        created.append(name)
        if name == hw_encode.HARDWARE:
            return _Nvenc(open_error, fail_at)
        return REAL_CREATE(name, mode)  # type: ignore[call-overload]

    monkeypatch.setattr(av.CodecContext, "create", create)
    _Nvenc.made = []
    return created


def _frames(n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    base = rng.integers(0, 255, (120, 160, 3), dtype=np.uint8)
    return [np.roll(base, 3 * i, axis=1) for i in range(n)]


def _encode_all(enc: FanoutEncoder, frames: list[np.ndarray]) -> list[av.Packet]:
    return [p for i, f in enumerate(frames) for p in enc.encode(f, i * 3000)]


def _decodes(packets: list[av.Packet]) -> int:
    dec = REAL_CREATE("h264", "r")
    return sum(len(dec.decode(av.Packet(bytes(p)))) for p in packets)  # type: ignore[attr-defined]


def _hardware(said: list[str]) -> hw_encode.HardwareH264:
    return hw_encode.HardwareH264(hw_encode.choose(lambda name: None), said.append)


def test_the_choice_names_the_encoder_and_why_not_hardware() -> None:
    present = hw_encode.choose(lambda name: None)
    assert present.hardware and present.h264 == "h264_nvenc"
    assert present.to_dict() == {
        "encoders": {"video/h264": "h264_nvenc", "video/vp8": "libvpx"},
        "software_reasons": {},
        "hardware_fallbacks": 0,
    }
    missing = hw_encode.choose(lambda name: f"{name}: no CUDA-capable device is detected")
    assert not missing.hardware and missing.h264 == "libx264"
    reasons = missing.to_dict()["software_reasons"]
    assert reasons == {"video/h264": "h264_nvenc: no CUDA-capable device is detected"}
    assert missing.summary() == "h264: libx264, vp8: libvpx"
    assert hw_encode.detect(enabled=False).reason == "hardware encode is turned off"


def test_probe_opens_nvenc_with_its_settings_and_says_why_it_cannot(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_av(monkeypatch)
    assert hw_encode.probe() is None  # opened
    told = _Nvenc.made[-1].told
    assert told["options"] == hw_encode.NVENC_OPTIONS
    assert (told["width"], told["height"]) == hw_encode.PROBE_SIZE
    _fake_av(monkeypatch, open_error=PermissionError(1, "Operation not permitted"))
    assert hw_encode.probe() == "h264_nvenc: [Errno 1] Operation not permitted"
    monkeypatch.setattr(av, "codecs_available", set(av.codecs_available) - {"h264_nvenc"})
    assert hw_encode.probe() == "h264_nvenc is not in this PyAV build"


def test_a_stream_encodes_on_nvenc_where_it_opened(monkeypatch: pytest.MonkeyPatch) -> None:
    created = _fake_av(monkeypatch)
    said: list[str] = []
    enc = FanoutEncoder(bitrate=500_000, codec="H264", hardware_h264=_hardware(said))
    enc.subscribe()
    packets = _encode_all(enc, _frames(5))
    assert enc.encoder_name == "h264_nvenc" and created == ["h264_nvenc"]
    assert _Nvenc.made[0].encoded == 5 and _Nvenc.made[0].told["options"]["forced-idr"] == "1"
    assert packets[0].is_keyframe and _decodes(packets) == 5
    assert said == []


def test_nvenc_that_cannot_open_leaves_the_stream_on_software(monkeypatch: pytest.MonkeyPatch) -> None:
    created = _fake_av(monkeypatch, open_error=av.error.InvalidDataError(22, "No capable devices found"))
    said: list[str] = []
    hardware = _hardware(said)
    enc = FanoutEncoder(bitrate=500_000, codec="H264", hardware_h264=hardware)
    packets = _encode_all(enc, _frames(4))
    assert enc.encoder_name == "libx264" and created.count("h264_nvenc") == 1  # tried once, not per frame
    assert _decodes(packets) == 4 and hardware.choice.fallbacks == 1
    assert len(said) == 1 and "h264_nvenc could not start" in said[0] and "in software" in said[0]


def test_nvenc_failing_mid_stream_hands_the_stream_to_software(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_av(monkeypatch, fail_at=3)
    said: list[str] = []
    hardware = _hardware(said)
    enc = FanoutEncoder(bitrate=500_000, codec="H264", hardware_h264=hardware)
    per_frame = [enc.encode(f, i * 3000) for i, f in enumerate(_frames(6))]
    assert enc.encoder_name == "libx264" and hardware.choice.fallbacks == 1
    assert all(per_frame[2:]) and per_frame[2][0].is_keyframe  # the failed frame itself, as a keyframe
    assert _decodes([p for ps in per_frame[2:] for p in ps]) == 4
    assert len(said) == 1 and "h264_nvenc failed" in said[0]


def test_vp8_and_the_software_choice_never_touch_nvenc(monkeypatch: pytest.MonkeyPatch) -> None:
    created = _fake_av(monkeypatch)
    vp8 = FanoutEncoder(bitrate=500_000, codec="VP8", hardware_h264=_hardware([]))
    _encode_all(vp8, _frames(2))
    software = hw_encode.HardwareH264(hw_encode.choose(lambda name: "missing"), lambda msg: None)
    h264 = FanoutEncoder(bitrate=500_000, codec="H264", hardware_h264=software)
    _encode_all(h264, _frames(2))
    assert "h264_nvenc" not in created
    assert vp8.encoder_name == "libvpx" and h264.encoder_name == "libx264"
