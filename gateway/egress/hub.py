"""Every session's egress push, in one place: start/stop, the DELETEs still in flight, events, metrics.

One `aiohttp.ClientSession` serves all pushes. A push's state changes become monitor events (kind `egress`,
with the state: dashboards, the event log and webhooks read them) and Prometheus counters
(`livefuse_egress_state_changes_total{state}`, current pushes by state in `livefuse_egress_pushes{state}`).
DELETEs run in tasks of their own so a session's close never waits on a slow endpoint (bounded by the
request timeout); `close()` waits for them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from typing import Any

import aiohttp
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from gateway.egress.config import EgressConfig
from gateway.egress.guarded_resolver import GuardedResolver
from gateway.egress.ice_servers import IceServerCheck
from gateway.egress.policy import STATES, EgressState
from gateway.egress.push import EgressPush, MediaSource, PushTimeouts, Target
from gateway.egress.whip_client import delete_resource, endpoint_of
from gateway.errors import Conflict, NotFound

logger = logging.getLogger(__name__)

EVENT_KIND = "egress"
EventSink = Callable[..., None]  # MonitorLike.event(kind, message, **data)


class EgressHub:
    def __init__(self, config: EgressConfig, event: EventSink) -> None:
        self.config = config
        self.pushes: dict[str, EgressPush] = {}  # by session id; a finished push stays until replaced
        self.state_changes: dict[str, int] = dict.fromkeys(STATES, 0)
        self._event = event
        self._http: aiohttp.ClientSession | None = None
        self._deletes: set[asyncio.Task[None]] = set()
        self._closed = False
        trusted_hosts = frozenset(host for host, _ in config.trusted_origins())
        self._ice_check = IceServerCheck(config.allow_list, trusted_hosts)

    async def start(self) -> None:
        if self._http is None:  # every connection's addresses pass the allow-list (guarded_resolver)
            resolver = GuardedResolver(self.config.allow_list, self.config.trusted_origins())
            self._http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(resolver=resolver))

    async def close(self) -> None:
        """Stop every push (each DELETEs its resource), wait for the DELETEs. Idempotent."""
        self._closed = True
        await asyncio.gather(*(p.stop("gateway shutdown") for p in list(self.pushes.values())))
        if self._deletes:
            await asyncio.gather(*list(self._deletes), return_exceptions=True)
        if self._http is not None:
            await self._http.close()
            self._http = None

    def start_push(self, session: MediaSource, target: Target) -> EgressPush:
        """Start pushing `session` to `target`; 409 while another push of it is on."""
        if self._closed or self._http is None:
            raise Conflict("egress is shutting down")
        current = self.pushes.get(session.id)
        if current is not None and not current.done:
            raise Conflict(
                f"session {session.id} already pushes to {current.target.endpoint} (DELETE it first)"
            )
        push = EgressPush(
            session,
            target,
            self._http,
            retry=self.config.retry,
            timeouts=PushTimeouts(self.config.request_timeout_s, self.config.connect_timeout_s),
            host_addresses=self.config.host_addresses,
            on_state=self._on_state,
            on_delete=self._delete_later,
            ice_check=self._ice_check,
        )
        self.pushes[session.id] = push
        push.start()
        return push

    def get(self, session_id: str) -> EgressPush:
        push = self.pushes.get(session_id)
        if push is None:
            raise NotFound(f"session {session_id} has no egress")
        return push

    async def stop_push(self, session_id: str, reason: str) -> bool:
        push = self.pushes.get(session_id)
        if push is None:
            return False
        await push.stop(reason)
        return True

    async def session_closing(self, session_id: str, reason: str) -> None:
        """The session is closing: its push stops, and is forgotten."""
        await self.stop_push(session_id, f"session ended ({reason})")
        self.pushes.pop(session_id, None)

    def _on_state(self, push: EgressPush, state: EgressState, reason: str) -> None:
        self.state_changes[state.value] += 1
        self._event(
            EVENT_KIND,
            f"session {push.source.id} egress {state.value}: {reason}",
            session_id=push.source.id,
            state=state.value,
            reason=reason,
            url=push.target.endpoint,  # scheme, host and port: events reach every reader of /api/stats
            attempts=push.attempts,
        )

    def _delete_later(self, location: str, token: str | None) -> None:
        http = self._http
        if http is None:
            return

        async def delete() -> None:
            status = await delete_resource(http, location, token, self.config.request_timeout_s)
            if status is None or status >= 300:
                where = endpoint_of(location)
                logger.warning("egress DELETE on %s: %s", where, status or "endpoint unreachable")

        task = asyncio.get_running_loop().create_task(delete(), name="egress-delete")
        self._deletes.add(task)
        task.add_done_callback(self._deletes.discard)

    # --- stats ----------------------------------------------------------------------------------------
    def data(self) -> dict[str, Any]:
        current = dict.fromkeys(STATES, 0)
        for push in list(self.pushes.values()):
            current[push.state.value] += 1
        return {"pushes": current, "state_changes": dict(self.state_changes)}

    def collector(self) -> Collector:
        return _EgressCollector(self.data)


class _EgressCollector(Collector):
    def __init__(self, data: Callable[[], dict[str, Any]]) -> None:
        self._data = data

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        data = self._data()
        pushes = GaugeMetricFamily("livefuse_egress_pushes", "Egress pushes by state", labels=["state"])
        changes = CounterMetricFamily(
            "livefuse_egress_state_changes", "Egress state changes, by the state entered", labels=["state"]
        )
        for state in STATES:
            pushes.add_metric([state], data["pushes"][state])
            changes.add_metric([state], data["state_changes"][state])
        yield pushes
        yield changes
