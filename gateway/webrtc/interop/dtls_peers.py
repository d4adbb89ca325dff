"""What the gateway's DTLS must do for a given peer, and what a failed handshake means: pure, no aiortc.

Two publishers drove these rules, each run by the interop matrix in tests/integration (figures in
docs/BENCHMARKS.md, the interop matrix):
- **FFmpeg 8's WHIP muxer built on GnuTLS** (PyAV's wheels, Debian's and Ubuntu's FFmpeg) is always the DTLS
  server and signs with a P-224 key, which an OpenSSL 4 client refuses in DTLS 1.2 ("wrong curve"): its
  offers get DTLS 1.0 (`legacy_dtls_peer`).
- **libdatachannel** (OBS Studio's WHIP output) can check our certificate before it has stored our answer:
  it gets the SHA-256 fingerprint alone (`ANSWER_FINGERPRINT_ALGORITHM`) and a short wait before our
  ClientHello (`handshake_grace_s`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# The one fingerprint the gateway puts in its answers. libdatachannel keeps one fingerprint per description,
# the last one on the first m-line, and fixes the hash algorithm it will compare with when its DTLS transport
# starts. When ICE connects before it has stored our answer (it hands the answer to ICE first), that
# algorithm is its default SHA-256 while the answer's last line, as aiortc writes them, is SHA-512: it
# rejects our certificate with "unknown ca". The SHA-256 fingerprint alone (what browsers send) takes that
# race away.
ANSWER_FINGERPRINT_ALGORITHM = "sha-256"

# DTLS 1.0 has no AEAD suites: the CBC ECDHE suites every DTLS 1.0 stack has.
LEGACY_DTLS_CIPHERS: tuple[str, ...] = (
    "ECDHE-ECDSA-AES128-SHA",
    "ECDHE-ECDSA-AES256-SHA",
    "ECDHE-RSA-AES128-SHA",
    "ECDHE-RSA-AES256-SHA",
)

LIBDATACHANNEL_GRACE_S = 0.1  # a tenth of a second holds (a quarter second before): handshake_grace_s

_FFMPEG_ORIGIN = re.compile(r"^o=FFmpeg\s", re.MULTILINE)
_LIBDATACHANNEL_ORIGIN = re.compile(r"^o=rtc\s", re.MULTILINE)
_FFMPEG_SESSION = re.compile(r"^s=FFmpegPublishSession\s*$", re.MULTILINE)


DTLS_CHOICES = ("auto", "1.0", "1.2")


def dtls_choice(raw: str | None) -> bool | None:
    """A WHIP `?dtls=` value: None (auto: by the offer), True (DTLS 1.0, as for FFmpeg on GnuTLS), False
    (DTLS 1.2 always: an FFmpeg built on OpenSSL or mbedTLS, whose P-256 key needs no fallback)."""
    if raw is None or raw == "auto":
        return None
    if raw not in DTLS_CHOICES:
        raise ValueError(f"unknown ?dtls={raw[:20]} (known: {', '.join(DTLS_CHOICES)})")
    return raw == "1.0"


def legacy_dtls_peer(offer_sdp: str) -> str | None:
    """The name of the peer whose offer needs DTLS 1.0 (FFmpeg's WHIP muxer), or None.

    FFmpeg 8's WHIP muxer on GnuTLS offers `a=setup:passive`, so it is always the DTLS server, and signs with
    an ECDSA key on P-224 (`gnutls_sec_param_to_pk_bits(GNUTLS_PK_ECDSA, GNUTLS_SEC_PARAM_MEDIUM)` is 224
    bits). In DTLS 1.2 an OpenSSL client must find the server key's curve among its own supported groups;
    OpenSSL 4 has no P-224 group left, so the handshake ends in "wrong curve" whatever is configured. DTLS
    1.0 signs without signature-algorithm negotiation and has no such check: for an offer that FFmpeg wrote,
    the gateway (as client) offers DTLS 1.0 with its SHA-1 ECDHE suites (`LEGACY_DTLS_CIPHERS`). The SRTP
    keys and the fingerprint check are the same."""
    if _FFMPEG_ORIGIN.search(offer_sdp) or _FFMPEG_SESSION.search(offer_sdp):
        return "FFmpeg's WHIP muxer"
    return None


def handshake_grace_s(offer_sdp: str) -> float:
    """How long the gateway, as DTLS client, waits after ICE connects before its ClientHello to this offer's
    peer: libdatachannel's (its origin line `o=rtc`); 0 for everyone else.

    Until libdatachannel has stored our answer it fails any certificate check
    ("tls_process_client_certificate: certificate verify failed"), and on a busy machine its thread can
    stall there while ICE connects from our checks and a whole handshake runs. `LIBDATACHANNEL_GRACE_S`
    after ICE connects covers that window; the early resends of interop.dtls_retransmit cover a ClientHello
    that arrives before its DTLS endpoint exists."""
    return LIBDATACHANNEL_GRACE_S if _LIBDATACHANNEL_ORIGIN.search(offer_sdp) else 0.0


@dataclass(frozen=True)
class HandshakeFacts:
    """What the gateway knew when a DTLS handshake failed."""

    reason: str  # OpenSSL's reason, or the cause found after the handshake
    role: str  # our DTLS role: "client" or "server"
    peer_key: str | None = None  # the peer certificate's key ("ECDSA secp224r1", "RSA 2048") if seen
    legacy_for: str | None = None  # DTLS 1.0 was offered for this peer


def _peer_alert(reason: str) -> str | None:
    found = re.search(r"(?:tlsv1|sslv3|tls) alert ([a-z ]+)", reason)
    return found.group(1).strip() if found else None


def explain(facts: HandshakeFacts) -> str:
    """One line an operator can act on: who rejected what, and our side of it."""
    reason, role = facts.reason, facts.role
    key = f"; its certificate key: {facts.peer_key}" if facts.peer_key else ""
    alert = _peer_alert(reason)
    if alert in ("unknown ca", "bad certificate", "certificate unknown", "decrypt error"):
        what = (
            f"the peer rejected our certificate ({alert}): it did not match the fingerprint it read from "
            "our answer"
        )
    elif alert in ("protocol version",):
        what = "the peer refused the DTLS version we offered" + (
            f" (DTLS 1.0, offered because the offer is {facts.legacy_for}'s)" if facts.legacy_for else ""
        )
    elif alert is not None:
        what = f"the peer ended the handshake ({alert})"
    elif "wrong curve" in reason:
        what = "we rejected the peer's certificate: its key's curve is not one our TLS library accepts"
    elif "no shared cipher" in reason or "no suitable" in reason:
        what = "no cipher suite in common (the peer's certificate type or suites do not match ours)"
    elif "unsupported protocol" in reason or "wrong version" in reason:
        what = "no DTLS version in common"
    elif "fingerprint" in reason:
        what = "we rejected the peer's certificate: it does not match the fingerprint in its SDP"
    else:
        what = reason
    legacy = f", DTLS 1.0 for {facts.legacy_for}" if facts.legacy_for else ""
    return f"{what} [{reason}; we were DTLS {role}{legacy}{key}]"
