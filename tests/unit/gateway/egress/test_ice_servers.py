"""The ICE servers an endpoint offers pass the egress allow-list before they are used."""

from __future__ import annotations

from aiortc import RTCIceServer

from gateway.egress.destinations import AllowList
from gateway.egress.ice_servers import IceServerCheck


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
