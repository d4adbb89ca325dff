"""Hardware decode selection: which decoder runs per codec, the aiortc hook and its undo, and the fallback
to software mid-stream. The hardware decoder's role is played by PyAV's software `h264` where no GPU is
present: the wiring under test is the same; the real NVDEC run is part of scripts/gpu_proof.sh."""

from __future__ import annotations

from fractions import Fraction
from types import SimpleNamespace
from typing import Any

import av
import numpy as np
import pytest
from aiortc.codecs import get_decoder as stock_get_decoder

from gateway.webrtc.codecs import hw_decode
from gateway.webrtc.install import install_decoders


def _h264_packets(n: int = 6) -> list[bytes]:
    enc = av.CodecContext.create("libx264", "w")
    enc.width, enc.height, enc.pix_fmt = 64, 48, "yuv420p"
    enc.time_base = Fraction(1, 30)
    enc.options = {"tune": "zerolatency", "bframes": "0"}
    out: list[bytes] = []
    for i in range(n):
        img = np.full((48, 64, 3), (i * 30) % 255, dtype=np.uint8)
        frame = av.VideoFrame.from_ndarray(img, format="rgb24").reformat(format="yuv420p")
        frame.pts = i
        out += [bytes(p) for p in enc.encode(frame)]
    out += [bytes(p) for p in enc.encode(None)]
    return out


def _jitter_frames(packets: list[bytes]) -> list[Any]:
    return [SimpleNamespace(data=p, timestamp=3000 * i) for i, p in enumerate(packets)]


def test_choice_per_codec_with_reasons() -> None:
    said = {"h264_cuvid": None, "vp8_cuvid": "vp8_cuvid: Operation not permitted"}
    choice = hw_decode.choose(said.__getitem__)
    assert choice.decoders == {"video/h264": "h264_cuvid", "video/vp8": hw_decode.SOFTWARE}
    assert choice.reasons == {"video/vp8": "vp8_cuvid: Operation not permitted"} and choice.hardware
    assert choice.summary() == "h264: h264_cuvid, vp8: software"
    off = hw_decode.detect(enabled=False)
    assert not off.hardware and set(off.reasons) == set(hw_decode.HARDWARE)


def test_detect_here_says_why_each_codec_decodes_in_software() -> None:
    choice = hw_decode.detect()
    if choice.hardware:
        pytest.skip("this machine has NVDEC")
    for mime, name in hw_decode.HARDWARE.items():
        assert choice.decoders[mime] == hw_decode.SOFTWARE
        assert choice.reasons[mime].startswith(name) and "\n" not in choice.reasons[mime]
    assert install_decoders(choice, lambda msg: None)() is None  # nothing to install: a no-op undo


def test_install_routes_new_receivers_and_undo_restores() -> None:
    import aiortc.rtcrtpreceiver as rr

    choice = hw_decode.DecoderChoice(decoders={"video/h264": "h264", "video/vp8": hw_decode.SOFTWARE})
    undo = install_decoders(choice, lambda msg: None)
    try:
        dec = rr.get_decoder(SimpleNamespace(mimeType="video/H264"))
        assert isinstance(dec, hw_decode.HardwareDecoder) and dec.name == "h264"
        frames = [f for jf in _jitter_frames(_h264_packets()) for f in dec.decode(jf)]
        assert len(frames) >= 5 and all(f.format.name == "yuv420p" and f.width == 64 for f in frames)
        vp8 = rr.get_decoder(SimpleNamespace(mimeType="video/VP8"))
        assert not isinstance(vp8, hw_decode.HardwareDecoder)
        assert hw_decode.installed_layers() == ("hardware decode",)
    finally:
        undo()
    assert rr.get_decoder is stock_get_decoder
    assert hw_decode.installed_layers() == ()


def test_a_failing_hardware_decoder_hands_the_stream_to_software() -> None:
    choice = hw_decode.DecoderChoice(decoders={"video/h264": "h264"})
    said: list[str] = []
    codec = SimpleNamespace(mimeType="video/H264")
    dec = hw_decode.HardwareDecoder("h264", lambda: stock_get_decoder(codec), choice, said.append)

    class Broken:
        def decode(self, packet: Any) -> list[Any]:
            raise av.error.InvalidDataError(1094995529, "Invalid data found when processing input")

    dec.codec = Broken()
    frames = [f for jf in _jitter_frames(_h264_packets()) for f in dec.decode(jf)]
    assert len(frames) >= 5  # the software decoder took the stream from its first packet
    assert choice.fallbacks == 1 and len(said) == 1 and "decodes in software" in said[0]
    assert choice.to_dict()["hardware_fallbacks"] == 1
