"""The worker processes of a DataLoader, ended by the process that started them.

Our workers ignore SIGTERM and SIGINT (``utils.stop_signals.ignore_stop_signals``): a job's manager may signal every
process of a job, and the training process finishes its step before it stops them. That also makes them deaf to the
SIGTERM with which torch's shutdown and Python's exit end workers that did not leave on their own; a worker stuck in
a sample, or a loader still referenced when the interpreter exits (by an error's traceback), then kept the process
waiting for ever (seen as a test suite that hung after its last line). So:

* ``ended_with(batches)``: the iterator's workers end as soon as the iteration does, also when it raises (torch's
  own shutdown, then SIGKILL for any worker still alive);
* at exit, before ``multiprocessing`` joins its children, the workers of iterators still alive are killed.
"""

from __future__ import annotations

import atexit
import multiprocessing.util  # noqa: F401  (its exit function registered first: ours, registered below, runs before it)
import weakref
from collections.abc import Iterator
from typing import Any

_alive: weakref.WeakSet = weakref.WeakSet()  # iterators whose workers may still run


def ended_with(batches: Any) -> Iterator:
    """``batches`` (a DataLoader's iterator), whose worker processes end with the iteration, whichever way it ends
    (tracked at once: its workers run from now on, also if no batch is ever asked for)."""
    if getattr(batches, "_workers", None):
        _alive.add(batches)
    return _until_done(batches)


def _until_done(batches: Any) -> Iterator:
    try:
        yield from batches
    finally:
        end_workers(batches)


def end_workers(batches: Any) -> None:
    """torch's shutdown of the iterator's workers (a sentinel each, then a wait of a few seconds), then SIGKILL for
    those still running."""
    shutdown = getattr(batches, "_shutdown_workers", None)
    if shutdown is not None:
        shutdown()
    for worker in getattr(batches, "_workers", ()):
        if worker.is_alive():
            worker.kill()
            worker.join(5)
    _alive.discard(batches)


@atexit.register
def _end_all() -> None:
    for batches in list(_alive):
        end_workers(batches)
