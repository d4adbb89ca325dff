"""The invisible mark against what platforms do to a video (engines.marking): for each attack, detection of
the public layer and the payload over 1-second windows, PSNR and the embed cost; then false positives over
>= 10,000 frames of unmarked video.

Marked stream: the load generator's single-face scene, 640x360 at 15 fps, every frame's luma marked before the
gateway's own encoder (bench.mark_attacks); the shares are over every 1-second window, the first (the
encoder's start) included, and the first second is also shown on its own.
Unmarked: the same scenes and two photos, each frame cut and scaled at random and scored alone with the full
search, and the unmarked streams through every attack, scored per window.

    .venv/bin/python -m bench.mark --output reports/bench_mark.json
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from bench.mark_attacks import FPS, Attack, apply, attacks, luma
from engines.marking.detect import NOMINAL_THRESHOLD, THRESHOLD, Detector
from engines.marking.embed import Embedder
from engines.marking.pattern import Payload, coefficients, key_id
from loadgen.media import default_media_dir, media_path
from loadgen.synth import SynthConfig, build_loop

KEY = b"bench.mark key: 32 bytes of key!"


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)


def marked_stream(frames: list[np.ndarray], embedder: Embedder) -> tuple[list[np.ndarray], list[float]]:
    out, costs = [], []
    for i420 in frames:
        frame = i420.copy()
        t0 = time.perf_counter()
        embedder.mark(frame[: frame.shape[0] * 2 // 3])
        costs.append((time.perf_counter() - t0) * 1000.0)
        out.append(frame)
    return out, costs


def windows(
    detector: Detector, frames: list[np.ndarray], payload: Payload | None
) -> tuple[list[dict[str, Any]], float]:
    rows, spent = [], 0.0
    for start in range(0, len(frames) - FPS + 1, FPS):
        t0 = time.perf_counter()
        result = detector.window([luma(f) for f in frames[start : start + FPS]])
        spent += time.perf_counter() - t0
        rows.append(
            {
                "second": start // FPS,
                "score": round(result.score, 2),
                "nominal": round(result.nominal, 2),
                "detected": result.detected,
                "payload_ok": payload is not None and result.payload == payload,
                "frames_detected": sum(s >= NOMINAL_THRESHOLD for s in result.frame_scores),
            }
        )
    return rows, spent / max(1, len(rows))


def attack_row(
    attack: Attack, marked: list[np.ndarray], detector: Detector, payload: Payload
) -> dict[str, Any]:
    out = apply(attack, marked)
    rows, per_window_s = windows(detector, out, payload)
    return {
        "attack": attack.name,
        "first_second": rows[0] if rows else None,
        "windows": len(rows),
        "public_detected": sum(r["detected"] for r in rows) / max(1, len(rows)),
        "payload_read": sum(r["payload_ok"] for r in rows) / max(1, len(rows)),
        "min_score": min((r["score"] for r in rows), default=None),
        "min_nominal": min((r["nominal"] for r in rows), default=None),
        "frames_detected": sum(r["frames_detected"] for r in rows) / max(1, len(rows) * FPS),
        "detect_s_per_window": round(per_window_s, 3),
        "size": f"{out[0].shape[1]}x{out[0].shape[0] * 2 // 3}",
    }


def unmarked_frames(media: Path, count: int, seed: int = 7) -> list[np.ndarray]:
    """`count` luma planes, each a random cut of a random source scaled to 640x360 or 320x240."""
    rng = np.random.default_rng(seed)
    sources = []
    for name in ("astronaut.png", "t1.jpg"):
        picture = cv2.imread(str(media_path(media, name)), cv2.IMREAD_GRAYSCALE)
        if picture is None:
            raise SystemExit(f"cannot read {name}: run `python -m loadgen.media provision`")
        sources.append(picture)
    for case in ("single_face", "multi_face"):
        loop = build_loop(SynthConfig(640, 360, FPS, test_case=case, loop_frames=60), media)
        sources += [luma(f) for f in loop.frames]
    clip = build_loop(
        SynthConfig(640, 360, FPS, loop_frames=150, source_video=media_path(media, "carphone_pristine.mp4")),
        media,
    )
    sources += [luma(f) for f in clip.frames]
    out = []
    for _ in range(count):
        src = sources[int(rng.integers(len(sources)))]
        h, w = src.shape
        frac = rng.uniform(0.5, 1.0)
        ch, cw = max(16, int(h * frac)), max(16, int(w * frac * rng.uniform(0.8, 1.2)))
        cw = min(cw, w)
        y0, x0 = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
        size = (640, 360) if rng.random() < 0.5 else (320, 240)
        out.append(cv2.resize(np.ascontiguousarray(src[y0 : y0 + ch, x0 : x0 + cw]), size))
    return out


def contact_sheet(plain: np.ndarray, marked: np.ndarray) -> np.ndarray:
    """Unmarked | marked (whole frame), the same at 3x on the flattest 160x90 corner, and the difference
    x16 around mid grey: what a viewer could see, and where the mark is."""
    h, w = plain.shape
    corners = [(0, 0), (0, w - 160), (h - 90 - 40, 0), (h - 90 - 40, w - 160)]
    y0, x0 = min(corners, key=lambda c: float(plain[c[0] : c[0] + 90, c[1] : c[1] + 160].std()))

    def zoom(y: np.ndarray) -> np.ndarray:
        return cv2.resize(y[y0 : y0 + 90, x0 : x0 + 160], (480, 270), interpolation=cv2.INTER_NEAREST)

    diff = np.clip(128 + 16 * (marked.astype(np.float32) - plain), 0, 255).astype(np.uint8)
    pad = np.full((h, 16), 255, np.uint8)
    top = np.hstack([plain, pad, marked, pad, diff])
    zpad = np.full((270, 16), 255, np.uint8)
    bottom = np.hstack([zoom(plain), zpad, zoom(marked), zpad, zoom(diff)])
    bottom = np.pad(bottom, ((0, 0), (0, top.shape[1] - bottom.shape[1])), constant_values=255)
    return np.vstack([top, np.full((16, top.shape[1]), 255, np.uint8), bottom])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.mark", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=21, help="marked stream length (default 21)")
    parser.add_argument("--unmarked-frames", type=int, default=10_000)
    parser.add_argument("--gateway-kbps", type=int, default=300)
    parser.add_argument("--output", type=Path, default=None, help="write the JSON report here")
    parser.add_argument("--sheet", type=Path, default=None, help="write the contact sheet (PNG) here")
    parser.add_argument("--sheet-only", action="store_true", help="the contact sheet, no attacks")
    parser.add_argument(
        "--embed-only", action="store_true", help="the embed's CPU per frame (3 x 300 frames), no attacks"
    )
    parser.add_argument(
        "--marked-only", action="store_true", help="the marked stream's attacks only, no false-positive count"
    )
    parser.add_argument(
        "--attacks", default="", help="only the attacks whose names contain one of these (comma-separated)"
    )
    args = parser.parse_args(argv)
    wanted = [w.strip() for w in args.attacks.split(",") if w.strip()]
    chosen = [a for a in attacks(args.gateway_kbps * 1000) if not wanted or any(w in a.name for w in wanted)]
    if not chosen:
        parser.error(f"no attack matches {args.attacks!r}")
    media = default_media_dir(dict(__import__("os").environ))
    n = args.seconds * FPS
    clip = build_loop(
        SynthConfig(640, 360, FPS, loop_frames=n, source_video=media_path(media, "carphone_pristine.mp4")),
        media,
    )
    payload = Payload(key_id(KEY), 0x5A5, 0x123)
    embedder = Embedder(*coefficients(KEY, payload))
    if args.embed_only:
        for run in range(3):
            cpu = []
            for k in range(300):
                plane = luma(clip.frames[k % len(clip.frames)]).copy()
                c0 = time.thread_time()
                embedder.mark(plane)
                cpu.append((time.thread_time() - c0) * 1000.0)
            print(
                f"run {run}: embed CPU per 640x360 frame mean {np.mean(cpu):.3f} ms, "
                f"median {np.median(cpu):.3f} ms, p90 {np.percentile(cpu, 90):.3f} ms"
            )
        return 0
    plain = [f.copy() for f in clip.frames]
    marked, costs = marked_stream(plain, embedder)
    psnrs = [psnr(luma(a), luma(b)) for a, b in zip(plain, marked, strict=True)]
    if args.sheet is not None:
        args.sheet.parent.mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(args.sheet), contact_sheet(luma(plain[n // 2]), luma(marked[n // 2])))
        if args.sheet_only:
            return 0
    report: dict[str, Any] = {
        "machine": platform.node(),
        "stream": f"640x360 {FPS} fps, {args.seconds} s",
        "psnr_luma_db": {
            "median": round(float(np.median(psnrs)), 2),
            "min": round(min(psnrs), 2),
        },
        "embed_ms": {
            "mean": round(float(np.mean(costs)), 3),
            "median": round(float(np.median(costs)), 3),
            "p90": round(float(np.percentile(costs, 90)), 3),
        },
        "threshold": THRESHOLD,
        "nominal_threshold": NOMINAL_THRESHOLD,
        "attacks": [],
    }
    print(f"PSNR (luma) median {report['psnr_luma_db']['median']} dB, min {report['psnr_luma_db']['min']} dB")
    print(
        f"embed per 640x360 frame: mean {report['embed_ms']['mean']} ms, "
        f"median {report['embed_ms']['median']} ms, "
        f"p90 {report['embed_ms']['p90']} ms"
    )
    detector = Detector(KEY)
    header = (
        f"{'attack':28} {'size':8} {'1st s':>6} {'public':>7} {'payload':>8} {'min z':>6} {'min nz':>6} "
        f"{'frames':>7} {'s/win':>6}"
    )
    print(header)
    for attack in chosen:
        row = attack_row(attack, marked, detector, payload)
        report["attacks"].append(row)
        first = row["first_second"]
        first_mark = ("yes" if first["detected"] else "no") if first else "-"
        print(
            f"{row['attack']:28} {row['size']:8} {first_mark:>6} "
            f"{row['public_detected']:7.1%} {row['payload_read']:8.1%} {row['min_score']:6.2f} "
            f"{row['min_nominal']:6.2f} "
            f"{row['frames_detected']:7.1%} {row['detect_s_per_window']:6.3f}",
            flush=True,
        )
    if args.marked_only:
        _write(args.output, report)
        return 0
    public = Detector()
    fp_windows, n_windows = 0, 0
    for attack in attacks(args.gateway_kbps * 1000):
        rows, _ = windows(public, apply(attack, plain), None)
        fp_windows += sum(r["detected"] for r in rows)
        n_windows += len(rows)
    frames = unmarked_frames(media, args.unmarked_frames)
    scores = [public.search(y).score for y in frames]
    nominals = [public.nominal(y) for y in frames]
    either = [n >= NOMINAL_THRESHOLD or s >= THRESHOLD for n, s in zip(nominals, scores, strict=True)]
    report["unmarked"] = {
        "frames": len(frames),
        "frames_detected": int(sum(either)),
        "max_frame_score": round(max(scores), 2),
        "p99_frame_score": round(float(np.percentile(scores, 99)), 2),
        "max_frame_nominal": round(max(nominals), 2),
        "windows": n_windows,
        "windows_detected": fp_windows,
    }
    u = report["unmarked"]
    print(
        f"unmarked: {u['frames_detected']} of {u['frames']} frames detected "
        f"(search: max {u['max_frame_score']}, p99 {u['p99_frame_score']}, threshold {THRESHOLD}; "
        f"nominal: max {u['max_frame_nominal']}, threshold {NOMINAL_THRESHOLD}); "
        f"{fp_windows} of {n_windows} stream windows"
    )
    _write(args.output, report)
    return 0


def _write(path: Path | None, report: dict[str, Any]) -> None:
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    raise SystemExit(main())
