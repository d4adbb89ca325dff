"""The replica's capacity and utilisation gauges: every resource a session costs, the tightest one binds."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.control.capacity import ResourceUse, estimate, usable_cores


def test_cpu_binds_when_codecs_and_transport_dominate() -> None:
    # measured shape on the 2-core box: 2 sessions use 0.55 cores of process CPU (0.05 idle), the batch
    # workers only 0.2 of 2 workers: the workers alone would claim 17 sessions, the CPU says 6
    got = estimate(
        [ResourceUse("cpu", 0.55, 2.0, baseline=0.05), ResourceUse("workers", 0.2, 2.0)], sessions=2
    )
    assert got.per_resource == {"cpu": 7, "workers": 18}
    assert got.capacity_sessions == 7 and got.binding == "cpu"
    assert got.utilisation == pytest.approx(0.275)


def test_gpu_binds_on_a_gpu_node() -> None:
    got = estimate([ResourceUse("cpu", 2.0, 16.0), ResourceUse("gpu", 0.6, 1.0)], sessions=12)
    assert got.binding == "gpu" and got.capacity_sessions == 18  # 0.05 GPU per session, 0.9 usable
    assert got.per_resource["cpu"] == 86
    assert got.utilisation == pytest.approx(0.6)


def test_no_evidence_no_number() -> None:
    idle = estimate([ResourceUse("cpu", 0.05, 2.0, baseline=0.05)], sessions=0)
    assert idle.capacity_sessions is None and idle.utilisation == pytest.approx(0.025)
    assert estimate([], sessions=3).capacity_sessions is None
    # a resource with no per-session cost does not bound the count
    assert estimate([ResourceUse("cpu", 0.05, 2.0, baseline=0.05)], sessions=1).capacity_sessions is None


def test_overload_reports_utilisation_above_one_and_zero_headroom() -> None:
    got = estimate([ResourceUse("cpu", 2.0, 2.0)], sessions=10)
    assert got.capacity_sessions == 9 and got.utilisation == pytest.approx(1.0)
    over = estimate([ResourceUse("workers", 3.0, 2.0)], sessions=10)
    assert over.utilisation == pytest.approx(1.5) and over.capacity_sessions == 6


def test_usable_cores_honours_the_cgroup_quota(tmp_path: Path) -> None:
    (tmp_path / "cpu.max").write_text("50000 100000\n")
    assert usable_cores(str(tmp_path)) == pytest.approx(min(0.5, usable_cores(str(tmp_path / "none"))))
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert usable_cores(str(tmp_path)) == usable_cores(str(tmp_path / "none")) >= 1
