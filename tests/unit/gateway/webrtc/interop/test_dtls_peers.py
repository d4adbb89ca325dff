"""The DTLS peer rules and the failure explanations, on real offers' text and OpenSSL's reason strings."""

from __future__ import annotations

from gateway.webrtc.interop.dtls_peers import HandshakeFacts, explain, legacy_dtls_peer

FFMPEG_OFFER = (
    "v=0\r\no=FFmpeg 4489045141692799359 2 IN IP4 127.0.0.1\r\ns=FFmpegPublishSession\r\nt=0 0\r\n"
    "m=video 9 UDP/TLS/RTP/SAVPF 106\r\na=setup:passive\r\n"
)
BROWSER_OFFER = "v=0\r\no=- 46117 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\n"
LIBDATACHANNEL_OFFER = BROWSER_OFFER.replace("o=- 46117 2", "o=rtc 1234 0")


def test_only_ffmpegs_offer_asks_for_dtls_1_0() -> None:
    assert legacy_dtls_peer(FFMPEG_OFFER) == "FFmpeg's WHIP muxer"
    assert legacy_dtls_peer(FFMPEG_OFFER.replace("s=FFmpegPublishSession", "s=-")) == "FFmpeg's WHIP muxer"
    assert legacy_dtls_peer(BROWSER_OFFER) is None
    assert legacy_dtls_peer(LIBDATACHANNEL_OFFER) is None
    # a media-level attribute that merely mentions FFmpeg is not the origin line
    assert legacy_dtls_peer(BROWSER_OFFER + "a=tool:FFmpeg\r\n") is None


def test_the_peer_rejecting_our_certificate_is_said_so() -> None:
    line = explain(HandshakeFacts("tlsv1 alert unknown ca", "server", "ECDSA secp256r1"))
    assert line.startswith("the peer rejected our certificate (unknown ca)")
    assert "we were DTLS server" in line and "ECDSA secp256r1" in line


def test_our_rejection_of_a_curve_names_the_key() -> None:
    line = explain(HandshakeFacts("wrong curve", "client", "ECDSA secp224r1"))
    assert line.startswith("we rejected the peer's certificate: its key's curve")
    assert "secp224r1" in line and "[wrong curve;" in line


def test_a_version_refusal_after_the_legacy_offer_names_why_it_was_offered() -> None:
    line = explain(HandshakeFacts("tlsv1 alert protocol version", "client", None, "FFmpeg's WHIP muxer"))
    assert "refused the DTLS version" in line and "FFmpeg's WHIP muxer" in line


def test_cipher_and_fingerprint_causes() -> None:
    assert explain(HandshakeFacts("no shared cipher", "server", "RSA 2048")).startswith("no cipher suite")
    fingerprint = "peer certificate does not match the fingerprint in its SDP"
    assert explain(HandshakeFacts(fingerprint, "client")).startswith("we rejected the peer's certificate")
    assert explain(HandshakeFacts("something new", "client")).startswith("something new [")


def test_the_dtls_query_choice() -> None:
    import pytest

    from gateway.webrtc.interop.dtls_peers import dtls_choice

    assert dtls_choice(None) is None and dtls_choice("auto") is None
    assert dtls_choice("1.0") is True and dtls_choice("1.2") is False
    with pytest.raises(ValueError, match=r"unknown \?dtls=1.3"):
        dtls_choice("1.3")


def test_only_libdatachannels_offer_gets_a_handshake_grace() -> None:
    from gateway.webrtc.interop.dtls_peers import LIBDATACHANNEL_GRACE_S, handshake_grace_s

    assert handshake_grace_s(LIBDATACHANNEL_OFFER) == LIBDATACHANNEL_GRACE_S > 0
    assert handshake_grace_s(BROWSER_OFFER) == 0.0 and handshake_grace_s(FFMPEG_OFFER) == 0.0
