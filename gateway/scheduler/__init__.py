"""Cross-session dynamic batcher: frames from every session meet here and leave in batches.

`policy` decides (pure, synchronous), `estimator` predicts batch times from measurements (pure), `runner`
coordinates on the event loop and runs batches in worker threads.
"""

from gateway.scheduler.policy import ScheduledFrame, SchedulerConfig
from gateway.scheduler.runner import FrameScheduler

__all__ = ["FrameScheduler", "ScheduledFrame", "SchedulerConfig"]
