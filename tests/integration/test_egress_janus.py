"""Egress into a real SFU: a session's processed video and relayed Opus reach Janus's VideoRoom through a
WHIP front (tests.harness.janus), as Janus's own admin API counts them; the first POST is answered 503
(the push retries), the token is sent as a bearer token on every request, and ending the session DELETEs
the resource (Janus's session is gone). All of it inside a private network namespace with a veth pair
(10.77.0.1/24, no route out): Janus gathers no loopback candidates, and nothing leaves the namespace."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.janus import janus_binary

ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = (
    "ip link set lo up && ip link add lfe0 type veth peer name lfe1 && ip addr add 10.77.0.1/24 dev lfe0 "
    "&& ip addr add 10.77.0.2/24 dev lfe1 && ip link set lfe0 up && ip link set lfe1 up"
)

pytestmark = [
    pytest.mark.skipif(janus_binary() is None, reason="janus not installed (apt-get install janus)"),
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("ip") is None,
        reason="needs root, unshare and ip to make a private network namespace",
    ),
]


def test_egress_reaches_janus_with_video_and_audio_and_deletes_at_the_end() -> None:
    probe = f"{NAMESPACE} && exec {sys.executable} -m tests.harness.egress_janus_probe 90"
    done = subprocess.run(
        ["unshare", "-n", "sh", "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=180
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, (done.returncode, done.stdout[-2000:], done.stderr[-3000:])
    result = json.loads(lines[-1])
    assert result["ok"], result
    # Janus's admin API: the publisher handle received VP8 and Opus, over the namespace's veth address
    assert result["janus_reached"], result["janus_media"]
    media = result["janus_media"]
    assert media["video"]["codec"] == "vp8" and media["video"]["packets"] >= 150
    assert media["audio"]["codec"] == "opus" and media["audio"]["packets"] >= 100
    assert "10.77.0." in result["janus_pair"]
    # the gateway encoded once: the egress is one more subscriber of the session's VP8 encoder
    session = result["session"]
    assert list(session["send_bitrate"]) == ["VP8"] and session["audio"]["audio_viewers"] == 1
    assert result["egress"]["state"] == "live" and result["egress"]["attempts"] == 2
    # RFC 9725 client: bearer token everywhere, retry after the 503, DELETE of the Location at the end
    methods = [method for method, _, _ in result["front_requests"]]
    assert methods.count("POST") == 2 and methods[-1] == "DELETE", methods
    assert all(auth == "Bearer janus-front-secret" for _, _, auth in result["front_requests"])
    assert result["janus_deleted"] and result["janus_sessions_after"] == []
    # one event per state change, in order
    states = [event["state"] for event in result["events"]]
    assert states == ["connecting", "retrying", "connecting", "live", "stopped"], states
