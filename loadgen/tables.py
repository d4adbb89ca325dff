"""The tables `loadgen` shows: the live progress of a run and the result of every run in a report.

A capacity search decides each point on the mean of its last windows' p95 and received ratio
(loadgen.capacity), not on the whole run's p95 over every window: the result table shows those two numbers
in columns of their own, labelled as the verdict, beside the whole run's percentiles, so that a row's
verdict can be read off the row.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table

from loadgen.runner import Progress

# Columns of every run; "lost" counts every frame not identified on return, "unread" the part of it that
# did come back but whose stamp band no longer reads (e.g. macroblocks the publisher's own encoder left stale)
RUN_COLUMNS = (
    "jobs",
    "p50 ms",
    "p95 ms",
    "p99 ms",
    "in budget",
    "sent",
    "recv",
    "lost",
    "unread",
    "rep",
    "fps/job",
)
# Columns of a capacity point: the statistics its verdict (the SLO column) was decided on
VERDICT_P95 = "verdict p95 ms"
VERDICT_RECV = "verdict recv"


def progress_table(title: str, p: Progress, budget_ms: float) -> Table:
    t = Table(
        title=f"{title}  [{p.phase}] {p.elapsed_s:.0f}s  joined {p.jobs_joined}  failed {p.jobs_failed}"
    )
    for col in ("job", "fps", "p95 ms", "lost", "repeated"):
        t.add_column(col, justify="right")
    for j in p.jobs:
        p95 = "-" if j.p95_ms is None else f"{j.p95_ms:.0f}"
        style = "red" if j.p95_ms is not None and j.p95_ms > budget_ms else None
        t.add_row(str(j.job), f"{j.fps:.1f}", p95, str(j.lost), str(j.repeated), style=style)
    g = p.gateway
    if g:

        def f(v: Any) -> str:
            return "-" if v is None else (f"{v:.0f}" if isinstance(v, float | int) else str(v))

        t.caption = (
            f"gateway cpu {f(g.get('cpu_percent'))}%  proc {f(g.get('process_cpu_percent'))}%  "
            f"gpu {f(g.get('gpu_util_percent'))}%  "
            f"fps in/out {f(g.get('fps_in'))}/{f(g.get('fps_out'))}  "
            f"server p95 {f(g.get('server_p95_ms'))} ms  level {f(g.get('degradation_level'))}"
        )
    return t


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def _run_cells(r: dict[str, Any], verdict: bool) -> list[str]:
    lat = r["latency_ms"]
    wb = r.get("within_budget")
    fr = r["frames"]
    cells = [
        r["name"],
        str(r["concurrent_jobs"]),
        _ms(lat["p50"]),
        _ms(lat["p95"]),
        _ms(lat["p99"]),
        "-" if wb is None else f"{wb * 100:.1f}%",
        str(fr["sent"]),
        str(fr["received"]),
        str(fr["lost"]),
        str(fr.get("unreadable", 0)),
        str(fr["repeated"]),
        f"{r['fps_per_job']['mean']:.1f}",
    ]
    if verdict:
        point = r.get("capacity_point")
        cells += [_ms(point["p95_ms"]), f"{point['received_ratio'] * 100:.1f}%"] if point else ["-", "-"]
    return [*cells, "[green]ok[/]" if r["slo_met"] else "[red]MISS[/]"]


def _av_cells(job: dict[str, Any], width: int) -> list[str] | None:
    av_ms = job.get("av_offset_ms")
    if not av_ms:
        return None
    cells = [
        f"  job {job['job']} A/V ms",
        "",
        f"{av_ms['p50']:+.1f}",
        f"{av_ms['p95']:+.1f}",
        f"p5 {av_ms['p5']:+.1f}",
        f"n={av_ms['count']}",
    ]
    ok = -45 <= av_ms["p5"] and av_ms["p95"] <= 125
    return [*cells, *[""] * (width - len(cells) - 1), "[green]ok[/]" if ok else "[red]off[/]"]


def capacity_caption(capacity: dict[str, Any]) -> str:
    windows = capacity.get("stable_windows")
    over = f"its last {windows} windows" if windows else "its last windows"
    return (
        f"capacity: {capacity['capacity']} concurrent jobs within {capacity['budget_ms']:g} ms p95 "
        f"(each point decided on '{VERDICT_P95}' and '{VERDICT_RECV}': the mean over {over}; "
        f"'p95 ms' is the whole run's)"
    )


def result_table(runs: list[dict[str, Any]], capacity: dict[str, Any] | None) -> Table:
    t = Table(title="loadgen result")
    t.add_column("run", no_wrap=True)
    verdict = any("capacity_point" in r for r in runs)
    columns = (*RUN_COLUMNS, *((VERDICT_P95, VERDICT_RECV) if verdict else ()), "SLO")
    for col in columns:
        t.add_column(col, justify="right")
    for r in runs:
        t.add_row(*_run_cells(r, verdict))
        for job in r.get("jobs", []):
            cells = _av_cells(job, len(columns) + 1)
            if cells is not None:
                t.add_row(*cells)
    if capacity is not None:
        t.caption = capacity_caption(capacity)
    return t


class LiveView:
    """The rich Live table; a no-op when disabled."""

    def __init__(self, console: Console, enabled: bool, budget_ms: float) -> None:
        self.console = console
        self.enabled = enabled
        self.budget_ms = budget_ms
        self.title = ""
        self._live: Live | None = None

    def __enter__(self) -> LiveView:
        if self.enabled:
            self._live = Live(Table(), console=self.console, refresh_per_second=2, transient=True)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)

    def update(self, p: Progress) -> None:
        if self._live is not None:
            self._live.update(progress_table(self.title, p, self.budget_ms))
