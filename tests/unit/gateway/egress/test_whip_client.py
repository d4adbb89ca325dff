"""The WHIP client's pure parts: which Link headers become ICE servers, which targets the configuration
lets a client name."""

from __future__ import annotations

import pytest

from gateway.egress.config import EgressConfig
from gateway.egress.whip_client import check_endpoint, ice_servers_from_links


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
