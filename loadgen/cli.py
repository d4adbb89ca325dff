"""`loadgen`: open N real WHIP sessions against a gateway and measure every frame's end-to-end latency.

Subcommands: `run` (N jobs for a while; the default, so `loadgen --concurrent-jobs 10` still runs),
`capacity` (search the largest N that meets the SLO), `merge` (one report over several loadgens that ran at
the same time). The only module of the load generator that prints or exits. Exit codes: 0 = the SLO held
(p95 <= budget in every run, or a capacity of at least one job), 1 = it did not, 2 = usage or connection
errors (bad flags, gateway not reachable or not ready, no job could join). The picture quality report is a
study run from a clone: `python -m bench.quality`.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import aiohttp
from rich.console import Console

from loadgen.client import JoinError
from loadgen.embedded import GatewayStartError
from loadgen.fingerprint import host_fingerprint
from loadgen.media import MediaUnavailable
from loadgen.options import add_capacity_options, add_measure_options, add_run_options, show_defaults
from loadgen.report import build_report, write_csv, write_html, write_json
from loadgen.sweep import Measured, run_cells
from loadgen.tables import LiveView, result_table
from loadgen.timeline import format_marks

SUBCOMMANDS = ("run", "capacity", "merge")
SUBCOMMAND_HELP = {
    "run": "N jobs for --duration seconds: latency, frames lost, fps (the default subcommand)",
    "capacity": "search the largest number of jobs whose p95 stays within --budget-ms",
    "merge": "one report with exact statistics over several loadgens that ran at the same time",
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="loadgen", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = p.add_subparsers(dest="command", metavar="{run,capacity,merge}")
    run = sub.add_parser(
        "run", help=SUBCOMMAND_HELP["run"], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    show_defaults(add_run_options(run) + add_measure_options(run))
    run.set_defaults(find_capacity=False, keep_degradation=False, capacity_max_jobs=0)
    capacity = sub.add_parser(
        "capacity", help=SUBCOMMAND_HELP["capacity"], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    show_defaults(add_capacity_options(capacity) + add_measure_options(capacity))
    capacity.set_defaults(find_capacity=True, concurrent_jobs=1, duration=None, durations=None)
    merge = sub.add_parser(
        "merge", help=SUBCOMMAND_HELP["merge"], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    merge.add_argument("reports", nargs="+", type=Path, metavar="REPORT.json")
    merge.add_argument("--output", metavar="FILE.json", type=Path, help="the merged report (required)")
    merge.add_argument("--output-report", dest="output", type=Path, help=argparse.SUPPRESS)
    return p


def with_subcommand(argv: list[str]) -> list[str]:
    """Today's argv with its subcommand: none given means `run`, and the older `--find-capacity` flag means
    `capacity`, so that `loadgen --concurrent-jobs 10 ...` keeps working."""
    if argv and (argv[0] in SUBCOMMANDS or argv[0] in ("-h", "--help")):
        return argv
    if "--find-capacity" in argv:
        return ["capacity", *(a for a in argv if a != "--find-capacity")]
    return ["run", *argv]


def usage_error(args: argparse.Namespace) -> str | None:
    if args.concurrent_jobs < 1 or args.fps <= 0 or args.budget_ms <= 0 or args.ramp_up_rate <= 0:
        return "--concurrent-jobs, --fps, --budget-ms and --ramp-up-rate must be positive"
    for w, h in args.resolutions or [args.resolution]:
        if w % 2 or h % 4 or w < 64 or h < 48:
            return f"resolution {w}x{h}: width must be even and >= 64, height a multiple of 4 and >= 48"
    if args.html and importlib.util.find_spec("matplotlib") is None:
        return "--html draws its charts with matplotlib: pip install 'livefuse[report]'"
    return None


def measure(args: argparse.Namespace) -> int:
    """`loadgen run` and `loadgen capacity`: measure, write the reports, print the result table."""
    # Piped output (CI logs, `make demo | tee`) gets a fixed width so the result table is not squeezed.
    console = Console() if sys.stdout.isatty() else Console(width=150)
    err = Console(stderr=True)
    problem = usage_error(args)
    if problem is not None:
        err.print(f"error: {problem}")
        return 2
    if args.batch_sizes and args.url:
        err.print(
            "note: --batch-sizes with --url cannot change a remote gateway; the observed batch is reported"
        )
        args.batch_sizes = None
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    host = host_fingerprint()
    view = LiveView(err, not args.no_live and err.is_terminal, args.budget_ms)
    try:
        with view:
            measured: Measured = asyncio.run(run_cells(args, view, console.print))
    except GatewayStartError as e:
        err.print(f"error: embedded gateway failed: {e}")
        return 2
    except (JoinError, MediaUnavailable, OSError, aiohttp.ClientError) as e:
        err.print(f"error: {e}")
        return 2
    except KeyboardInterrupt:
        err.print("interrupted")
        return 2
    entries, capacity = measured.entries, measured.capacity
    report = build_report("loadgen", host, config, entries, capacity)
    write_reports(args, report, measured)
    console.print(result_table(entries, capacity))
    for entry in entries:
        for f in entry["join_failures"][:3]:
            err.print(f"join failure ({entry['name']}, job {f['job']}): {f['detail']}")
    for entry in entries:
        timeline = entry.get("timeline_ms", {})
        if any(timeline.values()):
            console.print(f"on air, {entry['name']} (ms after the POST: the client's, the gateway's):")
            for side in ("client", "gateway"):
                table = {f"{side}.{name}": row for name, row in timeline.get(side, {}).items()}
                console.print("\n".join(format_marks(table)), highlight=False)
    if args.output:
        console.print(f"report: {args.output}")
    joined_any = any(len(entry["join_failures"]) < entry["concurrent_jobs"] for entry in entries)
    if not entries or not joined_any:
        err.print("error: no job could join the gateway")
        return 2
    return 0 if report["slo_met"] else 1


def write_reports(args: argparse.Namespace, report: dict[str, Any], measured: Measured) -> None:
    if args.output:
        write_json(report, args.output)
    if args.csv:
        write_csv(measured.results, args.csv)
    if args.html:
        from loadgen.charts import report_charts

        charts = report_charts(
            measured.results, args.budget_ms, args.fps, measured.capacity, measured.entries
        )
        write_html(report, charts, args.html)


def merge(args: argparse.Namespace) -> int:
    """`loadgen merge r1.json r2.json ... --output all.json`: exact union statistics."""
    from loadgen.merge import MergeError, merge_reports

    err = Console(stderr=True)
    if args.output is None:
        err.print("error: loadgen merge needs --output FILE.json")
        return 2
    try:
        reports = [json.loads(path.read_text()) for path in args.reports]
        merged = merge_reports(reports)
    except (OSError, ValueError) as e:  # MergeError and JSONDecodeError are ValueErrors
        known = isinstance(e, MergeError | OSError)
        err.print(f"error: {e}" if known else f"error: not a JSON report: {e}")
        return 2
    write_json(merged, args.output)
    console = Console()
    console.print(result_table(merged["runs"], None))
    console.print(f"report: {args.output} (merged {len(reports)} reports)")
    return 0 if merged["slo_met"] else 1


def main(argv: list[str] | None = None) -> int:
    args_list = with_subcommand(list(sys.argv[1:] if argv is None else argv))
    if args_list[:2] == ["run", "quality"]:  # the quality report is a study now, not a subcommand
        print("loadgen: the picture quality report is `python -m bench.quality`", file=sys.stderr)
        return 2
    try:
        args = build_parser().parse_args(args_list)
    except SystemExit as e:
        return int(e.code or 0)
    if args.command == "merge":
        return merge(args)
    return measure(args)


if __name__ == "__main__":
    sys.exit(main())
