"""bench/network.py --shaper tc: how a profile is split between the kernel's qdiscs and the in-process
shaper, given which qdiscs the kernel has (pure; the real run is tests/integration/test_tc_shaper.py)."""

from __future__ import annotations

from types import ModuleType

import pytest

NO_NETEM = {"netem": "Error: Specified qdisc kind is unknown.", "tbf": None}
BOTH = {"netem": None, "tbf": None}


def load_bench_network() -> ModuleType:
    import bench.network

    return bench.network


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_bench_network()


def test_bottleneck_without_netem_is_kernel_tbf_plus_in_process_delay(bench: ModuleType) -> None:
    commands, rest, shaper = bench.plan_tc(bench.PROFILES["bottleneck-600k"], NO_NETEM)
    tbf = ["tbf", "rate", "600kbit", "burst", "1600", "latency", "200ms"]
    assert commands == [["tc", "qdisc", "add", "dev", "lo", "root", *tbf]]
    assert rest == "delay=20"
    assert "kernel tbf" in shaper and "in-process" in shaper


def test_netem_only_profile_is_refused_in_one_line_when_the_kernel_lacks_netem(bench: ModuleType) -> None:
    with pytest.raises(ValueError) as info:
        bench.plan_tc(bench.PROFILES["loss1"], NO_NETEM)
    message = str(info.value)
    assert "needs sch_netem" in message and "Specified qdisc kind is unknown" in message
    assert "--shaper udp" in message and "\n" not in message


def test_with_netem_everything_runs_in_the_kernel(bench: ModuleType) -> None:
    commands, rest, shaper = bench.plan_tc(bench.PROFILES["bottleneck-600k"], BOTH)
    assert rest is None and shaper == "kernel tc netem+tbf"
    assert commands[0][-3:] == ["netem", "delay", "20ms"]
    assert "tbf" in commands[1]
    _, rest, _ = bench.plan_tc(bench.PROFILES["loss1"], BOTH)
    assert rest is None


def test_no_tbf_refuses_a_bottleneck(bench: ModuleType) -> None:
    with pytest.raises(ValueError, match="no tbf"):
        bench.plan_tc(bench.PROFILES["bottleneck-600k"], {"netem": None, "tbf": "Error: unknown"})


def test_qdisc_counters_are_read_from_tc_s(bench: ModuleType) -> None:
    text = (
        "qdisc tbf 8006: root refcnt 2 rate 600Kbit burst 1599b lat 200ms \n"
        " Sent 255004 bytes 324 pkt (dropped 1008, overlimits 835 requeues 0) \n"
    )
    assert bench.qdisc_counters(text) == {"bytes": 255004, "packets": 324, "dropped": 1008, "overlimits": 835}
    assert bench.qdisc_counters("nothing") == {}


def test_per_direction_puts_the_gateways_mark_and_the_rest_through_their_own_tbf(bench: ModuleType) -> None:
    commands = [" ".join(c) for c in bench.per_direction_tc(bench.PROFILES["bottleneck-600k"])]
    leaves = [c for c in commands if " tbf " in c]
    assert len(leaves) == 2 and all("rate 600kbit" in c and "latency 200ms" in c for c in leaves)
    assert any("parent 1:10 handle 10:" in c for c in leaves)
    assert any("parent 1:20 handle 20:" in c for c in leaves)
    assert any("match ip tos 0x88 0xfc flowid 1:20" in c for c in commands)  # AF41 << 2: gateway -> publisher
    assert any("match ip protocol 6 0xff flowid 1:30" in c for c in commands)  # TCP signalling unshaped
    assert "htb default 10" in commands[0]  # everything else: publisher -> gateway
    assert bench.GATEWAY_TOS == bench.parse_dscp(bench.GATEWAY_DSCP) << 2
    with pytest.raises(ValueError, match="bottleneck rate"):
        bench.per_direction_tc(bench.PROFILES["loss1"])


def test_qdisc_counters_per_handle(bench: ModuleType) -> None:
    text = (
        "qdisc htb 1: root refcnt 2 r2q 10 default 0x10 direct_packets_stat 0 direct_qlen 1000\n"
        " Sent 900 bytes 9 pkt (dropped 3, overlimits 0 requeues 0) \n"
        "qdisc tbf 10: parent 1:10 rate 600Kbit burst 1599b lat 200ms \n"
        " Sent 500 bytes 5 pkt (dropped 2, overlimits 7 requeues 0) \n"
        "qdisc tbf 20: parent 1:20 rate 600Kbit burst 1599b lat 200ms \n"
        " Sent 400 bytes 4 pkt (dropped 1, overlimits 1 requeues 0) \n"
    )
    by = bench.qdisc_counters_by_handle(text)
    assert by["1:"]["bytes"] == 900 and by["10:"]["dropped"] == 2 and by["20:"]["packets"] == 4


def test_per_direction_plan_needs_tbf_and_keeps_delay_in_process(bench: ModuleType) -> None:
    commands, rest, shaper = bench.plan_per_direction(bench.PROFILES["bottleneck-600k"], NO_NETEM)
    assert commands == bench.per_direction_tc(bench.PROFILES["bottleneck-600k"])
    assert rest == "delay=20" and shaper.startswith("kernel tbf per direction")
    with pytest.raises(ValueError, match="no tbf"):
        bench.plan_per_direction(bench.PROFILES["bottleneck-600k"], {"netem": None, "tbf": "Error: unknown"})
