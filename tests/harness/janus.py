"""A real SFU for egress tests: Debian's Janus with its VideoRoom plugin, and a minimal WHIP front for it.

Janus's own HTTP API is not WHIP; the front (an aiohttp app) speaks RFC 9725 to the gateway and Janus's API
to Janus, as `simple-whip-server` does (that Debian package conflicts with the Node.js installed here):
POST /whip/{room} -> create a Janus session, attach the VideoRoom, `joinandconfigure` as a publisher with
the offer, long-poll for the answer -> 201 + Location; DELETE the Location -> destroy the Janus session.
It checks the bearer token and records every request, so a test can assert what the client did.

Janus gathers no loopback candidates: it must run where an interface other than `lo` has an address (the
egress test gives its network namespace a veth pair; traffic never leaves that namespace).
"""

from __future__ import annotations

import asyncio
import secrets
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from loadgen.processes import stop_process

ADMIN_SECRET = "livefuse-test-admin"
KEEP_PLUGINS = ("libjanus_videoroom.so",)
KEEP_TRANSPORTS = ("libjanus_http.so",)


def janus_binary() -> str | None:
    return shutil.which("janus")


def _libs(folder: str, keep: tuple[str, ...]) -> str:
    """Every plugin/transport Janus would load from `folder` but `keep`, for its `disable` list."""
    names = sorted(p.name for p in Path(folder).glob("*.so")) if Path(folder).is_dir() else []
    return ",".join(n for n in names if n not in keep)


def _lib_folder(kind: str) -> str:
    for base in ("/usr/lib/x86_64-linux-gnu/janus", "/usr/lib/aarch64-linux-gnu/janus", "/usr/lib/janus"):
        if Path(base, kind).is_dir():
            return str(Path(base, kind))
    return ""


class JanusServer:
    """Janus on `api_port` (API) and `admin_port` (admin API), room 1234 = VP8 + Opus publishers."""

    def __init__(self, api_port: int = 18088, admin_port: int = 17088, address: str = "127.0.0.1") -> None:
        self.api = f"http://{address}:{api_port}/janus"
        self.admin = f"http://{address}:{admin_port}/admin"
        self._ports = (api_port, admin_port)
        self._dir = Path(tempfile.mkdtemp(prefix="livefuse-janus-"))
        self.log_path = self._dir / "janus.log"
        self._proc: subprocess.Popen[bytes] | None = None

    def _write_config(self) -> None:
        plugins, transports = _lib_folder("plugins"), _lib_folder("transports")
        api_port, admin_port = self._ports
        (self._dir / "janus.jcfg").write_text(
            f"""general: {{
    configs_folder = "{self._dir}"
    plugins_folder = "{plugins}"
    transports_folder = "{transports}"
    debug_level = 4
    admin_secret = "{ADMIN_SECRET}"
    session_timeout = 0
}}
media: {{
    rtp_port_range = "40000-40200"
}}
nat: {{
    ice_ignore_list = "vmnet"
}}
plugins: {{
    disable = "{_libs(plugins, KEEP_PLUGINS)}"
}}
transports: {{
    disable = "{_libs(transports, KEEP_TRANSPORTS)}"
}}
events: {{
    broadcast = false
}}
loggers: {{
    disable = "libjanus_jsonlog.so"
}}
"""
        )
        (self._dir / "janus.transport.http.jcfg").write_text(
            f"""general: {{
    json = "indented"
    base_path = "/janus"
    http = true
    port = {api_port}
    ip = "127.0.0.1"
    https = false
}}
admin: {{
    admin_base_path = "/admin"
    admin_http = true
    admin_port = {admin_port}
    admin_ip = "127.0.0.1"
    admin_https = false
}}
"""
        )
        (self._dir / "janus.plugin.videoroom.jcfg").write_text(
            """general: {
}
room-1234: {
    description = "livefuse egress test"
    publishers = 4
    bitrate = 2000000
    videocodec = "vp8"
    audiocodec = "opus"
    record = false
}
"""
        )

    async def start(self, timeout_s: float = 30.0) -> None:
        binary = janus_binary()
        if binary is None:
            raise RuntimeError("janus is not installed (apt-get install janus)")
        self._write_config()
        log = open(self.log_path, "wb")  # noqa: SIM115  (Janus writes to it until stop)
        self._proc = subprocess.Popen(
            [binary, "-F", str(self._dir), "-C", str(self._dir / "janus.jcfg")], stdout=log, stderr=log
        )
        deadline = time.monotonic() + timeout_s
        async with aiohttp.ClientSession() as http:
            while time.monotonic() < deadline:
                if self._proc.poll() is not None:
                    raise RuntimeError(f"janus exited ({self._proc.returncode}): {self.log_tail()}")
                try:
                    async with http.get(self.api + "/info") as response:
                        if response.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.2)
        raise RuntimeError(f"janus did not answer within {timeout_s:g}s: {self.log_tail()}")

    def log_tail(self, n: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            stop_process(proc)
        shutil.rmtree(self._dir, ignore_errors=True)

    async def handle_info(
        self, http: aiohttp.ClientSession, session_id: int, handle_id: int
    ) -> dict[str, Any]:
        """Janus's admin view of one handle (its WebRTC state and per-medium packet counters)."""
        body = {"janus": "handle_info", "transaction": secrets.token_hex(6), "admin_secret": ADMIN_SECRET}
        async with http.post(f"{self.admin}/{session_id}/{handle_id}", json=body) as response:
            return dict(await response.json(content_type=None))

    async def list_sessions(self, http: aiohttp.ClientSession) -> list[int]:
        body = {"janus": "list_sessions", "transaction": secrets.token_hex(6), "admin_secret": ADMIN_SECRET}
        async with http.post(self.admin, json=body) as response:
            return list((await response.json(content_type=None)).get("sessions", []))


def media_in(info: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """What Janus received on a handle, by medium ("audio", "video"): codec, packets, bytes (`handle_info`
    of Janus 1.x: info.webrtc.media.<index>.stats.in)."""
    media = info.get("info", {}).get("webrtc", {}).get("media", {})
    out: dict[str, dict[str, Any]] = {}
    for medium in media.values() if isinstance(media, dict) else []:
        stats = medium.get("stats", {}).get("in", {})
        out[str(medium.get("type"))] = {
            "codec": medium.get("codecs", {}).get("codec"),
            "packets": int(stats.get("packets", 0)),
            "bytes": int(stats.get("bytes", 0)),
        }
    return out


def selected_pair(info: dict[str, Any]) -> str | None:
    return info.get("info", {}).get("webrtc", {}).get("ice", {}).get("selected-pair")


@dataclass
class Publisher:
    """One WHIP publisher the front put into Janus."""

    session_id: int
    handle_id: int
    deleted: bool = False


@dataclass
class WhipFront:
    """The WHIP front's record: requests by method, the publishers it made, tokens it refused."""

    janus: JanusServer
    token: str
    fail_first: int = 0  # answer the first N POSTs 503 (the client must retry)
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)  # method, path, Authorization
    publishers: dict[str, Publisher] = field(default_factory=dict)
    refused: int = 0

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/whip/{room}", self._post)
        app.router.add_route("OPTIONS", "/whip/{room}", self._options)
        app.router.add_delete("/whip/resource/{key}", self._delete)
        return app

    def _authorized(self, request: web.Request) -> bool:
        self.requests.append((request.method, request.path, request.headers.get("Authorization")))
        return request.headers.get("Authorization") == f"Bearer {self.token}"

    async def _options(self, request: web.Request) -> web.Response:
        self.requests.append((request.method, request.path, request.headers.get("Authorization")))
        return web.Response(status=204, headers={"Accept-Post": "application/sdp"})

    async def _janus(self, http: aiohttp.ClientSession, path: str, body: dict[str, Any]) -> dict[str, Any]:
        body = {**body, "transaction": secrets.token_hex(6)}
        async with http.post(self.janus.api + path, json=body) as response:
            return dict(await response.json(content_type=None))

    async def _post(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            self.refused += 1
            return web.Response(status=401, text="bad token")
        if self.fail_first > 0:
            self.fail_first -= 1
            return web.Response(status=503, text="warming up", headers={"Retry-After": "1"})
        offer = await request.text()
        room = int(request.match_info["room"])
        async with aiohttp.ClientSession() as http:
            session_id = (await self._janus(http, "", {"janus": "create"}))["data"]["id"]
            attached = await self._janus(
                http, f"/{session_id}", {"janus": "attach", "plugin": "janus.plugin.videoroom"}
            )
            handle_id = attached["data"]["id"]
            message = {
                "janus": "message",
                "body": {
                    "request": "joinandconfigure",
                    "room": room,
                    "ptype": "publisher",
                    "display": "livefuse",
                },
                "jsep": {"type": "offer", "sdp": offer},
            }
            await self._janus(http, f"/{session_id}/{handle_id}", message)
            answer = await self._answer(http, session_id)
        if answer is None:
            return web.Response(status=502, text="janus gave no answer")
        key = secrets.token_hex(8)
        self.publishers[key] = Publisher(session_id, handle_id)
        return web.Response(
            status=201,
            text=answer,
            content_type="application/sdp",
            headers={"Location": f"/whip/resource/{key}", "ETag": f'"{key}"'},
        )

    async def _answer(
        self, http: aiohttp.ClientSession, session_id: int, timeout_s: float = 15.0
    ) -> str | None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            async with http.get(f"{self.janus.api}/{session_id}?maxev=1") as response:
                event = await response.json(content_type=None)
            for item in event if isinstance(event, list) else [event]:
                jsep = item.get("jsep") if isinstance(item, dict) else None
                if jsep and jsep.get("type") == "answer":
                    return str(jsep["sdp"])
        return None

    async def _delete(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return web.Response(status=401, text="bad token")
        publisher = self.publishers.get(request.match_info["key"])
        if publisher is None:
            return web.Response(status=404, text="no such resource")
        async with aiohttp.ClientSession() as http:
            await self._janus(http, f"/{publisher.session_id}", {"janus": "destroy"})
        publisher.deleted = True
        return web.Response(status=200)
