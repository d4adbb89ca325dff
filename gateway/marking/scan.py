"""Scanning a video file for the mark (the library call behind `livefuse-mark detect`): any file PyAV reads,
decoded once, its luma cut into 1-second windows by the frames' own times, each window searched
(engines.marking.detect).

A file is reported marked when at least one second is: each window's search is held to a false-positive rate
measured at zero over more than 10,000 unmarked frames (bench.mark), so one marked second is the evidence,
and a clip cut from a marked stream anywhere is found."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import av
import numpy as np

from engines.marking.detect import THRESHOLD, Detector, WindowResult
from engines.marking.pattern import Payload


@dataclass(frozen=True)
class SecondReport:
    second: int  # from the file's first frame
    frames: int
    score: float  # the public layer's score (THRESHOLD and above: marked)
    detected: bool
    frames_detected: int
    payload: Payload | None


@dataclass
class ScanReport:
    path: str
    keyed: bool
    seconds: list[SecondReport] = field(default_factory=list)

    @property
    def detected(self) -> bool:
        return any(s.detected for s in self.seconds)

    @property
    def payload(self) -> Payload | None:
        """The payload read in most seconds (None without the key, or where none was read)."""
        counts = Counter(s.payload for s in self.seconds if s.payload is not None)
        return counts.most_common(1)[0][0] if counts else None

    def to_dict(self) -> dict[str, object]:
        seconds_detected = sum(s.detected for s in self.seconds)
        scores = [s.score for s in self.seconds]
        read = {s.payload for s in self.seconds if s.payload is not None}
        payloads = sorted(read, key=lambda p: p.time_code)
        return {
            "file": self.path,
            "detected": self.detected,
            "seconds": len(self.seconds),
            "seconds_detected": seconds_detected,
            # the share of seconds where the mark was found, and the median score against the threshold
            "confidence": round(seconds_detected / len(self.seconds), 4) if self.seconds else 0.0,
            "median_score": round(float(np.median(scores)), 2) if scores else None,
            "threshold": THRESHOLD,
            "frames": sum(s.frames for s in self.seconds),
            "frames_detected": sum(s.frames_detected for s in self.seconds),
            "keyed": self.keyed,
            "payload": None if self.payload is None else self.payload.as_dict(),
            "payloads": [p.as_dict() for p in payloads],
            "per_second": [
                {
                    "second": s.second,
                    "frames": s.frames,
                    "score": round(s.score, 2),
                    "detected": s.detected,
                    "frames_detected": s.frames_detected,
                    "payload": None if s.payload is None else s.payload.as_dict(),
                }
                for s in self.seconds
            ],
        }


def _luma_windows(path: Path, window_s: float) -> Iterator[tuple[int, list[np.ndarray]]]:
    """The file's first video stream as luma planes, grouped by second (a new size starts a new window)."""
    with av.open(str(path)) as container:
        if not container.streams.video:
            raise ValueError(f"{path}: no video stream")
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        start: float | None = None
        current: list[np.ndarray] = []
        index, n = 0, 0
        for frame in container.decode(stream):
            t = frame.time if frame.time is not None else n / float(stream.average_rate or 30)
            n += 1
            start = t if start is None else start
            k = int((t - start) // window_s)
            y = frame.to_ndarray(format="gray")
            if current and (k != index or y.shape != current[0].shape):
                yield index, current
                current = []
            index = k
            current.append(y)
        if current:
            yield index, current


def scan_file(path: Path, key: bytes | None = None, window_s: float = 1.0) -> ScanReport:
    """Every second of the file searched for the mark (and, with the key, its payload read).
    ValueError for a file with no video; av's errors for one it cannot read."""
    detector = Detector(key)
    report = ScanReport(str(path), key is not None)
    for second, lumas in _luma_windows(path, window_s):
        result: WindowResult = detector.window(lumas)
        report.seconds.append(
            SecondReport(
                second=second,
                frames=len(lumas),
                score=result.score,
                detected=result.detected,
                frames_detected=sum(score >= THRESHOLD for score in result.frame_scores),
                payload=result.payload,
            )
        )
    return report
