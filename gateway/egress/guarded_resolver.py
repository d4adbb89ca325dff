"""The egress HTTP client's resolver: every connection's addresses pass the allow-list again.

A host name checked when the request was accepted may resolve elsewhere by the time the push connects (or
reconnects, minutes later): DNS rebinding. aiohttp asks its resolver for each new connection; this one asks
the default resolver, then refuses the connection (an OSError, which the push counts as a network failure)
when any address is one gateway.egress.destinations would not allow for that host. The operator's own
--egress-url host is trusted as configured. IP-literal URLs never reach a resolver: they were checked
whole when the request was accepted.
"""

from __future__ import annotations

import socket

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from gateway.egress.destinations import AllowList


class GuardedResolver(AbstractResolver):
    def __init__(
        self,
        allow: AllowList,
        trusted: frozenset[tuple[str, int]] = frozenset(),
        inner: AbstractResolver | None = None,
    ) -> None:
        self._allow = allow
        self._trusted = trusted
        self._inner = inner if inner is not None else DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        results = await self._inner.resolve(host, port, family)
        name = host.lower().rstrip(".")
        if (name, port) in self._trusted:
            return results
        refused = [r["host"] for r in results if not self._allow.host_allows(name, port, r["host"])]
        if refused or not results:
            raise OSError(f"egress to {host} refused: it resolves to {', '.join(refused) or 'nothing'}")
        return results

    async def close(self) -> None:
        await self._inner.close()
