"""gateway.cpu_slice: the media threads' short scheduler slice, asked of the kernel, kept by later threads,
given back by the workers and children that do not carry video. Each case runs in a fresh interpreter: the
setting belongs to the process that asks for it."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.cli import build_config, build_parser
from gateway.config import GatewayConfig

ROOT = Path(__file__).resolve().parents[2]


def _kernel_has_custom_slices() -> bool:
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "aarch64"):
        return False
    major, minor = (int(x) for x in platform.release().split(".")[:2])
    return (major, minor) >= (6, 12)


SUPPORTED = _kernel_has_custom_slices()

PROBE = r"""
import json, os, sys, threading
from gateway import cpu_slice

def slices():
    out = {}
    for task in os.listdir("/proc/self/task"):
        text = open(f"/proc/self/task/{task}/sched").read()
        out[int(task)] = int(text.split("se.slice")[1].split()[1])
    return out

def own():
    return slices()[threading.get_native_id()]

before = own()
os.nice(3)
early = threading.Event(); stop = threading.Event()
t = threading.Thread(target=lambda: (early.set(), stop.wait())); t.start(); early.wait()
result = cpu_slice.apply_to_process(int(sys.argv[1]))
after = slices()
seen = {}
def later():
    seen["later"] = own()
    cpu_slice.reset_thread()
    seen["worker_reset"] = own()
    seen["main_meanwhile"] = slices()[os.getpid()]
w = threading.Thread(target=later); w.start(); w.join()
cpu_slice.reset_process()
stop.set(); t.join()
print(json.dumps({
    "result": result.__dict__,
    "before": before, "after": sorted(set(after.values())), "threads": len(after),
    "nice": os.getpriority(os.PRIO_PROCESS, 0), "reset": own(), **seen,
}))
"""


def _probe(slice_us: int) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(slice_us)], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout))


@pytest.mark.skipif(not Path("/proc/self/sched").exists(), reason="needs Linux's /proc/<pid>/sched")
def test_every_thread_gets_the_slice_later_threads_inherit_it_and_workers_give_it_back() -> None:
    got = _probe(300)
    result = got["result"]
    assert isinstance(result, dict)
    if not SUPPORTED:
        assert result["applied"] is False
        assert "6.12" in str(result["why_not"]) or "sched_setattr" in str(result["why_not"])
        assert got["after"] == [got["before"]]  # and nothing changed
        return
    assert result["applied"] is True and result["slice_ns"] == 300_000, result
    assert result["threads"] == got["threads"] >= 2  # the main thread and the one started before
    assert got["after"] == [300_000]  # every thread, the earlier one included
    assert got["later"] == 300_000  # a thread made afterwards inherits it
    assert got["worker_reset"] == got["before"] != 300_000  # a worker for requests gives it back ...
    assert got["main_meanwhile"] == 300_000  # ... for itself only
    assert got["reset"] == got["before"]  # a child that inherited it gives it all back
    assert got["nice"] == 3  # the weight is untouched: only the slice changes


@pytest.mark.skipif(not SUPPORTED, reason="custom slices need Linux 6.12+")
def test_slice_is_clamped_to_the_kernels_range_and_zero_asks_for_nothing() -> None:
    short = _probe(20)["result"]
    assert isinstance(short, dict) and short["slice_ns"] == 100_000  # the kernel's floor, 0.1 ms
    none = _probe(0)
    assert none["result"] == {"applied": False, "threads": 0, "slice_ns": 0, "why_not": "not asked for"}
    assert none["after"] == [none["before"]]


def test_config_takes_300_us_by_default_0_for_the_kernels_and_refuses_nonsense() -> None:
    assert build_config(build_parser().parse_args([])).cpu_slice_us == 300
    assert build_config(build_parser().parse_args(["--cpu-slice-us", "0"])).cpu_slice_us == 0
    assert build_config(build_parser().parse_args(["--cpu-slice-us", "1000"])).cpu_slice_us == 1000
    for bad in (-1, 50, 200_000):
        with pytest.raises(ValueError, match="cpu slice"):
            GatewayConfig(cpu_slice_us=bad)


def test_the_cli_refuses_a_bad_slice_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from gateway.cli import main

    assert main(["--cpu-slice-us", "50"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gateway: error: cpu slice") and "\n" not in err
