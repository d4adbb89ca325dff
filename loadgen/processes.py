"""Stopping a child process the one way the tools and tests do: SIGTERM, a grace period, then SIGKILL."""

from __future__ import annotations

import subprocess
from typing import Any


def stop_process(proc: subprocess.Popen[Any], grace_s: float = 10.0) -> int:
    """SIGTERM, then SIGKILL if it is still running after `grace_s`; its exit status. One already gone is
    only reaped."""
    if proc.poll() is None:
        proc.terminate()
        try:
            return proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait()
