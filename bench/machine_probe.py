"""How fast is this machine right now? A fixed piece of work, timed in CPU seconds, at a steady interval.

    python -m bench.machine_probe --interval 10 [--count N]     # one line per probe: "<monotonic s> <cpu ms>"

A long benchmark on a shared box reads "CPU per frame" over an hour; a frame can cost more late in the run
because the sessions aged (what the benchmark looks for) or because the machine slowed (a neighbour taking
the caches and the memory bus, a frequency change: nothing in this machine's load average shows it). The
probe, in a process of its own, tells them apart: if it costs 20 % more in the last window, so does every
frame. Its work is what a frame's CPU time is made of, single-threaded: colour conversion, resizing and
blurring of a 640x360 picture, float maths, a small matrix product and a little pure Python.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

REPEATS = 3  # per probe: the median of three, so one preemption or page fault does not count


def workload(picture: np.ndarray, weights: np.ndarray) -> float:
    """One unit of frame-like work; returns a number so nothing is optimised away."""
    import cv2

    yuv = cv2.cvtColor(picture, cv2.COLOR_RGB2YUV_I420)
    small = cv2.resize(picture, (320, 180), interpolation=cv2.INTER_AREA)
    f = small.astype(np.float32) / 255.0
    product = weights @ f.reshape(-1, 3)[:256]
    blurred = cv2.GaussianBlur(f, (9, 9), 0)
    total = 0
    for k in range(40000):  # the interpreter's share of a frame (event loop, stats, packets)
        total += k & 7
    return float(yuv[0, 0]) + float(product.sum()) + float(blurred[0, 0, 0]) + total


def probe_ms(picture: np.ndarray, weights: np.ndarray) -> float:
    """CPU milliseconds of one unit of work (median of `REPEATS`)."""
    times = []
    for _ in range(REPEATS):
        start = time.process_time()
        workload(picture, weights)
        times.append(1000.0 * (time.process_time() - start))
    return sorted(times)[len(times) // 2]


def inputs(seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    picture = rng.integers(0, 256, (360, 640, 3), dtype=np.uint8)
    weights = rng.standard_normal((64, 256)).astype(np.float32)
    return picture, weights


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--interval", type=float, default=10.0, metavar="SECONDS", help="between probes (default 10)"
    )
    p.add_argument("--count", type=int, default=0, metavar="N", help="stop after N probes (default 0: never)")
    args = p.parse_args(argv)
    if args.interval <= 0 or args.count < 0:
        print("error: --interval must be positive and --count not negative", file=sys.stderr)
        return 2
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import cv2

    cv2.setNumThreads(1)  # one thread: the probe measures the core it runs on, not the pool
    picture, weights = inputs()
    probe_ms(picture, weights)  # warm: first-call costs are not the machine's speed
    done = 0
    next_at = time.monotonic()
    try:
        while args.count == 0 or done < args.count:
            print(f"{time.monotonic():.3f} {probe_ms(picture, weights):.4f}", flush=True)
            done += 1
            next_at += args.interval
            time.sleep(max(0.0, next_at - time.monotonic()))
    except (KeyboardInterrupt, BrokenPipeError):
        return 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
