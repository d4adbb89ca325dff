"""Egress retry policy and the WHIP client's pure parts: what is retried, how long the backoff is, which
Link headers become ICE servers, which targets the configuration lets a client name."""

from __future__ import annotations

import pytest
from aiortc import RTCIceServer

from gateway.egress.config import EgressConfig
from gateway.egress.destinations import AllowList
from gateway.egress.ice_servers import IceServerCheck
from gateway.egress.policy import EgressState, Failure, RetryConfig, after_failure, retryable
from gateway.egress.push import Target
from gateway.egress.whip_client import REFUSAL_CHARS, check_endpoint, ice_servers_from_links, refusal_text


def test_server_and_network_errors_are_retried_with_a_capped_exponential_backoff() -> None:
    config = RetryConfig(first_delay_s=1.0, max_delay_s=5.0, factor=2.0, max_attempts=0)
    delays = [after_failure(config, Failure("boom", 503), n).delay_s for n in range(1, 6)]
    assert delays == [1.0, 2.0, 4.0, 5.0, 5.0]
    for status in (None, 500, 502, 408, 429):
        assert after_failure(config, Failure("x", status), 1).state is EgressState.RETRYING


def test_client_errors_fail_at_once_and_attempts_are_bounded() -> None:
    config = RetryConfig(max_attempts=3)
    for status in (400, 401, 403, 404, 415, 422):
        assert not retryable(status)
        assert after_failure(config, Failure("no", status), 1).state is EgressState.FAILED
    assert after_failure(config, Failure("down"), 2).state is EgressState.RETRYING
    assert after_failure(config, Failure("down"), 3).state is EgressState.FAILED


def test_retry_after_is_honoured_up_to_the_cap() -> None:
    config = RetryConfig(first_delay_s=1.0, max_delay_s=10.0)
    assert after_failure(config, Failure("busy", 503, retry_after_s=4.0), 1).delay_s == 4.0
    assert after_failure(config, Failure("busy", 503, retry_after_s=60.0), 1).delay_s == 10.0


def test_bad_retry_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        RetryConfig(first_delay_s=0)
    with pytest.raises(ValueError):
        RetryConfig(first_delay_s=5, max_delay_s=1)


def test_link_headers_become_ice_servers() -> None:
    links = [
        '<stun:stun.example.net>; rel="ice-server"',
        '<turn:turn.example.net?transport=udp>; rel="ice-server"; username="user"; '
        'credential="pass:word"; credential-type="password", <https://example.net/x>; rel="help"',
        "<turns:t.example.net:5349>; rel=ice-server",
        '<http://not-ice.example>; rel="ice-server"',
    ]
    servers = ice_servers_from_links(links)
    assert [s.urls for s in servers] == [
        "stun:stun.example.net",
        "turn:turn.example.net?transport=udp",
        "turns:t.example.net:5349",
    ]
    assert (servers[1].username, servers[1].credential) == ("user", "pass:word")
    assert servers[0].username is None


def test_targets_must_be_absolute_and_allowed() -> None:
    assert check_endpoint("https://sfu.example/whip/1") == "https://sfu.example/whip/1"
    for bad in ("/whip", "ftp://x/y", "sfu.example/whip", "http://"):
        with pytest.raises(ValueError):
            check_endpoint(bad)
    closed = EgressConfig()
    assert not closed.allows("https://sfu.example/whip")
    some = EgressConfig(allowed_prefixes=("https://sfu.example/",))
    assert some.allows("https://sfu.example/whip/1") and not some.allows("https://evil.example/")
    assert EgressConfig(allowed_prefixes=("*",)).allows("http://anything/")  # its addresses: checked later
    assert not EgressConfig(allowed_prefixes=("*",)).allows("http://127.0.0.1/")
    default = EgressConfig(default_url="https://sfu.example/whip/{session}")
    assert default.default_for("abc") == "https://sfu.example/whip/abc"
    with pytest.raises(ValueError):
        EgressConfig(default_url="not a url")


def test_hub_counts_state_changes_for_prometheus() -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from gateway.egress.hub import EgressHub

    events: list[tuple[str, str, dict[str, object]]] = []
    hub = EgressHub(EgressConfig(), lambda kind, message, **data: events.append((kind, message, data)))

    class FakePush:
        class source:  # noqa: N801  (stands for the session)
            id = "s1"

        target = Target("https://sfu.example/whip/stream-key?k=1")

        attempts = 1
        state = EgressState.LIVE

    push: object = FakePush()
    hub.pushes["s1"] = push  # type: ignore[assignment]
    for state in (EgressState.CONNECTING, EgressState.LIVE, EgressState.RETRYING, EgressState.CONNECTING):
        hub._on_state(push, state, "why")  # type: ignore[arg-type]
    registry = CollectorRegistry()
    registry.register(hub.collector())
    text = generate_latest(registry).decode()
    assert 'livefuse_egress_state_changes_total{state="connecting"} 2.0' in text
    assert 'livefuse_egress_state_changes_total{state="failed"} 0.0' in text
    assert 'livefuse_egress_pushes{state="live"} 1.0' in text
    assert [e[2]["state"] for e in events] == ["connecting", "live", "retrying", "connecting"]
    assert all(e[0] == "egress" and e[2]["session_id"] == "s1" for e in events)
    assert all(e[2]["url"] == "https://sfu.example:443" and "stream-key" not in e[1] for e in events)


def test_a_target_shows_its_endpoint_and_scrubs_its_path_and_query() -> None:
    target = Target("https://sfu.example/whip/stream%20key?k=SECRET")
    assert target.endpoint == "https://sfu.example:443"
    text = "POST https://sfu.example/whip/stream%20key?k=SECRET failed at /whip/stream key (k=SECRET)"
    scrubbed = target.scrub(text)
    assert "stream" not in scrubbed and "SECRET" not in scrubbed and "sfu.example" not in scrubbed, scrubbed
    assert refusal_text("x" * 500 + "\nsecond line", None) == "x" * (REFUSAL_CHARS - 1) + "…"


async def test_ice_servers_the_endpoint_offers_pass_the_allow_list() -> None:
    """Judged as the endpoint is: a host an entry names (any port), a public address under `*`; names
    resolved once here and handed on as the checked address (turns: keeps its name for TLS)."""
    dns = {"sfu.example": ["10.0.0.2"], "turn.example.net": ["8.8.8.8", "2001:4860::8"],
           "meta.sfu.example": ["169.254.169.254"], "rebind.example": ["127.0.0.1"]}  # fmt: skip

    async def resolve(host: str, port: int) -> list[str]:
        return dns[host]

    def servers(*urls: str) -> tuple[RTCIceServer, ...]:
        return tuple(RTCIceServer(urls=u, username="u", credential="c") for u in urls)

    named = IceServerCheck(AllowList.parse(("http://127.0.0.1:8088/whip", "https://sfu.example/whip")),
                           resolve=resolve)  # fmt: skip
    kept = await named(servers("turn:127.0.0.1:3478?transport=tcp", "turn:127.0.0.3:3478?transport=tcp",
                               "stun:sfu.example:3478", "turn:other.example", "stun:[::1]:3478"))  # fmt: skip
    assert [s.urls for s in kept] == ["turn:127.0.0.1:3478?transport=tcp", "stun:10.0.0.2:3478"]
    assert kept[0].username == "u" and kept[0].credential == "c"
    anything = IceServerCheck(AllowList.parse(("*",)), resolve=resolve)
    kept = await anything(servers("stun:turn.example.net", "turns:turn.example.net:5349",
                                  "stun:rebind.example", "turn:127.0.0.1", "turn:64:ff9b::7f00:1",
                                  "stun:169.254.169.254"))  # fmt: skip
    assert [s.urls for s in kept] == ["stun:8.8.8.8:3478", "turns:turn.example.net:5349"]
    meta = IceServerCheck(AllowList.parse(("https://meta.sfu.example/whip",)), resolve=resolve)
    assert await meta(servers("turn:meta.sfu.example")) == ()  # a name entry never vouches for metadata
    trusted = IceServerCheck(AllowList.parse(()), frozenset({"sfu.example"}), resolve=resolve)
    assert [s.urls for s in await trusted(servers("turn:sfu.example:3479"))] == ["turn:10.0.0.2:3479"]
