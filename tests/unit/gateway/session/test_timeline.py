"""The way-on-air marks (gateway.session.timeline), pure."""

from __future__ import annotations

import pytest

from gateway.session.timeline import ANSWER, DTLS, FRAME_OUT, ICE, Timeline


def test_each_mark_is_kept_once_in_ms_after_the_post() -> None:
    timeline = Timeline(post_s=10.0)
    assert timeline.mark(DTLS, 10.25) and timeline.mark(ANSWER, 10.005) and timeline.mark(ICE, 10.1)
    assert not timeline.mark(DTLS, 11.0)  # the first time stands
    assert timeline.as_ms() == {"post": 0.0, ANSWER: 5.0, ICE: 100.0, DTLS: 250.0}  # in the marks' order
    assert timeline.has(DTLS) and not timeline.has(FRAME_OUT)


def test_an_unknown_mark_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown timeline mark"):
        Timeline(0.0).mark("first_frame", 1.0)
