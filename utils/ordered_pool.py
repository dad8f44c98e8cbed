"""``ordered_map``: a function over items in worker processes, results in the items' order, with a bounded number
of items in flight (the converter's decoding and mask drawing on every core: docs/benchmarks.md#scale).

    for result in ordered_map(prepare, items, workers=2):
        write(result)

Workers are started with "spawn": a fresh interpreter does not inherit the caller's memory (a forked one would, and
its garbage collector would copy the annotations of a whole dataset page by page). At most ``window`` chunks of
``chunk`` items are submitted ahead of the one being consumed, so a slow consumer never lets results pile up. With
``workers`` 0 the items are mapped here, in this process. An exception in a worker is raised here, with its type;
Ctrl-C stops the caller alone (workers ignore it), and the pool is shut down as the caller leaves.
"""

from __future__ import annotations

import multiprocessing
import signal
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from itertools import islice
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def _leave_interrupts_to_the_caller() -> None:
    """A worker ignores Ctrl-C (the terminal sends it to the whole process group): the caller stops, says so in its
    own words, and shuts the workers down; a worker would print a traceback of its own."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _apply(fn: Callable[[T], R], chunk: list[T]) -> list[R]:
    return [fn(item) for item in chunk]


def ordered_map(
    fn: Callable[[T], R], items: Iterable[T], workers: int, chunk: int = 16, window: int | None = None
) -> Iterator[R]:
    """``fn(item)`` of each item, in order, computed by ``workers`` spawned processes (0: in this one). ``fn`` must be
    a module-level function; items and results are pickled. ``window``: chunks in flight (default 2 per worker)."""
    if workers <= 0:
        yield from map(fn, items)
        return
    window = window or 2 * workers
    it = iter(items)
    pending: deque[Future] = deque()
    pool = ProcessPoolExecutor(
        workers, mp_context=multiprocessing.get_context("spawn"), initializer=_leave_interrupts_to_the_caller
    )
    try:
        while True:
            while len(pending) < window:
                part = list(islice(it, chunk))
                if not part:
                    break
                pending.append(pool.submit(_apply, fn, part))
            if not pending:
                break
            yield from pending.popleft().result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
