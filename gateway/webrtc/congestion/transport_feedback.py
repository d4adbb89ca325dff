"""Transport-wide congestion control feedback packets (draft-holmer-rmcat-transport-wide-cc-extensions-01).

Pure: arrivals in, RTCP packets (bytes) out, and the parser the sender side, the tests and the load
generator read them back with. The layout is libwebrtc's (RTPFB, PT=205, FMT=15: base sequence number,
status count, reference time, feedback count, run-length and status-vector chunks, receive deltas).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

RTCP_RTPFB = 205
TRANSPORT_CC_FMT = 15
TICK_US = 250
REFERENCE_TICKS = 256  # the reference time's unit, 64 ms, in 250 us ticks
NOT_RECEIVED, SMALL_DELTA, LARGE_DELTA = 0, 1, 2
MAX_RUN = 0x1FFF
# What one feedback packet covers at most: libwebrtc cuts at the same order (its packets stay under an MTU).
MAX_STATUS_COUNT = 1024


@dataclass(frozen=True)
class TransportFeedback:
    """One feedback packet's content: `arrivals` maps each reported sequence number (16-bit, as sent) to its
    arrival time in microseconds on the reference clock (`reference_time * 64 ms` plus the deltas), or None
    for a packet reported lost. Parsed times are multiples of 250 us."""

    sender_ssrc: int
    media_ssrc: int
    base_sequence: int
    reference_time: int
    feedback_count: int
    arrivals: list[tuple[int, int | None]] = field(default_factory=list)


def _chunks(symbols: list[int]) -> list[int]:
    """Greedy chunking: a run of 7 or more equal symbols as one run-length chunk, otherwise 14 one-bit
    symbols where none needs a large delta, else 7 two-bit symbols; a vector's unused tail is padding."""
    chunks: list[int] = []
    i, n = 0, len(symbols)
    while i < n:
        run = 1
        while i + run < n and run < MAX_RUN and symbols[i + run] == symbols[i]:
            run += 1
        if run >= 7 or i + run == n:
            chunks.append((symbols[i] << 13) | run)
            i += run
            continue
        window = symbols[i : i + 14]
        if LARGE_DELTA not in window:
            bits = 0
            for k in range(14):
                bits = (bits << 1) | (window[k] if k < len(window) else 0)
            chunks.append(0x8000 | bits)
            i += 14
        else:
            window = symbols[i : i + 7]
            bits = 0
            for k in range(7):
                bits = (bits << 2) | (window[k] if k < len(window) else 0)
            chunks.append(0xC000 | bits)
            i += 7
    return chunks


def build_feedback(
    sender_ssrc: int,
    media_ssrc: int,
    base_sequence: int,
    arrivals_us: list[int | None],
    feedback_count: int,
) -> bytes:
    """One transport-cc RTCP packet for the packets `base_sequence`, `base_sequence + 1`, ... whose arrival
    times (microseconds, monotonic, None = not received) are `arrivals_us`. At least one must have arrived
    (the first received one sets the reference time) and every delta must fit 16 signed bits of 250 us
    (`FeedbackRecorder` cuts its packets so)."""
    first = next((arrival for arrival in arrivals_us if arrival is not None), None)
    if first is None:
        raise ValueError("a feedback packet reports at least one received packet")
    if len(arrivals_us) > 0xFFFF:
        raise ValueError("too many packets for one feedback packet")
    reference = (first // TICK_US) // REFERENCE_TICKS
    last = reference * REFERENCE_TICKS
    symbols: list[int] = []
    deltas = bytearray()
    for arrival in arrivals_us:
        if arrival is None:
            symbols.append(NOT_RECEIVED)
            continue
        tick = arrival // TICK_US
        delta = tick - last
        last = tick
        if 0 <= delta <= 0xFF:
            symbols.append(SMALL_DELTA)
            deltas.append(delta)
        elif -0x8000 <= delta <= 0x7FFF:
            symbols.append(LARGE_DELTA)
            deltas += struct.pack("!h", delta)
        else:
            raise ValueError(f"receive delta {delta * TICK_US} us does not fit a feedback packet")
    body = struct.pack(
        "!IIHHI",
        sender_ssrc & 0xFFFFFFFF,
        media_ssrc & 0xFFFFFFFF,
        base_sequence & 0xFFFF,
        len(arrivals_us),
        ((reference & 0xFFFFFF) << 8) | (feedback_count & 0xFF),
    )
    body += b"".join(struct.pack("!H", chunk) for chunk in _chunks(symbols)) + bytes(deltas)
    padding = -len(body) % 4
    if padding:
        body += bytes(padding - 1) + bytes([padding])
    first = 0x80 | (0x20 if padding else 0) | TRANSPORT_CC_FMT  # V=2, P
    header = struct.pack("!BBH", first, RTCP_RTPFB, len(body) // 4)
    return header + body


def parse_feedback(packet: bytes) -> TransportFeedback:
    """The content of one transport-cc RTCP packet (ValueError when it is not one, or is malformed)."""
    if len(packet) < 20 or len(packet) % 4:
        raise ValueError("transport-cc feedback is too short or not 32-bit aligned")
    first, packet_type, length = struct.unpack("!BBH", packet[:4])
    if first >> 6 != 2 or first & 0x1F != TRANSPORT_CC_FMT or packet_type != RTCP_RTPFB:
        raise ValueError("not a transport-cc feedback packet")
    end = 4 + 4 * length
    if end > len(packet):
        raise ValueError("transport-cc feedback is truncated")
    if first & 0x20:
        end -= packet[end - 1]
    sender_ssrc, media_ssrc, base, count, ref_and_count = struct.unpack("!IIHHI", packet[4:20])
    reference = ref_and_count >> 8
    if reference & 0x800000:
        reference -= 1 << 24
    symbols: list[int] = []
    pos = 20
    while len(symbols) < count:
        if pos + 2 > end:
            raise ValueError("transport-cc feedback ends inside its status chunks")
        (chunk,) = struct.unpack("!H", packet[pos : pos + 2])
        pos += 2
        if not chunk & 0x8000:
            symbols += [(chunk >> 13) & 0x3] * (chunk & MAX_RUN)
        elif not chunk & 0x4000:
            symbols += [(chunk >> (13 - k)) & 1 for k in range(14)]
        else:
            symbols += [(chunk >> (12 - 2 * k)) & 0x3 for k in range(7)]
    time_us = reference * REFERENCE_TICKS * TICK_US
    arrivals: list[tuple[int, int | None]] = []
    for k, symbol in enumerate(symbols[:count]):
        sequence = (base + k) & 0xFFFF
        if symbol == NOT_RECEIVED:
            arrivals.append((sequence, None))
            continue
        if symbol == SMALL_DELTA:
            if pos + 1 > end:
                raise ValueError("transport-cc feedback ends inside its deltas")
            delta = packet[pos]
            pos += 1
        elif symbol == LARGE_DELTA:
            if pos + 2 > end:
                raise ValueError("transport-cc feedback ends inside its deltas")
            (delta,) = struct.unpack("!h", packet[pos : pos + 2])
            pos += 2
        else:
            raise ValueError("reserved packet status symbol")
        time_us += delta * TICK_US
        arrivals.append((sequence, time_us))
    return TransportFeedback(sender_ssrc, media_ssrc, base, reference, ref_and_count & 0xFF, arrivals)


class FeedbackRecorder:
    """Collects the transport-wide sequence numbers of one receive transport and their arrival times, and
    cuts them into feedback packets. Sequence numbers are unwrapped (16 bits on the wire); a packet older than
    what was already reported is left out (it was reported lost), as is one arriving twice."""

    def __init__(
        self, max_status_count: int = MAX_STATUS_COUNT, max_pending: int = 8 * MAX_STATUS_COUNT
    ) -> None:
        self._max = max_status_count
        self._max_pending = max_pending  # bounds memory while nothing is taken (no RTCP SSRC yet, a stall)
        self._arrivals: dict[int, int] = {}  # unwrapped sequence -> arrival (us)
        self._last_unwrapped: int | None = None
        self._next_base: int | None = None  # the first sequence not yet reported
        self.feedback_count = 0
        self.packets_recorded = 0
        self.packets_sent = 0

    def _unwrap(self, sequence: int) -> int:
        if self._last_unwrapped is None:
            unwrapped = sequence
        else:
            diff = (sequence - self._last_unwrapped) & 0xFFFF
            unwrapped = self._last_unwrapped + (diff - 0x10000 if diff >= 0x8000 else diff)
        if self._last_unwrapped is None or unwrapped > self._last_unwrapped:
            self._last_unwrapped = unwrapped
        return unwrapped

    def add(self, sequence: int, arrival_us: int) -> None:
        unwrapped = self._unwrap(sequence & 0xFFFF)
        if self._next_base is None:
            self._next_base = unwrapped
        if unwrapped < self._next_base or unwrapped in self._arrivals:
            return
        if unwrapped - self._next_base >= 0x8000 or len(self._arrivals) >= self._max_pending:
            # a jump no feedback can span, or nothing taken for too long: start over from here
            self._arrivals.clear()
            self._next_base = unwrapped
        self._arrivals[unwrapped] = arrival_us
        self.packets_recorded += 1

    @property
    def pending(self) -> int:
        return len(self._arrivals)

    def take(self, sender_ssrc: int, media_ssrc: int) -> list[bytes]:
        """Feedback packets for everything recorded since the last call (empty when nothing arrived)."""
        packets: list[bytes] = []
        while self._arrivals and self._next_base is not None:
            base = min(self._arrivals)  # the run up to it was lost and is reported below from next_base
            start = self._next_base if base - self._next_base < self._max else base
            top = max(self._arrivals)
            arrivals: list[int | None] = []
            first_tick: int | None = None
            last_tick = 0
            sequence = start
            while sequence <= top and len(arrivals) < self._max:
                arrival = self._arrivals.get(sequence)
                if arrival is not None:
                    tick = arrival // TICK_US
                    reference_tick = (tick // REFERENCE_TICKS) * REFERENCE_TICKS
                    if first_tick is None:
                        first_tick, last_tick = tick, reference_tick
                    if not -0x8000 <= tick - last_tick <= 0x7FFF:
                        break  # the next packet starts a new feedback packet
                    last_tick = tick
                arrivals.append(arrival)
                sequence += 1
            if first_tick is None:
                break
            packets.append(build_feedback(sender_ssrc, media_ssrc, start, arrivals, self.feedback_count))
            self.feedback_count = (self.feedback_count + 1) & 0xFF
            for done in range(start, start + len(arrivals)):
                self._arrivals.pop(done, None)
            self._next_base = start + len(arrivals)
        self.packets_sent += len(packets)
        return packets


def received(feedback: Iterable[TransportFeedback]) -> int:
    """How many packets a set of feedback packets reports as received."""
    return sum(1 for fb in feedback for _, at in fb.arrivals if at is not None)
