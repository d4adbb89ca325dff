"""DSCP marking of the gateway's media packets (RFC 8837: WebRTC video is AF41/AF42, audio EF).

A network that honours DiffServ can queue marked media ahead of bulk traffic; an operator's shaper can tell
the gateway's media from everything else by the mark (`bench/network.py --per-direction` shapes
the gateway's downlink apart from its publishers' uplink on one loopback this way). Off by default, as in
browsers: a mark is a request to the network, and some networks drop or re-mark what they do not expect.

Pure parsing here; `mark_socket` is the one system call, applied per ICE socket by
`gateway.webrtc.interop.ice`.
"""

from __future__ import annotations

import socket

# RFC 4594 / RFC 8837 names -> DSCP code points (6 bits)
DSCP_NAMES: dict[str, int] = {
    "default": 0,
    "cs0": 0,
    "cs1": 8,
    "af11": 10,
    "af12": 12,
    "af13": 14,
    "cs2": 16,
    "af21": 18,
    "af22": 20,
    "af23": 22,
    "cs3": 24,
    "af31": 26,
    "af32": 28,
    "af33": 30,
    "cs4": 32,
    "af41": 34,
    "af42": 36,
    "af43": 38,
    "cs5": 40,
    "ef": 46,
    "cs6": 48,
    "cs7": 56,
}


def parse_dscp(value: str) -> int:
    """A DSCP name (`af41`, `ef`, ...) or a number 0-63 -> the code point. ValueError with the choices."""
    text = value.strip().lower()
    if text in DSCP_NAMES:
        return DSCP_NAMES[text]
    try:
        number = int(text, 0)
    except ValueError:
        number = -1
    if not 0 <= number <= 63:
        raise ValueError(f"DSCP must be a name ({', '.join(sorted(DSCP_NAMES))}) or 0-63, not {value!r}")
    return number


def tos_byte(dscp: int) -> int:
    """The IPv4 TOS / IPv6 traffic-class byte for a DSCP code point (ECN bits left 0)."""
    if not 0 <= dscp <= 63:
        raise ValueError(f"DSCP out of range: {dscp}")
    return dscp << 2


def mark_socket(sock: socket.socket, dscp: int) -> bool:
    """Set the DSCP of everything `sock` sends. False when the socket's family has no such option."""
    if sock.family == socket.AF_INET:
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos_byte(dscp))
        return True
    if sock.family == socket.AF_INET6 and hasattr(socket, "IPV6_TCLASS"):
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_TCLASS, tos_byte(dscp))
        return True
    return False
