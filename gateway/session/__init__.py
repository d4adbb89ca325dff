"""Sessions: a publisher's peer connection, its video loop, its viewers; the manager that admits and reaps."""

from gateway.session.manager import SessionManager
from gateway.session.ports import MonitorLike, SchedulerLike
from gateway.session.session import Session

__all__ = ["MonitorLike", "SchedulerLike", "Session", "SessionManager"]
