"""A session's way on air: when each step from the WHIP POST to the first processed frame sent happened. Pure.

Marks, in the order a healthy session meets them (each kept once, the first time it happens):
    post          the WHIP POST arrived (the origin: every other mark is milliseconds after it)
    answer        the SDP answer was ready to go back
    ice           ICE connected (a candidate pair works)
    dtls          DTLS connected (the peer connection's state "connected": SRTP keys are in place)
    frame_in      the publisher's first frame was complete (its last RTP packet arrived)
    frame_out     the first frame went out to the encoders (processed, or passed through)
    swap_out      the first frame with a face changed by the pipeline went out
The gateway's half; the client's half (first frame decoded at the publisher, at a viewer) is bench.interop's.
"""

from __future__ import annotations

POST = "post"
ANSWER = "answer"
ICE = "ice"
DTLS = "dtls"
FRAME_IN = "frame_in"
FRAME_OUT = "frame_out"
SWAP_OUT = "swap_out"
MARKS: tuple[str, ...] = (POST, ANSWER, ICE, DTLS, FRAME_IN, FRAME_OUT, SWAP_OUT)


class Timeline:
    """The marks of one session, on the monotonic clock, relative to its POST."""

    def __init__(self, post_s: float) -> None:
        self._at: dict[str, float] = {POST: post_s}

    @property
    def post_s(self) -> float:
        return self._at[POST]

    def mark(self, name: str, at_s: float) -> bool:
        """Record `name` at `at_s` unless it was already recorded; True when this call recorded it."""
        if name not in MARKS:
            raise ValueError(f"unknown timeline mark {name!r} (known: {', '.join(MARKS)})")
        if name in self._at:
            return False
        self._at[name] = at_s
        return True

    def has(self, name: str) -> bool:
        return name in self._at

    def as_ms(self) -> dict[str, float]:
        """Every recorded mark as milliseconds after the POST, in the order of `MARKS`."""
        post = self._at[POST]
        return {name: round((self._at[name] - post) * 1000.0, 1) for name in MARKS if name in self._at}
