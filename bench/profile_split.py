#!/usr/bin/env python3
"""Where a gateway's CPU goes: py-spy's raw (collapsed) stacks -> share of samples per category.

Each sample is put in the FIRST category whose marker appears anywhere in its stack, in the order below
(so ONNX Runtime calls made from the pipeline count as inference, not as pipeline work). py-spy counts a
thread as busy when it is not blocked in a known wait; a thread pool's idle `_worker` and uvloop's native
`run` are listed apart because they are mostly waiting.

    python -m bench.profile_split reports/profile/gateway.pyspy [--top 25]
"""

from __future__ import annotations

import argparse
import collections
from pathlib import Path

CATEGORIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("inference (onnxruntime Session.run)", ("onnxruntime_inference_collection.py",)),
    ("pipeline pre/post-processing (engines/)", ("engines/",)),
    ("decoded frame -> RGB (sessions._to_rgb)", ("_to_rgb",)),
    (
        "RGB -> YUV + VP8 encode (media/fanout, colour)",
        ("gateway/media/fanout.py", "gateway/media/colour.py"),
    ),
    ("aiortc decoder thread (VP8 decode)", ("decoder_worker",)),
    ("batch scheduler", ("gateway/scheduler/",)),
    ("monitor", ("gateway/monitoring/",)),
    (
        "RTP/SRTP/DTLS/jitter buffer (aiortc)",
        (
            "rtcrtpreceiver.py",
            "rtcrtpsender.py",
            "rtcdtlstransport.py",
            "aiortc/rtp.py",
            "jitterbuffer.py",
            "gateway/webrtc/",
        ),
    ),
    ("ICE/UDP (aioice)", ("aioice/",)),
    ("event loop: native uvloop run (mostly waiting)", ("Runner.run (asyncio/runners.py",)),
    ("thread pools: idle _worker (waiting)", ("_worker (concurrent/futures/thread.py",)),
)


def split(lines: list[str]) -> tuple[int, collections.Counter[str], collections.Counter[str]]:
    total = 0
    cats: collections.Counter[str] = collections.Counter()
    leaves: collections.Counter[str] = collections.Counter()
    for line in lines:
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        leaves[frames[-1]] += n
        if len(frames) >= 2 and frames[-1].startswith(("_worker (concurrent", "Runner.run (asyncio")):
            name = next(c for c, marks in CATEGORIES if any(m in frames[-1] for m in marks))
        else:
            name = next((c for c, marks in CATEGORIES if any(m in stack for m in marks)), "other")
        cats[name] += n
    return total, cats, leaves


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="py-spy raw stacks -> CPU split by category")
    p.add_argument("raw", type=Path)
    p.add_argument("--top", type=int, default=20, help="also list the N busiest leaf lines")
    args = p.parse_args(argv)
    total, cats, leaves = split(args.raw.read_text().splitlines())
    if total == 0:
        print(f"no samples in {args.raw}")
        return 1
    print(f"{total} samples")
    for name, n in cats.most_common():
        print(f"{100.0 * n / total:5.1f} %  {name}")
    print("busiest lines:")
    for name, n in leaves.most_common(args.top):
        print(f"{100.0 * n / total:5.1f} %  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
