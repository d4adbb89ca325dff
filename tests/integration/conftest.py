"""Integration tests: real peers on 127.0.0.1, real-time waits. Every one is `slow` (out of `make test-fast`);
what they share that is not a fixture lives in tests/harness."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

from loadgen.embedded import free_port
from tests.harness.echo import echo_app


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def echo_gateway() -> Iterator[tuple[str, dict[str, int]]]:
    """The echo WHIP server on its own thread and event loop (so the CLI can call asyncio.run)."""
    counters = {"joined": 0, "deleted": 0, "sources": 0}
    port = free_port()
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(echo_app({}, counters))
    started = threading.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(runner.setup())
        loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port).start())
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert started.wait(10)
    yield f"http://127.0.0.1:{port}", counters
    asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(15)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
