"""Peak resident memory of this process over a stretch of code, for the bench scripts (Linux: /proc/self/statm;
elsewhere the process's high-water mark so far, which never comes down between stages)."""

from __future__ import annotations

import contextlib
import os
import resource
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def resident_mb() -> float:
    """This process's resident memory now, in MB (1e6 bytes); its high-water mark where /proc is missing."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * _PAGE / 1e6
    except OSError:
        return max_resident_mb()


def _children(pid: int) -> list[int]:
    """The child processes of ``pid`` (Linux)."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):  # the task ended meanwhile
            found += [int(c) for c in task.read_text().split()]
    return found


def tree_resident_mb(pid: int | None = None) -> float:
    """Resident memory of a process and of all its descendants (worker pools), in MB; ``resident_mb`` where /proc is
    missing. Pages they share are counted once per process."""
    pid = pid or os.getpid()
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            total += int(Path(f"/proc/{p}/statm").read_text().split()[1]) * _PAGE / 1e6
        except (OSError, IndexError, ValueError):
            if p == os.getpid():
                return resident_mb()
            continue
        todo += _children(p)
    return total


def max_resident_mb(children: bool = False) -> float:
    """The high-water mark of this process's (or of its largest waited-for child's) resident memory, in MB.

    For this process, Linux's VmHWM: the getrusage figure keeps the high-water mark of the process it was forked
    from across exec (a bench's child would report its parent's size). The children's figure has that flaw: read it
    only for children forked from a small process."""
    if not children:
        try:
            with open("/proc/self/status") as f:
                return next(int(line.split()[1]) * 1024 / 1e6 for line in f if line.startswith("VmHWM:"))
        except (OSError, StopIteration):
            pass
    peak = resource.getrusage(resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF).ru_maxrss
    return peak / 1e6 if sys.platform == "darwin" else peak * 1024 / 1e6  # bytes on macOS, KiB on Linux


class PeakSampler:
    """``with sampler.stage(): ...`` gives ``sampler.peak`` the largest resident memory (MB) seen during the block,
    read by a thread every ``interval`` seconds (and at both ends); with ``tree``, that of the process and its
    descendants together (``tree_resident_mb``)."""

    def __init__(self, interval: float = 0.002, tree: bool = False):
        self.interval = interval
        self.read = tree_resident_mb if tree else resident_mb
        self.peak = 0.0
        self._running = False

    def _watch(self) -> None:
        while self._running:
            self.peak = max(self.peak, self.read())
            time.sleep(self.interval)

    @contextmanager
    def stage(self):
        self.peak = self.read()
        self._running = True
        thread = threading.Thread(target=self._watch, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._running = False
            thread.join()
            self.peak = max(self.peak, self.read())
