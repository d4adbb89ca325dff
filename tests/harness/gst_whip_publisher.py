"""A WHIP publisher built on GStreamer's `webrtcbin` (the element `whipsink` / `whipclientsink` wrap): an
independent WebRTC stack (libnice ICE, OpenSSL DTLS with an RSA certificate, GStreamer RTP), not aiortc.

Runs under Debian's system Python (`/usr/bin/python3`, which has `python3-gi`), not the project venv, and
imports nothing from the project. It publishes a live VP8 test pattern to a WHIP URL on 127.0.0.1 (ICE on
127.0.0.1 only), receives the processed video back on the same transceiver and decodes it, then DELETEs
the session and prints one JSON line: {"status": 201, "answer_setup": "active", "connection_state":
"connected", "frames_sent": .., "frames_received": .., "errors": [..]}

Usage: /usr/bin/python3 gst_whip_publisher.py URL [--seconds 6] [--width 320 --height 240 --fps 15]
       [--token T] [--address 127.0.0.1]
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstSdp", "1.0")
gi.require_version("GstWebRTC", "1.0")
gi.require_version("Nice", "0.1")
from gi.repository import GLib, Gst, GstSdp, GstWebRTC, Nice  # noqa: E402

PIPELINE = (
    "videotestsrc is-live=true pattern=ball name=src ! video/x-raw,width={w},height={h},framerate={fps}/1 "
    "! videoconvert ! vp8enc deadline=1 keyframe-max-dist=3000 target-bitrate=600000 "
    "! rtpvp8pay pt=96 mtu=1200 ! queue "
    "! application/x-rtp,media=video,encoding-name=VP8,payload=96,clock-rate=90000 "
    "! webrtcbin name=webrtc bundle-policy=max-bundle"
)


def _corner_mean(buffer: Gst.Buffer, width: int) -> list[float] | None:
    """Mean RGB of the block at rows/columns 10..30 of a packed RGB frame (what the gateway's test pipeline
    paints magenta when it processed the frame); no numpy in the system Python."""
    ok, mapped = buffer.map(Gst.MapFlags.READ)
    if not ok:
        return None
    try:
        data = mapped.data
        stride = (width * 3 + 3) // 4 * 4  # GStreamer pads RGB rows to 4 bytes
        sums = [0, 0, 0]
        for row in range(10, 30):
            line = data[row * stride + 30 : row * stride + 90]
            for channel in range(3):
                sums[channel] += sum(line[channel::3])
        return [round(total / 400.0, 1) for total in sums]
    finally:
        buffer.unmap(mapped)


class Publisher:
    def __init__(
        self,
        url: str,
        seconds: float,
        width: int,
        height: int,
        fps: int,
        token: str = "",
        address: str = "127.0.0.1",
    ) -> None:
        self.url = url
        self.seconds = seconds
        self._publishing = False
        self.token = token
        self.address = address
        self.loop = GLib.MainLoop()
        self.pipeline = Gst.parse_launch(PIPELINE.format(w=width, h=height, fps=fps))
        self.webrtc = self.pipeline.get_by_name("webrtc")
        self.result: dict[str, object] = {
            "status": None,
            "answer_setup": None,
            "connection_state": None,
            "ice_state": None,
            "frames_sent": 0,
            "frames_received": 0,
            "received_caps": None,
            "corner_rgb": None,
            "errors": [],
            # seconds after the POST went out, as milliseconds: answer, connected, first frame decoded
            "timeline_ms": {},
        }
        self._posted_s: float | None = None
        self.location: str | None = None
        self._lock = threading.Lock()
        # Only loopback candidates (libnice skips lo by default). PyGObject takes the ICE object from the
        # "ice-agent" property without adding the reference it later drops: keep the wrappers alive for the
        # whole run, or webrtcbin's ICE object is freed under it.
        self._ice = self.webrtc.get_property("ice-agent")
        self._agent = self._ice.get_property("agent")
        address = Nice.Address()
        address.set_from_string(self.address)
        self._agent.add_local_address(address)
        self.webrtc.connect("on-negotiation-needed", self._on_negotiation_needed)
        self.webrtc.connect("notify::ice-gathering-state", self._on_gathering)
        self.webrtc.connect("notify::connection-state", self._on_state)
        self.webrtc.connect("pad-added", self._on_pad)
        src_pad = self.pipeline.get_by_name("src").get_static_pad("src")
        src_pad.add_probe(Gst.PadProbeType.BUFFER, self._count_sent)
        bus = self.pipeline.get_bus()
        bus.add_signal_watch()
        bus.connect("message::error", self._on_error)

    # --- negotiation: full offer (all candidates) in one POST, as whipsink does without trickle -------------
    def _on_negotiation_needed(self, element: Gst.Element) -> None:
        for index in range(4):
            transceiver = element.emit("get-transceiver", index)
            if transceiver is not None:
                transceiver.set_property("direction", GstWebRTC.WebRTCRTPTransceiverDirection.SENDRECV)
        promise = Gst.Promise.new_with_change_func(self._on_offer, element, None)
        element.emit("create-offer", None, promise)

    def _on_offer(self, promise: Gst.Promise, element: Gst.Element, _: object) -> None:
        reply = promise.get_reply()
        offer = reply.get_value("offer") if reply is not None and reply.has_field("offer") else None
        if offer is None:
            self._fail(f"create-offer failed: {reply.to_string() if reply is not None else 'no reply'}")
            return
        element.emit("set-local-description", offer, Gst.Promise.new())

    def _on_gathering(self, element: Gst.Element, _: object) -> None:
        if element.get_property("ice-gathering-state") == GstWebRTC.WebRTCICEGatheringState.COMPLETE:
            threading.Thread(target=self._post, daemon=True).start()

    def _post(self) -> None:
        offer = self.webrtc.get_property("local-description").sdp.as_text()
        request = urllib.request.Request(
            self.url,
            data=offer.encode(),
            method="POST",
            headers=self._headers({"Content-Type": "application/sdp"}),
        )
        self._posted_s = time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                self.result["status"] = response.status
                answer = response.read().decode()
                self._mark("answer")
                self.location = urllib.parse.urljoin(self.url, response.headers["Location"])
        except urllib.error.HTTPError as exc:
            self.result["status"] = exc.code
            self._fail(f"WHIP POST -> {exc.code}: {exc.read().decode(errors='replace')[:300]}")
            return
        except OSError as exc:
            self._fail(f"WHIP POST failed: {exc}")
            return
        setups = [line.split(":", 1)[1] for line in answer.splitlines() if line.startswith("a=setup:")]
        self.result["answer_setup"] = setups[0].strip() if setups else None
        _, sdp = GstSdp.SDPMessage.new_from_text(answer)
        description = GstWebRTC.WebRTCSessionDescription.new(GstWebRTC.WebRTCSDPType.ANSWER, sdp)
        GLib.idle_add(self._set_answer, description)

    def _set_answer(self, description: GstWebRTC.WebRTCSessionDescription) -> bool:
        self.webrtc.emit("set-remote-description", description, Gst.Promise.new())
        return False

    # --- media ---------------------------------------------------------------------------------------------
    def _count_sent(self, pad: Gst.Pad, info: Gst.PadProbeInfo) -> Gst.PadProbeReturn:
        with self._lock:
            self.result["frames_sent"] = int(self.result["frames_sent"]) + 1  # type: ignore[arg-type]
        return Gst.PadProbeReturn.OK

    def _on_pad(self, element: Gst.Element, pad: Gst.Pad) -> None:
        if pad.get_direction() != Gst.PadDirection.SRC:
            return
        decode = Gst.parse_bin_from_description(
            "queue ! rtpvp8depay ! vp8dec ! videoconvert ! video/x-raw,format=RGB "
            "! fakesink name=sink sync=false",
            True,
        )
        self.pipeline.add(decode)
        decode.sync_state_with_parent()
        pad.link(decode.get_static_pad("sink"))
        sink_pad = decode.get_by_name("sink").get_static_pad("sink")
        sink_pad.add_probe(Gst.PadProbeType.BUFFER, self._count_received)

    def _count_received(self, pad: Gst.Pad, info: Gst.PadProbeInfo) -> Gst.PadProbeReturn:
        with self._lock:
            if not self.result["frames_received"]:
                self._mark("first_decoded")
            self.result["frames_received"] = int(self.result["frames_received"]) + 1  # type: ignore[arg-type]
            caps = pad.get_current_caps()
            if caps is not None:
                s = caps.get_structure(0)
                width, height = s.get_value("width"), s.get_value("height")
                self.result["received_caps"] = [width, height]
                self.result["corner_rgb"] = _corner_mean(info.get_buffer(), width)
        return Gst.PadProbeReturn.OK

    def _mark(self, name: str) -> None:
        timeline = self.result["timeline_ms"]
        if self._posted_s is not None and isinstance(timeline, dict) and name not in timeline:
            timeline[name] = round((time.monotonic() - self._posted_s) * 1000.0, 1)

    # --- state ---------------------------------------------------------------------------------------------
    def _on_state(self, element: Gst.Element, _: object) -> None:
        state = element.get_property("connection-state")
        if state == GstWebRTC.WebRTCPeerConnectionState.CONNECTED:
            self._mark("connected")
        self.result["connection_state"] = state.value_nick
        self.result["ice_state"] = element.get_property("ice-connection-state").value_nick
        if state == GstWebRTC.WebRTCPeerConnectionState.FAILED:
            self._fail("peer connection failed")
        elif state == GstWebRTC.WebRTCPeerConnectionState.CONNECTED and not self._publishing:
            self._publishing = True  # publish `seconds` from here: a slow machine's set-up is not counted
            GLib.timeout_add(int(self.seconds * 1000), self._stop)

    def _on_error(self, bus: Gst.Bus, message: Gst.Message) -> None:
        error, debug = message.parse_error()
        self._fail(f"{error.message} ({(debug or '').splitlines()[0] if debug else ''})")

    def _fail(self, why: str) -> None:
        errors = self.result["errors"]
        assert isinstance(errors, list)
        errors.append(why)
        GLib.idle_add(self.loop.quit)

    def run(self) -> dict[str, object]:
        self.pipeline.set_state(Gst.State.PLAYING)
        GLib.timeout_add(int((self.seconds + 30) * 1000), self.loop.quit)  # hard stop: never hang a test
        self.loop.run()
        self.result["connection_state"] = self.webrtc.get_property("connection-state").value_nick
        self.pipeline.set_state(Gst.State.NULL)
        if self.location is not None:
            try:
                delete = urllib.request.Request(self.location, method="DELETE", headers=self._headers({}))
                urllib.request.urlopen(delete, timeout=5)
            except OSError as exc:
                self.result["errors"].append(f"DELETE failed: {exc}")  # type: ignore[union-attr]
        return self.result

    def _headers(self, headers: dict[str, str]) -> dict[str, str]:
        return {**headers, "Authorization": f"Bearer {self.token}"} if self.token else headers

    def _stop(self) -> bool:
        self.loop.quit()
        return False


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--seconds", type=float, default=6.0, help="how long to publish once connected")
    parser.add_argument("--width", type=int, default=320)
    parser.add_argument("--height", type=int, default=240)
    parser.add_argument("--fps", type=int, default=15)
    parser.add_argument("--token", default="", help="bearer token for the WHIP POST and DELETE")
    parser.add_argument("--address", default="127.0.0.1", help="the one local address ICE gathers on")
    args = parser.parse_args()
    Gst.init(None)
    started = time.monotonic()
    result = Publisher(
        args.url, args.seconds, args.width, args.height, args.fps, args.token, args.address
    ).run()
    result["wall_s"] = round(time.monotonic() - started, 2)
    print(json.dumps(result), flush=True)
    # Skip interpreter teardown: finalising the borrowed ICE wrappers after the pipeline is gone is unsafe.
    os._exit(0 if not result["errors"] else 1)


if __name__ == "__main__":
    main()
