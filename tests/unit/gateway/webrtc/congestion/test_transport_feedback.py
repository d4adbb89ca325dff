"""Transport-cc feedback packets (gateway.webrtc.congestion.transport_feedback) against packets libwebrtc
wrote.

The byte strings are Chrome's feedback packets as pion/rtcp's tests carry them (reference data; the
draft's own examples are the chunk bytes): examples whose padding is consistent with their length."""

from __future__ import annotations

import pytest

from gateway.webrtc.congestion.transport_feedback import (
    FeedbackRecorder,
    build_feedback,
    parse_feedback,
    received,
)

CHROME_1 = bytes([
    0xAF, 0xCD, 0x00, 0x05, 0xFA, 0x17, 0xFA, 0x17, 0x43, 0x03, 0x2F, 0xA0,
    0x00, 0x99, 0x00, 0x01, 0x3D, 0xE8, 0x02, 0x17, 0x20, 0x01, 0x94, 0x01,
])  # fmt: skip
CHROME_3 = bytes([
    0xAF, 0xCD, 0x00, 0x07, 0xFA, 0x17, 0xFA, 0x17, 0x19, 0x3D, 0xD8, 0xBB,
    0x01, 0x74, 0x00, 0x06, 0x45, 0xB1, 0x5A, 0x40, 0x40, 0x02, 0x20, 0x04,
    0x1F, 0xFE, 0x1F, 0x9A, 0xD0, 0x00, 0xD0, 0x00,
])  # fmt: skip
CHROME_4 = bytes([
    0xAF, 0xCD, 0x00, 0x07, 0xFA, 0x17, 0xFA, 0x17, 0x19, 0x3D, 0xD8, 0xBB,
    0x00, 0x04, 0x00, 0x07, 0x10, 0x63, 0x6E, 0x01, 0x20, 0x07, 0x4C, 0x24,
    0x24, 0x10, 0x0C, 0x0C, 0x10, 0x00, 0x00, 0x03,
])  # fmt: skip
MS = 1000  # microseconds


def test_parses_chrome_packets() -> None:
    one = parse_feedback(CHROME_1)
    assert (one.sender_ssrc, one.media_ssrc) == (4195875351, 1124282272)
    assert (one.base_sequence, one.reference_time, one.feedback_count) == (153, 4057090, 23)
    assert one.arrivals == [(153, 4057090 * 64 * MS + 37 * MS)]

    three = parse_feedback(CHROME_3)  # two large deltas, then small ones
    ref = 4567386 * 64 * MS
    steps = [2047500, 2022500, 52000, 0, 52000, 0]
    times = [ref + sum(steps[: k + 1]) for k in range(6)]
    assert three.arrivals == [((372 + k) & 0xFFFF, t) for k, t in enumerate(times)]

    four = parse_feedback(CHROME_4)
    assert [seq for seq, _ in four.arrivals] == list(range(4, 11))
    assert received([one, three, four]) == 1 + 6 + 7


def test_builds_what_chrome_builds() -> None:
    ref = 1074030 * 64 * MS
    steps = [19, 9, 9, 4, 3, 3, 4]
    arrivals = [ref + sum(steps[: k + 1]) * MS for k in range(7)]
    assert build_feedback(4195875351, 423483579, 4, list(arrivals), 1) == CHROME_4
    assert build_feedback(4195875351, 1124282272, 153, [4057090 * 64 * MS + 37 * MS], 23) == CHROME_1


def test_round_trip_with_losses_large_and_negative_deltas() -> None:
    base_us = 5_000_000_123
    arrivals: list[int | None] = []
    t = base_us
    for k in range(60):
        if k % 9 == 4 or 20 <= k < 29:  # scattered losses and a run of 9
            arrivals.append(None)
            continue
        t += [1_000, 70_000, -3_000, 250][k % 4]  # small, large, negative (reordered), tiny
        arrivals.append(t)
    fb = parse_feedback(build_feedback(1, 2, 65530, arrivals, 200))
    assert [seq for seq, _ in fb.arrivals] == [(65530 + k) & 0xFFFF for k in range(60)]
    for (_, got), want in zip(fb.arrivals, arrivals, strict=True):
        if want is None:
            assert got is None
        else:  # 250 us ticks, accumulated without drift
            assert got == (want // 250) * 250


def test_parser_refuses_malformed_packets() -> None:
    with pytest.raises(ValueError):
        parse_feedback(CHROME_4[:-4])  # length says more than there is
    with pytest.raises(ValueError):
        parse_feedback(bytes([0x81]) + CHROME_4[1:])  # FMT 1 (a NACK)
    with pytest.raises(ValueError):
        parse_feedback(CHROME_4[:20])  # chunks missing


def test_recorder_reports_every_packet_once_across_wrap_and_loss() -> None:
    recorder = FeedbackRecorder(max_status_count=50)
    sent = [(65500 + k) & 0xFFFF for k in range(120)]
    lost = {65510, 65511, 3, 40}
    now = 1_000_000
    reported: dict[int, int | None] = {}
    for k, sequence in enumerate(sent):
        now += 5_000
        if sequence not in lost:
            recorder.add(sequence, now)
        if k % 30 == 29:
            for packet in recorder.take(7, 8):
                for seq, at in parse_feedback(packet).arrivals:
                    assert seq not in reported, "reported twice"
                    reported[seq] = at
    assert set(reported) == set(sent)
    assert {seq for seq, at in reported.items() if at is None} == lost
    assert recorder.pending == 0


def test_recorder_leaves_out_late_and_duplicate_packets() -> None:
    recorder = FeedbackRecorder()
    recorder.add(10, 1_000)
    recorder.add(12, 2_000)
    (first,) = [parse_feedback(p) for p in recorder.take(1, 2)]
    assert [at is not None for _, at in first.arrivals] == [True, False, True]
    recorder.add(11, 3_000)  # arrived after it was reported lost
    recorder.add(12, 3_500)  # a duplicate
    assert recorder.take(1, 2) == []
    recorder.add(13, 4_000)
    (second,) = [parse_feedback(p) for p in recorder.take(1, 2)]
    assert second.base_sequence == 13 and second.feedback_count == 1


def test_recorder_splits_when_a_delta_does_not_fit() -> None:
    recorder = FeedbackRecorder()
    recorder.add(1, 0)
    recorder.add(2, 9_000_000)  # 9 s later: beyond a signed 16-bit delta of 250 us
    packets = [parse_feedback(p) for p in recorder.take(1, 2)]
    assert [fb.base_sequence for fb in packets] == [1, 2]
    assert [at for fb in packets for _, at in fb.arrivals] == [0, 9_000_000]


def test_recorder_memory_is_bounded_when_nothing_is_taken() -> None:
    recorder = FeedbackRecorder(max_status_count=16, max_pending=64)
    for sequence in range(1000):
        recorder.add(sequence, sequence * 1000)
    assert recorder.pending <= 64
    packets = [parse_feedback(p) for p in recorder.take(1, 2)]
    reported = [seq for fb in packets for seq, at in fb.arrivals if at is not None]
    assert reported == list(range(reported[0], 1000)) and len(reported) <= 64
