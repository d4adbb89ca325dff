"""DSCP names and numbers (gateway.webrtc.interop.dscp) and the mark on a real socket."""

from __future__ import annotations

import socket

import pytest

from gateway.cli import build_config, build_parser, main
from gateway.webrtc.interop.dscp import mark_socket, parse_dscp, tos_byte


def test_names_and_numbers() -> None:
    assert parse_dscp("af41") == 34 and parse_dscp("AF42") == 36 and parse_dscp("ef") == 46
    assert parse_dscp("0") == 0 and parse_dscp("63") == 63 and parse_dscp("0x22") == 34
    assert tos_byte(34) == 0x88 and tos_byte(46) == 0xB8


@pytest.mark.parametrize("bad", ["64", "-1", "af44", "", "video"])
def test_bad_values_name_the_choices(bad: str) -> None:
    with pytest.raises(ValueError, match="af41"):
        parse_dscp(bad)


def test_mark_socket_sets_the_tos_byte() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        assert sock.getsockopt(socket.IPPROTO_IP, socket.IP_TOS) == 0
        assert mark_socket(sock, parse_dscp("af41"))
        assert sock.getsockopt(socket.IPPROTO_IP, socket.IP_TOS) == 0x88


def test_cli_flag_and_its_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert build_config(build_parser().parse_args(["--media-dscp", "af41"])).ice.dscp == 34
    assert build_config(build_parser().parse_args([])).ice.dscp is None
    assert main(["--media-dscp", "af99"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "DSCP" in err
