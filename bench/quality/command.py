"""`python -m bench.quality`: run the quality report, write its sheet and metrics; the only printing."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import cv2

import bench.quality
from bench.quality.identity import FaceRecognizer, IdentityUnavailable
from bench.quality.report import run
from engines.models.store import ModelStore, ModelUnavailable, default_model_dir
from loadgen.media import MediaUnavailable, default_media_dir


def build_parser(prog: str = "python -m bench.quality") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description=bench.quality.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--output",
        metavar="DIR",
        type=Path,
        default=Path("reports"),
        help="folder for quality.png and quality.json (default reports)",
    )
    p.add_argument("--out-dir", dest="output", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--media-dir", type=Path, help="provisioned media (default ~/.cache/livefuse/media)")
    p.add_argument("--model-dir", type=Path, help="provisioned models (default ~/.cache/livefuse/models)")
    return p


def main(argv: list[str] | None = None, prog: str = "python -m bench.quality") -> int:
    args = build_parser(prog).parse_args(argv)
    store = ModelStore(args.model_dir or default_model_dir(os.environ))
    try:
        metrics, sheet = run(store, args.media_dir or default_media_dir(os.environ), FaceRecognizer())
    except (ModelUnavailable, MediaUnavailable, IdentityUnavailable) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    out: Path = args.output
    out.mkdir(parents=True, exist_ok=True)
    png, js = out / "quality.png", out / "quality.json"
    cv2.imwrite(str(png), cv2.cvtColor(sheet, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_PNG_COMPRESSION, 9])
    js.write_text(json.dumps(metrics, indent=2) + "\n")
    print(json.dumps(metrics, indent=2))
    print(f"contact sheet: {png}\nmetrics: {js}")
    return 0
