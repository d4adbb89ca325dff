"""--ice-public-address auto against a real STUN responder on loopback, made of aioice's own STUN message
code (independent of the gateway's Binding client): the address it reports is the one advertised; a server
that never answers, or a closed port, stops the start in one line."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aioice import stun

from gateway.cli import load_config
from gateway.stun_discovery import DiscoveryError, discover_public_address, mapped_address, parse_stun_url
from loadgen.embedded import free_port
from loadgen.processes import stop_process

ROOT = Path(__file__).resolve().parents[2]


class Responder(asyncio.DatagramProtocol):
    """Answers Binding requests with the address each came from (RFC 8489), as any STUN server does."""

    def __init__(self, attribute: str = "XOR-MAPPED-ADDRESS", answer: bool = True) -> None:
        self.attribute = attribute
        self.answer = answer
        self.seen: list[tuple[str, int]] = []
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # a datagram endpoint's transport

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        request = stun.parse_message(data)
        if (request.message_method, request.message_class) != (stun.Method.BINDING, stun.Class.REQUEST):
            return
        self.seen.append(addr)
        if not self.answer or self.transport is None:
            return
        response = stun.Message(
            message_method=stun.Method.BINDING,
            message_class=stun.Class.RESPONSE,
            transaction_id=request.transaction_id,
        )
        response.attributes[self.attribute] = addr
        response.attributes["SOFTWARE"] = "aioice test responder"
        self.transport.sendto(bytes(response), addr)


async def _serve(responder: Responder) -> tuple[asyncio.DatagramTransport, int]:
    transport, _ = await asyncio.get_running_loop().create_datagram_endpoint(
        lambda: responder, local_addr=("127.0.0.1", 0)
    )
    return transport, transport.get_extra_info("sockname")[1]  # type: ignore[return-value]


@pytest.fixture
async def responder() -> AsyncIterator[tuple[Responder, int]]:
    r = Responder()
    transport, port = await _serve(r)
    try:
        yield r, port
    finally:
        transport.close()


@pytest.mark.parametrize("attribute", ["XOR-MAPPED-ADDRESS", "MAPPED-ADDRESS"])
async def test_the_address_is_the_one_the_server_saw(attribute: str) -> None:
    responder = Responder(attribute)
    transport, port = await _serve(responder)
    try:
        # bound to 127.0.0.3: the answer must be the server's view, not this socket's default address
        address = await discover_public_address(f"stun:127.0.0.1:{port}", local_address="127.0.0.3")
    finally:
        transport.close()
    assert address == "127.0.0.3" and {a for a, _ in responder.seen} == {"127.0.0.3"}  # (retransmits too)


async def test_silence_and_a_closed_port_are_one_line_errors() -> None:
    silent = Responder(answer=False)
    transport, port = await _serve(silent)
    try:
        with pytest.raises(DiscoveryError, match="did not answer in 0.3 s"):
            await discover_public_address(f"stun:127.0.0.1:{port}", retries_s=(0.1, 0.2))
    finally:
        transport.close()
    assert len(silent.seen) == 2  # retransmitted
    with pytest.raises(DiscoveryError) as info:
        await discover_public_address(f"stun:127.0.0.1:{free_port()}", retries_s=(0.5, 0.5))
    assert "\n" not in str(info.value)


def test_a_response_to_another_transaction_or_not_a_success_is_ignored() -> None:
    request = stun.Message(message_method=stun.Method.BINDING, message_class=stun.Class.RESPONSE,
                           transaction_id=b"A" * 12)  # fmt: skip
    request.attributes["XOR-MAPPED-ADDRESS"] = ("198.51.100.4", 5000)
    assert mapped_address(bytes(request), b"A" * 12) == "198.51.100.4"
    assert mapped_address(bytes(request), b"B" * 12) is None
    error = stun.Message(message_method=stun.Method.BINDING, message_class=stun.Class.ERROR,
                         transaction_id=b"A" * 12)  # fmt: skip
    error.attributes["XOR-MAPPED-ADDRESS"] = ("198.51.100.4", 5000)
    assert mapped_address(bytes(error), b"A" * 12) is None
    v6 = stun.Message(message_method=stun.Method.BINDING, message_class=stun.Class.RESPONSE,
                      transaction_id=b"C" * 12)  # fmt: skip
    v6.attributes["XOR-MAPPED-ADDRESS"] = ("2001:db8::7", 5000)
    assert mapped_address(bytes(v6), b"C" * 12) == "2001:db8::7"
    assert mapped_address(b"\x01\x01\x00", b"A" * 12) is None


def test_auto_needs_a_stun_server_and_a_good_url() -> None:
    assert parse_stun_url("stun:stun.example") == ("stun.example", 3478)
    assert parse_stun_url("stun:[2001:db8::1]:19302") == ("2001:db8::1", 19302)
    with pytest.raises(ValueError, match="give one"):
        load_config(["--ice-public-address", "auto"], {})
    with pytest.raises(ValueError, match="stun:HOST"):
        load_config(["--ice-public-address", "auto", "--stun", "stun.example:3478"], {})
    env = {"LIVEFUSE_ICE_PUBLIC_ADDRESS": "auto", "LIVEFUSE_STUN": "stun:a.example"}
    config, steps = load_config([], env)
    assert steps.discover_address and config.ice.public_address is None
    config, steps = load_config(["--ice-public-address", "203.0.113.7"], {})
    assert not steps.discover_address and config.ice.public_address == "203.0.113.7"


async def test_the_gateway_asks_at_start_up_and_stops_in_one_line_without_an_answer(
    model_store: object, tmp_path: Path, responder: tuple[Responder, int]
) -> None:
    server, stun_port = responder
    port = free_port()
    argv = [sys.executable, "-m", "gateway.cli", "--host", "127.0.0.1", "--port", str(port),
            "--ice-loopback-only", "--processors", "none", "--event-log", "none", "--no-front-process",
            "--ice-public-address", "auto", "--stun", f"stun:127.0.0.1:{stun_port}"]  # fmt: skip
    log = tmp_path / "gateway.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    try:
        async with aiohttp.ClientSession() as http:
            end = time.monotonic() + 60
            while time.monotonic() < end:
                try:
                    async with http.get(f"http://127.0.0.1:{port}/healthz") as r:
                        if r.status == 200:
                            break
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.1)
        assert server.seen  # asked once (more on a machine too busy to answer within 0.5 s)
        text = log.read_text()
        assert f"ICE host candidates advertise 127.0.0.1 (asked of stun:127.0.0.1:{stun_port})" in text, text
    finally:
        stop_process(proc, 20)
    silent = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "--ice-public-address", "auto", "--stun",
         f"stun:127.0.0.1:{free_port()}", "--event-log", "none"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert silent.returncode == 2 and silent.stderr.count("\n") == 1, silent.stderr
    assert silent.stderr.startswith("gateway: error: --ice-public-address auto: STUN server")
