"""What the encoder tests share (test_vp8_encoder, test_h264_encoder): the clip, feeding it to an encoder,
the rate and PSNR of what came out, a FanoutEncoder's keyframes across a rate cut, refused input."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from gateway.media.fanout import FanoutEncoder

TB = Fraction(1, 90000)
Packets = list[tuple[int, av.Packet]]


def carphone(path: Path, width: int = 320, height: int = 240) -> list[av.VideoFrame]:
    """The carphone clip (a real talking face, real motion) as yuv420p frames of this size."""
    with av.open(str(path)) as container:
        return [f.reformat(width=width, height=height, format="yuv420p") for f in container.decode(video=0)]


def feed(
    encoder: object,
    frames: list[av.VideoFrame],
    start: int,
    count: int,
    key_at: int = -1,
    step: int = 3000,
    one_each: bool = False,
) -> Packets:
    """Encode frames start..start+count-1, `step` ticks apart (frame `key_at` asked to be a keyframe);
    `one_each`: every frame must come out at once, as one packet."""
    out = []
    for i in range(start, start + count):
        frame = frames[i % len(frames)]
        frame.pts, frame.time_base = i * step, TB
        frame.pict_type = av.video.frame.PictureType.I if i == key_at else av.video.frame.PictureType.NONE
        packets = list(encoder.encode(frame))  # type: ignore[attr-defined]
        if one_each:
            assert len(packets) == 1, f"frame {i} gave {len(packets)} packets: the encoder held a frame back"
        out += [(i, packet) for packet in packets]
    return out


def kbps(packets: Packets, first: int, last: int, step: int = 3000) -> float:
    return sum(p.size for i, p in packets if first <= i < last) * 8 / ((last - first) * step / 90000) / 1000


def psnr(packets: Packets, frames: list[av.VideoFrame], first: int, codec: str) -> float:
    """Mean PSNR (all planes) of the decoded frames from `first` on against the frames encoded."""
    decoder = av.CodecContext.create(codec, "r")
    values = []
    for i, packet in packets:
        for decoded in decoder.decode(packet):
            if i >= first:
                a = decoded.to_ndarray(format="yuv420p").astype(np.float64)
                b = frames[i % len(frames)].to_ndarray(format="yuv420p").astype(np.float64)
                values.append(10 * np.log10(255**2 / np.mean((a - b) ** 2)))
    assert len(values) == len([i for i, _ in packets if i >= first]), "every packet decodes to a picture"
    return float(np.mean(values))


def check_wrong_input_is_refused(encoder: object) -> None:
    """A yuv420p frame of another size, or another format, is refused; a closed encoder refuses all."""
    with pytest.raises(ValueError, match="expected yuv420p 320x240"):
        encoder.encode(av.VideoFrame(640, 360, "yuv420p"))  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="rgb24"):
        encoder.encode(av.VideoFrame(320, 240, "rgb24"))  # type: ignore[attr-defined]
    encoder.close()  # type: ignore[attr-defined]
    with pytest.raises(RuntimeError, match="closed"):
        encoder.encode(av.VideoFrame(320, 240, "yuv420p"))  # type: ignore[attr-defined]


def fanout_keyframes(enc: FanoutEncoder) -> tuple[list[int], int | None]:
    """40 frames with a receiver's loss report at frame 20 (a lower rate): which frames were keyframes, and
    the rate the encoder ended at."""
    enc.subscribe()
    enc.bitrate.add("viewer")
    keys = []
    for i in range(40):
        img = np.full((240, 320, 3), 40 + (i * 7) % 150, np.uint8)
        if i == 20:
            enc.bitrate.on_loss("viewer", 0.4, now=1.0)
            enc._retarget(1.0)
        keys += [i for p in enc.encode(img, (i + 1) * 3000) if p.is_keyframe]
    return keys, enc.encoding_bps


def keyframes_across_sizes(enc: FanoutEncoder, sizes: list[tuple[int, int]]) -> list[int]:
    """The frames that came out as keyframes when FanoutEncoder was fed black RGB frames of these sizes."""
    keys = []
    for i, size in enumerate(sizes):
        keys += [i for p in enc.encode(np.zeros((*size, 3), np.uint8), (i + 1) * 3000) if p.is_keyframe]
    return keys
