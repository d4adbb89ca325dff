"""The monitoring routes on a port of their own (gateway.http.metrics_listener): which routes move, and
how a request is known to have arrived there."""

from __future__ import annotations

import pytest

from gateway.cli import load_config
from gateway.http.metrics_listener import (
    GROUPS,
    MetricsListenerConfig,
    _arrived_on,
    bound_addresses,
    public_routes,
)


def test_the_metrics_listener_moves_the_chosen_routes_off_the_public_port() -> None:
    assert MetricsListenerConfig().paths == frozenset()  # no metrics port: nothing moves
    only = MetricsListenerConfig(port=9090)
    assert only.paths == {"/metrics"}
    every = MetricsListenerConfig(port=9090, groups=tuple(GROUPS))
    assert every.paths >= {"/metrics", "/api/stats", "/api/stream", "/dashboard", "/"}
    routes = (("GET", "/metrics"), ("GET", "/api/stats"), ("POST", "/whip"), ("GET", "/healthz"))
    assert public_routes(only, routes) == routes[1:]
    assert public_routes(every, routes) == routes[2:]
    with pytest.raises(ValueError, match="--metrics-routes"):
        MetricsListenerConfig(port=9090, groups=("metrics", "sessions"))
    with pytest.raises(ValueError, match="must differ"):
        load_config(["--port", "9090", "--metrics-port", "9090"], {})
    config, _ = load_config(
        ["--metrics-port", "9100", "--metrics-address", "0.0.0.0", "--metrics-routes", "metrics,api"],
        {"LIVEFUSE_ALLOW_ANONYMOUS": "true"},
    )
    assert config.metrics == MetricsListenerConfig(port=9100, address="0.0.0.0", groups=("metrics", "api"))


def test_a_request_is_on_the_metrics_listener_by_its_local_address() -> None:
    bound = bound_addresses([("127.0.0.1", 9100), ("::1", 9100, 0, 0), "/tmp/media.sock"])
    assert bound == {("127.0.0.1", 9100), ("::1", 9100)}
    assert _arrived_on(("127.0.0.1", 9100), bound) and _arrived_on(("::1", 9100), bound)
    assert not _arrived_on(("127.0.0.1", 8080), bound) and not _arrived_on(None, bound)
    assert not _arrived_on(("10.0.0.5", 9100), bound)
    wildcard = bound_addresses([("0.0.0.0", 9100)])
    assert _arrived_on(("10.0.0.5", 9100), wildcard) and not _arrived_on(("10.0.0.5", 8080), wildcard)
