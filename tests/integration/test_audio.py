"""Audio: the publisher's Opus reaches WHEP viewers untouched and in sync with the delayed processed picture.

The publisher sends a click every second and, at the same instants, a white flash frame (both tracks paced
from one clock, `loadgen.avsync.MediaClock`). A viewer maps both streams through the gateway's RTCP sender
reports, as a lip-syncing receiver would, and measures how far apart the click and the flash land.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import statistics
from pathlib import Path
from typing import Any

import aiohttp
import cv2
import numpy as np
import pytest
from aiortc import RTCRtpSender
from aiortc.mediastreams import MediaStreamError
from av import VideoFrame

import gateway.media.session_audio as session_audio
from engines.frames import FrameItem, FrameOutput
from gateway.http.keys import sessions_of
from gateway.media.audio import AudioConfig
from gateway.monitoring.monitor import Monitor, MonitorConfig
from gateway.webrtc.install import create_peer_connection
from loadgen.avsync import (
    AUDIO_RATE,
    AvSyncProbe,
    ClickAudioTrack,
    MediaClock,
    stamp_capture_reports,
)
from loadgen.client import ClientConfig
from loadgen.report import loadgen_run_entry
from loadgen.runner import RunConfig, run_point
from loadgen.synth import SynthConfig, build_loop
from tests.harness.fakes import FakePipeline, RecordingMonitor
from tests.harness.gateway import LOOPBACK, gw_config, running_gateway
from tests.harness.media import FLASH_FPS, flash_track
from tests.harness.peers import negotiate, read_id, source_query
from tests.harness.waiting import wait_for

FPS = FLASH_FPS  # the probe counts the flash track's frames


def _sdp_section(sdp: str, kind: str) -> str:
    start = sdp.index(f"m={kind}")
    end = sdp.find("\nm=", start + 1)
    return sdp[start:] if end < 0 else sdp[start:end]


async def _publisher(
    http: aiohttp.ClientSession,
    base: str,
    image: np.ndarray,
    query: str,
    audio_stop_s: float | None = None,
    audio_codec: str = "audio/opus",
) -> Any:
    clock = MediaClock()
    pc = create_peer_connection(LOOPBACK)
    video = pc.addTransceiver(flash_track(image, clock), direction="sendonly")
    audio = pc.addTransceiver(ClickAudioTrack(clock, stop_after_s=audio_stop_s), direction="sendonly")
    # capture-time sender reports, as a browser sends them: what the gateway keeps in sync is then exactly
    # what was captured together, however late a busy machine sends either stream
    assert stamp_capture_reports(video.sender, clock, 90_000)
    assert stamp_capture_reports(audio.sender, clock, AUDIO_RATE)
    caps = RTCRtpSender.getCapabilities("audio").codecs
    audio.setCodecPreferences([c for c in caps if c.mimeType.lower() == audio_codec])
    status, body, location = await negotiate(http, f"{base}/whip{query}", pc, None)
    assert status == 201, body
    return pc, body, location


async def _viewer(http: aiohttp.ClientSession, base: str, session_id: str) -> Any:
    pc = create_peer_connection(LOOPBACK)
    video = pc.addTransceiver("video", direction="recvonly")
    audio = pc.addTransceiver("audio", direction="recvonly")
    probe = AvSyncProbe(fps=FPS)
    assert probe.attach(audio.receiver, video.receiver)
    status, body, _ = await negotiate(http, f"{base}/whep/{session_id}", pc, None)
    assert status == 201, body

    async def consume() -> None:
        with contextlib.suppress(MediaStreamError, asyncio.CancelledError):
            while True:
                frame: VideoFrame = await video.receiver.track.recv()  # type: ignore[assignment]
                bright = float(frame.to_ndarray(format="gray").mean()) > 200
                probe.on_video_frame(read_id(frame), frame.pts, bright)

    return pc, body, probe, asyncio.ensure_future(consume())


class StallingPipeline(FakePipeline):
    """50 ms per batch, but every 4th batch stalls 250 ms: its frames miss their deadline and the late
    policy repeats the last processed picture in their place."""

    def __init__(self) -> None:
        super().__init__(delay_s=0.05)
        self.calls = 0

    def process(self, items: list[FrameItem]) -> list[FrameOutput]:
        self.calls += 1
        self.delay_s = 0.25 if self.calls % 4 == 0 else 0.05
        return super().process(items)


async def _measure(
    astronaut: np.ndarray, pipeline: FakePipeline, seconds: float = 9.0, min_flashes: int = 0, **sessions: Any
) -> tuple[AvSyncProbe, dict[str, Any]]:
    image = cv2.resize(astronaut, (320, 240))
    async with (
        running_gateway(gw_config(**sessions), pipeline=pipeline, monitor=RecordingMonitor()) as gw,
        aiohttp.ClientSession() as http,
    ):
        query = await source_query(http, gw.url, astronaut)
        pub, answer, location = await _publisher(http, gw.url, image, query)
        session_id = location.rsplit("/", 1)[-1]
        vpc, vanswer, probe, task = await _viewer(http, gw.url, session_id)
        try:
            assert "a=recvonly" in _sdp_section(answer, "audio")  # the publisher gets no audio back
            assert "opus/48000" in _sdp_section(answer, "audio")
            assert "a=sendonly" in _sdp_section(vanswer, "audio")
            # Wait for the measurements themselves, not a fixed time: on a loaded machine they come later.
            assert await wait_for(
                lambda: len(probe.offsets_ms) >= 6 and probe.flashes >= min_flashes, seconds + 10
            ), (probe.offsets_ms, probe.flashes)
            stats = sessions_of(gw.app).get(session_id).summary()["audio"]
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await vpc.close()
            await pub.close()
    return probe, stats


async def test_audio_is_relayed_in_sync_with_the_delayed_picture(astronaut: np.ndarray) -> None:
    """55 ms of processing: the click and the flash still land together at the viewer (±20 ms).

    Under the 67 ms frame interval, so every frame (and so every once-a-second white one) is processed. At
    80 ms one frame in six was replaced while it waited, in a pattern that repeats every 2 s: with an
    unlucky phase it took the white frame each time, and the test waited in vain for 3 flashes."""
    probe, stats = await _measure(astronaut, FakePipeline(delay_s=0.055), min_flashes=3)
    assert stats["audio"] and stats["audio_viewers"] == 1
    assert stats["audio_packets_in"] > 100 and stats["audio_packets_relayed"] > 100
    assert stats["sender_reports_stamped"] > 0
    assert probe.flashes >= 3  # the white frames came through processing
    settled = probe.offsets_ms[2:]  # the first reports come before the publisher's own SRs are known
    median = statistics.median(settled)
    assert -20.0 <= median <= 20.0, probe.offsets_ms
    assert all(-45.0 <= o <= 125.0 for o in settled), probe.offsets_ms  # ITU-R BT.1359 window


async def test_pictures_repeated_by_the_late_policy_do_not_shift_the_timeline(astronaut: np.ndarray) -> None:
    # repeat_gap_ms=0: a repeat for every frame not processed (by default only after 200 ms without a frame,
    # and the frames behind a stall go out right after the stalled one, so none would be repeated here)
    probe, stats = await _measure(astronaut, StallingPipeline(), repeat_gap_ms=0.0)
    assert probe.repeats > 0  # the late policy did repeat pictures
    settled = probe.offsets_ms[2:]
    assert -20.0 <= statistics.median(settled) <= 20.0, probe.offsets_ms
    assert all(-45.0 <= o <= 125.0 for o in settled), probe.offsets_ms


async def test_without_stamped_reports_the_audio_runs_ahead(
    astronaut: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The measurement can fail: with aiortc's send-time sender reports the viewer would play the sound
    ahead of the picture by about the processing delay (what the stamping corrects)."""
    monkeypatch.setattr(session_audio, "install_sender_clock", lambda sender, capture_of: None)
    probe, stats = await _measure(astronaut, FakePipeline(delay_s=0.08))
    assert stats["sender_reports_stamped"] == 0
    assert statistics.median(probe.offsets_ms[2:]) < -50.0, probe.offsets_ms


def _only_l16_audio(sdp: str) -> str:
    out, audio = [], False
    for line in sdp.split("\r\n"):
        if line.startswith("m="):
            audio = line.startswith("m=audio")
            if audio:
                out += ["m=audio 9 UDP/TLS/RTP/SAVPF 101", "a=rtpmap:101 L16/48000/2"]
                continue
        if audio and line.startswith(("a=rtpmap:", "a=fmtp:", "a=rtcp-fb:")):
            continue
        out.append(line)
    return "\r\n".join(out)


async def test_publisher_without_opus_and_audio_that_stops(astronaut: np.ndarray) -> None:
    """PCMU-only or L16-only audio is answered inactive (the video session works); Opus audio that
    stops after 1.5 s leaves the session, its video and its viewer alone."""
    image = cv2.resize(astronaut, (320, 240))
    monitor = Monitor(MonitorConfig(sample_interval_s=0.25))
    async with (
        running_gateway(gw_config(reap_after_s=3.0), pipeline=FakePipeline(), monitor=monitor) as gw,
        aiohttp.ClientSession() as http,
    ):
        pcmu, answer, location = await _publisher(http, gw.url, image, "", audio_codec="audio/pcmu")
        try:
            assert "a=inactive" in _sdp_section(answer, "audio")
            session = sessions_of(gw.app).get(location.rsplit("/", 1)[-1])
            assert await wait_for(lambda: session.counters.frames_out >= 10, 20)
            assert session.audio.relay is None
        finally:
            await pcmu.close()

        offer_pc = create_peer_connection(LOOPBACK)
        offer_pc.addTransceiver("video", direction="sendonly")
        offer_pc.addTransceiver("audio", direction="sendonly")
        await offer_pc.setLocalDescription(await offer_pc.createOffer())
        offer = _only_l16_audio(offer_pc.localDescription.sdp)
        async with http.post(f"{gw.url}/whip", data=offer, headers={"Content-Type": "application/sdp"}) as r:
            l16_answer = await r.text()
            assert r.status == 201, l16_answer  # aiortc alone would refuse the whole offer
            l16_location = r.headers["Location"]
        audio_answer = _sdp_section(l16_answer, "audio")
        assert re.match(r"m=audio \d+ UDP/TLS/RTP/SAVPF 101\r\n", audio_answer), audio_answer
        assert "a=inactive" in audio_answer
        async with http.delete(gw.url + l16_location) as r:
            assert r.status == 200
        await offer_pc.close()

        pub, answer, location = await _publisher(http, gw.url, image, "", audio_stop_s=1.5)
        session_id = location.rsplit("/", 1)[-1]
        vpc, _, probe, task = await _viewer(http, gw.url, session_id)
        try:
            session = sessions_of(gw.app).get(session_id)
            relay = session.audio.relay
            assert relay is not None
            assert await wait_for(lambda: relay.packets_in >= 50, 20)
            await asyncio.sleep(5.0)  # longer than reap_after_s, with no audio for the last 3.5 s
            assert sessions_of(gw.app).get(session_id) is session
            before = session.counters.frames_out
            assert await wait_for(lambda: session.counters.frames_out >= before + 10, 10)
            assert relay.packets_relayed > 0 and probe.audio_packets > 0
            async with http.get(f"{gw.url}/api/stats") as r:
                audio_stats = (await r.json())["audio"]
            assert audio_stats["sessions_with_audio"] == 1 and audio_stats["viewers_with_audio"] == 1
            assert audio_stats["packets_relayed"] == relay.packets_relayed
            async with http.get(f"{gw.url}/metrics") as r:
                metrics = await r.text()
            assert f'livefuse_audio_packets_total{{fate="relayed"}} {float(relay.packets_relayed)}' in metrics
            assert "livefuse_audio_viewers 1.0" in metrics
            packets = relay.packets_in
            await asyncio.sleep(0.5)
            assert relay.packets_in == packets  # the audio really stopped
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await vpc.close()
            await pub.close()


async def test_killed_publisher_with_audio_is_reaped_and_its_viewers_closed(astronaut: np.ndarray) -> None:
    """A publisher that vanishes without a goodbye (video AND audio stop) is reaped as before; its audio
    relay and its viewers go with it."""
    image = cv2.resize(astronaut, (320, 240))
    monitor = RecordingMonitor()
    config = gw_config(reap_after_s=1.0, connect_timeout_s=5.0)
    async with (
        running_gateway(config, pipeline=FakePipeline(), monitor=monitor) as gw,
        aiohttp.ClientSession() as http,
    ):
        pub, _, location = await _publisher(http, gw.url, image, "")
        session_id = location.rsplit("/", 1)[-1]
        vpc, _, probe, task = await _viewer(http, gw.url, session_id)
        try:
            manager = sessions_of(gw.app)
            session = manager.get(session_id)
            relay = session.audio.relay
            assert relay is not None
            assert await wait_for(lambda: probe.audio_packets >= 20, 20)
            for sender in pub.getSenders():  # no DTLS close, no DELETE: the tracks just stop
                assert sender.track is not None
                sender.track.stop()
            assert await wait_for(lambda: manager.counts()["sessions"] == 0, 10)
            assert manager.counts() == {"sessions": 0, "viewers": 0, "tasks": 0}
            assert relay.closed and relay.subscribers == 0
            assert monitor.closed_sessions and "no media" in monitor.closed_sessions[0][1]
            assert await wait_for(lambda: vpc.connectionState in ("closed", "failed"), 15)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await vpc.close()
            await pub.close()


async def test_audio_relay_turned_off_answers_audio_inactive(astronaut: np.ndarray) -> None:
    image = cv2.resize(astronaut, (320, 240))
    config = gw_config(audio=AudioConfig(enabled=False))
    async with (
        running_gateway(config, pipeline=FakePipeline(), monitor=RecordingMonitor()) as gw,
        aiohttp.ClientSession() as http,
    ):
        pub, answer, location = await _publisher(http, gw.url, image, "")
        vpc, vanswer, _, task = await _viewer(http, gw.url, location.rsplit("/", 1)[-1])
        try:
            assert "a=inactive" in _sdp_section(answer, "audio")
            assert "a=inactive" in _sdp_section(vanswer, "audio")
            session = sessions_of(gw.app).get(location.rsplit("/", 1)[-1])
            assert session.audio.relay is None
            assert await wait_for(lambda: session.counters.frames_out >= 5, 20)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await vpc.close()
            await pub.close()


async def test_loadgen_audio_jobs_report_their_av_offset(astronaut: np.ndarray, media_dir: Path) -> None:
    """`loadgen --audio`: each job sends Opus beside its stamped video and a WHEP viewer per job measures the
    offset; the report entry carries its distribution per job."""
    async with (
        running_gateway(gw_config(), pipeline=FakePipeline(delay_s=0.08), monitor=RecordingMonitor()) as gw,
        aiohttp.ClientSession() as http,
    ):
        source_id = (await source_query(http, gw.url, astronaut)).split("=", 1)[1]
        frame_loop = build_loop(SynthConfig(320, 240, 15, "single_face", loop_frames=10), media_dir)
        # 9 s: at least 3 clicks must land after the first sender reports even on a loaded machine
        cfg = RunConfig(
            concurrent_jobs=2,
            fps=15,
            warmup_s=3.0,
            ramp_up_rate=10,
            window_s=9.0,
            max_measure_s=9.0,
            stats_interval_s=1.0,
        )
        client = ClientConfig(url=gw.url, source_id=source_id, audio=True)
        result = await run_point(gw.url, frame_loop, cfg, client)
    entry = loadgen_run_entry("audio", result, {"concurrent_jobs": 2})
    assert len(entry["jobs"]) == 2
    for job in entry["jobs"]:
        assert "av_offset_ms" in job, f"no A/V offset measured: {job}"
        offsets = job["av_offset_ms"]
        assert offsets["count"] >= 3, job
        assert offsets["min"] <= offsets["p50"] <= offsets["max"], job  # a distribution, per job
        # In sync at the median. (Single clicks can land further out here: with two sessions on an 80 ms
        # pipeline a busy machine drops most frames, and few video marks make a noisy reference. The
        # BT.1359 window on every click is the dedicated tests' above, with one session.)
        assert -20.0 <= offsets["p50"] <= 20.0, job
