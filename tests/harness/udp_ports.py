"""Free UDP port blocks on 127.0.0.1, for the tests of --ice-udp-ports."""

from __future__ import annotations

import random
import socket


def free_udp_block(size: int) -> int:
    """The first of `size` consecutive UDP ports free on 127.0.0.1 (from a random place in the high range)."""
    for _ in range(50):
        first = random.randrange(20000, 60000)
        probes = []
        try:
            for port in range(first, first + size):
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                probes.append(s)
                s.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
        finally:
            for s in probes:
                s.close()
    raise RuntimeError("no free block of UDP ports")
