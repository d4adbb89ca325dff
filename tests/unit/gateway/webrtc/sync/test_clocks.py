"""The capture clock (pure): RTP unwrapping, arrival-based offsets, publisher-SR anchoring, NTP conversion;
the --no-audio flag; loadgen's per-job A/V offset summary."""

from __future__ import annotations

from gateway.webrtc.sync.clocks import (
    AUDIO_RATE,
    VIDEO_RATE,
    CaptureClock,
    SyncConfig,
    Unwrapper,
    ntp64_to_seconds,
)


def test_unwrapper_crosses_the_32_bit_wrap_and_tolerates_reordering() -> None:
    u = Unwrapper()
    assert u.rel(0xFFFFFF00) == 0
    assert u.rel(0x00000100) == 0x200  # wrapped
    assert u.rel(0xFFFFFF80) == 0x80  # a late packet from before the wrap
    assert u.last_rel == 0x200


def test_offset_is_the_least_delayed_arrival_and_may_rise_slowly() -> None:
    clock = CaptureClock(SyncConfig(leak_s_per_s=0.001))
    for i, jitter in enumerate([0.030, 0.010, 0.050, 0.012]):
        clock.audio.observe(i * 960, 100.0 + i * 0.02 + jitter)
    assert abs(clock.audio.offset - 100.010) < 0.0002  # type: ignore[operator]
    capture = clock.audio_capture(AUDIO_RATE)  # one second of media later
    assert capture is not None and abs(capture - 101.010) < 0.0002
    clock.audio.observe(100 * 960, 100.0 + 2.0 + 0.040)  # only late packets for 2 s: the estimate leaks up
    assert 100.010 < clock.audio.offset < 100.013  # type: ignore[operator]


def test_video_follows_the_publishers_stated_relation_once_both_reports_are_in() -> None:
    clock = CaptureClock()
    clock.audio.observe(0, 50.020)  # audio arrives 20 ms after capture (packetisation + network)
    clock.video.observe(0, 50.045)  # video 45 ms (the publisher's encode took longer)
    assert abs(clock.video_capture(0) - 50.045) < 1e-9  # type: ignore[operator]  # arrival only
    clock.audio.publisher_report(ntp_s=1000.0, rel=AUDIO_RATE, now_s=51.0)  # both captured at 1000 s
    clock.video.publisher_report(ntp_s=1000.030, rel=VIDEO_RATE, now_s=51.0)  # (a send-time SR: +30 ms)
    clock.video.publisher_report(ntp_s=1001.0, rel=2 * VIDEO_RATE, now_s=52.0)  # a prompt one
    assert abs(clock.video_capture(VIDEO_RATE) - clock.audio_capture(AUDIO_RATE)) < 1e-9  # type: ignore[operator]
    assert abs(clock.publisher_skew_ms() - 25.0) < 1e-6  # type: ignore[operator]


def test_ntp_conversion_keeps_differences() -> None:
    clock = CaptureClock()
    a, b = clock.ntp64(10.0), clock.ntp64(10.25)
    assert abs(ntp64_to_seconds(b) - ntp64_to_seconds(a) - 0.25) < 1e-6


def test_no_audio_flag_reaches_the_session_config() -> None:
    from gateway.cli import load_config

    assert load_config([], {})[0].sessions.audio.enabled
    assert not load_config(["--no-audio"], {})[0].sessions.audio.enabled


def test_av_offsets_are_summarised_per_job_and_window() -> None:
    from loadgen.stats import AvOffset, FrameSent, StatsCollector

    collector = StatsCollector(budget_ms=150.0)
    collector.record(FrameSent(0, 1, 0.5))
    collector.record(FrameSent(1, 1, 0.5))
    for i, ms in enumerate([4.0, 6.0, 5.0, 40.0]):
        collector.record(AvOffset(0, 1.0 + i, ms))
    window = collector.window(0.0, 3.5)  # the 40 ms click lies outside
    by_job = {j.job: j for j in window.jobs}
    offsets = by_job[0].av_offset_ms
    assert offsets is not None and offsets.count == 3 and offsets.p50 == 5.0
    assert offsets.min == 4.0 and offsets.max == 6.0
    assert by_job[1].av_offset_ms is None  # a job without audio has no distribution
