"""RTCDtlsTransport and RTCCertificate: the layers on one DTLS transport and on one certificate.

The handshake (`_do_handshake`, `_set_state`) carries the DTLS watch; the packet path (`_send_rtp`,
`_handle_rtcp_data`) carries the transport-cc send side; a certificate's `_create_ssl_context` carries the
cipher and version choice, and its fingerprints are narrowed to the one the answer names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gateway.webrtc import compat
from gateway.webrtc.patches import chain

Make = Callable[[Any], Callable[..., Any]]


def wrap_do_handshake(transport: Any, layer: str, make: Make) -> None:
    chain.wrap(transport, compat.DTLS_DO_HANDSHAKE, layer, make)


def wrap_set_state(transport: Any, layer: str, make: Make) -> None:
    chain.wrap(transport, compat.DTLS_SET_STATE, layer, make)


def wrap_send_rtp(transport: Any, layer: str, make: Make) -> None:
    chain.wrap(transport, compat.DTLS_SEND_RTP, layer, make)


def wrap_handle_rtcp_data(transport: Any, layer: str, make: Make) -> None:
    chain.wrap(transport, compat.DTLS_HANDLE_RTCP_DATA, layer, make)


def wrap_ssl_context(certificate: Any, layer: str, make: Make) -> None:
    chain.wrap(certificate, compat.CERTIFICATE_SSL_CONTEXT, layer, make)


def wrap_fingerprints(certificate: Any, layer: str, make: Make) -> None:
    chain.wrap(certificate, "getFingerprints", layer, make)
