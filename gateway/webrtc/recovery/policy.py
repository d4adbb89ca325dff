"""Loss recovery for a received video stream: NACK again, give up, ask for a keyframe. Pure.

aiortc sends one NACK per gap and otherwise waits for 512 newer packets before its first PLI: one unlucky
loss froze a stream for seconds. Like libwebrtc, driven by packet arrivals (no timer): NACK each missing
packet again every `nack_interval_s` up to `nack_retries` times; after `give_up_s` skip the hole to the
newest keyframe held (else the newest frame start, then PLI); repeat PLI every `pli_interval_s` until a
keyframe arrives; skip a backlog of more than `max_backlog_frames` only to a keyframe.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class RecoveryConfig:
    nack_interval_s: float = 0.1  # above a loopback-to-metro RTT; a NACK answered in time is not repeated
    nack_retries: int = 3
    give_up_s: float = 0.5  # longest a missing packet may block the frames behind it
    pli_interval_s: float = 0.5  # keyframe request repeated while none arrives
    max_keyframe_wait_s: float = 3.0  # a sender that never answers PLI: decode what comes rather than freeze
    max_backlog_frames: int = 3  # complete frames queued behind the one being released: jump ahead past more
    max_nack_list: int = 20  # more packets missing than this (a congested link): stop asking, skip instead

    def __post_init__(self) -> None:
        if min(self.nack_interval_s, self.give_up_s, self.pli_interval_s, self.max_keyframe_wait_s) <= 0:
            raise ValueError("recovery intervals must be > 0")
        if self.nack_retries < 0:
            raise ValueError("nack_retries must be >= 0")


@dataclass
class _Missing:
    since: float
    last_nack: float
    nacks: int = 1  # aiortc's own NackGenerator sent the first one when the gap appeared


@dataclass
class RecoveryCounters:
    nacks_resent: int = 0  # sequence numbers asked for again
    gaps_skipped: int = 0
    keyframe_requests: int = 0
    frames_held: int = 0  # released while waiting for a keyframe, not decoded


@dataclass
class LossRecovery:
    """Per received stream. Sequence numbers are the 16-bit RTP ones, compared modulo 2**16."""

    config: RecoveryConfig = field(default_factory=RecoveryConfig)
    counters: RecoveryCounters = field(default_factory=RecoveryCounters)
    _missing: dict[int, _Missing] = field(default_factory=dict)
    _highest: int | None = None
    _awaiting_keyframe: bool = False
    _awaiting_since: float = 0.0
    _last_pli: float = float("-inf")
    _started: bool = False  # the stream's first complete frame has been seen

    @property
    def has_missing(self) -> bool:
        return bool(self._missing)

    @property
    def highest(self) -> int | None:
        return self._highest

    @property
    def awaiting_keyframe(self) -> bool:
        return self._awaiting_keyframe

    def on_packet(self, seq: int, now: float) -> None:
        """A packet arrived: note the gap it opens, or the hole it fills."""
        if self._highest is None:
            self._highest = seq
            return
        ahead = (seq - self._highest) & 0xFFFF
        if 0 < ahead < 0x8000:
            for step in range(1, min(ahead, 512)):
                self._missing[(self._highest + step) & 0xFFFF] = _Missing(since=now, last_nack=now)
            self._highest = seq
        else:
            self._missing.pop(seq, None)

    def forget_before(self, origin: int) -> None:
        """The buffer moved its origin past these packets: they are no longer wanted."""
        for seq in [s for s in self._missing if 0 < ((origin - s) & 0xFFFF) < 0x8000]:
            del self._missing[seq]

    def nacks_due(self, now: float) -> list[int]:
        """Sequence numbers to NACK again now (each at most `nack_retries` more times). Nothing when more than
        `max_nack_list` are missing: retransmissions would only deepen the congestion that lost them."""
        if len(self._missing) > self.config.max_nack_list:
            return []
        due = []
        for seq, miss in self._missing.items():
            if miss.nacks <= self.config.nack_retries and now - miss.last_nack >= self.config.nack_interval_s:
                miss.last_nack = now
                miss.nacks += 1
                due.append(seq)
        self.counters.nacks_resent += len(due)
        return sorted(due, key=lambda s: (s - (self._highest or 0)) & 0xFFFF)

    def filter_nack(self, seqs: list[int], origin: int | None) -> list[int]:
        """aiortc's own NACK repeats its WHOLE missing list at every new gap; keep only the packets never
        asked for (repeats follow `nacks_due`'s interval), none the buffer gave up on (behind `origin`), and
        nothing on a congested link (more than `max_nack_list` missing): retransmitting every missing
        packet at every gap into the queue that dropped them collapses a slow link."""
        if len(self._missing) > self.config.max_nack_list:
            return []
        if origin is not None:
            seqs = [seq for seq in seqs if ((seq - origin) & 0xFFFF) < 0x8000]
        return [seq for seq in seqs if seq not in self._missing]

    def should_skip(self, head_seq: int, now: float) -> bool:
        """The packet at the head of the buffer is missing: give up on it now?"""
        miss = self._missing.get(head_seq)
        if miss is None:  # a gap we never saw open (e.g. lost before the first packet): time it from now
            self._missing[head_seq] = miss = _Missing(since=now, last_nack=now)
        return now - miss.since >= self.config.give_up_s

    def skipped(self, now: float, at_keyframe: bool) -> None:
        """The buffer jumped ahead: to a keyframe (decode on), or to an inter frame (hold frames until a
        keyframe, ask for one)."""
        self.counters.gaps_skipped += 1
        if at_keyframe:
            self._awaiting_keyframe = False
        else:
            self.need_keyframe(now)

    @property
    def started(self) -> bool:
        return self._started

    def start(self, is_keyframe: bool, now: float) -> None:
        """The stream's first complete frame. A decoder starts only on a keyframe: when this one is not
        (a publisher that joined mid-GOP, a first keyframe lost), ask for one at once (`pli_due`) instead of
        waiting for the publisher's next scheduled keyframe, up to its GOP later."""
        if self._started:
            return
        self._started = True
        if not is_keyframe:
            self.need_keyframe(now)

    def need_keyframe(self, now: float) -> None:
        """The decoder's references are broken (a skipped gap, aiortc's own buffer overflow)."""
        if not self._awaiting_keyframe:
            self._awaiting_since = now
        self._awaiting_keyframe = True
        self._last_pli = float("-inf")

    def pli_due(self, now: float) -> bool:
        if not self._awaiting_keyframe or now - self._last_pli < self.config.pli_interval_s:
            return False
        self._last_pli = now
        self.counters.keyframe_requests += 1
        return True

    def release(self, is_keyframe: bool, now: float) -> bool:
        """A complete frame is ready: decode it (True) or hold it back until a keyframe (False)."""
        waited = now - self._awaiting_since
        if self._awaiting_keyframe and not is_keyframe and waited < self.config.max_keyframe_wait_s:
            self.counters.frames_held += 1
            return False
        self._awaiting_keyframe = False
        return True


def is_keyframe(data: bytes) -> bool:
    """Is this depayloaded frame a keyframe? H.264 (aiortc gives Annex B): an IDR or SPS NAL unit; VP8: the
    frame tag's inverted key-frame bit (RFC 6386 9.1). A VP8 frame never starts with a zero byte."""
    if not data:
        return False
    if data.startswith(b"\x00\x00\x01") or data.startswith(b"\x00\x00\x00\x01"):
        index = 0
        while True:
            index = data.find(b"\x00\x00\x01", index)
            if index < 0 or index + 3 >= len(data):
                return False
            if data[index + 3] & 0x1F in (5, 7):
                return True
            index += 3
    return data[0] & 0x01 == 0
