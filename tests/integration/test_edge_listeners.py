"""The gateway's listeners as real processes: the monitoring routes on --metrics-port (with and without the
front process), and --allow-anonymous letting a gateway without a token listen on every address."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from loadgen.embedded import free_port
from loadgen.processes import stop_process
from tests.harness.waiting import http_status, until

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "edge-test-token"
STUDIO = "https://studio.example"


def _start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "gateway.cli", "--ice-loopback-only", "--processors", "none",
            "--log-level", "INFO", "--event-log", "none", *args]  # fmt: skip
    with open(log, "wb") as out:
        return subprocess.Popen(
            argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )


@pytest.mark.parametrize("front", [True, False], ids=["front-process", "no-front-process"])
async def test_metrics_port_serves_the_monitoring_routes_and_the_public_port_does_not(
    model_store: object, tmp_path: Path, front: bool
) -> None:
    port, metrics = free_port(), free_port()
    args = ["--host", "127.0.0.1", "--port", str(port), f"--token={TOKEN}", "--metrics-port", str(metrics),
            "--metrics-routes", "metrics,api", "--cors-origin", STUDIO]  # fmt: skip
    proc = _start(args + ([] if front else ["--no-front-process"]), tmp_path / "gateway.log")
    public, private = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{metrics}"
    try:
        async with aiohttp.ClientSession() as http:

            async def up() -> bool:
                return await http_status(http, public + "/readyz") == 200

            assert await until(up, 60), (tmp_path / "gateway.log").read_text()[-2000:]
            async with http.get(private + "/metrics") as r:
                assert r.status == 200 and "livefuse_sessions_open" in await r.text()
            assert await http_status(http, private + "/api/stats") == 200
            assert await http_status(http, private + "/readyz") == 200
            assert await http_status(http, public + "/metrics") == 404
            assert await http_status(http, public + "/api/stats") == 404
            assert await http_status(http, public + "/dashboard") == 200  # not moved: metrics,api only
            assert await http_status(http, private + "/dashboard") == 404
            async with http.post(private + "/whip", data="v=0", headers={"Content-Type": "application/sdp",
                                 "Authorization": f"Bearer {TOKEN}"}) as r:  # fmt: skip
                assert r.status == 404  # nothing but monitoring there
            # CORS for the named origin only, on forwarded answers and on the front's own refusals alike
            async with http.options(public + "/whip", headers={"Origin": STUDIO}) as r:
                assert r.status == 204 and r.headers["Access-Control-Allow-Origin"] == STUDIO
                assert "Livefuse-Egress-Token" in r.headers["Access-Control-Allow-Headers"]
            async with http.post(public + "/whip", data="v=0", headers={"Origin": STUDIO}) as r:
                assert r.status == 401 and r.headers["Access-Control-Allow-Origin"] == STUDIO
            async with http.options(public + "/whip", headers={"Origin": "https://elsewhere.example"}) as r:
                assert r.status == 204 and "Access-Control-Allow-Origin" not in r.headers
    finally:
        stop_process(proc, 20)
    assert f"metrics, api on http://127.0.0.1:{metrics}" in (tmp_path / "gateway.log").read_text()


async def test_allow_anonymous_starts_on_every_address_and_without_it_nothing_listens(
    model_store: object, tmp_path: Path
) -> None:
    port = free_port()
    refused = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "--host", "0.0.0.0", "--port", str(port),
         "--event-log", "none"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "refusing to listen on 0.0.0.0 without a token" in refused.stderr
    # only this test's own client, on 127.0.0.1, talks to it while it listens on every address
    proc = _start(["--host", "0.0.0.0", "--port", str(port), "--allow-anonymous"], tmp_path / "gateway.log")
    try:
        async with aiohttp.ClientSession() as http:

            async def up() -> bool:
                return await http_status(http, f"http://127.0.0.1:{port}/healthz") == 200

            assert await until(up, 60), (tmp_path / "gateway.log").read_text()[-2000:]
    finally:
        proc.send_signal(signal.SIGTERM)  # as soon as it answers: the handler is in place by then
        assert proc.wait(20) == 0
    assert "listening on http://0.0.0.0:" in (tmp_path / "gateway.log").read_text()


@pytest.mark.parametrize("front", [True, False], ids=["front-process", "no-front-process"])
async def test_without_a_token_only_loopback_host_names_are_answered(
    model_store: object, tmp_path: Path, front: bool
) -> None:
    """DNS rebinding: a page at attacker.example re-resolved to 127.0.0.1 sends `Host: attacker.example`; a
    gateway without a token (every caller an admin) answers loopback names and --allowed-hosts only. Both
    listeners; the front process and the media process alike."""
    port, metrics = free_port(), free_port()
    args = ["--host", "127.0.0.1", "--port", str(port), "--metrics-port", str(metrics),
            "--allowed-hosts", "gw.lan"]  # fmt: skip
    proc = _start(args + ([] if front else ["--no-front-process"]), tmp_path / "gateway.log")
    public, private = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{metrics}"
    try:
        async with aiohttp.ClientSession() as http:

            async def up() -> bool:
                return await http_status(http, public + "/readyz") == 200

            assert await until(up, 60), (tmp_path / "gateway.log").read_text()[-2000:]
            for base, path in ((public, "/api/stats"), (public, "/sessions"), (private, "/metrics")):
                for host in ("attacker.example", f"attacker.example:{port}", "localhost.attacker.example",
                             "127.0.0.1.nip.io", "gw.lan.attacker.example"):  # fmt: skip
                    async with http.get(base + path, headers={"Host": host}) as r:
                        text = await r.text()
                        assert r.status == 403 and "--allowed-hosts" in text and text.count("\n") == 1, text
                for host in ("localhost", f"localhost:{port}", "127.0.0.1", f"[::1]:{port}", "gw.lan:80"):
                    async with http.get(base + path, headers={"Host": host}) as r:
                        assert r.status == 200, (host, await r.text())
            sdp = {"Content-Type": "application/sdp", "Host": "attacker.example"}
            async with http.post(public + "/whip", data="v=0\r\n", headers=sdp) as r:
                assert r.status == 403
    finally:
        stop_process(proc, 20)
