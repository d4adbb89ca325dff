"""DTLS with stacks other than browsers and aiortc, and a failure the operator can read.

`watch_dtls` changes each of a connection's certificates, in the order the handshake meets them:
- its answer carries the SHA-256 fingerprint alone (libdatachannel, OBS's WHIP output: interop.dtls_peers);
- its SSL context adds ECDHE-RSA suites (a browser-sized list): GStreamer's webrtcbin signs with an RSA key
  and, as DTLS server (it answers our `active`), found "no shared cipher" against aiortc's ECDSA-only list;
- for an offer FFmpeg's WHIP muxer wrote (`use_legacy_dtls`), the context offers DTLS 1.0 only, the one
  version in which its GnuTLS P-224 certificate can be checked (interop.dtls_peers);
- the peer's certificate key is recorded as the handshake sees it, and why a handshake failed is recorded
  before the connection's state handlers run, so the session's close reason names who rejected what.
The DTLS role is aiortc's own (`active` to an `actpass` offer): every client in the interop matrix takes it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiortc import RTCPeerConnection
from OpenSSL import SSL

from gateway.webrtc import chain, compat
from gateway.webrtc.interop.dtls_peers import (
    ANSWER_FINGERPRINT_ALGORITHM,
    LEGACY_DTLS_CIPHERS,
    HandshakeFacts,
    explain,
)

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
LAYER = "DTLS watch"
DTLS1_VERSION = 0xFEFF  # OpenSSL's DTLS1_VERSION (pyOpenSSL names the TLS versions only)


@dataclass
class DtlsWatch:
    """What `watch_dtls` learned about one connection's DTLS handshake(s)."""

    label: str
    patched: bool
    failure: str | None = None  # the first failure, explained (interop.dtls_peers.explain)
    closed_here: Callable[[], bool] = lambda: False  # our own close() has begun (signaling state)
    legacy_for: str | None = None  # DTLS 1.0 is offered for this peer (use_legacy_dtls)
    grace_s: float = 0.0  # as DTLS client, wait this long after ICE connects (dtls_peers.handshake_grace_s)
    peer_key: str | None = None  # the peer certificate's key, once the handshake has seen it

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


def describe_key(certificate: Any) -> str:
    """ "ECDSA secp224r1", "RSA 2048": a peer certificate's key as an operator reads it."""
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    key = certificate.to_cryptography().public_key()
    if isinstance(key, ec.EllipticCurvePublicKey):
        return f"ECDSA {key.curve.name}"
    if isinstance(key, rsa.RSAPublicKey):
        return f"RSA {key.key_size}"
    return type(key).__name__


def _patch_certificate(certificate: Any, watch: DtlsWatch) -> None:
    def make_context(original: Callable[..., SSL.Context]) -> Callable[..., SSL.Context]:
        def create_ssl_context(*args: Any, **kwargs: Any) -> SSL.Context:
            ctx = original(*args, **kwargs)
            if watch.legacy_for is None:
                ctx.set_cipher_list(":".join(DTLS_CIPHERS).encode())
            else:  # SHA-1 signatures and DTLS 1.0 sit below OpenSSL's default security level
                ctx.set_cipher_list((":".join(LEGACY_DTLS_CIPHERS) + ":@SECLEVEL=0").encode())
                ctx.set_max_proto_version(DTLS1_VERSION)

            def verify(_conn: Any, x509: Any, _errno: int, depth: int, _ok: int) -> bool:
                # aiortc accepts every chain and checks the SDP fingerprint after the handshake; same here
                if depth == 0 and watch.peer_key is None:
                    try:
                        watch.peer_key = describe_key(x509)
                    except Exception:  # noqa: BLE001 - a description only; never fail a handshake over it
                        watch.peer_key = "unreadable key"
                return True

            ctx.set_verify(SSL.VERIFY_PEER | SSL.VERIFY_FAIL_IF_NO_PEER_CERT, verify)
            return ctx

        return create_ssl_context

    def make_fingerprints(fingerprints: Callable[[], list[Any]]) -> Callable[[], list[Any]]:
        def answer_fingerprints() -> list[Any]:
            every = fingerprints()
            return [f for f in every if f.algorithm == ANSWER_FINGERPRINT_ALGORITHM] or every

        return answer_fingerprints

    chain.wrap(certificate, compat.CERTIFICATE_SSL_CONTEXT, LAYER, make_context)
    chain.wrap(certificate, "getFingerprints", LAYER, make_fingerprints)


def _watch_transport(transport: Any, watch: DtlsWatch) -> None:
    if getattr(transport, _PC_MARK, None) is watch:
        return
    setattr(transport, _PC_MARK, watch)
    seen: list[str] = []

    def make_handshake(original_handshake: Callable[[], Awaitable[None]]) -> Callable[[], Awaitable[None]]:
        async def do_handshake() -> None:
            # aiortc drives the handshake both from `do_handshake()` and from `recv()` on each incoming
            # record (which swallows SSL errors); OpenSSL reports the cause once, on whichever call hit it.
            connection = compat.dtls_connection(transport)
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

            if watch.grace_s > 0 and compat.dtls_role(transport) == "client":
                await asyncio.sleep(watch.grace_s)
                if transport.state != "connecting":
                    return  # closed while we waited
            for name, step in originals.items():
                setattr(connection, name, recording(step))
            try:
                await original_handshake()
            finally:
                for name, step in originals.items():
                    setattr(connection, name, step)

        return do_handshake

    def make_set_state(original_set_state: Callable[[Any], None]) -> Callable[[Any], None]:
        def set_state(state: Any) -> None:
            # Report before aiortc emits "statechange": the connection's state handlers (the session's close
            # reason) run inside that emit and must find the cause already recorded.
            if getattr(state, "name", "") == "FAILED" and transport.state != "failed":
                _report(transport, watch, seen)
            original_set_state(state)

        return set_state

    chain.wrap(transport, compat.DTLS_DO_HANDSHAKE, LAYER, make_handshake)
    chain.wrap(transport, compat.DTLS_SET_STATE, LAYER, make_set_state)


def _post_handshake_cause(transport: Any) -> str:
    if not getattr(transport, "encrypted", False):
        ice = getattr(transport, "transport", None)
        if getattr(ice, "state", None) in ("closed", "failed"):
            return "ICE connection lost during the handshake"
        return "handshake did not complete"
    ssl = compat.dtls_connection(transport)
    if ssl is not None and not ssl.get_selected_srtp_profile():
        return "no common SRTP protection profile"
    return "peer certificate does not match the fingerprint in its SDP"


def _report(transport: Any, watch: DtlsWatch, seen: list[str]) -> None:
    if not seen and watch.closed_here():
        # our own close (DELETE, reaper, shutdown) stopped ICE under a pending handshake: nothing failed
        logger.debug("%s: DTLS handshake abandoned: the connection was closed", watch.label)
        return
    reason = seen[0] if seen else _post_handshake_cause(transport)
    cause = explain(
        HandshakeFacts(
            reason=reason,
            role=compat.dtls_role(transport),
            peer_key=watch.peer_key,
            legacy_for=watch.legacy_for,
        )
    )
    if watch.failure is None:
        watch.failure = cause
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
    """Change `pc`'s certificates and report handshake failures (see the module docstring).

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
    for certificate in compat.certificates(pc):
        _patch_certificate(certificate, watch)
    chain.on_dtls_transports(pc, _PC_MARK, lambda transport: _watch_transport(transport, watch))
    setattr(pc, _PC_MARK, watch)
    return watch


def wait_before_handshake(pc: RTCPeerConnection, seconds: float) -> bool:
    """As DTLS client, wait `seconds` after ICE connects before the ClientHello (dtls_peers). Before the
    handshake starts; False where `pc`'s DTLS is not watched."""
    watch = getattr(pc, _PC_MARK, None)
    if not isinstance(watch, DtlsWatch) or not watch.patched:
        return False
    watch.grace_s = seconds
    return True


def use_legacy_dtls(pc: RTCPeerConnection, peer: str) -> bool:
    """Offer DTLS 1.0 only on `pc`, for `peer` (interop.dtls_peers). Before the handshake starts (it starts
    after ICE connects); False where `pc`'s DTLS is not watched (then nothing changes)."""
    watch = getattr(pc, _PC_MARK, None)
    if not isinstance(watch, DtlsWatch) or not watch.patched:
        return False
    watch.legacy_for = peer
    return True
