"""One session's push to a downstream WHIP endpoint: one more consumer of the session's encoded packets.

Like a WHEP viewer it takes the fan-out encoder's packets (`FanoutEncoder.subscribe`: never a second encode;
the codec is one the session already encodes, VP8 when none yet) and the Opus relay's packets, with both
streams' sender reports stamped from the session's one capture clock (lip sync, as for viewers). Unlike a
viewer, the gateway is the offerer and the client: OPTIONS for ICE servers, POST the offer, apply the answer,
wait for ICE/DTLS, then watch the connection; a failure tears the attempt down (DELETE, tracks unsubscribed)
and `gateway.egress.policy` says whether and when to try again. A slow or dead endpoint costs the session
nothing: its packet tracks drop (video waits for a keyframe) instead of queueing, and every network wait is
in this push's own task.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import unquote, urlsplit

import aiohttp
from aiortc import RTCConfiguration, RTCIceServer, RTCPeerConnection, RTCRtpSender, RTCSessionDescription

from gateway.egress.policy import EgressState, Failure, RetryConfig, after_failure
from gateway.egress.whip_client import (
    WhipRefused,
    WhipResource,
    delete_resource,
    endpoint_of,
    ice_servers,
    post_offer,
)
from gateway.media.fanout import FanoutEncoder
from gateway.media.session_audio import SessionAudio
from gateway.webrtc.install import Features, install, install_sender, install_sender_clock

logger = logging.getLogger(__name__)


class MediaSource(Protocol):
    """What a push needs of a session (gateway.session.Session)."""

    id: str
    encoders: dict[str, FanoutEncoder]
    audio: SessionAudio

    def encoder_for(self, codec: str) -> FanoutEncoder: ...

    def disclosure_headers(self) -> dict[str, str]: ...


@dataclass(frozen=True)
class Target:
    url: str
    token: str | None = None
    origin: str = "request"  # request | default: where the target came from (shown in stats)
    scope: str = "/"  # the path prefix the endpoint's `Location` must stay within (its allow-list entry's)

    @property
    def endpoint(self) -> str:
        """Scheme, host and port only: all that events, stats, logs and webhooks show of the URL (its path
        and query carry stream keys; the owner reads them at GET /sessions/{id}/egress)."""
        return endpoint_of(self.url)

    def scrub(self, text: str) -> str:
        """`text` (an error's message, say) with the URL's path and query taken out."""
        parts = urlsplit(self.url)
        secrets = [self.url, parts.path + (f"?{parts.query}" if parts.query else ""), parts.path, parts.query]
        secrets += [unquote(p) for p in secrets]
        for secret in sorted({p for p in secrets if len(p) > 1}, key=len, reverse=True):
            text = text.replace(secret, "/…" if secret.startswith("/") else "…")
        return text


@dataclass(frozen=True)
class PushTimeouts:
    request_s: float = 10.0  # each HTTP request to the endpoint
    connect_s: float = 15.0  # from the answer to ICE/DTLS connected


StateListener = Callable[["EgressPush", EgressState, str], None]
IceCheck = Callable[[tuple[RTCIceServer, ...]], Awaitable[tuple[RTCIceServer, ...]]]


def _codec_for(source: MediaSource) -> str:
    """A codec the session encodes already (VP8 first); VP8 when it encodes none yet."""
    if "VP8" in source.encoders or not source.encoders:
        return "VP8"
    return next(iter(source.encoders))


def _prefer(pc: RTCPeerConnection, sender: RTCRtpSender, kind: str, codec: str) -> None:
    wanted = {f"{kind}/{codec.lower()}", f"{kind}/rtx"}
    codecs = [c for c in RTCRtpSender.getCapabilities(kind).codecs if c.mimeType.lower() in wanted]
    transceiver = next(t for t in pc.getTransceivers() if t.sender is sender)
    transceiver.setCodecPreferences(codecs)


class EgressPush:
    """`start()` runs attempts in a task until `stop()` or failure; `state` and `stats()` say how it goes."""

    def __init__(
        self,
        source: MediaSource,
        target: Target,
        http: aiohttp.ClientSession,
        *,
        retry: RetryConfig,
        timeouts: PushTimeouts,
        host_addresses: tuple[str, ...] = (),
        on_state: StateListener | None = None,
        on_delete: Callable[[str, str | None], None] | None = None,
        ice_check: IceCheck | None = None,
    ) -> None:
        self.source = source
        self.target = target
        self.state = EgressState.CONNECTING
        self.reason = ""
        self.attempts = 0
        self.failures_in_a_row = 0
        self.connected_s: float | None = None
        self.location: str | None = None
        self._http = http
        self._retry = retry
        self._timeouts = timeouts
        self._hosts = host_addresses
        self._on_state = on_state
        self._on_delete = on_delete  # (location, token): DELETE sent by the owner, off this task
        self._ice_check = ice_check
        self._pc: RTCPeerConnection | None = None
        self._tracks: list[object] = []
        self._lost = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self.packets_sent = 0
        self.packets_dropped = 0

    # --- lifecycle ------------------------------------------------------------------------------------
    def start(self) -> None:
        if self._task is None:
            self._set(EgressState.CONNECTING, f"to {self.target.endpoint}")
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"egress-{self.source.id}")

    async def stop(self, reason: str = "stopped") -> None:
        """End the push: the attempt's tracks and peer connection, the resource DELETEd. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        if self._task is not None and self._task is not asyncio.current_task():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._teardown()
        if self.state is not EgressState.FAILED:
            self._set(EgressState.STOPPED, reason)

    @property
    def done(self) -> bool:
        return self.state in (EgressState.FAILED, EgressState.STOPPED)

    # --- attempts -------------------------------------------------------------------------------------
    async def _run(self) -> None:
        while not self._stopped:
            self.attempts += 1
            failure = await self._attempt()
            await self._teardown()
            if self._stopped:
                return
            self.failures_in_a_row += 1
            step = after_failure(self._retry, failure, self.failures_in_a_row)
            if step.state is EgressState.FAILED:
                self._set(EgressState.FAILED, failure.reason)
                return
            self._set(EgressState.RETRYING, f"{failure.reason}; next attempt in {step.delay_s:g}s")
            await asyncio.sleep(step.delay_s)
            self._set(EgressState.CONNECTING, f"attempt {self.attempts + 1} to {self.target.endpoint}")

    async def _attempt(self) -> Failure:
        """One attempt, until it fails or the connection is lost (returned as the failure)."""
        try:
            await self._connect()
        except WhipRefused as exc:
            return Failure(self.target.scrub(str(exc)), exc.status, exc.retry_after_s)
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            return Failure(self.target.scrub(text))
        except Exception as exc:  # noqa: BLE001  (an answer aiortc cannot apply: ValueError and others)
            return Failure(self.target.scrub(f"egress attempt failed: {type(exc).__name__}: {exc}"), 422)
        self.failures_in_a_row = 0
        self.connected_s = time.monotonic()
        self._set(EgressState.LIVE, f"to {self.target.endpoint}")
        await self._lost.wait()
        pc = self._pc
        return Failure(f"connection {pc.connectionState if pc is not None else 'closed'}")

    async def _connect(self) -> WhipResource:
        url, token = self.target.url, self.target.token
        servers = await ice_servers(self._http, url, token, self._timeouts.request_s)
        if self._ice_check is not None:  # the endpoint's ICE servers pass the allow-list as it did
            servers = await self._ice_check(servers)
        pc = self._pc = RTCPeerConnection(RTCConfiguration(iceServers=list(servers)))
        if self._hosts:
            install(pc, Features(host_addresses=self._hosts, low_latency_receive=False))
        self._lost = asyncio.Event()
        connected = asyncio.Event()

        @pc.on("connectionstatechange")
        def on_state() -> None:
            if pc.connectionState == "connected":
                connected.set()
            elif pc.connectionState in ("failed", "closed"):
                self._lost.set()

        codec = _codec_for(self.source)
        encoder = self.source.encoder_for(codec)
        video = encoder.subscribe()
        self._tracks.append(video)
        sender = pc.addTrack(video)
        _prefer(pc, sender, "video", codec)
        feedback = encoder.bind_sender(sender)
        install_sender(pc, sender, feedback, stamp_reports=self.source.audio.stamp_video, transport_cc=False)
        relay = self.source.audio.relay
        if relay is not None and not relay.closed:
            audio = relay.subscribe()
            self._tracks.append(audio)
            audio_sender = pc.addTrack(audio)
            _prefer(pc, audio_sender, "audio", "opus")
            install_sender_clock(audio_sender, relay.capture_ntp)
        await pc.setLocalDescription(await pc.createOffer())
        resource = await post_offer(
            self._http,
            url,
            token,
            pc.localDescription.sdp,
            self._timeouts.request_s,
            self.target.scope,
            headers=self.source.disclosure_headers(),
        )
        self.location = resource.location
        await pc.setRemoteDescription(RTCSessionDescription(sdp=resource.answer_sdp, type="answer"))
        lost = asyncio.ensure_future(self._lost.wait())
        up = asyncio.ensure_future(connected.wait())
        try:
            await asyncio.wait(
                {lost, up}, timeout=self._timeouts.connect_s, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            lost.cancel()
            up.cancel()
        if not connected.is_set():
            raise TimeoutError(f"ICE/DTLS not connected ({pc.connectionState})")
        return resource

    async def _teardown(self) -> None:
        for track in self._tracks:
            self.packets_sent += getattr(track, "sent", 0)
            self.packets_dropped += getattr(track, "dropped", 0)
            track.stop()  # type: ignore[attr-defined]
        self._tracks.clear()
        pc, self._pc = self._pc, None
        if pc is not None:
            with contextlib.suppress(Exception):
                await pc.close()
        location, self.location = self.location, None
        if location is not None:
            if self._on_delete is not None:
                self._on_delete(location, self.target.token)
            else:
                await delete_resource(self._http, location, self.target.token, self._timeouts.request_s)

    def _set(self, state: EgressState, reason: str) -> None:
        changed = state is not self.state or state is EgressState.CONNECTING
        self.state, self.reason = state, reason
        if changed and self._on_state is not None:
            self._on_state(self, state, reason)

    def stats(self) -> dict[str, object]:
        live = sum(getattr(t, "sent", 0) for t in self._tracks)
        dropped = sum(getattr(t, "dropped", 0) for t in self._tracks)
        return {
            "state": self.state.value,
            "reason": self.reason,
            "url": self.target.url,
            "origin": self.target.origin,
            "location": self.location,
            "attempts": self.attempts,
            "live_s": None
            if self.state is not EgressState.LIVE or self.connected_s is None
            else round(time.monotonic() - self.connected_s, 3),
            "packets_sent": self.packets_sent + live,
            "packets_dropped": self.packets_dropped + dropped,
        }
