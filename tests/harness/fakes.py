"""Stand-ins for the pipeline and the monitor: what a gateway test observes without real models."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from engines.frames import FrameItem, FrameOptions, FrameOutput, SourceFace
from gateway.monitoring.null import NullMonitor
from gateway.monitoring.records import FrameRecord, LinkState


class FakePipeline:
    """Marks each frame's top-left block (processed vs pass-through is visible); optional delay."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.batches: list[int] = []
        self.closed = False

    def prepare_source(self, image_rgb: np.ndarray, source_id: str) -> SourceFace:
        from engines.frames import NoFaceFound

        if float(image_rgb.std()) < 1.0:
            raise NoFaceFound("flat image")
        return SourceFace(id=source_id, image=image_rgb, faces=1)

    def process(self, items: list[FrameItem]) -> list[FrameOutput]:
        self.batches.append(len(items))
        if self.delay_s:
            time.sleep(self.delay_s)
        outs = []
        for item in items:
            img = item.image.copy()
            img[: img.shape[0] // 4, : img.shape[1] // 4] = (255, 0, 255)
            outs.append(
                FrameOutput(
                    image=img,
                    faces=1,
                    timings_ms={"face_swapper": 1.0},
                    batch_sizes={"face_swapper": len(items)},
                )
            )
        return outs

    def warmup(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def not_ready_engines(self) -> list[str]:
        return []


class RecordingMonitor(NullMonitor):
    """Collects what the gateway reports (the real Monitor is tested by its owner)."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[FrameRecord] = []
        self.opened: list[str] = []
        self.closed_sessions: list[tuple[str, str]] = []
        self.rejects: list[str] = []
        self.links: list[tuple[str, LinkState]] = []
        self.timelines: dict[str, dict[str, float]] = {}
        self.events: list[tuple[str, str, dict[str, Any]]] = []  # kind, message, data

    def record_frame(self, rec: FrameRecord) -> None:
        self.records.append(rec)

    def session_opened(self, session_id: str, info: dict[str, object]) -> None:
        self.opened.append(session_id)

    def session_closed(self, session_id: str, reason: str) -> None:
        self.closed_sessions.append((session_id, reason))

    def session_link(self, session_id: str, link: LinkState) -> None:
        self.links.append((session_id, link))

    def session_timeline(self, session_id: str, marks: dict[str, float]) -> None:
        self.timelines[session_id] = dict(marks)

    def record_reject(self, reason: str) -> None:
        self.rejects.append(reason)

    def event(self, kind: str, message: str, **data: Any) -> None:
        self.events.append((kind, message, data))

    def frame_options(self, requested: tuple[str, ...]) -> FrameOptions:
        return FrameOptions(processors=requested)

    def admits_new_sessions(self) -> bool:
        return True

    def session_stats(self, session_id: str) -> dict[str, Any]:
        mine = [r for r in self.records if r.session_id == session_id]
        return {"frames": len(mine)}
