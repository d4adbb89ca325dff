"""`livefuse-mark detect FILE [--key-file F] [--json]`: is this video livefuse's synthetic output?

Exit status: 0 when the mark is found, 1 when it is not, 2 when the file or the key cannot be read (one line
on stderr). Without --json it prints one line per second and a verdict; with --json one JSON object
(gateway.marking.scan.ScanReport.to_dict)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gateway.marking.scan import ScanReport, scan_file
from gateway.secret_file import secret


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="livefuse-mark", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    detect = sub.add_parser("detect", help="search a video file for the mark (exit 0: found, 1: not found)")
    detect.add_argument("file", type=Path, help="any video file PyAV (FFmpeg) reads")
    detect.add_argument("--key-file", type=Path, help="the operator's mark key: also read the payload")
    detect.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def _text(report: ScanReport) -> str:
    lines = []
    for s in report.seconds:
        payload = ""
        if s.payload is not None:
            p = s.payload
            payload = f"  key id {p.key_id} session {p.session_code} time {p.time_code}"
        mark = "marked" if s.detected else "-"
        lines.append(f"{s.second:5d}s  {s.frames:3d} frames  score {s.score:6.2f}  {mark}{payload}")
    found = sum(s.detected for s in report.seconds)
    verdict = "SYNTHETIC: livefuse mark found" if report.detected else "no livefuse mark found"
    lines.append(f"{verdict} in {found} of {len(report.seconds)} seconds")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        key = secret(args.key_file, "--key-file").encode() if args.key_file is not None else None
        report = scan_file(args.file, key)
    except Exception as exc:  # noqa: BLE001  (a file FFmpeg cannot read, a missing key: one line, exit 2)
        print(f"livefuse-mark: {args.file}: {type(exc).__name__}: {exc}".splitlines()[0], file=sys.stderr)
        return 2
    print(json.dumps(report.to_dict()) if args.json else _text(report))
    return 0 if report.detected else 1


if __name__ == "__main__":
    raise SystemExit(main())
