"""The answer the gateway builds for foreign stacks: DTLS role (setup), fingerprints, suites."""

from __future__ import annotations

import re

import pytest
from aiortc import RTCPeerConnection, RTCRtpSender, RTCSessionDescription
from OpenSSL import SSL

from gateway.webrtc.interop.dtls import DTLS_CIPHERS, ssl_error_reason, use_legacy_dtls, watch_dtls
from gateway.webrtc.interop.dtls_peers import LEGACY_DTLS_CIPHERS


async def _offer(codec: str | None = None) -> str:
    pc = RTCPeerConnection()
    transceiver = pc.addTransceiver("video", direction="sendrecv")
    if codec is not None:
        caps = RTCRtpSender.getCapabilities("video").codecs
        transceiver.setCodecPreferences(
            [c for c in caps if c.mimeType.lower() in (f"video/{codec}", "video/rtx")]
        )
    offer = (await pc.createOffer()).sdp
    await pc.close()
    return offer


async def _answer(offer: str) -> str:
    pc = RTCPeerConnection()
    watch_dtls(pc, "test")
    try:
        await pc.setRemoteDescription(RTCSessionDescription(sdp=offer, type="offer"))
        return (await pc.createAnswer()).sdp
    finally:
        await pc.close()


@pytest.mark.parametrize(
    ("offer_setup", "answer_setup"),
    [("actpass", "active"), ("active", "passive"), ("passive", "active")],
)
async def test_dtls_role_in_the_answer(offer_setup: str, answer_setup: str) -> None:
    """aiortc's own choice: DTLS client to actpass (browsers, webrtcbin, OBS); an explicit choice is kept."""
    offer = (await _offer()).replace("a=setup:actpass", f"a=setup:{offer_setup}")
    assert set(re.findall(r"^a=setup:(\w+)", await _answer(offer), re.M)) == {answer_setup}


async def test_the_answer_carries_one_sha256_fingerprint_per_media() -> None:
    """libdatachannel compares with the last fingerprint line of the first m-line, by an algorithm it may
    have fixed before reading the answer (SHA-256): the answer names SHA-256 alone."""
    answer = await _answer(await _offer())
    assert re.findall(r"^a=fingerprint:(\S+)", answer, re.M) == ["sha-256"]


def test_client_context_offers_rsa_suites_too() -> None:
    """The connection's SSL context (what a DTLS client sends in its ClientHello) carries ECDHE-RSA suites,
    and stays as short as a browser's list."""
    pc = RTCPeerConnection()
    watch_dtls(pc, "test")
    (certificate,) = pc._RTCPeerConnection__certificates  # type: ignore[attr-defined]
    from aiortc.rtcdtlstransport import SRTP_AES128_CM_SHA1_80

    ctx = certificate._create_ssl_context([SRTP_AES128_CM_SHA1_80])
    names = [n for n in SSL.Connection(ctx).get_cipher_list() if not n.startswith("TLS_")]  # TLS 1.3 only
    assert names == list(DTLS_CIPHERS)
    assert any(n.startswith("ECDHE-RSA-") for n in names) and names[0] == "ECDHE-ECDSA-AES128-GCM-SHA256"
    # another connection in the process keeps aiortc's stock list (no global patch)
    other = RTCPeerConnection()
    (stock,) = other._RTCPeerConnection__certificates  # type: ignore[attr-defined]
    stock_names = SSL.Connection(stock._create_ssl_context([SRTP_AES128_CM_SHA1_80])).get_cipher_list()
    assert not any(n.startswith("ECDHE-RSA-") for n in stock_names)


def test_a_legacy_peer_gets_dtls_1_0_suites_on_that_connection_only() -> None:
    """FFmpeg's GnuTLS P-224 key can be checked in DTLS 1.0 only: its connection's context caps the
    version and lists the CBC suites; another watched connection keeps DTLS 1.2 and the usual list."""
    from aiortc.rtcdtlstransport import SRTP_AES128_CM_SHA1_80

    legacy, usual = RTCPeerConnection(), RTCPeerConnection()
    watch_dtls(legacy, "legacy")
    watch_dtls(usual, "usual")
    assert use_legacy_dtls(legacy, "FFmpeg's WHIP muxer") is True
    (cert,) = legacy._RTCPeerConnection__certificates  # type: ignore[attr-defined]
    (other,) = usual._RTCPeerConnection__certificates  # type: ignore[attr-defined]
    names = [
        n
        for n in SSL.Connection(cert._create_ssl_context([SRTP_AES128_CM_SHA1_80])).get_cipher_list()
        if not n.startswith("TLS_")
    ]
    assert names == list(LEGACY_DTLS_CIPHERS)
    other_names = SSL.Connection(other._create_ssl_context([SRTP_AES128_CM_SHA1_80])).get_cipher_list()
    assert [n for n in other_names if not n.startswith("TLS_")] == list(DTLS_CIPHERS)
    # an unwatched connection is not changed
    assert use_legacy_dtls(RTCPeerConnection(), "FFmpeg's WHIP muxer") is False


def test_ssl_error_reason_reads_openssls_queue() -> None:
    assert ssl_error_reason(SSL.Error([("SSL routines", "", "no shared cipher")])) == "no shared cipher"
    assert ssl_error_reason(SSL.Error([])) == ""
