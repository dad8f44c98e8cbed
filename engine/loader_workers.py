"""The worker processes of a DataLoader, ended by the process that started them.

Our workers ignore SIGTERM and SIGINT (a job-wide stop leaves them serving the step in progress) and end when their
loader's release flag is set, or when their parent is gone (``utils.worker_signals``). So that every way out ends
them, through public means only (``multiprocessing``'s RawValue and Process):

* ``WorkerGroup.started_by(make, release)``: the workers are the children that appeared while the iterator was
  made; ``end()`` sets the flag, waits ``GRACE_S`` and kills those still there (one stuck in C code that holds
  the interpreter's lock);
* ``ended_with(batches, group)``: an iteration that raises ends its workers before the error goes on (its
  traceback would keep the iterator, and so the workers, alive);
* at interpreter exit the groups not yet ended are: a daemon thread of ours waits for the main thread to finish,
  which Python marks before it runs the exit functions, and releases them while ``multiprocessing``'s joins every
  child (workers left running kept a finished process waiting for ever).

torch's own shutdown (at an epoch's end, or when an iterator is freed) still ends idle workers as it always does.
"""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable, Iterator
from multiprocessing.process import BaseProcess
from typing import Any

from simplepose.utils.worker_signals import serve_through_job_stops

GRACE_S = 5.0  # how long workers have to leave once released, before SIGKILL

_groups: set[WorkerGroup] = set()  # groups not yet ended, for the exit
_lock = threading.Lock()
_exit_watch: threading.Thread | None = None


class WorkerGroup:
    """The worker processes one DataLoader iterator started, and the flag that releases them (a shared
    ``multiprocessing.RawValue``)."""

    def __init__(self, processes: list[BaseProcess], release: Any) -> None:
        self.processes, self.release = processes, release

    @classmethod
    def started_by(cls, make: Callable[[], Any], release: Any) -> tuple[Any, WorkerGroup]:
        """``make()`` (``iter(loader)``) and the group of processes it started (none where it started none)."""
        before = set(multiprocessing.active_children())
        made = make()
        group = cls([p for p in multiprocessing.active_children() if p not in before], release)
        if group.processes:
            _watch(group)
        return made, group

    def end(self) -> None:
        """Release the workers, then SIGKILL for those still running after ``GRACE_S``."""
        with _lock:
            _groups.discard(self)
        if self.release is not None:
            self.release.value = 1
        for p in self.processes:
            try:
                p.join(GRACE_S)
                if p.is_alive():
                    p.kill()
                    p.join(GRACE_S)
            except RuntimeError as e:
                # torch's SIGCHLD handler, still set while the iterator lives, reports the worker killed here as a
                # failure of its own (torch 2.2 raises it inside this join): expected, not the error to report
                if "DataLoader worker" not in str(e):
                    raise
                p.join(GRACE_S)


def ended_with(batches: Iterator, group: WorkerGroup) -> Iterator:
    """``batches`` (a DataLoader's iterator); when its iteration raises, ``group`` ends before the error goes on. A
    normal end, or a consumer that stops early, leaves the workers to the loader (torch's shutdown, persistent
    workers)."""
    try:
        yield from batches
    except Exception:
        group.end()
        raise


def released_by(worker_id: int, release: Any = None, init: Callable[[int], None] | None = None) -> None:
    """A worker's ``worker_init_fn``: ``init(worker_id)``, then this worker ends when ``release`` turns non-zero."""
    if init is not None:
        init(worker_id)
    serve_through_job_stops(release)


def _watch(group: WorkerGroup) -> None:
    global _exit_watch
    with _lock:
        for done in [g for g in _groups if not any(p.is_alive() for p in g.processes)]:
            _groups.discard(done)  # ended by torch's own shutdown
        _groups.add(group)
        if _exit_watch is None:
            # a daemon, so that it can never hold the exit up: woken when the main thread ends, it releases the workers
            # while Python's exit functions run (multiprocessing's joins them)
            _exit_watch = threading.Thread(target=_end_at_exit, name="loader-workers-exit", daemon=True)
            _exit_watch.start()


def _end_at_exit() -> None:
    threading.main_thread().join()
    with _lock:
        left = list(_groups)
    for group in left:
        group.end()
