"""A load-generator job that receives like a browser: it offers transport-cc and returns its feedback.

aiortc neither offers transport-cc nor sends its feedback, so without this a load exercises only the
gateway's receiver-report path, while browsers give per-packet feedback 10-20 times a second
(`loadgen --transport-cc`; bench.network measures the sender under both). The offer carries the
extension and `a=rtcp-fb:<pt> transport-cc` as Chrome writes them; aiortc drops the extension from what it
negotiated, so the job's transport is told its id directly, and the gateway's own receive-side recorder
(gateway.webrtc.congestion.transport_cc) runs on the job's video receiver.
"""

from __future__ import annotations

import re

from aiortc import RTCPeerConnection, RTCRtpReceiver
from aiortc.rtcrtpparameters import RTCRtpHeaderExtensionParameters, RTCRtpParameters

from gateway.webrtc.compat import header_extensions_map
from gateway.webrtc.congestion.transport_cc import (
    TRANSPORT_CC_URI,
    TransportCcFeedback,
    offered_transport_cc,
)
from gateway.webrtc.install import install_transport_cc_receiver

_EXTMAP = re.compile(r"^a=extmap:(\d+)(?:/\w+)? (\S+)")
_VIDEO_RTPMAP = re.compile(r"^a=rtpmap:(\d+) ([\w-]+)/90000")


def offer_with_transport_cc(sdp: str) -> str:
    """`sdp` with transport-cc offered on its video m-lines (a free extension id, feedback on every video
    format but RTX)."""
    lines = sdp.split("\r\n")
    used = {int(m.group(1)) for line in lines if (m := _EXTMAP.match(line))}
    free = next((i for i in range(1, 15) if i not in used), None)
    if free is None or TRANSPORT_CC_URI in sdp:
        return sdp
    out: list[str] = []
    in_video = False
    for k, line in enumerate(lines):
        if line.startswith("m="):
            in_video = line.startswith("m=video")
        out.append(line)
        if not in_video:
            continue
        following = lines[k + 1] if k + 1 < len(lines) else ""
        if _EXTMAP.match(line) and not _EXTMAP.match(following):
            out.append(f"a=extmap:{free} {TRANSPORT_CC_URI}")  # after the section's last extension
        match = _VIDEO_RTPMAP.match(line)
        if match and match.group(2).lower() != "rtx":
            out.append(f"a=rtcp-fb:{match.group(1)} transport-cc")
    return "\r\n".join(out)


def answered_id(answer_sdp: str) -> int | None:
    """The transport-cc extension id of the answer's video m-line, None when it was not answered."""
    answered = offered_transport_cc(answer_sdp)
    return next((extension.id for extension, _ in answered.values()), None)


def parse_transport_cc(pc: RTCPeerConnection, answer_sdp: str) -> RTCRtpReceiver | None:
    """After `setRemoteDescription(answer)`: make `pc`'s transport parse the transport-wide sequence number
    (aiortc drops the extension from what it negotiated); the video receiver, None when the answer did not
    take transport-cc."""
    ext_id = answered_id(answer_sdp)
    receiver = next((t.receiver for t in pc.getTransceivers() if t.kind == "video"), None)
    extensions = header_extensions_map(receiver)
    if ext_id is None or receiver is None or extensions is None:
        return None
    tcc = RTCRtpHeaderExtensionParameters(id=ext_id, uri=TRANSPORT_CC_URI)
    extensions.configure(RTCRtpParameters(headerExtensions=[tcc]))
    return receiver


def receive_with_transport_cc(pc: RTCPeerConnection, answer_sdp: str) -> TransportCcFeedback | None:
    """After `setRemoteDescription(answer)`: parse the extension on the job's video receiver and record its
    packets for feedback (the caller runs `.run()`); None when the answer did not take transport-cc."""
    receiver = parse_transport_cc(pc, answer_sdp)
    return install_transport_cc_receiver(pc) if receiver is not None else None
