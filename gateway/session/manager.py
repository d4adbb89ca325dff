"""The session manager: admits, answers, finds, reaps and closes sessions (all on the event loop)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Sequence
from concurrent.futures import Executor

from aiortc import MediaStreamTrack

from engines.frames import FaceSettings, SourceFace
from gateway.config import SessionConfig
from gateway.control import GovernorLike
from gateway.errors import NotFound, Unavailable
from gateway.session.admission import decide
from gateway.session.answering import answer_or_refuse
from gateway.session.ports import MonitorLike, SchedulerLike
from gateway.session.reaping import verdict
from gateway.session.session import Session
from gateway.session.timeline import ANSWER, DTLS, ICE
from gateway.webrtc.codecs.hw_encode import HardwareH264
from gateway.webrtc.codecs.live_rate import live_rate_libraries
from gateway.webrtc.install import open_peer_connection
from gateway.webrtc.interop.ice import IceConfig
from gateway.webrtc.negotiation.sdp import check_offer

USER_AGENT_CHARS = 160


def printable(text: str, limit: int) -> str:
    """`text` with anything unprintable replaced, cut to `limit` characters (a header, shown as data)."""
    return "".join(c if c.isprintable() else "?" for c in text[:limit])


logger = logging.getLogger(__name__)


class SessionManager:
    """Admits, finds, reaps and closes sessions. All methods run on the event loop."""

    def __init__(
        self,
        config: SessionConfig,
        ice: IceConfig,
        scheduler: SchedulerLike,
        monitor: MonitorLike,
        governor: GovernorLike,
        *,
        budget_ms: float,
        executor: Executor | None = None,
        hardware_h264: HardwareH264 | None = None,
    ) -> None:
        self.config = config
        self.ice = ice
        self._scheduler = scheduler
        self._monitor = monitor
        self._governor = governor
        self._budget_ms = budget_ms
        self._executor = executor
        self.sessions: dict[str, Session] = {}
        self.accepting = True
        self.libvpx, self.libx264 = live_rate_libraries(config.live_bitrate)
        self.hardware_h264 = hardware_h264
        self._reaper: asyncio.Task[None] | None = None
        self._closing: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        if self._reaper is None:
            self._reaper = asyncio.get_running_loop().create_task(self._reap_loop(), name="session-reaper")

    def get(self, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is None or session.close_reason is not None:
            raise NotFound(f"no session {session_id!r}")
        return session

    def pending(self) -> list[Session]:
        """Sessions answered but not (yet) connected, oldest first."""
        waiting = [s for s in self.sessions.values() if s.connected_s is None and s.close_reason is None]
        return sorted(waiting, key=lambda s: s.created_s)

    def admit(self, owner: str | None = None, owner_limit: int | None = None) -> None:
        """Raise Unavailable when a new session cannot be taken now (shutting down, full, overloaded);
        evict the oldest pending session when the admission policy says its slot is stale."""
        pending = self.pending()
        mine = sum(1 for s in self.sessions.values() if s.owner == owner and s.close_reason is None)
        admission = decide(
            now=time.monotonic(),
            accepting=self.accepting,
            owner=owner,
            owner_sessions=mine,
            owner_limit=owner_limit,
            pending_created=[s.created_s for s in pending],
            sessions=len(self.sessions),
            max_pending=self.config.max_pending,
            pending_grace_s=self.config.pending_grace_s,
            max_sessions=self.config.max_sessions,
            governor_admits=self._governor.admits_new_sessions(),
        )
        if admission.evict_oldest_pending:
            oldest = pending[0]
            self._forget(oldest)  # its slot is free now; its peer connection closes in the background
            oldest.schedule_close("evicted: never connected, pending budget full")
        refusal = admission.refusal
        if refusal is not None:
            if refusal.reject is not None:
                self._monitor.record_reject(refusal.reject)
            raise Unavailable(refusal.message, retry_after_s=refusal.retry_after_s)

    async def create(
        self,
        offer_sdp: str,
        *,
        source: SourceFace | None,
        processors: Sequence[str],
        owner: str | None = None,
        owner_limit: int | None = None,
        face_settings: FaceSettings | None = None,
        user_agent: str | None = None,
        legacy_dtls: bool | None = None,
        label: str | None = None,
        post_s: float | None = None,
    ) -> tuple[Session, str]:
        """Answer a WHIP offer: returns the session and the SDP answer (ICE candidates included).
        `user_agent` (the POST's, shortened) is kept with the session: which publisher a failure was.
        `post_s`: when the POST arrived (monotonic), the origin of the session's timeline."""
        offer = check_offer(offer_sdp, need_send=True)  # a bad offer never costs a slot, or an eviction
        self.admit(owner, owner_limit)
        session_id = secrets.token_urlsafe(12)
        pc, dtls = open_peer_connection(self.ice, f"session {session_id}")
        session = Session(
            session_id,
            pc,
            source=source,
            processors=tuple(processors),
            config=self.config,
            scheduler=self._scheduler,
            monitor=self._monitor,
            governor=self._governor,
            executor=self._executor,
            budget_ms=self._budget_ms,
            on_closed=self._forget,
            face_settings=face_settings,
            libvpx=self.libvpx,
            libx264=self.libx264,
            hardware_h264=self.hardware_h264,
            label=label,
            post_s=post_s,
        )
        session.owner = owner
        self.sessions[session_id] = session

        @pc.on("track")
        def on_track(track: MediaStreamTrack) -> None:
            if track.kind == "video":
                receiver = next((t.receiver for t in pc.getTransceivers() if t.receiver.track is track), None)
                if receiver is not None:
                    session.start_media(track, receiver)

        @pc.on("iceconnectionstatechange")
        def on_ice_state() -> None:
            if pc.iceConnectionState in ("connected", "completed"):
                session.on_air_step(ICE)

        @pc.on("connectionstatechange")
        def on_state() -> None:
            if pc.connectionState == "connected" and session.connected_s is None:
                session.connected_s = time.monotonic()
                session.on_air_step(DTLS, session.connected_s)
            elif pc.connectionState in ("failed", "closed"):
                session.schedule_close(dtls.close_reason(pc.connectionState))

        def attach(transport_cc_lines: int) -> None:
            if transport_cc_lines:
                session.start_transport_cc(pc)
            video = next(t for t in pc.getTransceivers() if t.kind == "video")
            if video.direction in ("sendrecv", "recvonly"):  # our view: we receive, and send back if asked
                session.subscribe(pc, offer.codec, publisher=True)
            # every audio m-line is answered by attach_publisher: Opus recvonly, anything else inactive
            session.audio.attach_publisher(pc)

        answer = await answer_or_refuse(
            pc,
            offer_sdp,
            offer,
            transport_cc=self.config.transport_cc,
            attach=attach,
            give_back=lambda: session.close("bad offer"),
            what="WHIP offer",
            legacy_dtls=legacy_dtls,
        )
        session.on_air_step(ANSWER)
        info: dict[str, object] = {"source": source.id if source else None, "processors": list(processors)}
        if user_agent:
            info["user_agent"] = printable(user_agent, USER_AGENT_CHARS)
        info["timeline_ms"] = session.timeline.as_ms()
        self._monitor.session_opened(session_id, info)
        return session, answer

    def _forget(self, session: Session) -> None:
        if self.sessions.get(session.id) is session:
            del self.sessions[session.id]

    async def delete(self, session_id: str) -> None:
        session = self.get(session_id)
        await session.close("deleted by client")

    def reap_once(self, now: float) -> list[str]:
        """Close sessions whose peer vanished; drop those whose close hung (gateway.session.reaping)."""
        victims = []
        for session in list(self.sessions.values()):
            state = session.pc.connectionState
            found = verdict(
                now=now,
                state=state,
                created_s=session.created_s,
                connected_s=session.connected_s,
                last_frame_s=session.last_frame_s,
                close_reason=session.close_reason,
                closed_s=session.closed_s,
                connect_timeout_s=self.config.connect_timeout_s,
                reap_after_s=self.config.reap_after_s,
            )
            if found is None:
                continue
            victims.append(session.id)
            if found.drop:
                logger.warning("session %s: close hung (%s); dropped", session.id, found.reason)
                self._forget(session)
            else:
                session.schedule_close(found.reason)
        return victims

    async def _reap_loop(self) -> None:
        interval = min(1.0, self.config.reap_after_s / 4)
        while True:
            await asyncio.sleep(interval)
            self.reap_once(time.monotonic())

    def counts(self) -> dict[str, int]:
        return {
            "sessions": len(self.sessions),
            "viewers": sum(len(s.viewers) for s in self.sessions.values()),
            "tasks": sum(s.task_count for s in self.sessions.values()),
        }

    async def close(self) -> None:
        """Refuse new sessions, close every session and the reaper. Idempotent."""
        self.accepting = False
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
            self._reaper = None
        await asyncio.gather(
            *(s.close("gateway shutdown") for s in list(self.sessions.values())), return_exceptions=True
        )
