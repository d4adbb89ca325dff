"""Live control: PATCH /sessions/{id} changes a running session's source face, processors, kept regions and
face selector without reconnecting. The first frame the publisher sends after the PATCH is answered is
processed with the new values (each frame's stamp tells which frame the pipeline worked on); a bad value is a
one-line 4xx and changes nothing; only the session's owner or an admin may change it (or its egress)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import aiohttp
import cv2
import numpy as np

from engines.frames import FaceSettings, FrameItem, FrameOutput
from gateway.auth import AuthConfig
from gateway.tenants import Tenant
from loadgen.stamp import read_stamp
from tests.harness.fakes import FakePipeline, RecordingMonitor
from tests.harness.gateway import gw_config, running_gateway
from tests.harness.peers import publish
from tests.harness.waiting import wait_for

PNG = {"Content-Type": "image/png"}


@dataclass(frozen=True)
class Seen:
    frame_id: int | None
    source: str | None
    settings: FaceSettings | None


class SourcePipeline(FakePipeline):
    """Records, per processed frame, its stamp and the source and face settings it was processed with."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[Seen] = []

    def process(self, items: list[FrameItem]) -> list[FrameOutput]:
        for item in items:
            gray = cv2.cvtColor(item.image, cv2.COLOR_RGB2GRAY)
            self.seen.append(
                Seen(
                    read_stamp(gray),
                    item.source.id if item.source is not None else None,
                    item.track.settings if item.track is not None else None,
                )
            )
        return super().process(items)


def _face(seen: Seen) -> tuple[tuple[str, ...], str] | None:
    settings = seen.settings
    return None if settings is None else (settings.keep_regions, settings.selector)


async def _upload(http: aiohttp.ClientSession, base: str, image: np.ndarray) -> str:
    _, png = cv2.imencode(".png", cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
    async with http.post(base + "/sources", data=png.tobytes(), headers=PNG) as r:
        assert r.status == 201, await r.text()
        return str((await r.json())["id"])


async def test_patch_changes_the_face_within_one_frame_and_bad_values_change_nothing(
    astronaut: np.ndarray,
) -> None:
    pipeline = SourcePipeline()
    async with (
        running_gateway(gw_config(), pipeline=pipeline, monitor=RecordingMonitor()) as gw,
        aiohttp.ClientSession() as http,
    ):
        first = await _upload(http, gw.url, astronaut)
        second = await _upload(http, gw.url, astronaut[:, ::-1].copy())
        frames = [cv2.resize(astronaut, (160, 120))]
        pub = await publish(http, gw.url, frames, query=f"?source={first}")
        assert pub.sender_track is not None
        session_id = pub.location.rsplit("/", 1)[-1]
        url = f"{gw.url}/sessions/{session_id}"
        try:
            assert await wait_for(lambda: sum(s.source == first for s in pipeline.seen) >= 5, 20)
            change = {"source": second, "mask": ["mouth"], "faces": "one"}
            async with http.patch(url, json=change) as r:
                assert r.status == 200, await r.text()
                state = await r.json()
                sent_before = max(pub.sender_track.sent)  # every later frame left after the answer
            assert state == {
                "source": second,
                "processors": ["face_swapper"],
                "mask": ["mouth"],
                "faces": "one",
                "reference": None,
                "shape": 1.0,
                "label": None,
            }

            def after() -> list[Seen]:
                return [s for s in pipeline.seen if s.frame_id is not None and s.frame_id > sent_before]

            assert await wait_for(lambda: len(after()) >= 5, 20)
            later = after()
            # the first frame sent after the change, and every one after it, carries the new face and settings
            assert later[0].frame_id in (sent_before + 1, sent_before + 2), [s.frame_id for s in later]
            assert all(s.source == second for s in later), later
            assert all(_face(s) == (("mouth",), "one") for s in later), later

            # bad values: a one-line 4xx each, and nothing changes
            for body, status, words in (
                ({"processors": ["face_melter"]}, 400, "face_melter"),
                ({"source": "nope"}, 404, "nope"),
                ({"source": second, "mask": ["nose"]}, 400, "nose"),
                ({"faces": "all"}, 400, "faces"),
                ({"faces": "reference", "reference": first}, 422, "ArcFace"),
                ({"reference": first}, 400, "faces=reference"),
                ({"colour": "blue"}, 400, "unknown key"),
                ({}, 400, "nothing to change"),
            ):
                async with http.patch(url, json=body) as r:
                    text = (await r.text()).strip()
                    assert r.status == status and words in text and "\n" not in text, (body, r.status, text)
            async with http.patch(url, data=b"[1, 2]", headers={"Content-Type": "application/json"}) as r:
                assert r.status == 400
            async with http.patch(f"{gw.url}/sessions/unknown", json={"source": first}) as r:
                assert r.status == 404
            async with http.get(url) as r:
                summary = await r.json()
            assert summary["source"] == second and summary["processors"] == ["face_swapper"]
            checked = len(pipeline.seen)
            assert await wait_for(lambda: len(pipeline.seen) >= checked + 3, 20)
            assert all(s.source == second and s.settings is not None for s in pipeline.seen[checked:])
            assert _face(pipeline.seen[-1]) == (("mouth",), "one")

            # processors none: frames pass through, the pipeline sees no more of them
            async with http.patch(url, json={"processors": "none"}) as r:
                assert r.status == 200 and (await r.json())["processors"] == []
                sent_before = max(pub.sender_track.sent)
            received = len(pub.received.ids)
            assert await wait_for(lambda: len(pub.received.ids) >= received + 10, 20)
            assert after() == [], after()  # no frame sent after that answer reached the pipeline
        finally:
            await pub.close()


async def test_only_the_owner_or_an_admin_controls_a_session_and_its_egress(astronaut: np.ndarray) -> None:
    owner, other = Tenant("acme", "acme-token-0123456789"), Tenant("beta", "beta-token-0123456789")
    admin = Tenant("ops", "ops-token-0123456789", admin=True)
    config = replace(gw_config(), auth=AuthConfig(tenants=(owner, other, admin)))
    async with (
        running_gateway(config, pipeline=SourcePipeline(), monitor=RecordingMonitor()) as gw,
        aiohttp.ClientSession() as http,
    ):

        def bearer(tenant: Tenant) -> dict[str, str]:
            return {"Authorization": f"Bearer {tenant.token}"}

        frames = [cv2.resize(astronaut, (160, 120))]
        pub = await publish(http, gw.url, frames, query="?processors=none", headers=bearer(owner))
        session_id = pub.location.rsplit("/", 1)[-1]
        try:
            url = f"{gw.url}/sessions/{session_id}"
            change = {"faces": "one"}
            async with http.patch(url, json=change) as r:
                assert r.status == 401
            # another tenant's session is as unknown as a missing one, for control and egress alike
            async with http.patch(url, json=change, headers=bearer(other)) as r:
                assert r.status == 404
            async with http.post(url + "/egress", json={}, headers=bearer(other)) as r:
                assert r.status == 404
            async with http.patch(url, json=change, headers=bearer(owner)) as r:
                assert r.status == 200 and (await r.json())["faces"] == "one"
            async with http.patch(url, json={"faces": "many"}, headers=bearer(admin)) as r:
                assert r.status == 200 and (await r.json())["faces"] == "many"
        finally:
            await pub.close()
