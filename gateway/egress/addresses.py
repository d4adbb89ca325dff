"""What an egress destination's address really is: the IPv4 address an IPv6 one carries, and which addresses
no host-name entry may reach (gateway.egress.destinations decides with these).

An IPv6 address can carry an IPv4 one that the network delivers to: NAT64 (64:ff9b::/96, RFC 6052; local-use
64:ff9b:1::/48, RFC 8215), 6to4 (2002::/16), Teredo (2001::/32), IPv4-compatible (::/96), -mapped
(::ffff:0:0/96) and -translated (::ffff:0:0:0/96, RFC 2765). Each is judged as every IPv4 address it may
carry as well as itself, so `[64:ff9b::7f00:1]` is loopback. Site-local (fec0::/10, deprecated but still
routed by some stacks) and the cloud metadata services are never public and never reached through a name:
only an entry that is the very address allows them. The defaults follow Smokescreen, Stripe's egress proxy
(docs/EGRESS.md).
"""

from __future__ import annotations

import ipaddress

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# instance metadata, credentials and platform endpoints: AWS (IMDS v4/v6, ECS task credentials, EKS pod
# identity, Route 53 resolver), GCP and Azure IMDS (169.254.169.254), Azure's WireServer, Alibaba, Oracle
METADATA: frozenset[IpAddress] = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",
        "169.254.169.253",
        "169.254.170.2",
        "169.254.170.23",
        "fd00:ec2::254",
        "fd00:ec2::253",
        "fd00:ec2::23",
        "168.63.129.16",
        "100.100.100.200",
        "192.0.0.192",
    )
)
NAT64 = ipaddress.ip_network("64:ff9b::/96")
NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
SIX_TO_FOUR = ipaddress.ip_network("2002::/16")
TEREDO = ipaddress.ip_network("2001::/32")
COMPATIBLE = ipaddress.ip_network("::/96")
MAPPED = ipaddress.ip_network("::ffff:0:0/96")
TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")
SITE_LOCAL = ipaddress.ip_network("fec0::/10")
# RFC 6052 section 2.2: where the IPv4 address sits for each prefix length (bits 64-71 are skipped)
_RFC6052_PREFIXES = (32, 40, 48, 56, 64, 96)


def _v4(value: int) -> ipaddress.IPv4Address:
    return ipaddress.IPv4Address(value & 0xFFFFFFFF)


def _rfc6052(address: ipaddress.IPv6Address, prefix: int) -> ipaddress.IPv4Address:
    """The IPv4 address embedded after a `prefix`-bit NAT64 prefix (RFC 6052, skipping the u octet)."""
    raw = address.packed
    if prefix == 96:
        return ipaddress.IPv4Address(raw[12:16])
    octets = [b for i, b in enumerate(raw) if i != 8][prefix // 8 : prefix // 8 + 4]
    return ipaddress.IPv4Address(bytes(octets))


def embedded_ipv4(address: IpAddress) -> tuple[ipaddress.IPv4Address, ...]:
    """Every IPv4 address `address` may deliver to, by the IPv6 forms that carry one; () for the rest.

    For 64:ff9b:1::/48 the operator picks the prefix length, so every RFC 6052 position is read; Teredo
    carries the client's address inverted; ::/96 (IPv4-compatible) is deprecated but still delivered."""
    if isinstance(address, ipaddress.IPv4Address):
        return ()
    value = int(address)
    if address in MAPPED or address in TRANSLATED or address in NAT64:
        return (_v4(value),)
    if address in COMPATIBLE:
        return () if value <= 1 else (_v4(value),)  # :: and ::1 are themselves
    if address in NAT64_LOCAL:
        return tuple(dict.fromkeys(_rfc6052(address, p) for p in _RFC6052_PREFIXES if p >= 48))
    if address in SIX_TO_FOUR:
        return (_v4(value >> 80),)
    if address in TEREDO:
        return (_v4(~value),)  # the client's address, inverted in the last 32 bits
    return ()


def forms(address: IpAddress) -> tuple[IpAddress, ...]:
    """`address` and every IPv4 address it carries: a destination is allowed only when all of them are."""
    return (address, *embedded_ipv4(address))


def unreachable_by_name(address: IpAddress) -> bool:
    """Never allowed through a host-name entry: link-local, multicast, unspecified, site-local and metadata
    addresses, in any of their forms (an entry must be the very address)."""
    return any(_special(a) for a in forms(address))


def _special(a: IpAddress) -> bool:
    site_local = isinstance(a, ipaddress.IPv6Address) and a in SITE_LOCAL
    return a.is_link_local or a.is_multicast or a.is_unspecified or site_local or a in METADATA


def public(address: IpAddress) -> bool:
    """What `*` allows: every form global, none special, and not the local-use NAT64 prefix. Python's
    `is_global` alone is not enough: 3.11 counts 64:ff9b::/96, 2002::/16 and fec0::/10 as global."""
    if isinstance(address, ipaddress.IPv6Address) and address in NAT64_LOCAL:
        return False
    return all(a.is_global and not _special(a) for a in forms(address))


def kind(address: IpAddress) -> str:
    """A word for a refusal's message."""
    for a in reversed(forms(address)):
        if a in METADATA:
            return "cloud metadata"
        if a.is_loopback:
            return "loopback"
        if a.is_link_local:
            return "link-local"
    if isinstance(address, ipaddress.IPv6Address) and address in SITE_LOCAL:
        return "site-local"
    return "non-public"
