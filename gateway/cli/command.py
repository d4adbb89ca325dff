"""`gateway`: load the configuration, check the machine, run until a stop signal. Only this module prints
errors or decides exit codes."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import tempfile
import tomllib
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from gateway.cli.build import load_config
from gateway.config import GatewayConfig
from gateway.exposure_rule import check_listeners
from gateway.http.tls import make_self_signed, server_context
from gateway.preflight import PreflightError, check_engine
from gateway.process_setup import setup_process
from gateway.webrtc.version_check import UncheckedVersion, check_aiortc, installed_version


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _discovered(config: GatewayConfig) -> GatewayConfig:
    """--ice-public-address auto: the first --stun server's view of this machine, or one line and exit 2."""
    from gateway.stun_discovery import DiscoveryError, discover_public_address

    try:
        address = asyncio.run(discover_public_address(config.ice.stun[0]))
    except DiscoveryError as exc:
        raise ValueError(f"--ice-public-address auto: {exc}") from None
    return replace(config, ice=replace(config.ice, public_address=address))


def main(argv: Sequence[str] | None = None) -> int:
    """Exit codes: 0 clean stop, 1 failure while running, 2 bad command line, config or machine."""
    try:
        config, steps = load_config(argv, os.environ)
        check_aiortc(installed_version("aiortc"))
        check_engine(config.pipeline.engine)
        if steps.discover_address:
            config = _discovered(config)
        if steps.self_signed:
            folder = Path(tempfile.mkdtemp(prefix="livefuse-tls-"))
            config = replace(config, tls=make_self_signed(folder, config.host))
        check_listeners(config.listeners(), open_=config.anonymous)  # by the addresses they resolve to
        if config.tls is not None:
            server_context(config.tls)  # a bad certificate or key: one line here, not a front that dies
    except (OSError, ValueError, TypeError, tomllib.TOMLDecodeError, PreflightError, UncheckedVersion) as exc:
        print(f"gateway: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    setup_process(config.log_level)
    if steps.discover_address:
        logging.getLogger("gateway").info(
            "ICE host candidates advertise %s (asked of %s)", config.ice.public_address, config.ice.stun[0]
        )
    if config.tls is not None and config.tls.self_signed:
        logging.getLogger("gateway").warning(
            "DEVELOPMENT ONLY: HTTPS with a self-signed certificate made just now (%s); clients cannot "
            "verify it and browsers will warn. Use --tls-cert/--tls-key or a TLS-terminating proxy in "
            "production.",
            config.tls.cert,
        )
    from gateway.serve import serve

    try:
        return asyncio.run(serve(config))
    except KeyboardInterrupt:
        return 0
    except Exception as exc:
        logging.getLogger("gateway").error("gateway failed: %s", _one_line(exc))
        return 1
