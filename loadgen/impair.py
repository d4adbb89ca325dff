"""Impaired networks for one peer connection: delay, jitter, random loss and a drop-tail bottleneck.

In the process, not `tc netem`: the kernels here have no `sch_netem`, and `make test` cannot need a kernel
module. The model is netem's (Bernoulli loss, uniform delay D +- J, so packets reorder) and tbf's (a token
bucket at `rate` whose queue drops what would wait past `queue_ms`), applied on the client's side to both
directions, so the gateway runs unmodified on 127.0.0.1 (`bench.network --shaper tc` uses the real
qdiscs where the kernel has them). `gateway.webrtc.install.install_link` puts the model on this connection's
ICE connections only; STUN is not impaired; where aiortc's internals are missing `impair_peer_connection`
raises RuntimeError. `LinkModel` is pure and seeded.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any

from aiortc import RTCPeerConnection

from gateway.webrtc.install import install_link


@dataclass(frozen=True)
class Impairment:
    """One direction's impairment (the same one is applied to each direction)."""

    name: str = "clean"
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    loss: float = 0.0  # fraction of datagrams dropped at random, 0..1
    rate_kbps: float | None = None  # bottleneck; None = unlimited
    queue_ms: float = 200.0  # bottleneck queue: a datagram that would wait longer is dropped (tbf latency)

    def __post_init__(self) -> None:
        if not 0.0 <= self.loss < 1.0:
            raise ValueError("loss must be in [0, 1)")
        if self.delay_ms < 0 or self.jitter_ms < 0 or self.queue_ms <= 0:
            raise ValueError("delay, jitter must be >= 0 and queue_ms > 0")
        if self.rate_kbps is not None and self.rate_kbps <= 0:
            raise ValueError("rate_kbps must be > 0")

    @property
    def is_clean(self) -> bool:
        return not (self.delay_ms or self.jitter_ms or self.loss or self.rate_kbps)

    def describe(self) -> str:
        parts = []
        if self.delay_ms or self.jitter_ms:
            parts.append(f"delay {self.delay_ms:g}ms" + (f" ±{self.jitter_ms:g}ms" if self.jitter_ms else ""))
        if self.loss:
            parts.append(f"loss {self.loss * 100:g}%")
        if self.rate_kbps:
            parts.append(f"rate {self.rate_kbps:g} kbit/s (queue {self.queue_ms:g} ms)")
        return ", ".join(parts) or "no impairment"

    def netem_args(self) -> list[list[str]]:
        """The same impairment as `tc` commands on `lo` (for a kernel that has sch_netem)."""
        netem = ["netem"]
        if self.delay_ms or self.jitter_ms:
            netem += ["delay", f"{self.delay_ms:g}ms"] + ([f"{self.jitter_ms:g}ms"] if self.jitter_ms else [])
        if self.loss:
            netem += ["loss", f"{self.loss * 100:g}%"]
        if self.rate_kbps is None:
            return [] if netem == ["netem"] else [["tc", "qdisc", "add", "dev", "lo", "root", *netem]]
        burst = max(1600, int(self.rate_kbps * 1000 / 8 / 250))  # a jiffy's worth of bytes at HZ=250
        commands = [["tc", "qdisc", "add", "dev", "lo", "root", "handle", "1:", *netem]]
        commands.append(
            ["tc", "qdisc", "add", "dev", "lo", "parent", "1:1", "handle", "10:", "tbf",
             "rate", f"{self.rate_kbps:g}kbit", "burst", str(burst), "latency", f"{self.queue_ms:g}ms"]
        )  # fmt: skip
        return commands


PROFILES: dict[str, Impairment] = {
    p.name: p
    for p in (
        Impairment("clean"),
        Impairment("delay40-jitter20-loss2", delay_ms=40, jitter_ms=20, loss=0.02),
        Impairment("loss1", delay_ms=20, loss=0.01),
        Impairment("loss3-delay40", delay_ms=40, loss=0.03),
        Impairment("loss5-jitter10", delay_ms=40, jitter_ms=10, loss=0.05),
        Impairment("reorder-jitter30", delay_ms=30, jitter_ms=30),
        Impairment("bottleneck-600k", delay_ms=20, rate_kbps=600, queue_ms=200),
        # the same link with a router's short buffer: a burst larger than 50 ms of the link loses its tail
        Impairment("bottleneck-600k-q50", delay_ms=20, rate_kbps=600, queue_ms=50),
    )
}

_SPEC_KEYS = {
    "delay": "delay_ms",
    "jitter": "jitter_ms",
    "loss": "loss",
    "rate": "rate_kbps",
    "queue": "queue_ms",
}


def parse_impairment(spec: str) -> Impairment:
    """A profile name (PROFILES) or `delay=40,jitter=20,loss=2%,rate=600,queue=200` (ms, kbit/s)."""
    spec = spec.strip()
    if spec in PROFILES:
        return PROFILES[spec]
    values: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        key, _, raw = part.partition("=")
        field_name = _SPEC_KEYS.get(key.strip())
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(%?)\s*", raw)
        if field_name is None or match is None:
            raise ValueError(
                f"bad network impairment {part!r}: use a profile ({', '.join(PROFILES)}) or "
                "delay=MS,jitter=MS,loss=PCT%,rate=KBITS,queue=MS"
            )
        number = float(match.group(1))
        values[field_name] = (
            number / 100.0 if field_name == "loss" and (match.group(2) or number >= 1) else number
        )
    return Impairment(name=spec, **values)


@dataclass
class LinkModel:
    """One direction of the impaired link: for each datagram, dropped (None) or the time it arrives."""

    impairment: Impairment
    rng: random.Random
    _busy_until: float = 0.0
    dropped_loss: int = 0
    dropped_queue: int = 0
    passed: int = 0
    last_delivery: float = field(default=0.0)

    def admit(self, size_bytes: int, now: float) -> float | None:
        imp = self.impairment
        if imp.loss and self.rng.random() < imp.loss:
            self.dropped_loss += 1
            return None
        leave = now
        if imp.rate_kbps is not None:
            start = max(now, self._busy_until)
            if start - now > imp.queue_ms / 1000.0:
                self.dropped_queue += 1
                return None
            self._busy_until = start + size_bytes * 8 / (imp.rate_kbps * 1000.0)
            leave = self._busy_until
        delay = imp.delay_ms
        if imp.jitter_ms:
            delay += self.rng.uniform(-imp.jitter_ms, imp.jitter_ms)
        self.passed += 1
        arrive = leave + max(delay, 0.0) / 1000.0
        self.last_delivery = arrive
        return arrive

    def counters(self) -> dict[str, int]:
        return {"passed": self.passed, "dropped_loss": self.dropped_loss, "dropped_queue": self.dropped_queue}


@dataclass
class ImpairedLink:
    """Both directions of one peer connection's link (what `impair_peer_connection` returns)."""

    impairment: Impairment
    outgoing: LinkModel
    incoming: LinkModel

    def counters(self) -> dict[str, dict[str, int]]:
        return {"outgoing": self.outgoing.counters(), "incoming": self.incoming.counters()}


def impair_peer_connection(
    pc: RTCPeerConnection, impairment: Impairment, seed: int = 0, directions: str = "both"
) -> ImpairedLink:
    """Impair every datagram `pc` sends or receives (see the module docstring); `directions` "incoming" or
    "outgoing" impairs one way only (a slow downlink, say). Call before `setLocalDescription` /
    `setRemoteDescription`, on the event loop. Returns the link (drop counters)."""
    if directions not in ("both", "incoming", "outgoing"):
        raise ValueError(f"directions must be both, incoming or outgoing, got {directions!r}")
    rng = random.Random(seed)
    link = ImpairedLink(
        impairment,
        LinkModel(impairment, random.Random(rng.getrandbits(64))),
        LinkModel(impairment, random.Random(rng.getrandbits(64))),
    )
    clean = impairment.is_clean
    install_link(
        pc,
        None if clean or directions == "incoming" else link.outgoing.admit,
        None if clean or directions == "outgoing" else link.incoming.admit,
    )
    return link
