"""Hardware video decode (NVDEC through PyAV's `*_cuvid` decoders) where the GPU has it, software otherwise.

Why: at high resolutions every publisher's decode competes with the image work for the CPU, while an NVIDIA
GPU decodes H.264 and VP8 on NVDEC. Each decoder is tried once at start (`detect`); an event and the
/api/stats "decoder" field say which runs per codec and why. A hardware decoder that fails mid-stream hands
its stream to software (counted, one event), so a session never fails for it. `install_hardware_decode`
puts the `decoder_factory` layer on aiortc's decoder factory (process-wide, undone at shutdown), only when
some hardware decoder opened; it converts NVDEC's NV12 to the yuv420p aiortc's decoders hand on. Elsewhere
the software path is unchanged.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gateway.webrtc import chain, compat
from gateway.webrtc.codecs.hardware import one_line, probe_codec

log = logging.getLogger(__name__)

HARDWARE: Mapping[str, str] = {"video/h264": "h264_cuvid", "video/vp8": "vp8_cuvid"}
SOFTWARE = "software"
EVENT = "decoder"
LAYER = "hardware decode"


@dataclass
class DecoderChoice:
    """Per codec (mime type): the decoder that runs, and for software, why no hardware one does."""

    decoders: dict[str, str]
    reasons: dict[str, str] = field(default_factory=dict)
    fallbacks: int = 0  # streams moved from hardware to software mid-stream
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def hardware(self) -> bool:
        return any(d != SOFTWARE for d in self.decoders.values())

    def fell_back(self) -> None:
        with self._lock:
            self.fallbacks += 1

    def to_dict(self) -> dict[str, object]:
        return {
            "decoders": dict(self.decoders),
            "software_reasons": dict(self.reasons),
            "hardware_fallbacks": self.fallbacks,
        }

    def summary(self) -> str:
        return ", ".join(f"{mime.split('/')[1]}: {name}" for mime, name in sorted(self.decoders.items()))


def probe(name: str) -> str | None:
    """Why the PyAV decoder `name` cannot run here (one line), or None when it opened."""
    return probe_codec(name, "r")


def choose(probe_one: Callable[[str], str | None], wanted: Mapping[str, str] = HARDWARE) -> DecoderChoice:
    """The decoder per codec given what `probe_one` says about each hardware decoder (pure)."""
    choice = DecoderChoice(decoders={})
    for mime, name in wanted.items():
        reason = probe_one(name)
        choice.decoders[mime] = SOFTWARE if reason else name
        if reason:
            choice.reasons[mime] = reason
    return choice


def detect(enabled: bool = True) -> DecoderChoice:
    if not enabled:
        return choose(lambda name: "hardware decode is turned off")
    return choose(probe)


class HardwareDecoder:
    """aiortc's decoder interface (`decode(encoded_frame) -> frames`) over a PyAV hardware decoder, handing
    the stream to `software()` (aiortc's own decoder) on the first failure."""

    def __init__(
        self,
        name: str,
        software: Callable[[], Any],
        choice: DecoderChoice,
        on_fallback: Callable[[str], None],
    ) -> None:
        import av

        self._av = av
        self.name = name
        self._software_factory = software
        self._software: Any | None = None
        self._choice = choice
        self._on_fallback = on_fallback
        self.codec: Any = av.CodecContext.create(name, "r")

    def decode(self, encoded_frame: Any) -> list[Any]:
        if self._software is not None:
            return list(self._software.decode(encoded_frame))
        from aiortc.mediastreams import VIDEO_TIME_BASE

        packet = self._av.Packet(encoded_frame.data)
        packet.pts = encoded_frame.timestamp
        packet.time_base = VIDEO_TIME_BASE
        try:
            frames = self.codec.decode(packet)
        except Exception as e:  # any decoder error: the software decoder takes the stream from here
            self._choice.fell_back()
            self._on_fallback(f"{self.name} failed ({one_line(e)}); this stream decodes in software")
            self._software = self._software_factory()
            return list(self._software.decode(encoded_frame))
        return [f if f.format.name == "yuv420p" else f.reformat(format="yuv420p") for f in frames]


def decoder_factory(
    choice: DecoderChoice, on_fallback: Callable[[str], None]
) -> Callable[[Callable[[Any], Any]], Callable[[Any], Any]]:
    """The layer `install_hardware_decode` puts on aiortc's decoder factory: `choice`'s
    hardware decoder per codec, aiortc's own (`original`) for the rest and whenever a hardware one cannot
    start."""

    def make(original: Callable[[Any], Any]) -> Callable[[Any], Any]:
        def get_decoder(codec: Any) -> Any:
            name = choice.decoders.get(str(codec.mimeType).lower(), SOFTWARE)
            if name == SOFTWARE:
                return original(codec)
            try:
                return HardwareDecoder(name, lambda: original(codec), choice, on_fallback)
            except Exception as e:  # could not even create it: software for this stream
                choice.fell_back()
                on_fallback(f"{name} could not start ({e}); this stream decodes in software")
                return original(codec)

        return get_decoder

    return make


def install_hardware_decode(choice: DecoderChoice, on_fallback: Callable[[str], None]) -> Callable[[], None]:
    """Wrap the decoder factory every new receiver asks (`decoder_factory`); returns the undo (a no-op when
    nothing was wrapped: on an aiortc the name was not checked against, with one warning)."""
    if compat.refused("hardware decode (the receivers' decoder factory)"):
        return lambda: None
    make = decoder_factory(choice, on_fallback)
    return chain.wrap_undoable(compat.receiver_module(), compat.RECEIVER_GET_DECODER, LAYER, make)


def installed_layers() -> tuple[str, ...]:
    """The layers on the decoder factory now, outermost first."""
    return chain.layers(compat.receiver_module(), compat.RECEIVER_GET_DECODER)
