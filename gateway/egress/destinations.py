"""Where egress may go: the --egress-allow list, parsed, and the addresses a destination resolves to.

A client may name its session's WHIP target (?egress=, POST /sessions/{id}/egress), so the gateway would POST
wherever a client asks: the allow-list is a security boundary, matched on the parsed URL, never on its text,
and the URL is sent in the form it was matched in (`Destination.url`). An entry is `scheme://host[:port]
[/path]`: scheme, host and port equal, the path below the entry's at a segment boundary (`AllowEntry`); what
`parse` refuses outright, and the address rules (gateway.egress.addresses): `*` allows public destinations
only, an IP-literal entry that address, a host-name entry what its name resolves to short of link-local,
site-local, multicast, unspecified and metadata addresses. Names are resolved before the request is accepted
(403) and on every connection (gateway.egress.guarded_resolver: DNS rebinding); redirects are never followed
(gateway.egress.whip_client). The rules one a line, and how other servers compare: docs/EGRESS.md.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import quote, unquote, urlsplit

from gateway.egress import addresses

ANY = "*"
DEFAULT_PORTS = {"http": 80, "https": 443}
_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")
_NUMERIC_LAST = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$")  # WHATWG: such a last label makes the host an IPv4
_ENCODED_SEPARATOR = re.compile(r"%(2f|5c)", re.IGNORECASE)
_PATH_SAFE = "/!$&'()*+,=:@-._~"  # RFC 3986 pchar, less ';' (refused) and '%' (encoded)
IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class DestinationRefused(ValueError):
    """A URL or an address egress may not reach; the message is one line for a 403."""


@dataclass(frozen=True)
class Destination:
    scheme: str
    host: str  # normalised: lower-case DNS name, or an IP address in canonical form
    port: int
    path: str  # percent-decoded once, "/" when empty
    address: IpAddress | None  # the host, when it is an IP literal
    query: str = ""

    @property
    def origin(self) -> tuple[str, str, int]:
        return self.scheme, self.host, self.port

    @property
    def url(self) -> str:
        """The URL in the one form it was judged in, as it is sent: the path re-encoded from its decoded
        form (so the endpoint reads exactly the path that matched), the query as given."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        port = "" if DEFAULT_PORTS[self.scheme] == self.port else f":{self.port}"
        query = f"?{self.query}" if self.query else ""
        return f"{self.scheme}://{host}{port}{quote(self.path, safe=_PATH_SAFE)}{query}"

    @property
    def endpoint(self) -> str:
        """Scheme, host and port only: what stats, events and logs may show (the path and query carry
        stream keys)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


def _host(raw: str | None, url: str) -> tuple[str, IpAddress | None]:
    if not raw:
        raise DestinationRefused(f"no host in {url!r}")
    try:
        address = ipaddress.ip_address(raw)
    except ValueError:
        address = None
    if address is not None:
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        return str(address), address
    name = raw[:-1] if raw.endswith(".") else raw
    try:
        name = name.encode("idna").decode("ascii").lower()
    except UnicodeError:
        raise DestinationRefused(f"host {raw!r} is not a DNS name") from None
    labels = name.split(".")
    if not all(_LABEL.match(label) for label in labels):
        raise DestinationRefused(f"host {raw!r} is not a DNS name or an IP address")
    if _NUMERIC_LAST.match(labels[-1]):
        raise DestinationRefused(f"host {raw!r} is a numeric address in a non-standard form")
    return name, None


def host_of(raw: str) -> tuple[str, IpAddress | None]:
    """A host as `parse` normalises it (and its address when it is an IP literal); DestinationRefused else."""
    return _host(raw, raw)


def parse(url: str) -> Destination:
    """The destination of an egress URL; DestinationRefused (one line) for anything not plainly one: user-info
    (`https://sfu.example@169.254.169.254/`), a scheme other than http(s), a host that is not a plain DNS
    name or IP literal (percent-encoding, `0x7f.1`, `2130706433`), a path `_path` refuses."""
    if not isinstance(url, str) or any(c.isspace() or ord(c) < 0x20 for c in url) or "\\" in url:
        raise DestinationRefused(f"egress URL {url!r} has spaces, control characters or backslashes")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise DestinationRefused(f"egress URL {url!r}: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise DestinationRefused(f"egress URL must be http(s), got {url!r}")
    if "@" in parts.netloc:
        raise DestinationRefused(f"egress URL {url!r} carries user-info")
    host, address = _host(parts.hostname, url)
    path = _path(parts.path, url)
    port = port if port is not None else DEFAULT_PORTS[scheme]
    return Destination(scheme, host, port, path, address, parts.query)


def _path(raw: str, url: str) -> str:
    """The path decoded once; refused when a server could read it as another path: an encoded slash or
    backslash, a dot segment (also encoded), a `%` left after decoding (double encoding), `;` parameters
    (Tomcat and Spring strip them: `/whip/..;/admin`), NUL and other control characters."""
    if _ENCODED_SEPARATOR.search(raw):
        raise DestinationRefused(f"egress URL {url!r} has an encoded slash in its path")
    try:
        path = unquote(raw, errors="strict") if raw else "/"
    except UnicodeDecodeError:
        raise DestinationRefused(f"egress URL {url!r} has a path that is not UTF-8") from None
    if "%" in path:
        raise DestinationRefused(f"egress URL {url!r} is percent-encoded twice in its path")
    if ";" in path:
        raise DestinationRefused(f"egress URL {url!r} has ';' parameters in its path")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in path) or "\\" in path:
        raise DestinationRefused(f"egress URL {url!r} has NUL or control characters in its path")
    if any(segment in (".", "..") for segment in path.split("/")):
        raise DestinationRefused(f"egress URL {url!r} has dot segments in its path")
    return path if path.startswith("/") else "/" + path


@dataclass(frozen=True)
class AllowEntry:
    any: bool
    destination: Destination | None = None

    def matches(self, target: Destination) -> bool:
        """Scheme, host and port equal (both normalised by `parse`: the port defaulted by scheme, a name
        lower-case, IDNA-encoded, without a trailing dot, IPv6 canonical) and the path below the entry's at
        a segment boundary (`/whip` allows `/whip` and `/whip/1`, not `/whipper`); `*` matches any URL."""
        if self.any:
            return True
        entry = self.destination
        assert entry is not None
        if entry.origin != target.origin:
            return False
        return within(entry.path, target.path)


def within(prefix: str, path: str) -> bool:
    """Whether `path` is `prefix` or below it, at a segment boundary (both decoded, as `parse` gives them)."""
    if prefix.endswith("/"):
        return path.startswith(prefix)
    return path == prefix or path.startswith(prefix + "/")


def parse_entry(text: str) -> AllowEntry:
    """`*` or `scheme://host[:port][/path]` (no query, no user-info); ValueError (one line) otherwise."""
    if text.strip() == ANY:
        return AllowEntry(any=True)
    if urlsplit(text.strip()).query or urlsplit(text.strip()).fragment:
        raise ValueError(f"--egress-allow {text!r}: an entry has no query or fragment")
    try:
        return AllowEntry(any=False, destination=parse(text.strip()))
    except DestinationRefused as exc:
        raise ValueError(f"--egress-allow {text!r}: {exc}") from None


@dataclass(frozen=True)
class AllowList:
    entries: tuple[AllowEntry, ...] = ()

    @classmethod
    def parse(cls, texts: tuple[str, ...]) -> AllowList:
        return cls(tuple(parse_entry(t) for t in texts))

    def check(self, url: str) -> Destination:
        """The destination when `url` matches an entry (its address too, for an IP literal); else
        DestinationRefused. Host names still need `check_addresses` once resolved."""
        target = parse(url)
        entry = self._entry(target)
        if entry is None:
            raise DestinationRefused(f"egress to {url} is not allowed here (the gateway's --egress-allow)")
        if target.address is not None:
            self._check_address(entry, target, target.address)
        return target

    def scope(self, target: Destination) -> str:
        """The path prefix the endpoint's resources must stay within (its `Location`): the path of the entry
        that takes `target`; `/` (its origin) under `*`."""
        entry = self._entry(target)
        return entry.destination.path if entry is not None and entry.destination is not None else "/"

    def _entry(self, target: Destination) -> AllowEntry | None:
        named = [e for e in self.entries if not e.any and e.matches(target)]
        return named[0] if named else next((e for e in self.entries if e.any), None)

    def check_addresses(self, target: Destination, addresses: list[str]) -> None:
        """Every address `target`'s host resolved to must be allowed; DestinationRefused names the first
        that is not (a name resolving to nothing is refused as well)."""
        entry = self._entry(target)
        if entry is None:
            raise DestinationRefused(f"egress to {target.host} is not allowed here")
        if not addresses:
            raise DestinationRefused(f"egress host {target.host} resolves to no address")
        for text in addresses:
            self._check_address(entry, target, ipaddress.ip_address(text.split("%")[0]))

    def host_allows(self, host: str, port: int, address: str) -> bool:
        """For a connection about to be made to `address` for `host`:`port` (any entry with that host and
        port may vouch for it; the request's own path was checked before)."""
        candidates = [
            e
            for e in self.entries
            if e.any or (e.destination is not None and e.destination.origin[1:] == (host, port))
        ]
        ip = ipaddress.ip_address(address.split("%")[0])
        for entry in candidates:
            scheme = entry.destination.scheme if entry.destination is not None else "https"
            try:
                self._check_address(entry, Destination(scheme, host, port, "/", None), ip)
                return True
            except DestinationRefused:
                continue
        return False

    def may_reach(self, host: str) -> bool:
        """Whether some entry could take `host` on some port (`*`, or an entry naming it)."""
        return any(e.any or (e.destination is not None and e.destination.host == host) for e in self.entries)

    def ice_allows(self, host: str, address: str) -> bool:
        """For an ICE server the endpoint offers (gateway.egress.ice_servers): an entry names its host, on
        any port, and allows `address` for it; or `*` and a public address."""
        ip = ipaddress.ip_address(address.split("%")[0])
        for entry in self.entries:
            if entry.any or (entry.destination is not None and entry.destination.host == host):
                try:
                    self._check_address(entry, Destination("https", host, 0, "/", None), ip)
                    return True
                except DestinationRefused:
                    continue
        return False

    @staticmethod
    def _check_address(entry: AllowEntry, target: Destination, address: IpAddress) -> None:
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        named = entry.destination
        if named is not None and named.address is not None:
            if address == named.address:
                return  # the entry names this very address
        elif named is not None:
            if not addresses.unreachable_by_name(address):
                return  # the operator named this host: its own network's addresses are its business
        elif addresses.public(address):
            return
        carried = addresses.embedded_ipv4(address)
        shown = f"{address}, carrying {', '.join(map(str, carried))}" if carried else str(address)
        raise DestinationRefused(
            f"egress to {target.host} ({shown}) is not allowed: a {addresses.kind(address)} address that no "
            "--egress-allow entry names"
        )
