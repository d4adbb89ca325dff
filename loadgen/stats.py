"""Events in, numbers out: the load generator's accounting, pure and synchronous.

Jobs emit `FrameSent` (the moment the sender's `recv()` hands a frame to the encoder) and `FrameReceived` (the
moment a processed frame was decoded and its stamp read). Latency is the difference for the FIRST return of an
ID; an ID seen again is a repeat (the gateway re-sent its last processed frame), an unreadable stamp is
counted on its own, and a frame sent in the window but never returned is lost. Statistics are taken over a
time window (by send time) so warm-up, ramp-up and capacity windows are all the same call.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from loadgen.percentiles import percentiles
from loadgen.streaming import LogHistogram


@dataclass(frozen=True)
class FrameSent:
    job: int
    frame_id: int
    t: float


@dataclass(frozen=True)
class FrameReceived:
    job: int
    frame_id: int | None  # None: the stamp could not be read (or failed its check code)
    t: float
    psnr_db: float | None = None  # picture fidelity (loadgen.fidelity), when the run measures it


@dataclass(frozen=True)
class JobJoined:
    job: int
    t: float
    ok: bool
    detail: str = ""


@dataclass(frozen=True)
class AvOffset:
    """One click of a job's audio measured against its video at a WHEP viewer (loadgen.avsync): how much
    later the gateway's sender reports place the audio than the picture captured with it."""

    job: int
    t: float
    offset_ms: float


@dataclass(frozen=True)
class JobMark:
    """A step of a job's way on air, `ms` after its WHIP POST went out (loadgen.timeline): answer,
    connected, first_decoded (the first processed frame back, decoded), viewer_first_decoded (after the
    WHEP viewer's own POST)."""

    job: int
    name: str
    ms: float


Event = FrameSent | FrameReceived | JobJoined | AvOffset | JobMark


@dataclass(frozen=True)
class Sample:
    """One returned frame: what the per-frame CSV holds."""

    job: int
    frame_id: int
    sent_t: float
    recv_t: float

    @property
    def latency_ms(self) -> float:
        return (self.recv_t - self.sent_t) * 1000.0


@dataclass(frozen=True)
class LatencySummary:
    count: int
    mean: float | None
    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    max: float | None
    within_budget: float | None  # fraction of RETURNED frames at or under the budget

    @staticmethod
    def of(latencies_ms: Sequence[float], budget_ms: float) -> LatencySummary:
        if not latencies_ms:
            return LatencySummary(0, None, None, None, None, None, None, None)
        a = np.asarray(latencies_ms, dtype=np.float64)
        p50, p90, p95, p99 = percentiles(a, (50, 90, 95, 99))
        return LatencySummary(
            count=int(a.size),
            mean=float(a.mean()),
            p50=p50,
            p90=p90,
            p95=p95,
            p99=p99,
            max=float(a.max()),
            within_budget=float((a <= budget_ms).mean()),
        )


@dataclass(frozen=True)
class JobSummary:
    job: int
    sent: int
    received: int
    lost: int
    repeated: int
    unreadable: int
    sent_fps: float
    received_fps: float
    latency: LatencySummary
    av_offset_ms: OffsetSummary | None = None  # None: the job carried no audio (or nothing measured)


@dataclass(frozen=True)
class OffsetSummary:
    """The spread of one measure over a window: A/V offsets of one job (ms, + = audio late), or the picture
    fidelity of the frames received (dB)."""

    count: int
    p5: float
    p50: float
    p95: float
    min: float
    max: float

    @staticmethod
    def of(offsets_ms: Sequence[float]) -> OffsetSummary | None:
        if not offsets_ms:
            return None
        a = np.asarray(offsets_ms, dtype=np.float64)
        p5, p50, p95 = percentiles(a, (5, 50, 95))
        return OffsetSummary(int(a.size), p5, p50, p95, float(a.min()), float(a.max()))


@dataclass(frozen=True)
class WindowSummary:
    """Every job's numbers over one window of send times [start, end)."""

    start: float
    end: float
    budget_ms: float
    latency: LatencySummary
    sent: int
    received: int
    lost: int
    repeated: int
    unreadable: int
    sent_fps: float  # all jobs together
    received_fps: float
    fps_per_job_mean: float
    fps_per_job_min: float
    jobs: tuple[JobSummary, ...] = field(default_factory=tuple)
    # loadgen.fidelity over the frames received (dB; p5 = the worst twentieth); None: not measured
    picture_psnr_db: OffsetSummary | None = None

    @property
    def received_ratio(self) -> float:
        return self.received / self.sent if self.sent else 0.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["received_ratio"] = self.received_ratio
        return d


@dataclass
class _Job:
    sent: dict[int, float] = field(default_factory=dict)
    # send times in order, with their ids: a window is found by bisection, not by a scan of the whole run
    # (a live table asks every second; a scan would cost more the longer the run)
    sent_times: list[float] = field(default_factory=list)
    sent_ids: list[int] = field(default_factory=list)
    first_recv: dict[int, float] = field(default_factory=dict)
    repeats: list[float] = field(default_factory=list)  # receive times of repeated IDs
    unreadable: list[float] = field(default_factory=list)  # receive times of unreadable stamps
    av_offsets: list[tuple[float, float]] = field(default_factory=list)  # (t, offset ms)
    psnr: dict[int, float] = field(default_factory=dict)  # frame id -> fidelity of its first receipt (dB)
    joined: JobJoined | None = None
    marks: dict[str, float] = field(default_factory=dict)  # the way on air (JobMark), first of each


class StatsCollector:
    """Accumulates events of one run; every query is a pure function of what was recorded."""

    def __init__(self, budget_ms: float) -> None:
        self.budget_ms = budget_ms
        self._jobs: dict[int, _Job] = {}

    def _job(self, job: int) -> _Job:
        j = self._jobs.get(job)
        if j is None:
            j = self._jobs[job] = _Job()
        return j

    def record(self, event: Event) -> None:
        j = self._job(event.job)
        if isinstance(event, FrameSent):
            if event.frame_id in j.sent:  # sent again under the same id: the newer time stands
                k = j.sent_ids.index(event.frame_id)
                del j.sent_ids[k], j.sent_times[k]
            j.sent[event.frame_id] = event.t
            _insert(j.sent_times, event.t, j.sent_ids, event.frame_id)
        elif isinstance(event, FrameReceived):
            if event.frame_id is None:
                _insert(j.unreadable, event.t)
            elif event.frame_id in j.first_recv:
                _insert(j.repeats, event.t)
            elif event.frame_id in j.sent:
                j.first_recv[event.frame_id] = event.t
                if event.psnr_db is not None:
                    j.psnr[event.frame_id] = event.psnr_db
            else:
                # An ID we never sent: a misread that slipped past the check code. Not a latency sample.
                _insert(j.unreadable, event.t)
        elif isinstance(event, AvOffset):
            j.av_offsets.append((event.t, event.offset_ms))
        elif isinstance(event, JobMark):
            j.marks.setdefault(event.name, event.ms)
        else:
            j.joined = event

    @property
    def job_ids(self) -> list[int]:
        return sorted(self._jobs)

    def timelines(self) -> list[dict[str, float]]:
        """Each job's way on air (JobMark), jobs in order; jobs with no mark left out."""
        return [dict(self._jobs[j].marks) for j in self.job_ids if self._jobs[j].marks]

    def join_failures(self) -> list[JobJoined]:
        return [j.joined for j in self._jobs.values() if j.joined is not None and not j.joined.ok]

    def samples(self, start: float = float("-inf"), end: float = float("inf")) -> list[Sample]:
        out: list[Sample] = []
        for job_id in self.job_ids:
            j = self._jobs[job_id]
            for fid, rt in j.first_recv.items():
                st = j.sent[fid]
                if start <= st < end:
                    out.append(Sample(job_id, fid, st, rt))
        out.sort(key=lambda s: s.sent_t)
        return out

    def window(self, start: float, end: float) -> WindowSummary:
        """Statistics for frames SENT in [start, end). Call once in-flight frames had time to return."""
        duration = max(end - start, 1e-9)
        jobs: list[JobSummary] = []
        all_lat: list[float] = []
        all_psnr: list[float] = []
        for job_id in self.job_ids:
            j = self._jobs[job_id]
            sent_ids, lat = self._job_window(j, start, end)
            if not sent_ids and (j.joined is None or not j.joined.ok):
                continue
            all_lat.extend(lat)
            all_psnr.extend(j.psnr[f] for f in sent_ids if f in j.psnr)
            jobs.append(
                JobSummary(
                    job=job_id,
                    sent=len(sent_ids),
                    received=len(lat),
                    lost=len(sent_ids) - len(lat),
                    repeated=_count(j.repeats, start, end),
                    unreadable=_count(j.unreadable, start, end),
                    sent_fps=len(sent_ids) / duration,
                    received_fps=len(lat) / duration,
                    latency=LatencySummary.of(lat, self.budget_ms),
                    av_offset_ms=OffsetSummary.of([o for t, o in j.av_offsets if start <= t < end]),
                )
            )
        per_job_fps = [js.received_fps for js in jobs]
        return WindowSummary(
            start=start,
            end=end,
            budget_ms=self.budget_ms,
            latency=LatencySummary.of(all_lat, self.budget_ms),
            sent=sum(js.sent for js in jobs),
            received=sum(js.received for js in jobs),
            lost=sum(js.lost for js in jobs),
            repeated=sum(js.repeated for js in jobs),
            unreadable=sum(js.unreadable for js in jobs),
            sent_fps=sum(js.sent for js in jobs) / duration,
            received_fps=sum(js.received for js in jobs) / duration,
            fps_per_job_mean=float(np.mean(per_job_fps)) if per_job_fps else 0.0,
            fps_per_job_min=float(min(per_job_fps)) if per_job_fps else 0.0,
            jobs=tuple(jobs),
            picture_psnr_db=OffsetSummary.of(all_psnr),
        )

    @staticmethod
    def _job_window(j: _Job, start: float, end: float) -> tuple[list[int], list[float]]:
        """Ids sent in [start, end) and the latencies (ms) of those that came back."""
        lo, hi = _span(j.sent_times, start, end)
        sent_ids = j.sent_ids[lo:hi]
        lat = [(j.first_recv[f] - j.sent[f]) * 1000.0 for f in sent_ids if f in j.first_recv]
        return sent_ids, lat

    def fps_series(self, bucket_s: float = 1.0) -> dict[int, list[tuple[float, float]]]:
        """job -> [(bucket start, received fps)] by receive time: the 'fps over time' chart."""
        out: dict[int, list[tuple[float, float]]] = {}
        for job_id in self.job_ids:
            times = sorted(self._jobs[job_id].first_recv.values())
            if not times:
                continue
            t0 = times[0]
            counts: dict[int, int] = {}
            for t in times:
                b = int((t - t0) // bucket_s)
                counts[b] = counts.get(b, 0) + 1
            out[job_id] = [(t0 + b * bucket_s, c / bucket_s) for b, c in sorted(counts.items())]
        return out


@dataclass
class JobTally:
    """One job's frames since a tally's start: counts and a fixed-size latency histogram."""

    sent: int = 0
    received: int = 0
    repeated: int = 0
    latency_ms: LogHistogram = field(default_factory=LogHistogram)

    @property
    def lost(self) -> int:
        return self.sent - self.received


class RunningTally:
    """Per-job totals of a run so far, each frame folded in once (by send time) as `advance` moves on.

    What a live table shows every second: recomputing them from the run's start each time would cost more
    the longer the run (and the load generator shares the machine with the gateway it measures).
    """

    def __init__(self, start: float) -> None:
        self.start = start
        self.upto = start
        self.jobs: dict[int, JobTally] = {}

    def advance(self, collector: StatsCollector, upto: float) -> None:
        """Fold in the frames sent in [the previous `upto`, `upto`)."""
        if upto <= self.upto:
            return
        for job_id in collector.job_ids:
            j = collector._jobs[job_id]  # noqa: SLF001  (the collector's own module)
            sent_ids, lat = collector._job_window(j, self.upto, upto)  # noqa: SLF001
            tally = self.jobs.get(job_id)
            if tally is None:
                tally = self.jobs[job_id] = JobTally()
            tally.sent += len(sent_ids)
            tally.received += len(lat)
            tally.repeated += _count(j.repeats, self.upto, upto)
            tally.latency_ms.extend(lat)
        self.upto = upto


def _insert(times: list[float], t: float, ids: list[int] | None = None, frame_id: int = 0) -> None:
    """Append `t` (and its id) keeping `times` sorted: events come in time order, so this is an append."""
    if not times or t >= times[-1]:
        times.append(t)
        if ids is not None:
            ids.append(frame_id)
        return
    k = bisect.bisect_right(times, t)
    times.insert(k, t)
    if ids is not None:
        ids.insert(k, frame_id)


def _span(times: list[float], start: float, end: float) -> tuple[int, int]:
    return bisect.bisect_left(times, start), bisect.bisect_left(times, end)


def _count(times: list[float], start: float, end: float) -> int:
    lo, hi = _span(times, start, end)
    return hi - lo
