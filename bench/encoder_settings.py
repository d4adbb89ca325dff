"""The gateway's output path offline: VP8 denoiser on/off, and whole-frame vs changed-box I420 conversion.

Frames are carphone (a talking head, the load generator's clip) scaled to each resolution, put through a
real VP8 encode + decode first (what the gateway receives). For each encoder variant the same frames go
through `FanoutEncoder` at the gateway's bitrate: CPU ms per encode (process time), the bitrate it used,
and PSNR of the decoded result against the frames it was given. For the conversion, the I420 of a frame
whose face box changed: the whole frame (`rgb_to_i420` + a new frame, the path before) vs `patched_frame` (the
decoded planes copied once, the box converted).

    .venv/bin/python -m bench.encoder_settings --output reports/bench_encoder_settings.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import cv2
import numpy as np

from gateway.media.colour import rgb_to_i420
from gateway.media.fanout import FanoutEncoder
from gateway.media.planes import patched_frame
from gateway.webrtc.congestion.bitrate import size_class_bitrate
from loadgen.arguments import parse_resolution
from loadgen.media import MediaUnavailable, default_media_dir, media_path

VARIANTS: dict[str, int] = {"denoiser off (now)": 0, "denoiser 4 (aiortc's, before)": 4}


def received_frames(clip: Path, size: tuple[int, int], n: int) -> list[av.VideoFrame]:
    """`n` frames of the clip at `size`, through a real VP8 encode and decode (as the gateway gets them)."""
    enc = av.CodecContext.create("libvpx", "w")
    enc.width, enc.height, enc.pix_fmt = size[0], size[1], "yuv420p"  # type: ignore[attr-defined]
    enc.bit_rate, enc.time_base = 1_000_000, Fraction(1, 90000)
    dec = av.CodecContext.create("vp8", "r")
    out: list[av.VideoFrame] = []
    with av.open(str(clip)) as container:
        for k, frame in enumerate(container.decode(video=0)):
            if k >= n:
                break
            rgb = np.asarray(
                cv2.resize(frame.to_ndarray(format="rgb24"), size, interpolation=cv2.INTER_AREA),
                dtype=np.uint8,
            )
            f = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuv420p")
            f.pts = k * 6000
            for packet in enc.encode(f):  # type: ignore[attr-defined]
                out.extend(dec.decode(packet))  # type: ignore[arg-type]
    return out


def encode_variant(frames: list[np.ndarray], noise: int, bitrate: int) -> dict[str, float]:
    enc = FanoutEncoder(bitrate=bitrate, vp8_noise_sensitivity=noise)
    enc.subscribe()
    dec = av.CodecContext.create("vp8", "r")
    cpu, size, psnr = [], 0, []
    for k, rgb in enumerate(frames):
        yuv = whole_frame(rgb)  # the encode alone is timed
        t0 = time.process_time()
        packets = enc.encode(rgb, k * 6000, yuv)
        cpu.append(time.process_time() - t0)
        for packet in packets:
            size += packet.size
            for decoded in dec.decode(av.Packet(bytes(packet))):
                psnr.append(cv2.PSNR(decoded.to_ndarray(format="rgb24"), rgb))
    skip = min(15, len(cpu) // 4)  # the rate control's first second
    return {
        "encode_cpu_ms": round(statistics.mean(cpu[skip:]) * 1000.0, 3),
        "kbps": round(size * 8 / (len(frames) / 15.0) / 1000.0, 1),
        "psnr_db": round(float(np.mean(psnr[skip:])), 2),
    }


def per_call_ms(fn: Callable[[], object], repeat: int) -> float:
    fn()
    t0 = time.process_time()
    for _ in range(repeat):
        fn()
    return (time.process_time() - t0) / repeat * 1000.0


def whole_frame(rgb: np.ndarray) -> av.VideoFrame:
    return av.VideoFrame.from_ndarray(rgb_to_i420(rgb), format="yuv420p")  # type: ignore[arg-type]


def conversion(frame: av.VideoFrame, box_fraction: float, repeat: int) -> dict[str, float]:
    """A centred box of `box_fraction` of the frame's area changed (a face in a broadcast shot)."""
    rgb = frame.to_ndarray(format="rgb24")
    h, w = rgb.shape[:2]
    bw, bh = int(w * box_fraction**0.5), int(h * box_fraction**0.5)
    box = ((w - bw) // 2, (h - bh) // 2, (w + bw) // 2, (h + bh) // 2)
    return {
        "box_fraction": box_fraction,
        "whole_frame_ms": round(per_call_ms(lambda: whole_frame(rgb), repeat), 4),
        "changed_box_ms": round(per_call_ms(lambda: patched_frame(frame, rgb, (box,)), repeat), 4),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--resolutions", nargs="+", default=["320x240", "640x360"])
    p.add_argument("--frames", type=int, default=150)
    p.add_argument("--bitrate", type=int, default=1_000_000)
    p.add_argument(
        "--ceilings",
        action="store_true",
        help="instead of the variants: the encoder (denoiser off) at --bitrate against the "
        "picture's size-class ceiling (webrtc.congestion.bitrate.size_class_bitrate, the default "
        "since --video-bitrate auto)",
    )
    p.add_argument("--repeats", type=int, default=3, help="encode runs per variant (the best CPU counts)")
    p.add_argument("--media-dir", type=Path, default=None)
    p.add_argument("--output", type=Path, default=None)
    args = p.parse_args(argv)
    try:
        clip = media_path(args.media_dir or default_media_dir(os.environ), "carphone_pristine.mp4")
    except MediaUnavailable as exc:
        print(exc, file=sys.stderr)
        return 2
    results: list[dict[str, Any]] = []
    for res in args.resolutions:
        size = parse_resolution(res)
        received = received_frames(clip, size, args.frames)
        rgbs = [f.to_ndarray(format="rgb24") for f in received]
        variants = [(name, noise, args.bitrate) for name, noise in VARIANTS.items()]
        if args.ceilings:
            auto = size_class_bitrate(*size)
            variants = [(f"ceiling {rate // 1000} kbit/s", 0, rate) for rate in (args.bitrate, auto)]
        for name, noise, rate in variants:
            runs = [encode_variant(rgbs, noise, rate) for _ in range(args.repeats)]
            best = min(runs, key=lambda r: r["encode_cpu_ms"])
            row = {"resolution": res, "variant": name, **best}
            results.append(row)
            print(
                f"{res:>9} {name:<30} encode {best['encode_cpu_ms']:.2f} ms  {best['kbps']:.0f} kbit/s  "
                f"PSNR {best['psnr_db']:.2f} dB"
            )
        for fraction in () if args.ceilings else (0.1, 0.25):
            row = {
                "resolution": res,
                "variant": "i420 conversion",
                **conversion(received[len(received) // 2], fraction, 300),
            }
            results.append(row)
            print(
                f"{res:>9} I420 with {fraction:.0%} of the frame changed: whole frame "
                f"{row['whole_frame_ms']:.3f} ms, changed box {row['changed_box_ms']:.3f} ms "
                "(an unchanged frame: none, the decoded frame is encoded)"
            )
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(
            json.dumps(
                {
                    "kind": "bench_encoder_settings",
                    "frames": args.frames,
                    "bitrate": args.bitrate,
                    "results": results,
                },
                indent=2,
            )
        )
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
