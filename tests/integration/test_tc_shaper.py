"""The `--shaper tc` path of bench/network.py on the real kernel: a private network
namespace, the 600 kbit/s bottleneck as a real `tbf` on its `lo`, a real gateway and publisher inside it.
Asserts that the media really crossed the kernel's qdisc (its own byte/packet counters) and that a profile
the kernel cannot shape is refused in one line instead of running unshaped. Skips, saying why, where
`unshare` or tbf is not available."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.models  # the embedded gateway runs its default pipeline


def _qdiscs_or_skip() -> dict[str, str | None]:
    """The kernel's qdiscs as bench_network probes them; skips, saying why, without unshare, tc or tbf."""
    if shutil.which("unshare") is None or shutil.which("tc") is None:
        pytest.skip("needs unshare (util-linux) and tc (iproute2)")
    from bench.network import probe_qdiscs

    qdiscs: dict[str, str | None] = probe_qdiscs()
    if qdiscs["tbf"] is not None:
        pytest.skip(f"no tbf in a private network namespace here: {qdiscs['tbf']}")
    return qdiscs


def test_bottleneck_runs_through_kernel_tbf(tmp_path: Path) -> None:
    qdiscs = _qdiscs_or_skip()
    out = tmp_path / "network.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench.network", "--shaper", "tc",
         "--profiles", "bottleneck-600k,loss1", "--duration", "5", "--output", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    rows = {r["profile"]: r for r in json.loads(out.read_text())["profiles"]}
    bottleneck = rows["bottleneck-600k"]
    assert "error" not in bottleneck, bottleneck
    assert bottleneck["shaper"].startswith("kernel tc") or bottleneck["shaper"].startswith("kernel tbf")
    assert bottleneck["sent"] > 0
    bitrate = bottleneck["gateway_bitrate"]  # the gateway's sender, sampled inside the namespace
    assert bitrate and bitrate["samples"] > 0 and bitrate["target_kbps"], bitrate
    uplink = bottleneck["gateway_uplink"]  # the publisher's stream as the gateway saw it, and the REMB cap
    assert uplink and uplink["samples"] > 0 and uplink["loss"] is not None, uplink
    counters = bottleneck["qdisc"]
    assert counters and counters["packets"] > 100 and counters["bytes"] > 50_000, counters
    if qdiscs["netem"] is not None:
        assert "needs sch_netem" in rows["loss1"]["error"], rows["loss1"]
        assert done.returncode == 1  # a refused profile is a failed row, never a silent unshaped run
    else:
        assert "error" not in rows["loss1"], rows["loss1"]


def test_per_direction_bottlenecks_split_by_the_gateways_dscp_mark(tmp_path: Path) -> None:
    """--per-direction: the gateway marks its media AF41 (--media-dscp), u32 sends the marked packets
    through one tbf and the publisher's through the other. Both leaves must have carried media: the mark
    really is on the gateway's packets, and only on them (the publisher's stream fills the other)."""
    _qdiscs_or_skip()
    out = tmp_path / "network.json"
    subprocess.run(
        [sys.executable, "-m", "bench.network", "--shaper", "tc", "--per-direction",
         "--profiles", "bottleneck-600k", "--duration", "5", "--output", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    row = json.loads(out.read_text())["profiles"][0]
    assert "error" not in row, row
    assert row["shaper"].startswith("kernel tbf per direction") and row["received"] > 0, row
    split = row["qdisc_by_direction"]
    assert split is not None, row
    for direction in ("publisher_to_gateway", "gateway_to_publisher"):
        assert split[direction]["packets"] > 50 and split[direction]["bytes"] > 20_000, split
