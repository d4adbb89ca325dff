"""A gateway on 127.0.0.1 (a free port, ICE gathered on loopback only), started and stopped by a test."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any

from aiohttp import web

from gateway.app import create_app, wait_started
from gateway.config import GatewayConfig, SessionConfig
from gateway.webrtc.interop.ice import IceConfig
from loadgen.embedded import start_site

LOOPBACK = IceConfig.loopback_only()


def gw_config(**sessions: Any) -> GatewayConfig:
    """The product defaults on 127.0.0.1, a free port and loopback ICE; `sessions` changes SessionConfig."""
    return GatewayConfig(host="127.0.0.1", port=0, ice=LOOPBACK, sessions=SessionConfig(**sessions))


@dataclass
class Gateway:
    """A started app, its runner (to stop it) and its base URL."""

    app: web.Application
    runner: web.AppRunner
    url: str

    async def stop(self) -> None:
        await self.runner.cleanup()


async def start_gateway(config: GatewayConfig, *, wait_ready: bool = True, **kwargs: Any) -> Gateway:
    """Listening on a free port; by default also waits for the background start-up (models warm)."""
    app = create_app(config, **kwargs)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    port = await start_site(runner)
    if wait_ready:
        try:
            await wait_started(app, 60)
        except BaseException:
            await runner.cleanup()
            raise
    return Gateway(app, runner, f"http://127.0.0.1:{port}")


@contextlib.asynccontextmanager
async def running_gateway(config: GatewayConfig, **kwargs: Any) -> AsyncIterator[Gateway]:
    """start_gateway for an `async with`: stopped however the test leaves."""
    gw = await start_gateway(config, **kwargs)
    try:
        yield gw
    finally:
        await gw.stop()


def with_sessions(config: GatewayConfig, **changes: Any) -> GatewayConfig:
    """`config` with some session settings changed (the config is frozen)."""
    return replace(config, sessions=replace(config.sessions, **changes))
