"""DTLS with stacks other than browsers and aiortc, and a failure the operator can read.

Peers with RSA certificates (GStreamer's webrtcbin, other OpenSSL stacks) find "no shared cipher" against
aiortc's ECDHE-ECDSA-only suites when they are the DTLS server. `answer_as_dtls_server` takes the server role
where the offer said `actpass` (answer `a=setup:passive`, as libwebrtc does); `watch_dtls` adds ECDHE-RSA
suites (a browser-sized list) for peers that insist on being the server, and records why a handshake failed
before the connection's state handlers run, so the session's close reason names it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiortc import RTCPeerConnection
from aiortc.sdp import SessionDescription
from OpenSSL import SSL

from gateway.webrtc import compat
from gateway.webrtc.transports import on_dtls_transports

logger = logging.getLogger(__name__)

# aiortc's own list (ECDSA, RFC 8827's mandatory suite first), then the ECDHE-RSA suites a browser offers.
DTLS_CIPHERS: tuple[str, ...] = (
    "ECDHE-ECDSA-AES128-GCM-SHA256",
    "ECDHE-ECDSA-CHACHA20-POLY1305",
    "ECDHE-ECDSA-AES128-SHA",
    "ECDHE-ECDSA-AES256-SHA",
    "ECDHE-RSA-AES128-GCM-SHA256",
    "ECDHE-RSA-CHACHA20-POLY1305",
    "ECDHE-RSA-AES128-SHA",
    "ECDHE-RSA-AES256-SHA",
)

_PC_MARK = "_livefuse_dtls_watch"


@dataclass
class DtlsWatch:
    """What `watch_dtls` learned about one connection's DTLS handshake(s)."""

    label: str
    patched: bool
    failure: str | None = None  # the first failure's cause
    closed_here: Callable[[], bool] = lambda: False  # our own close() has begun (signaling state)

    def close_reason(self, state: str) -> str:
        """A session close reason for connection state `state` that carries the DTLS cause when known."""
        if state == "failed" and self.failure is not None:
            return f"peer failed (DTLS: {self.failure})"
        return f"peer {state}"


def ssl_error_reason(exc: BaseException) -> str:
    """OpenSSL's reasons from a pyOpenSSL error ("no shared cipher", "tls alert handshake failure");
    "" when OpenSSL's queue was empty (a call after the failure was already reported)."""
    reasons: list[str] = []
    details = exc.args[0] if exc.args else None
    if isinstance(details, list):
        for item in details:
            if isinstance(item, tuple) and item:
                reason = str(item[-1]).strip()
                if reason and reason not in reasons:
                    reasons.append(reason)
    return "; ".join(reasons)


def _explain(reason: str, role: str) -> str:
    """Add what an operator can do about the two causes seen in the field."""
    if "no shared cipher" in reason or "handshake failure" in reason:
        return (
            f"{reason} (we were DTLS {role}; the peer's certificate type or cipher suites do not match ours)"
        )
    return f"{reason} (we were DTLS {role})"


def _patch_context_factory(certificate: Any) -> None:
    original: Callable[..., SSL.Context] = getattr(certificate, compat.CERTIFICATE_SSL_CONTEXT)

    def create_ssl_context(*args: Any, **kwargs: Any) -> SSL.Context:
        ctx = original(*args, **kwargs)
        ctx.set_cipher_list(":".join(DTLS_CIPHERS).encode())
        return ctx

    setattr(certificate, compat.CERTIFICATE_SSL_CONTEXT, create_ssl_context)


def _watch_transport(transport: Any, watch: DtlsWatch) -> None:
    if getattr(transport, _PC_MARK, None) is watch:
        return
    setattr(transport, _PC_MARK, watch)
    original_handshake = getattr(transport, compat.DTLS_DO_HANDSHAKE)
    original_set_state = getattr(transport, compat.DTLS_SET_STATE)
    seen: list[str] = []

    async def do_handshake() -> None:
        # aiortc drives the handshake both from `do_handshake()` and from `recv()` on each incoming record
        # (which swallows SSL errors); OpenSSL reports the cause once, on whichever call hit it.
        connection = getattr(transport, compat.DTLS_SSL)
        originals = {name: getattr(connection, name) for name in ("do_handshake", "recv")}

        def recording(step: Callable[..., Any]) -> Callable[..., Any]:
            def call(*args: Any) -> Any:
                try:
                    return step(*args)
                except (SSL.WantReadError, SSL.ZeroReturnError):
                    raise
                except SSL.Error as exc:
                    reason = ssl_error_reason(exc)
                    if reason:
                        seen.append(reason)
                    raise

            return call

        for name, step in originals.items():
            setattr(connection, name, recording(step))
        try:
            await original_handshake()
        finally:
            for name, step in originals.items():
                setattr(connection, name, step)

    def set_state(state: Any) -> None:
        # Report before aiortc emits "statechange": the connection's state handlers (the session's close
        # reason) run inside that emit and must find the cause already recorded.
        if getattr(state, "name", "") == "FAILED" and transport.state != "failed":
            _report(transport, watch, seen)
        original_set_state(state)

    setattr(transport, compat.DTLS_DO_HANDSHAKE, do_handshake)
    setattr(transport, compat.DTLS_SET_STATE, set_state)


def _post_handshake_cause(transport: Any) -> str:
    if not getattr(transport, "encrypted", False):
        ice = getattr(transport, "transport", None)
        if getattr(ice, "state", None) in ("closed", "failed"):
            return "ICE connection lost during the handshake"
        return "handshake did not complete"
    ssl = getattr(transport, compat.DTLS_SSL, None)
    if ssl is not None and not ssl.get_selected_srtp_profile():
        return "no common SRTP protection profile"
    return "peer certificate does not match the fingerprint in its SDP"


def _report(transport: Any, watch: DtlsWatch, seen: list[str]) -> None:
    if not seen and watch.closed_here():
        # our own close (DELETE, reaper, shutdown) stopped ICE under a pending handshake: nothing failed
        logger.debug("%s: DTLS handshake abandoned: the connection was closed", watch.label)
        return
    reason = seen[0] if seen else _post_handshake_cause(transport)
    cause = _explain(reason, getattr(transport, compat.DTLS_ROLE))
    if watch.failure is None:
        watch.failure = reason
    logger.warning("%s: DTLS handshake failed: %s", watch.label, cause)


def _supported(pc: RTCPeerConnection) -> bool:
    from aiortc.rtcdtlstransport import RTCCertificate, RTCDtlsTransport

    return (
        compat.supported()
        and hasattr(pc, compat.PC_CERTIFICATES)
        and hasattr(pc, compat.PC_CREATE_DTLS_TRANSPORT)
        and hasattr(RTCCertificate, compat.CERTIFICATE_SSL_CONTEXT)
        and all(
            hasattr(RTCDtlsTransport, name)
            for name in (compat.DTLS_DO_HANDSHAKE, compat.DTLS_SET_ROLE, compat.DTLS_SET_STATE)
        )
    )


def watch_dtls(pc: RTCPeerConnection, label: str) -> DtlsWatch:
    """Add ECDHE-RSA suites to `pc`'s DTLS and report handshake failures (see the module docstring).

    Call right after creating the connection, before `setRemoteDescription`. Idempotent.
    """
    existing = getattr(pc, _PC_MARK, None)
    if isinstance(existing, DtlsWatch):
        return existing
    if not _supported(pc):
        logger.warning("%s: this aiortc's DTLS internals are unknown; stock DTLS (ECDSA peers only)", label)
        watch = DtlsWatch(label=label, patched=False)
        setattr(pc, _PC_MARK, watch)
        return watch
    watch = DtlsWatch(label=label, patched=True, closed_here=lambda: pc.signalingState == "closed")
    for certificate in getattr(pc, compat.PC_CERTIFICATES):
        _patch_context_factory(certificate)
    on_dtls_transports(pc, _PC_MARK, lambda transport: _watch_transport(transport, watch))
    setattr(pc, _PC_MARK, watch)
    return watch


def answer_as_dtls_server(pc: RTCPeerConnection) -> int:
    """Take the DTLS server role (answer `a=setup:passive`) where the remote offer said `actpass`.

    Call after `setRemoteDescription(offer)` and before `createAnswer()`. An offer that says `active` already
    makes us the server; one that says `passive` keeps us the client (its choice). Returns how many DTLS
    transports were switched.
    """
    remote = pc.remoteDescription
    if remote is None or remote.type != "offer" or compat.refused("the DTLS server role"):
        return 0
    media = SessionDescription.parse(remote.sdp).media
    actpass_mids = {m.rtp.muxId for m in media if m.dtls is not None and m.dtls.role == "auto"}
    transports: list[Any] = [t.receiver.transport for t in pc.getTransceivers() if t.mid in actpass_mids]
    if pc.sctp is not None and pc.sctp.mid in actpass_mids:
        transports.append(pc.sctp.transport)
    switched = 0
    for transport in {id(t): t for t in transports}.values():
        if getattr(transport, compat.DTLS_ROLE, None) == "auto" and hasattr(transport, compat.DTLS_SET_ROLE):
            getattr(transport, compat.DTLS_SET_ROLE)("server")
            switched += 1
    return switched
