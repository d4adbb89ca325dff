"""--ice-udp-ports: a free port inside the range, busy ones skipped, a full range a clear error."""

from __future__ import annotations

import random
import socket

import pytest

from gateway.webrtc.interop.host_ports import PortRange, bind_in_range, parse_port_range
from tests.harness.udp_ports import free_udp_block


def test_parse_port_range() -> None:
    assert parse_port_range("40000-40999") == PortRange(40000, 40999)
    assert parse_port_range("40000") == PortRange(40000, 40000) and len(PortRange(40000, 40009)) == 10
    for bad in ("80-90", "40999-40000", "40000-70000", "forty", "4e4-5e4"):
        with pytest.raises(ValueError, match="ICE UDP ports"):
            parse_port_range(bad)


def test_binds_inside_the_range_and_skips_busy_ports() -> None:
    first = free_udp_block(4)
    ports = PortRange(first, first + 3)
    busy = []
    try:
        for port in (first, first + 1, first + 3):  # all but one taken
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind(("127.0.0.1", port))
            busy.append(s)
        for seed in range(5):
            sock = bind_in_range("127.0.0.1", ports, random.Random(seed))
            assert sock.getsockname() == ("127.0.0.1", first + 2)
            sock.close()
        last = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        last.bind(("127.0.0.1", first + 2))
        busy.append(last)
        with pytest.raises(OSError, match=f"no free UDP port in {first}-{first + 3}"):
            bind_in_range("127.0.0.1", ports)
    finally:
        for s in busy:
            s.close()
