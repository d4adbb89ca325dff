"""AudioRelay without a network: packets in (as the receiver's tap hands them), av.Packets out per viewer."""

from __future__ import annotations

from aiortc.rtp import RtpPacket

from gateway.media.audio import AudioConfig, AudioRelay
from gateway.webrtc.sync.clocks import CaptureClock


def _packet(ts: int, ssrc: int = 1234, payload: bytes = b"\xfc\xff\xfe") -> RtpPacket:
    packet = RtpPacket(payload_type=111, timestamp=ts & 0xFFFFFFFF, ssrc=ssrc)
    packet.payload = payload
    return packet


async def test_packets_reach_every_viewer_untouched_with_relative_timestamps() -> None:
    relay = AudioRelay(CaptureClock())
    a, b = relay.subscribe(), relay.subscribe()
    for i in range(3):
        relay.on_packet(_packet(0xFFFFFC40 + i * 960, payload=bytes([i, 1, 2])))  # crosses the 32-bit wrap
    got = [await a.recv() for _ in range(3)]
    assert [p.pts for p in got] == [0, 960, 1920]
    assert [bytes(p) for p in got] == [bytes([i, 1, 2]) for i in range(3)]
    assert (await b.recv()).pts == 0
    assert relay.packets_in == 3 and relay.packets_relayed == 6


async def test_a_slow_viewer_loses_the_oldest_packets_and_a_new_source_continues_the_timeline() -> None:
    relay = AudioRelay(CaptureClock(), AudioConfig(max_queue=4))
    track = relay.subscribe()
    for i in range(10):
        relay.on_packet(_packet(1000 + i * 960))
    assert track.dropped == 6
    assert [(await track.recv()).pts for _ in range(4)] == [6 * 960, 7 * 960, 8 * 960, 9 * 960]
    relay.on_packet(_packet(55, ssrc=999))  # the publisher replaced its track: timestamps start anywhere
    restarted = (await track.recv()).pts
    assert restarted > 9 * 960  # outgoing timestamps keep growing for the viewer
    relay.on_packet(_packet(55 + 960, ssrc=999))
    assert (await track.recv()).pts == restarted + 960


def test_closed_relay_ends_its_tracks() -> None:
    relay = AudioRelay(CaptureClock())
    track = relay.subscribe()
    relay.close()
    relay.on_packet(_packet(0))
    assert relay.packets_in == 0 and relay.subscribers == 0
    assert track.readyState == "ended"
