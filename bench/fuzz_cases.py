"""The fuzz rig's cases, pure: a real offer mutated into malformed SDP, trickle fragments, image bombs, bad
headers and request lines (sent on a raw socket), huge bodies, every endpoint with every method.

Apart from the sending (bench.fuzz) so that the same seeded cases can be sent at full rate, one at a time with
their CPU charged per kind, or looked at in a test without a network.
"""

from __future__ import annotations

import random
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

SDP = "application/sdp"
TRICKLE = "application/trickle-ice-sdpfrag"
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "PROPFIND")


@dataclass(frozen=True)
class FuzzCase:
    kind: str
    method: str
    path: str
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    raw: bytes | None = None  # sent as-is on a socket (bad request lines, non-UTF-8 headers)


# --- image bombs ---
def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_bomb(width: int, height: int, rows: int | None = None) -> bytes:
    """A valid 1-bit greyscale PNG: tiny, but width*height*3 bytes once decoded to colour."""
    ihdr = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    comp = zlib.compressobj(9)
    row = b"\x00" * (1 + (width + 7) // 8)
    data = b"".join(comp.compress(row) for _ in range(height if rows is None else rows)) + comp.flush()
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", data) + _chunk(b"IEND", b"")


def jpeg_header(width: int, height: int) -> bytes:
    sof = (
        b"\xff\xc0" + struct.pack(">HBHHB", 17, 8, height, width, 3) + b"\x01\x22\x00\x02\x11\x01\x03\x11\x01"
    )
    return b"\xff\xd8" + sof + b"\xff\xd9"


@dataclass(frozen=True)
class Bombs:
    """Built once per run (the 20000x20000 PNG takes a second to compress)."""

    big_png: bytes
    header_png: bytes
    header_jpeg: bytes

    @classmethod
    def build(cls) -> Bombs:
        return cls(png_bomb(20000, 20000), png_bomb(65535, 65535, rows=0), jpeg_header(65500, 65500))


# --- SDP mutations ---
def _mutate_sdp(rng: random.Random, offer: str) -> bytes:
    lines = offer.split("\r\n")
    choice = rng.randrange(18)
    i = rng.randrange(len(lines))
    if choice == 0:
        del lines[i]
    elif choice == 1:
        lines.insert(i, lines[rng.randrange(len(lines))])
    elif choice == 2:
        j = rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    elif choice == 3:
        return offer.encode()[: rng.randrange(len(offer))]
    elif choice == 4:
        lines[i] = rng.randbytes(rng.randint(1, 80)).decode("latin-1")
    elif choice == 5:
        lines = [ln for ln in lines if not ln.startswith("a=group:BUNDLE")]
        lines.insert(
            4, "a=group:BUNDLE " + " ".join(rng.choice(["-1", "0", "1", "7", "x", ""]) for _ in range(3))
        )
    elif choice == 6:
        lines = [ln for ln in lines if not ln.startswith("a=mid:") or rng.random() < 0.5]
    elif choice == 7:
        junk = rng.choice(["IN IP6 zz", "IN IP4 999.1.1.1", "IN", "IN IP4", "IN IP7 1.2.3.4", "IN IP4 ::1"])
        lines = [("c=" + junk if ln.startswith("c=") else ln) for ln in lines]
    elif choice == 8:
        lines = [
            (
                ln.split(" ")[0]
                + " "
                + rng.choice(["abc", "-1", "99999999999", ""])
                + " UDP/TLS/RTP/SAVPF 96"
                if ln.startswith("m=")
                else ln
            )
            for ln in lines
        ]
    elif choice == 9:
        lines.insert(i, "a=" + "x" * rng.choice([1000, 20000, 70000]))
    elif choice == 10:
        lines = [
            (
                f"a=rtpmap:{rng.choice(['96', 'x', '-5', '128'])} {rng.choice(['VP8', '', '/', 'H264/x'])}"
                if ln.startswith("a=rtpmap") and rng.random() < 0.5
                else ln
            )
            for ln in lines
        ]
        return "\r\n".join(lines).encode()
    elif choice == 11:
        return b"\xff\xfe" + offer.encode()[: rng.randrange(len(offer))] + b"\xc3\x28"
    elif choice == 12:
        return offer.replace("\r\n", "\n").encode()
    elif choice == 13:
        lines.insert(
            i,
            "a=candidate:"
            + " ".join(
                rng.choice(["1", "udp", "x", "999999999999", "host", "typ"])
                for _ in range(rng.randint(0, 12))
            ),
        )
    elif choice == 14:
        lines = [
            (f"a=setup:{rng.choice(['holdconn', '', 'x'])}" if ln.startswith("a=setup") else ln)
            for ln in lines
        ]
    elif choice == 15:
        lines = [
            (
                f"a=fingerprint:{rng.choice(['sha-999 AA', 'sha-256', ''])}"
                if ln.startswith("a=fingerprint")
                else ln
            )
            for ln in lines
        ]
    elif choice == 16:
        lines.insert(i, f"a=extmap:{rng.choice(['9999', '0', 'x'])} urn:x")
    else:
        lines.insert(
            i,
            rng.choice(
                [
                    "m=video 9 UDP/TLS/RTP/SAVPF",
                    "m=text 9 RTP/AVP 0",
                    "m=application 0 x",
                    "v=1",
                    "o=",
                    "b=AS:-1",
                    "a=ssrc:x",
                    "a=msid-semantic: WMS *" * 200,
                ]
            ),
        )
    return "\r\n".join(lines).encode("utf-8", "surrogateescape")


def _trickle(rng: random.Random) -> bytes:
    parts = []
    for _ in range(rng.randint(0, 6)):
        parts.append(
            rng.choice(
                [
                    "a=ice-ufrag:" + rng.choice(["abcd", "", "x" * 300]),
                    "a=ice-pwd:" + rng.choice(["0123456789abcdefghijkl", ""]),
                    "a=mid:" + rng.choice(["0", "1", "zz", ""]),
                    "a=candidate:1 1 udp 2130706431 127.0.0.1 "
                    + rng.choice(["9", "70000", "x", "-1"])
                    + " typ host",
                    "a=candidate:"
                    + " ".join(
                        rng.choice(["1", "udp", "x", "typ", "relay"]) for _ in range(rng.randint(0, 10))
                    ),
                    "a=end-of-candidates",
                    "m=video 9 RTP/AVP 0",
                    "garbage line",
                    rng.randbytes(20).decode("latin-1"),
                ]
            )
        )
    return "\r\n".join(parts).encode("utf-8", "surrogateescape")


def _raw(rng: random.Random, path: str, token: str | None) -> bytes:
    host = b"Host: 127.0.0.1\r\n"
    end = b"Connection: close\r\n\r\n"
    auth = f"Authorization: Bearer {token}\r\n".encode() if token else b""
    choice = rng.randrange(10)
    if choice == 0:
        return (
            b"DELETE "
            + path.encode()
            + b" HTTP/1.1\r\n"
            + host
            + b"Authorization: Bearer \xff\xfe\x80\r\n"
            + end
        )
    if choice == 1:
        return b"GET / HTTP/1.1\r\n" + host + b"X-Big: " + b"a" * rng.choice([9000, 70000]) + b"\r\n" + end
    if choice == 2:
        return (
            b"POST /whip HTTP/1.1\r\n"
            + host
            + auth
            + b"Content-Type: application/sdp\r\nContent-Length: -5\r\n"
            + end
        )
    if choice == 3:
        return b"POST /whip HTTP/1.1\r\n" + host + auth + b"Content-Length: 100\r\n" + end + b"v=0"
    if choice == 4:
        return (
            b"POST /sources HTTP/1.1\r\n"
            + host
            + auth
            + b"Transfer-Encoding: chunked\r\nContent-Type: image/png\r\n"
            + end
            + b"zz\r\n"
        )
    if choice == 5:
        return rng.randbytes(rng.randint(1, 200)) + b"\r\n\r\n"
    if choice == 6:
        return b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\n" + host + end
    if choice == 7:
        return b"GET http://evil.example/whip HTTP/1.1\r\n" + host + end
    if choice == 8:
        return b"GET /sessions HTTP/1.1\r\n" + host + b"Authorization: \xc3\x28\r\nCookie: \xff\r\n" + end
    return (
        b"PATCH "
        + path.encode()
        + b" HTTP/1.1\r\n"
        + host
        + auth
        + b"Content-Type: "
        + TRICKLE.encode()
        + b"\r\nIf-Match: \xff\r\nContent-Length: 3\r\n"
        + end
        + b"a=x"
    )


def generate_cases(
    rng: random.Random,
    offer: str,
    n: int,
    *,
    bombs: Bombs,
    live_session: str | None = None,
    own_session: str | None = None,
    token: str | None = None,
    max_body_bytes: int = 8 * 1024 * 1024,
) -> Iterator[FuzzCase]:
    """`n` cases, a fixed mix of every kind; `token` is the fuzzer's own (a tenant's), used on most requests
    so the parsers behind authentication are reached too. The live session is only ever PATCHed (never
    deleted), and with fragments that carry no usable candidate; `own_session` (one the fuzzer's tenant
    created) gets real trickle fragments, so the parser behind the ownership check is reached too."""
    sid = live_session or "unknown-session"
    paths = [
        "/whip",
        f"/whip/{sid}",
        "/whip/nope",
        f"/whep/{sid}",
        f"/whep/{sid}/nope",
        "/sources",
        "/sources/nope",
        "/sessions",
        f"/sessions/{sid}",
        "/api/stats",
        "/metrics",
        "/dashboard",
        "/dashboard.js",
        "/demo",
        "/healthz",
        "/readyz",
        "/",
        "/nonexistent",
        "/whip/%00",
        "/../../etc/passwd",
        "/sources/..%2f",
    ]
    auth = (("Authorization", f"Bearer {token}"),) if token else ()
    for _ in range(n):
        pick = rng.random()
        who = auth if rng.random() < 0.8 else rng.choice([(), (("Authorization", "Bearer wrong"),)])
        if pick < 0.30:
            target = rng.choice(
                ["/whip", "/whip", f"/whep/{sid}", "/whip?processors=bogus", "/whip?source=x"]
            )
            yield FuzzCase("sdp", "POST", target, (("Content-Type", SDP), *who), _mutate_sdp(rng, offer))
        elif pick < 0.42:
            target = rng.choice([f"/whip/{sid}", "/whip/nope", f"/whip/{own_session or sid}"])
            well_formed = own_session is not None and target.endswith(own_session) and rng.random() < 0.8
            etag = "*" if well_formed else rng.choice(["*", '"nope"', ""])
            ctype = TRICKLE if well_formed else rng.choice([TRICKLE, SDP, "text/plain"])
            headers = (("Content-Type", ctype), ("If-Match", etag), *who)
            body = _trickle(rng)
            if target.endswith(sid) and b"a=candidate" in body:  # nothing connects the live peer elsewhere
                body = body.replace(b"a=candidate", b"a=x-candidate")
            yield FuzzCase("trickle", "PATCH", target, headers, body)
        elif pick < 0.52:
            kind = rng.randrange(8)
            if kind == 0:
                body = bombs.big_png
            elif kind == 1:
                body = bombs.header_png
            elif kind == 2:
                body = bombs.header_jpeg
            elif kind == 3:
                body = png_bomb(64, 64)[: rng.randint(8, 80)]
            elif kind == 4:
                body = b"RIFF\x00\x00\x00\x00WEBPVP8 " + rng.randbytes(30)
            elif kind == 5:
                body = rng.randbytes(rng.randint(0, 2000))
            elif kind == 6:
                body = b"\xff\xd8" + rng.randbytes(300)
            else:
                body = png_bomb(rng.randint(1, 3000), rng.randint(1, 3000))
            ctype = rng.choice(["image/png", "image/jpeg", "image/webp", "image/gif", ""])
            headers = ((("Content-Type", ctype),) if ctype else ()) + who
            yield FuzzCase("image", "POST", "/sources", headers, body)
        elif pick < 0.62:
            yield FuzzCase(
                "raw", "RAW", rng.choice(["/whip/nope", f"/whip/{sid}"]), raw=_raw(rng, "/whip/nope", token)
            )
        elif pick < 0.67:
            target = rng.choice(["/whip", "/sources", f"/whep/{sid}", "/whip/nope"])
            size = rng.choice([max_body_bytes + 1, 2 * max_body_bytes, 200_000])
            ctype = {"/whip": SDP, "/sources": "image/png"}.get(target, SDP)
            yield FuzzCase("huge", "POST", target, (("Content-Type", ctype), *who), b"v=0\r\n" + b"a" * size)
        else:
            method = rng.choice(METHODS)
            target = rng.choice(paths)
            if method == "DELETE" and sid in target:
                target = target.replace(
                    sid, "nope"
                )  # the live session must live (it is owned by another tenant anyway)
            ctype = rng.choice([SDP, TRICKLE, "image/png", "application/json", "text/plain", ""])
            body = rng.randbytes(rng.randint(0, 300)) if method not in ("GET", "HEAD", "OPTIONS") else b""
            headers = ((("Content-Type", ctype),) if ctype else ()) + who
            yield FuzzCase("endpoint", method, target, headers, body)
