"""The publisher/viewer interop matrix: real third-party WebRTC stacks against a real gateway.

    python -m bench.interop --runs 50 --busy           # every case 50 times, one core held busy
    python -m bench.interop --preset suite --output F   # what the test suite runs (one matrix)

The gateway (`python -m gateway.cli`, the bundled swap) and every client run in a private network namespace
(`unshare -n`, needs root; veth 10.77.0.1/24, no route out): libdatachannel (libjuice) and Janus-style stacks
gather no loopback candidates, and media must never leave the machine. A publisher passes when it connected
and the gateway's stats show processed frames leaving its session (with audio: Opus at an aiortc WHEP
viewer); a viewer when its RTP decodes and Opus arrived. The full preset adds Chromium publishing
(bench.interop_browser). Prints connected and passed per case, each case's way on air, and writes JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import aiohttp

from bench.interop_browser import run_chromium, write_face_y4m
from bench.interop_cases import Case, RunOutcome, preset, summarize
from bench.interop_clients import (
    GST_PACKAGES,
    ROOT,
    ClientRun,
    ViewerRun,
    aiortc_publisher,
    aiortc_viewer,
    decode_viewer_frames,
    face_frames,
    gstreamer_missing,
    node_client_missing,
    run_datachannel,
    run_ffmpeg,
    run_gstreamer,
    write_clip,
)
from bench.interop_timeline import ON_AIR_MARK, format_table, run_marks

ADDRESS = "10.77.0.1"  # the gateway's end of the veth pair
PEER_ADDRESS = "10.77.0.2"  # the other end, for a client that gathers on one address
PORT = 18180
TOKEN = "interop-admin-token"
NAMESPACE = (
    "ip link set lo up && ip link add lfi0 type veth peer name lfi1 && ip addr add 10.77.0.1/24 dev lfi0 "
    "&& ip addr add 10.77.0.2/24 dev lfi1 && ip link set lfi0 up && ip link set lfi1 up"
)
INSIDE = "INTEROP_NETWORK_NAMESPACE"  # set by the re-run inside the namespace


# -- the gateway -------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def gateway_process(workdir: Path, source: Path) -> AsyncIterator[str]:
    """`python -m gateway.cli` on ADDRESS:PORT with the bundled swap and `source` as the default face. The
    matrix counts connections, not capacity: with `--no-degradation` a busy core never turns a publisher
    away with 503 (the overload governor's last step)."""
    token_file = workdir / "token"
    token_file.write_text(TOKEN)
    log = (workdir / "gateway.log").open("wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gateway.cli",
            "--host",
            ADDRESS,
            "--port",
            str(PORT),
            "--token-file",
            str(token_file),
            "--default-source",
            str(source),
            "--no-front-process",
            "--no-degradation",
        ],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://{ADDRESS}:{PORT}"
    try:
        deadline = time.monotonic() + 120
        async with aiohttp.ClientSession() as http:
            while True:
                with contextlib.suppress(aiohttp.ClientError, OSError):
                    async with http.get(url + "/readyz") as resp:
                        if resp.status == 200:
                            break
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the gateway did not get ready (see {workdir / 'gateway.log'})")
                await asyncio.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


async def session_entries(http: aiohttp.ClientSession, url: str) -> dict[str, dict[str, Any]]:
    async with http.get(url + "/api/stats", headers={"Authorization": f"Bearer {TOKEN}"}) as resp:
        data = await resp.json()
    return {e["session_id"]: e for e in data.get("sessions", {}).get("list", [])}


def gateway_timeline(entry: dict[str, Any]) -> dict[str, Any]:
    """The session's way on air as the gateway's stats show it (gateway.session.timeline)."""
    found = entry.get("info", {}).get("timeline_ms")
    return found if isinstance(found, dict) else {}


async def on_air(http: aiohttp.ClientSession, url: str, session_id: str, timeout_s: float) -> bool:
    """Wait (up to `timeout_s`) for the session's first processed frame to go out; whether it did."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        entry = (await session_entries(http, url)).get(session_id, {})
        if ON_AIR_MARK in gateway_timeline(entry):
            return True
        if entry and not entry.get("open", True):
            break
        await asyncio.sleep(0.05)
    return False


async def new_session(http: aiohttp.ClientSession, url: str, known: set[str], timeout_s: float) -> str | None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        entries = await session_entries(http, url)
        fresh = [sid for sid, e in entries.items() if sid not in known and e["open"]]
        if fresh:
            return fresh[0]
        await asyncio.sleep(0.2)
    return None


# -- one run of a case -------------------------------------------------------------------------------


async def publish_run(case: Case, url: str, image: Path, clip: Path, camera: Path) -> RunOutcome:
    launch: Callable[[], Awaitable[ClientRun]]
    if case.client == "chromium":
        launch = lambda: run_chromium(url, TOKEN, camera, case.seconds)  # noqa: E731
    elif case.client == "ffmpeg":
        launch = lambda: run_ffmpeg(url + "/whip", TOKEN, image, case.seconds + 1.0, case.audio)  # noqa: E731
    elif case.client == "libdatachannel":
        spec = {
            "mode": "publish",
            "url": url + "/whip",
            "token": TOKEN,
            "media": str(clip),
            "audio": case.audio,
            "seconds": case.seconds + 1.0,
            "logLevel": case.client_log,
        }
        launch = lambda: run_datachannel(spec, timeout_s=case.seconds + 25)  # noqa: E731
    elif case.client == "gstreamer":
        launch = lambda: run_gstreamer(url + "/whip", TOKEN, PEER_ADDRESS, case.seconds)  # noqa: E731
    else:
        launch = lambda: aiortc_publisher(url, TOKEN, image, case.seconds + 1.0, case.audio)  # noqa: E731
    async with aiohttp.ClientSession() as http:
        known = set(await session_entries(http, url))
        client = asyncio.ensure_future(launch())
        session_id = await new_session(http, url, known, timeout_s=20)
        viewer = ViewerRun()
        live = False
        if session_id is not None:
            # a viewer joins a session already on air (or, past a second of waiting, whatever it is then)
            live = await on_air(http, url, session_id, timeout_s=1.0)
            viewer = await aiortc_viewer(url, TOKEN, session_id, case.seconds)
        run = await client
        entry = (await session_entries(http, url)).get(session_id or "", {})
    frames_in, frames_out = int(entry.get("frames_in", 0)), int(entry.get("frames_out", 0))
    timeline = run_marks(
        gateway_timeline(entry),
        run.details.get("timeline_ms"),
        viewer.first_video_ms if live else None,
    )
    why = []
    if not run.connected:
        why.append(f"did not connect: {run.error or entry.get('close_reason', '')}")
    # media in, and processed frames out: how many of them is the load's business (stale drops), not interop's
    if frames_in < 10 or frames_out < 1:
        why.append(f"{frames_in} frames came in, {frames_out} processed went out")
    if case.audio and viewer.audio < 10:
        why.append(f"the WHEP viewer got {viewer.audio} Opus frames")
    return RunOutcome(
        connected=run.connected,
        passed=not why,
        why="; ".join(why),
        frames_in=frames_in,
        frames_out=frames_out,
        viewer_frames=viewer.video,
        viewer_audio=viewer.audio,
        close_reason=str(entry.get("close_reason", "")),
        user_agent=str(entry.get("info", {}).get("user_agent", "")),
        client=asdict(run),
        timeline=timeline,
    )


async def view_run(case: Case, url: str, image: Path, workdir: Path, clip: Path) -> RunOutcome:
    """A publisher with Opus (aiortc: VP8; libdatachannel: H.264 as OBS sends it) and a libdatachannel WHEP
    viewer of its session. The viewer offers VP8 first, then H.264: with an H.264 session the answer must
    name H.264 alone (negotiation.video_codecs), or the viewer gets H.264 labelled VP8."""
    async with aiohttp.ClientSession() as http:
        known = set(await session_entries(http, url))
        if case.publisher == "libdatachannel":
            spec = {
                "mode": "publish",
                "url": url + "/whip",
                "token": TOKEN,
                "media": str(clip),
                "audio": True,
                "seconds": case.seconds + 4.0,
                "logLevel": case.client_log,
            }
            publisher = asyncio.ensure_future(run_datachannel(spec, timeout_s=case.seconds + 30))
        else:
            publisher = asyncio.ensure_future(aiortc_publisher(url, TOKEN, image, case.seconds + 4.0, True))
        session_id = await new_session(http, url, known, timeout_s=20)
        if session_id is None:
            await publisher
            return RunOutcome(False, False, why="the publisher opened no session")
        live = await on_air(http, url, session_id, timeout_s=1.0)
        out = workdir / f"viewer-{session_id}.rtp"
        spec = {
            "mode": "view",
            "url": f"{url}/whep/{session_id}",
            "token": TOKEN,
            "out": str(out),
            "seconds": case.seconds,
            "logLevel": case.client_log,
        }
        run = await run_datachannel(spec, timeout_s=case.seconds + 25)
        await publisher
    frames, first = decode_viewer_frames(out) if out.exists() else (0, None)
    frame_ms = run.details.get("frame_ms") or []
    first_ms = frame_ms[first] if first is not None and first < len(frame_ms) else None
    timeline = run_marks(None, run.details.get("timeline_ms"), first_ms if live else None)
    why = []
    if not run.connected:
        why.append(f"did not connect: {run.error}")
    if frames < 5:
        why.append(f"{frames} video frames decoded")
    if run.received_audio < 10:
        why.append(f"{run.received_audio} Opus packets")
    return RunOutcome(
        run.connected,
        not why,
        "; ".join(why),
        viewer_frames=frames,
        viewer_audio=run.received_audio,
        client=asdict(run),
        timeline=timeline,
    )


@contextlib.contextmanager
def busy_core(on: bool) -> Any:
    # the loop ends with its parent too (a killed benchmark must not leave a core busy behind it)
    spin = "import os\nparent = os.getppid()\nwhile os.getppid() == parent: pass"
    proc = subprocess.Popen([sys.executable, "-c", spin]) if on else None
    try:
        yield
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()


async def run_matrix(
    cases: list[Case],
    source: Path,
    on_run: Callable[[Case, int, RunOutcome], None],
) -> dict[str, Any]:
    missing = node_client_missing()
    gst = gstreamer_missing() if any(case.client == "gstreamer" for case in cases) else None
    workdir = Path(tempfile.mkdtemp(prefix="livefuse-interop-"))
    clip = write_clip(workdir / "clip.bin", face_frames(source, 320, 240, 30), audio=True)
    camera = write_face_y4m(source, workdir / "face.y4m")  # Chromium's camera
    outcomes: dict[str, list[RunOutcome]] = {}
    started = time.monotonic()
    async with gateway_process(workdir, source) as url:
        for case in cases:
            if case.client == "libdatachannel" and missing:
                outcomes[case.name] = [RunOutcome(False, False, why=missing)]
                continue
            if case.client == "gstreamer" and gst:
                why = f"GStreamer webrtcbin is not installed ({gst}: apt-get install {GST_PACKAGES})"
                outcomes[case.name] = [RunOutcome(False, False, why=why)]
                continue
            with busy_core(case.busy):
                for i in range(case.runs):
                    if case.role == "view":
                        outcome = await view_run(case, url, source, workdir, clip)
                    else:
                        outcome = await publish_run(case, url, source, clip, camera)
                    outcomes.setdefault(case.name, []).append(outcome)
                    on_run(case, i, outcome)
    shutil.rmtree(workdir, ignore_errors=True)
    return {
        "cases": summarize(cases, outcomes),
        "runs": {name: [asdict(r) for r in runs] for name, runs in outcomes.items()},
        "wall_s": round(time.monotonic() - started, 1),
    }


def _inside_namespace(argv: list[str]) -> int:
    """Re-run this command inside a private network namespace with the veth pair."""
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("ip") is None:
        print("interop: needs root, unshare and ip (a private network namespace)", file=sys.stderr)
        return 2
    command = " ".join([sys.executable, "-m", "bench.interop", *map(_quote, argv)])
    return subprocess.call(
        ["unshare", "-n", "sh", "-c", f"{NAMESPACE} && exec {command}"],
        cwd=ROOT,
        env={**os.environ, INSIDE: "1"},
    )


def _quote(arg: str) -> str:
    import shlex

    return shlex.quote(arg)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m bench.interop", description="interop matrix")
    parser.add_argument(
        "--preset",
        choices=("suite", "full"),
        default="full",
        help="suite: what `make test` runs; full: every case 10 times, OBS-style 50",
    )
    parser.add_argument("--runs", type=int, default=None, help="runs of every case (overrides the preset)")
    parser.add_argument("--busy", action="store_true", help="hold one core busy during every case")
    parser.add_argument("--clients", default="", help="only these clients (comma list)")
    parser.add_argument("--client-log", default="Warning", help="libdatachannel log level (Info, Debug)")
    parser.add_argument("--source", type=Path, default=None, help="face image (default: obama.jpg)")
    parser.add_argument("--output", type=Path, default=None, help="write the JSON report here")
    args = parser.parse_args(argv)
    if os.environ.get(INSIDE) != "1":
        return _inside_namespace(argv)
    if args.source is None:
        from loadgen.media import default_media_dir, media_path

        args.source = media_path(default_media_dir(os.environ), "obama.jpg")
    cases = preset(args.preset, args.runs, args.busy, args.client_log)
    if args.clients:
        wanted = set(args.clients.split(","))
        cases = [c for c in cases if c.client in wanted]

    def on_run(case: Case, i: int, outcome: RunOutcome) -> None:
        mark = "ok" if outcome.passed else f"FAIL ({outcome.why})"
        print(f"{case.name} #{i + 1}: {mark}", file=sys.stderr, flush=True)

    try:
        report = asyncio.run(run_matrix(cases, args.source, on_run))
    except RuntimeError as exc:
        print(f"interop: {exc}", file=sys.stderr)
        return 2
    for row in report["cases"]:
        total = row["total"]
        print(f"{row['case']:<48} connected {row['connected']}/{total}  passed {row['passed']}/{total}")
    print("timelines (ms; gateway.* after its POST arrived, client.* / viewer.* after that client's POST):")
    for row in report["cases"]:
        print("\n".join(format_table(row["case"], row["timeline_ms"])))
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(report, indent=1))
    print(json.dumps({"cases": report["cases"], "wall_s": report["wall_s"]}), flush=True)
    return 0 if all(r["passed"] == r["total"] for r in report["cases"]) else 1


if __name__ == "__main__":
    sys.exit(main())
