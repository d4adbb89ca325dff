"""bench.vs_stock's configuration from its command line."""

from __future__ import annotations

import pytest

import bench.vs_stock as bvs


def test_quick_mode_and_fixed_points_from_the_command_line() -> None:
    quick = bvs.config_from_args(bvs.build_parser().parse_args(["--quick"]))
    assert quick.window_s == 3.0 and quick.capacity.stable_windows == 2 and quick.capacity.max_jobs == 10
    assert quick.max_time_per_design_s == 150.0
    fixed = bvs.config_from_args(
        bvs.build_parser().parse_args(
            [
                "--jobs",
                "1",
                "4",
                "--resolution",
                "640x360",
                "--designs",
                "gateway",
                "--gateway-arg=--batch-wait=window",
            ]
        )
    )
    assert fixed.jobs == (1, 4) and (fixed.width, fixed.height) == (640, 360)
    assert fixed.designs == ("gateway",)
    gw = bvs.server_config("gateway", fixed)
    argv = gw.argv(8123)
    assert "--no-degradation" in argv and "--batch-wait=window" in argv and "--ice-loopback-only" in argv
    stock = bvs.server_config("stock-inline", fixed).argv(8124)
    assert stock[1:3] == ["-m", "bench.stock_server"] and stock[-2:] == ["--mode", "inline"]
    with pytest.raises(ValueError, match="resolution"):
        bvs.config_from_args(bvs.build_parser().parse_args(["--resolution", "big"]))
    with pytest.raises(ValueError, match="unknown design"):
        bvs.server_config("nginx", fixed)
