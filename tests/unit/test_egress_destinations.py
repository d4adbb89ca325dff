"""The egress allow-list holds against the usual ways around a prefix match (gateway.egress.destinations)."""

from __future__ import annotations

import pytest

from gateway.egress.config import EgressConfig
from gateway.egress.destinations import AllowList, DestinationRefused, parse, parse_entry

ALLOW_TEXTS = ("https://sfu.example/whip", "http://127.0.0.1:8088/janus", "http://[::1]:9000/")
ALLOW = AllowList.parse(ALLOW_TEXTS)

BYPASSES = [
    "https://sfu.example.attacker.net/whip",  # a prefix of the host, not the host
    "https://sfu.example@169.254.169.254/whip",  # user-info: the host is the metadata service
    "https://sfu.example:x@169.254.169.254/whip",
    "https://user@sfu.example/whip",  # user-info even on the right host
    "https://sfu.example:444/whip",  # another port
    "http://sfu.example/whip",  # another scheme
    "ftp://sfu.example/whip",
    "javascript://sfu.example/whip",
    "https://sfu.examplE.evil/whip",
    "https://sfu.example/whipper",  # a prefix of a path segment
    "https://sfu.example/other",
    "https://sfu.example/whip/../admin",  # dot segments
    "https://sfu.example/whip/%2e%2e/admin",  # percent-encoded dot segments
    "https://sfu.example/whip/%2E%2E%2Fadmin",
    "https://sfu%2eexample/whip",  # percent-encoding in the host
    "https://sfu.example%00.evil/whip",
    "https://sfu.example\\@evil.example/whip",
    "https://sfu.example /whip",
    "https://169.254.169.254/whip",
    "https://[::ffff:169.254.169.254]/whip",  # IPv4-mapped IPv6
    "http://127.0.0.1:8089/janus",  # the named address, another port
    "http://127.0.0.2:8088/janus",  # another loopback address
    "http://0x7f.1:8088/janus",  # non-standard numeric hosts (inet_aton would take them)
    "http://2130706433:8088/janus",
    "http://0177.0.0.1:8088/janus",
    "http://[::1]:9001/",
    "http://[0:0:0:0:0:0:0:2]:9000/",
    "https://sfu.example:443@127.0.0.1/whip",
    "//sfu.example/whip",
    "sfu.example/whip",
]

ALLOWED = [
    "https://sfu.example/whip",
    "https://sfu.example/whip/room-1",
    "https://SFU.Example/whip/room-1",  # host names are case-insensitive
    "https://sfu.example./whip",  # the trailing dot of a fully qualified name
    "https://sfu.example:443/whip",  # the default port written out
    "HTTPS://sfu.example/whip",
    "https://sfu.example/whip?room=1",
    "http://127.0.0.1:8088/janus/x",
    "http://[::1]:9000/anything",
    "http://[0:0:0:0:0:0:0:1]:9000/",  # the same IPv6 address, written long
]


@pytest.mark.parametrize("url", BYPASSES)
def test_every_bypass_is_refused(url: str) -> None:
    with pytest.raises(DestinationRefused):
        ALLOW.check(url)
    assert not EgressConfig(allowed_prefixes=ALLOW_TEXTS).allows(url)


@pytest.mark.parametrize("url", ALLOWED)
def test_the_allowed_urls_pass(url: str) -> None:
    ALLOW.check(url)


def test_any_takes_public_destinations_only() -> None:
    anything = AllowList.parse(("*",))
    anything.check("https://whip.example.com/x")
    anything.check("https://8.8.8.8/whip")
    for private in ("http://127.0.0.1/", "http://10.0.0.5/", "http://192.168.1.1/", "http://169.254.169.254/",
                    "http://[::1]/", "http://[fe80::1]/", "http://[fd00:ec2::254]/", "http://100.64.0.1/",
                    "http://0.0.0.0/", "http://224.0.0.1/"):  # fmt: skip
        with pytest.raises(DestinationRefused, match="not allowed"):
            anything.check(private)
    target = parse("https://whip.example.com/x")
    anything.check_addresses(target, ["8.8.4.4"])
    for addresses in (["127.0.0.1"], ["8.8.4.4", "10.1.2.3"], ["169.254.169.254"], ["::1"], []):
        with pytest.raises(DestinationRefused):
            anything.check_addresses(target, addresses)


def test_a_named_host_may_resolve_to_its_own_network_but_never_to_link_local() -> None:
    internal = AllowList.parse(("http://janus.media.svc:8088/janus",))
    target = internal.check("http://janus.media.svc:8088/janus/1")
    internal.check_addresses(target, ["10.96.4.2"])
    internal.check_addresses(target, ["127.0.0.1"])
    for bad in (["169.254.169.254"], ["fe80::1%eth0"], ["0.0.0.0"], ["10.96.4.2", "169.254.169.254"]):
        with pytest.raises(DestinationRefused, match="link-local|non-public"):
            internal.check_addresses(target, bad)
    # the connection-time check (gateway.egress.guarded_resolver) asks the same question per address
    assert internal.host_allows("janus.media.svc", 8088, "10.96.4.2")
    assert not internal.host_allows("janus.media.svc", 8088, "169.254.169.254")
    assert not internal.host_allows("janus.media.svc", 8089, "10.96.4.2")
    assert not internal.host_allows("other.svc", 8088, "10.96.4.2")
    public = AllowList.parse(("https://sfu.example/whip",))
    assert public.host_allows("sfu.example", 443, "10.0.0.1")  # named: the operator vouches for it
    assert not AllowList.parse(("*",)).host_allows("rebind.example", 443, "10.0.0.1")


def test_bad_entries_are_one_line_errors_at_start_up() -> None:
    for bad in ("sfu.example", "ftp://sfu.example/", "https://u:p@sfu.example/", "https://sfu.example/?a=1",
                "https://0x7f.1/", "https://sfu.example/a/../b"):  # fmt: skip
        with pytest.raises(ValueError, match="--egress-allow"):
            parse_entry(bad)
        with pytest.raises(ValueError, match="--egress-allow"):
            EgressConfig(allowed_prefixes=(bad,))
    assert parse_entry(" * ").any
