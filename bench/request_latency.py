"""What one HTTP request costs in wall time against a fresh gateway: GET /healthz, GET /api/stats, a real
WHIP offer (201, then DELETE) and a malformed one (400), each sent `--requests` times in sequence.

Why: the front process (gateway.front) adds a hop to every forwarded request; this measures it
(`--gateway-arg=--no-front-process` for the gateway without it). Loopback only; prints p50 / p90 and
writes JSON with --output.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp

from bench.fuzz import real_offer
from loadgen.embedded import EmbeddedGateway, EmbeddedGatewayConfig
from loadgen.percentiles import summary


async def measure(requests: int, gateway_args: Sequence[str]) -> dict[str, Any]:
    offer = await real_offer()
    gateway = EmbeddedGateway(
        EmbeddedGatewayConfig(
            processors="none",
            max_sessions=64,
            log_level="error",
            extra_args=("--rate-limit", "0", "--max-pending", "64", *gateway_args),
        )
    )
    url = await gateway.start()
    sdp = {"Content-Type": "application/sdp"}
    cases: list[tuple[str, str, str, dict[str, Any]]] = [
        ("GET /healthz", "GET", "/healthz", {}),
        ("GET /api/stats", "GET", "/api/stats", {}),
        ("POST /whip 201", "POST", "/whip", {"data": offer, "headers": sdp}),
        ("POST /whip 400", "POST", "/whip", {"data": "v=0\r\n", "headers": sdp}),
    ]
    out: dict[str, Any] = {"gateway_args": list(gateway_args), "requests": requests, "cases": {}}
    try:
        async with aiohttp.ClientSession() as http:
            for name, method, path, kwargs in cases:
                times, statuses = [], set()
                for _ in range(requests):
                    t0 = time.perf_counter()
                    async with http.request(method, url + path, **kwargs) as r:
                        await r.read()
                        statuses.add(r.status)
                        location = r.headers.get("Location")
                    times.append(1000.0 * (time.perf_counter() - t0))
                    if location:
                        async with http.delete(url + location) as d:
                            await d.read()
                out["cases"][name] = {
                    "statuses": sorted(statuses),
                    **summary(times, {"p50_ms": 50, "p90_ms": 90}, 2),
                }
    finally:
        await gateway.stop()
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=25)
    parser.add_argument("--gateway-arg", action="append", default=[], help="for the gateway (repeatable)")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    result = asyncio.run(measure(args.requests, args.gateway_arg))
    for name, case in result["cases"].items():
        print(f"{name:16} {case['statuses']}  p50 {case['p50_ms']:.2f} ms  p90 {case['p90_ms']:.2f} ms")
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
