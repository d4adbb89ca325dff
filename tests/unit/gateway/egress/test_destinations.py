"""The egress allow-list holds against the usual ways around a prefix match (gateway.egress.destinations)."""

from __future__ import annotations

from ipaddress import ip_address

import pytest

from gateway.egress.addresses import embedded_ipv4
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
    "https://sfu.example/whip%2fx",  # an encoded slash: one segment here, two at a server that decodes
    "https://sfu.example/whip%2Fx",
    "https://sfu.example/whip/%5c..%5cadmin",
    "https://sfu.example/whip/%252e%252e/admin",  # dot segments encoded twice
    "https://sfu.example/whip/%25252e",
    "https://sfu.example/whip/..;/admin",  # `;` parameters (Tomcat, Spring: `..;` is `..`)
    "https://sfu.example/whip;a=b",
    "https://sfu.example/whip/%3b",
    "https://sfu.example/whip/%00",  # NUL
    "https://sfu.example/whip/%0aHost:%20evil",
    "https://sfu.example/whip/%ff",  # not UTF-8
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
        with pytest.raises(DestinationRefused, match="link-local|non-public|metadata"):
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


EMBEDDING = [  # IPv6 forms that carry an IPv4 address, with the address they deliver to
    ("64:ff9b::7f00:1", "127.0.0.1"),  # NAT64 well-known prefix
    ("64:ff9b::a00:5", "10.0.0.5"),  # DNS64 on an IPv6-only cluster
    ("64:ff9b::a9fe:a9fe", "169.254.169.254"),
    ("64:ff9b:1:7f00:0:100::", "127.0.0.1"),  # local-use NAT64 /48 (RFC 6052: the u octet skipped)
    ("2002:7f00:1::1", "127.0.0.1"),  # 6to4
    ("2002:a9fe:a9fe::1", "169.254.169.254"),
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", "127.0.0.1"),  # Teredo: the client inverted
    ("::a9fe:a9fe", "169.254.169.254"),  # IPv4-compatible
    ("::7f00:1", "127.0.0.1"),
    ("::ffff:a9fe:a9fe", "169.254.169.254"),  # IPv4-mapped
    ("::ffff:0:a9fe:a9fe", "169.254.169.254"),  # IPv4-translated
    ("::ffff:0:a00:5", "10.0.0.5"),
]


@pytest.mark.parametrize("v6, v4", EMBEDDING)
def test_ipv4_embedded_in_ipv6_is_judged_as_the_ipv4_address(v6: str, v4: str) -> None:
    assert ip_address(v4) in embedded_ipv4(ip_address(v6))
    anything = AllowList.parse(("*",))
    with pytest.raises(DestinationRefused, match="not allowed"):
        anything.check(f"http://[{v6}]:8443/whip")
    with pytest.raises(DestinationRefused, match="not allowed"):
        anything.check_addresses(parse("https://whip.example.com/x"), [v6])
    assert not anything.host_allows("whip.example.com", 443, v6)


def test_public_ipv4_embedded_in_ipv6_stays_public() -> None:
    anything = AllowList.parse(("*",))
    for v6 in ("64:ff9b::808:808", "2002:808:808::1"):
        anything.check(f"https://[{v6}]/whip")


def test_site_local_and_metadata_addresses_need_an_entry_that_is_the_address() -> None:
    anything = AllowList.parse(("*",))
    named = AllowList.parse(("https://sfu.example/whip",))
    target = parse("https://sfu.example/whip")
    for address in ("fec0::1", "fd00:ec2::254", "fd00:ec2::23", "169.254.169.254", "168.63.129.16",
                    "100.100.100.200", "64:ff9b::a9fe:a9fe"):  # fmt: skip
        with pytest.raises(DestinationRefused, match="not allowed"):
            anything.check_addresses(target, [address])
        with pytest.raises(DestinationRefused, match="not allowed"):  # a name entry does not vouch for it
            named.check_addresses(target, [address])
        assert not named.host_allows("sfu.example", 443, address)
    literal = AllowList.parse(("http://[fec0::1]:8088/", "http://169.254.169.254/"))
    literal.check("http://[fec0::1]:8088/whip")
    literal.check("http://169.254.169.254/latest")
    with pytest.raises(DestinationRefused, match="site-local"):
        anything.check("http://[fec0::1]/whip")


def test_the_path_is_sent_in_the_form_it_was_matched_in() -> None:
    for given, sent in (
        ("https://SFU.example:443/whip/%7Ekey?k=s%2Fecret", "https://sfu.example/whip/~key?k=s%2Fecret"),
        ("https://sfu.example/whip/a%20b", "https://sfu.example/whip/a%20b"),
        ("https://sfu.example/whip/caf%C3%A9", "https://sfu.example/whip/caf%C3%A9"),
        ("http://127.0.0.1:8088/janus/x", "http://127.0.0.1:8088/janus/x"),
        ("http://[0:0::1]:9000", "http://[::1]:9000/"),
    ):
        target = ALLOW.check(given)
        assert target.url == sent and parse(sent) == target, (given, target.url)
    assert parse("https://sfu.example/whip/k?x=1").endpoint == "https://sfu.example:443"
