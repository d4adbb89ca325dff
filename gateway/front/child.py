"""The front process's entry point: `python -m gateway.front --listen-fd N --media-socket PATH --parent PID`,
its FrontConfig pickled on stdin (from the supervisor, its own parent: never from anyone else).

Protocol on stdout, one line each: `ready` once the app is serving on the inherited socket, then every
`report_interval_s` a JSON object of reject counts since the last line (only when there are some). Logs go
to stderr, shared with the parent. SIGINT is ignored (a terminal's Ctrl-C reaches the whole process group;
the parent decides when the front stops), SIGTERM stops it at once: the parent only sends it after its own
drain. The kernel sends SIGTERM when the parent dies, and a watchdog checks the parent id as well.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import json
import logging
import os
import pickle
import shutil
import signal
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

from aiohttp import web

from gateway.front.app import DRAINING, REJECTS, create_front_app
from gateway.front.config import DRAIN_SIGNAL, PRIVATE_DIR_PREFIX, FrontConfig
from gateway.http.access_log import runner_options
from gateway.http.tls import server_context
from gateway.process_setup import setup_process

PR_SET_PDEATHSIG = 1
logger = logging.getLogger("gateway.front")


def die_with_parent() -> None:
    """Linux: SIGTERM to this process when its parent thread exits (best effort elsewhere: the watchdog)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass


async def run(config: FrontConfig, listen_fd: int, media_socket: str, parent: int) -> int:
    app = create_front_app(config, media_socket)
    runner = web.AppRunner(app, handle_signals=False, **runner_options(config.header_timeout_s))
    await runner.setup()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(DRAIN_SIGNAL, app[DRAINING].append, True)
    try:
        sock = socket.socket(fileno=listen_fd)
        context = None if config.tls is None else server_context(config.tls)
        site = web.SockSite(runner, sock, ssl_context=context)
        await site.start()
        print("ready", flush=True)
        rejects = app[REJECTS]
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), config.report_interval_s)
            except TimeoutError:
                pass
            if os.getppid() != parent:
                logger.warning("the gateway's media process is gone: the front stops")
                stop.set()
                _remove_private_dir(media_socket)
            if rejects:
                print(json.dumps(dict(rejects)), flush=True)
                rejects.clear()
        return 0
    finally:
        await runner.cleanup()


def _remove_private_dir(media_socket: str) -> None:
    """The media process could not clean up after itself (killed): its socket's private directory goes."""
    folder = Path(media_socket).parent
    if folder.name.startswith(PRIVATE_DIR_PREFIX):
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gateway.front")
    parser.add_argument("--listen-fd", type=int, required=True)
    parser.add_argument("--media-socket", required=True)
    parser.add_argument("--parent", type=int, required=True)
    args = parser.parse_args(argv)
    die_with_parent()
    if os.getppid() != args.parent:  # the parent died before the kernel was told
        return 0
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    config: FrontConfig = pickle.load(sys.stdin.buffer)
    if config.nice:
        os.nice(config.nice)
    if config.cpus:  # every later thread inherits it; threads already started (a maths library's pool,
        # started while the config's classes were imported) are moved one by one
        for task in os.listdir("/proc/self/task"):
            os.sched_setaffinity(int(task), config.cpus)
    setup_process(config.log_level)
    try:
        return asyncio.run(run(config, args.listen_fd, args.media_socket, args.parent))
    except Exception as exc:
        logger.error("front process failed: %s", str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return 1
