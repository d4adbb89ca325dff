"""WHIP egress on loopback, into an aiortc WHIP endpoint (tests.harness.whip_endpoint): the processed
stream arrives there while the publisher keeps getting it back from the one encoder; the HTTP API starts,
shows and stops a push and refuses bad requests in one line; an endpoint that refuses fails the push at
once, one that has gone away is retried with backoff and given up, and the session never stalls for it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import aiohttp
import cv2
import numpy as np

from gateway.egress.config import EgressConfig
from gateway.egress.policy import RetryConfig
from tests.harness.fakes import FakePipeline, RecordingMonitor
from tests.harness.gateway import gw_config, running_gateway
from tests.harness.peers import publish, source_query
from tests.harness.waiting import wait_for
from tests.harness.whip_endpoint import WhipEndpoint, running_endpoint

LOOPBACK_EGRESS = ("127.0.0.1",)


def _states(monitor: RecordingMonitor, session_id: str) -> list[str]:
    return [d["state"] for kind, _, d in monitor.events if kind == "egress" and d["session_id"] == session_id]


async def _json(response: aiohttp.ClientResponse) -> Any:
    return await response.json(content_type=None)


async def test_egress_api_pushes_the_processed_stream_and_stops(astronaut: np.ndarray) -> None:
    endpoint = WhipEndpoint()
    monitor = RecordingMonitor()
    async with running_endpoint(endpoint) as downstream, aiohttp.ClientSession() as http:
        config = replace(
            gw_config(),
            egress=EgressConfig(allowed_prefixes=(downstream + "/",), host_addresses=LOOPBACK_EGRESS),
        )
        async with running_gateway(config, pipeline=FakePipeline(), monitor=monitor) as gw:
            frames = [cv2.resize(astronaut, (160, 120))]
            pub = await publish(http, gw.url, frames, query=await source_query(http, gw.url, astronaut))
            session_id = pub.location.rsplit("/", 1)[-1]
            egress = f"{gw.url}/sessions/{session_id}/egress"
            try:
                body = {"url": f"{downstream}/ingest/main", "token": endpoint.token}
                async with http.post(egress, json=body) as r:
                    assert r.status == 201, await r.text()
                    assert r.headers["Location"] == f"/sessions/{session_id}/egress"
                assert await wait_for(
                    lambda: any(len(p.video_ids) >= 20 for p in endpoint.resources.values()), 30
                )
                (pushed,) = endpoint.resources.values()
                # processed frames (FakePipeline paints the top-left corner magenta), in order
                corner = pushed.last_video[:20, :30].reshape(-1, 3).mean(axis=0)  # type: ignore[index]
                assert corner[0] > 180 and corner[1] < 80 and corner[2] > 180, corner
                assert pushed.video_ids == sorted(pushed.video_ids)
                (said,) = endpoint.disclosures  # the egress POST says the stream is synthetic
                assert said is not None and "trainedAlgorithmicMedia" in said and "mark=on" in said
                async with http.get(egress) as r:
                    state = await _json(r)
                assert state["state"] == "live" and state["attempts"] == 1 and state["packets_sent"] > 0
                async with http.get(f"{gw.url}/sessions/{session_id}") as r:
                    session = await _json(r)
                assert list(session["send_bitrate"]) == ["VP8"]  # one encoder: publisher and egress
                sent_back = len(pub.received.ids)
                assert await wait_for(lambda: len(pub.received.ids) > sent_back + 10, 20)

                # bad requests: one line each, nothing changed
                for payload, status, words in (
                    (body, 409, "already pushes"),
                    ({"url": "http://elsewhere.example/whip"}, 403, "not allowed"),
                    ({"url": "ftp://x"}, 400, "absolute"),
                    ({"url": body["url"], "tokn": "x"}, 400, "unknown"),
                    ({}, 422, "no url"),
                ):
                    async with http.post(egress, json=payload) as r:
                        text = (await r.text()).strip()
                        assert r.status == status and words in text and "\n" not in text, (payload, text)
                json_type = {"Content-Type": "application/json"}
                async with http.post(egress, data=b"{not json", headers=json_type) as r:
                    assert r.status == 400
                async with http.post(egress, data=b"{not json") as r:
                    assert r.status == 415  # not sent as JSON
                async with http.get(f"{gw.url}/sessions/nope/egress") as r:
                    assert r.status == 404

                async with http.delete(egress) as r:
                    assert r.status == 200 and (await _json(r))["state"] == "stopped"
                assert await wait_for(lambda: pushed.deleted, 10)
                methods = [m for m, _, _ in endpoint.requests]
                assert methods == ["OPTIONS", "POST", "DELETE"], methods
                assert all(auth == f"Bearer {endpoint.token}" for _, _, auth in endpoint.requests)

                # an endpoint that refuses (401) fails the push at once: no retry
                endpoint.mode = "refuse"
                async with http.post(egress, json=body) as r:
                    assert r.status == 201
                assert await wait_for(lambda: _states(monitor, session_id)[-1:] == ["failed"], 10)
                async with http.get(egress) as r:
                    state = await _json(r)
                assert state["state"] == "failed" and "401" in state["reason"] and state["attempts"] == 1
                expected = ["connecting", "live", "stopped", "connecting", "failed"]
                assert _states(monitor, session_id) == expected
            finally:
                await pub.close()


async def test_a_gone_endpoint_is_retried_then_given_up_and_the_session_never_stalls(
    astronaut: np.ndarray,
) -> None:
    endpoint = WhipEndpoint(mode="silent")
    monitor = RecordingMonitor()
    async with running_endpoint(endpoint) as downstream, aiohttp.ClientSession() as http:
        config = replace(
            gw_config(),
            egress=EgressConfig(
                default_url=f"{downstream}/ingest/{{session}}",
                default_token=endpoint.token,
                host_addresses=LOOPBACK_EGRESS,
                connect_timeout_s=1.0,
                retry=RetryConfig(first_delay_s=0.2, max_delay_s=0.4, max_attempts=3),
            ),
        )
        async with running_gateway(config, pipeline=FakePipeline(), monitor=monitor) as gw:
            frames = [cv2.resize(astronaut, (160, 120))]
            pub = await publish(http, gw.url, frames, query=await source_query(http, gw.url, astronaut))
            session_id = pub.location.rsplit("/", 1)[-1]
            try:
                assert await wait_for(lambda: _states(monitor, session_id)[-1:] == ["failed"], 30)
                assert _states(monitor, session_id) == [
                    "connecting",
                    "retrying",
                    "connecting",
                    "retrying",
                    "connecting",
                    "failed",
                ]
                # the gateway-wide default, with the session's id filled in; each attempt's resource DELETEd
                posts = [path for method, path, _ in endpoint.requests if method == "POST"]
                assert posts == [f"/ingest/{session_id}"] * 3
                assert await wait_for(lambda: all(p.deleted for p in endpoint.resources.values()), 10)
                # meanwhile the publisher got its processed stream back: every frame the gateway took in went
                # out, but for the odd stale frame a busy machine makes the live-video policy drop (a session
                # stalled by the retries would show as a run of stale drops)
                async with http.get(f"{gw.url}/sessions/{session_id}") as r:
                    session = await _json(r)
                stale = session["drops"].get("stale", 0)
                assert session["frames_in"] >= 30 and set(session["drops"]) <= {"stale"}, session
                assert stale <= 0.1 * session["frames_in"], session
                assert session["frames_out"] + stale >= session["frames_in"] - 2, session
                assert len(pub.received.ids) >= session["frames_out"] * 0.8, session
            finally:
                await pub.close()


async def test_an_h264_session_pushes_h264_from_its_one_encoder(astronaut: np.ndarray) -> None:
    endpoint = WhipEndpoint()
    async with running_endpoint(endpoint) as downstream, aiohttp.ClientSession() as http:
        config = replace(
            gw_config(),
            # "*" takes public destinations only: the loopback endpoint is named, at the path that holds both
            # its ingest URLs and its resources (a Location must stay below the entry)
            egress=EgressConfig(allowed_prefixes=(downstream + "/",), host_addresses=LOOPBACK_EGRESS),
        )
        async with running_gateway(config, pipeline=FakePipeline(), monitor=RecordingMonitor()) as gw:
            frames = [cv2.resize(astronaut, (160, 120))]
            pub = await publish(
                http,
                gw.url,
                frames,
                query=f"?processors=none&egress={downstream}/ingest/h264",
                headers={"Livefuse-Egress-Token": endpoint.token},
                codec="H264",
            )
            session_id = pub.location.rsplit("/", 1)[-1]
            try:
                assert await wait_for(
                    lambda: any(len(p.video_ids) >= 15 for p in endpoint.resources.values()), 30
                )
                (pushed,) = endpoint.resources.values()
                offer = pushed.pc.remoteDescription.sdp  # the push offered H.264 only, and was decoded as it
                assert "H264/90000" in offer and "VP8/90000" not in offer
                async with http.get(f"{gw.url}/sessions/{session_id}") as r:
                    session = await _json(r)
                assert list(session["send_bitrate"]) == ["H264"]  # the publisher's codec, encoded once
                assert endpoint.requests[1][2] == f"Bearer {endpoint.token}"  # the header's token
            finally:
                await pub.close()
            assert await wait_for(lambda: pushed.deleted, 10)  # the session ended: its resource DELETEd
