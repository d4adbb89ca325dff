"""Short CPU slices for the media process's threads (issue 13, item 9).

Linux's fair scheduler (EEVDF, 6.6+) gives every runnable thread a time slice and serves the earliest virtual
deadline first; since 6.12 a thread may ask for a slice of its own (`sched_setattr`, `sched_runtime` for
SCHED_OTHER, 0.1-100 ms, no privilege needed), and a waking thread with a shorter slice may preempt one with
a longer slice at once instead of queueing behind it. Live video is many short jobs (a packet, a decode, an
engine call) that each wait for a core; request parsing, uploads and anything else on the machine are
longer. A short slice lets the media threads in first without raising their share of the CPU: their nice
value, and so their weight, stay as they were.

The setting is per thread and is inherited by threads created later, so `apply_to_process` sets every
thread the process has now and every later one follows. Processes the gateway starts inherit it too; the
front process and the image decoder put theirs back to the kernel's default (`reset_process`).
On a kernel without custom slices (before 6.12), or another OS, nothing changes and `apply_to_process` says
why in its result.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
import struct
from dataclasses import dataclass
from pathlib import Path

# struct sched_attr (include/uapi/linux/sched/types.h), the 56-byte version 1
SCHED_ATTR = struct.Struct("=IIQiIQQQII")
SYSCALLS = {"x86_64": (314, 315), "aarch64": (274, 275)}  # (sched_setattr, sched_getattr)
MIN_SLICE_NS = 100_000  # the kernel's clamp: 0.1 ms ..
MAX_SLICE_NS = 100_000_000  # .. 100 ms
SCHED_OTHER, SCHED_BATCH = 0, 3


@dataclass(frozen=True)
class SliceResult:
    applied: bool
    threads: int  # threads set
    slice_ns: int  # what the kernel reports for this thread afterwards (0 = unknown)
    why_not: str = ""


class _SchedAttr:
    """sched_getattr/sched_setattr through libc's syscall(): Python has neither."""

    def __init__(self) -> None:
        numbers = SYSCALLS.get(platform.machine())
        if os.name != "posix" or platform.system() != "Linux" or numbers is None:
            raise OSError(f"sched_setattr is not available on {platform.system()} {platform.machine()}")
        self._set_nr, self._get_nr = numbers
        self._libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)

    def get(self, tid: int) -> tuple[int, ...]:
        buf = ctypes.create_string_buffer(SCHED_ATTR.size)
        if self._libc.syscall(self._get_nr, tid, buf, SCHED_ATTR.size, 0) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
        return SCHED_ATTR.unpack(buf.raw)

    def set_slice(self, tid: int, slice_ns: int) -> int:
        """Set the thread's slice (0 = the kernel's default), keeping its policy and nice; the slice after."""
        _size, policy, _flags, nice, _prio, _runtime, _dl, _period, _umin, _umax = self.get(tid)
        if policy not in (SCHED_OTHER, SCHED_BATCH):
            return 0  # real-time or idle threads: left as the operator set them
        buf = ctypes.create_string_buffer(
            SCHED_ATTR.pack(SCHED_ATTR.size, policy, 0, nice, 0, slice_ns, 0, 0, 0, 0), SCHED_ATTR.size
        )
        if self._libc.syscall(self._set_nr, tid, buf, 0) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
        return int(self.get(tid)[5])


def _thread_ids() -> list[int]:
    try:
        return sorted(int(p.name) for p in Path("/proc/self/task").iterdir())
    except OSError:
        return [0]


def apply_to_process(slice_us: int) -> SliceResult:
    """Ask for `slice_us` microseconds for every thread of this process (0 = leave the kernel's default)."""
    if slice_us <= 0:
        return SliceResult(False, 0, 0, "not asked for")
    slice_ns = min(max(slice_us * 1000, MIN_SLICE_NS), MAX_SLICE_NS)
    try:
        attr = _SchedAttr()
        done = 0
        for tid in _thread_ids():
            try:
                attr.set_slice(tid, slice_ns)
                done += 1
            except ProcessLookupError:
                continue  # the thread ended meanwhile
        now = int(attr.get(0)[5])
    except OSError as exc:
        return SliceResult(False, 0, 0, f"sched_setattr failed: {exc.strerror or exc}")
    if now != slice_ns:  # before 6.12 the kernel ignores sched_runtime for fair threads
        why = f"the kernel kept its slice ({now} ns): custom slices need Linux 6.12+"
        return SliceResult(False, done, now, why)
    return SliceResult(True, done, now)


def reset_process() -> None:
    """Back to the kernel's default slice for every thread of this process (a child that inherited one)."""
    for tid in _thread_ids():
        _reset(tid)


def reset_thread() -> None:
    """Back to the kernel's default slice for the calling thread (a worker for requests, not for video)."""
    _reset(0)


def _reset(tid: int) -> None:
    try:
        _SchedAttr().set_slice(tid, 0)
    except OSError:
        pass  # ended meanwhile, or nothing could have been inherited where nothing can be set
