"""Watermarking libraries from PyPI against the mark's targets, before writing our own (engines.marking):
embed cost per 640x360 frame, PSNR, and whether a 32-bit payload is read back after the gateway's VP8 at
300 kbit/s, then a transcode to H.264 at 150 kbit/s, a 0.5x downscale (scaled back to the embedded size for
the decoder, which needs it), a 10 % crop on each side (likewise).

Candidates: invisible-watermark (`imwatermark`, DWT-DCT and DWT-DCT-SVD, what Stable Diffusion uses) and
blind-watermark (DWT-DCT-SVD). Neither is a dependency: install them apart to run this
(`pip install --target DIR --no-deps invisible-watermark blind-watermark pywavelets`, then PYTHONPATH=DIR).
Each frame is marked on its own (both are image libraries), bits are read per frame.

    PYTHONPATH=.:DIR .venv/bin/python -m bench.mark_libraries --frames 30
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from bench.mark_attacks import FPS, cropped, gateway_encode, resized, transcode
from loadgen.media import default_media_dir, media_path
from loadgen.synth import SynthConfig, build_loop

BITS = np.random.default_rng(5).integers(0, 2, 32).astype(np.uint8)
Embed = Callable[[np.ndarray], np.ndarray]  # BGR in, BGR out
Read = Callable[[np.ndarray], np.ndarray]  # BGR in, 32 bits out


def _imwatermark(method: str) -> tuple[Embed, Read]:
    from imwatermark import WatermarkDecoder, WatermarkEncoder

    encoder = WatermarkEncoder()
    encoder.set_watermark("bits", BITS.tolist())
    decoder = WatermarkDecoder("bits", 32)
    return (lambda bgr: encoder.encode(bgr, method)), (lambda bgr: np.array(decoder.decode(bgr, method)))


def _blind_watermark() -> tuple[Embed, Read]:
    from blind_watermark import WaterMark

    def embed(bgr: np.ndarray) -> np.ndarray:
        mark = WaterMark(password_img=1, password_wm=1, processes=1)
        mark.read_img(img=bgr)
        mark.read_wm(BITS.astype(bool), mode="bit")
        return np.clip(mark.embed(), 0, 255).astype(np.uint8)

    def read(bgr: np.ndarray) -> np.ndarray:
        mark = WaterMark(password_img=1, password_wm=1, processes=1)
        return np.asarray(mark.extract(embed_img=bgr, wm_shape=32, mode="bit")) > 0.5

    return embed, read


LIBRARIES: dict[str, Callable[[], tuple[Embed, Read]]] = {
    "invisible-watermark dwtDct": lambda: _imwatermark("dwtDct"),
    "invisible-watermark dwtDctSvd": lambda: _imwatermark("dwtDctSvd"),
    "blind-watermark": _blind_watermark,
}


def _bgr(i420: np.ndarray) -> np.ndarray:
    return cv2.cvtColor(i420, cv2.COLOR_YUV2BGR_I420)


def _i420(bgr: np.ndarray) -> np.ndarray:
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2YUV_I420)


def _attacks(marked: list[np.ndarray]) -> dict[str, list[np.ndarray]]:
    """Each attack's frames as BGR at 640x360 (what the libraries' decoders need)."""
    vp8 = gateway_encode(marked, "VP8", 300_000)
    half = [resized(f, 0.5) for f in vp8]
    crop = [cropped(f, 0.10) for f in vp8]
    return {
        "none": [_bgr(f) for f in marked],
        "vp8 300k": [_bgr(f) for f in vp8],
        "vp8 -> h264 150k": [_bgr(f) for f in transcode(vp8, 150_000)],
        "vp8 -> 0.5x": [cv2.resize(_bgr(f), (640, 360)) for f in half],
        "vp8 -> crop 10%": [cv2.resize(_bgr(f), (640, 360)) for f in crop],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.mark_libraries", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--frames", type=int, default=30)
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args(argv)
    media = default_media_dir(dict(__import__("os").environ))
    clip = build_loop(
        SynthConfig(
            640, 360, FPS, loop_frames=args.frames, source_video=media_path(media, "carphone_pristine.mp4")
        ),
        media,
    )
    report: dict[str, Any] = {}
    for name, make in LIBRARIES.items():
        try:
            embed, read = make()
        except ImportError as exc:
            print(f"{name}: not installed ({exc.name})")
            continue
        costs, marked, psnrs = [], [], []
        for i420 in clip.frames:
            bgr = _bgr(i420)
            t0 = time.perf_counter()
            out = embed(bgr)
            costs.append((time.perf_counter() - t0) * 1000)
            psnrs.append(10 * np.log10(255**2 / max(1e-9, float(np.mean((out.astype(float) - bgr) ** 2)))))
            marked.append(_i420(out))
        row: dict[str, Any] = {
            "embed_ms": round(float(np.median(costs)), 1),
            "psnr_db": round(float(np.median(psnrs)), 1),
        }
        for attack, frames in _attacks(marked).items():
            t0 = time.perf_counter()
            accuracy = [float(np.mean(read(f).astype(np.uint8) == BITS)) for f in frames]
            row[attack] = {
                "frames_all_32_bits": round(float(np.mean([a == 1.0 for a in accuracy])), 3),
                "bit_accuracy": round(float(np.mean(accuracy)), 3),
                "read_ms": round((time.perf_counter() - t0) * 1000 / len(frames), 1),
            }
        report[name] = row
        print(f"{name}: embed {row['embed_ms']} ms/frame, PSNR {row['psnr_db']} dB")
        for attack in ("none", "vp8 300k", "vp8 -> h264 150k", "vp8 -> 0.5x", "vp8 -> crop 10%"):
            r = row[attack]
            print(
                f"    {attack:18} all 32 bits in {r['frames_all_32_bits']:6.1%} of frames, "
                f"bit accuracy {r['bit_accuracy']:.3f}"
            )
    if args.output is not None:
        args.output.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
