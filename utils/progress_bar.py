"""Progress of a long loop, the one rule for every command: a tqdm bar on a terminal, plain lines in a log file.

    for item in progress_bar(items, total=len(items), desc="eval", unit="img"):
        ...
    bar = progress_bar(total=steps, desc="epoch 3", unit="step", disable=not is_main)
    bar.update(1); bar.set_postfix(loss="0.12"); bar.close()

A bar redraws itself with carriage returns (``\\r``), which a log file (CI, ``nohup``, a pipe: stderr is not a
terminal) keeps as one ever-growing line, and which a terminal without a size (``script``) does not show at all. There
the same calls log plain lines instead (``logging``, INFO, so they go where the command's other lines go), one at each
tenth of the total and at least every ``every_s`` seconds while it runs (only the latter when the total is unknown),
and one at the end:

    eval 120/500 img (24 %), 3.1 img/s
    epoch 3 40/400 step (10 %), 2.4 step/s, loss=0.1204, lr=0.0025

A notebook (Jupyter) draws bars as a terminal does. ``close_bars()`` ends every open bar, so that an error message
starts on a line of its own.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Iterable, Iterator, Sized
from typing import Any, TextIO

from tqdm import tqdm

log = logging.getLogger(__name__)

EVERY_S = 30.0  # at most this long between two lines in a log file


def interactive(stream: TextIO | None = None) -> bool:
    """Whether ``stream`` (default: stderr, where tqdm draws) shows a bar as a bar: a terminal that has a width (a
    pseudo-terminal without a size, as under ``script`` or some CI runners, gets no bar drawn at all), or a
    notebook."""
    stream = stream if stream is not None else sys.stderr
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        tty = False
    return (tty and terminal_columns(stream) > 0) or "ipykernel" in sys.modules


def terminal_columns(stream: TextIO) -> int:
    """The width of the terminal ``stream`` writes to, in characters; 0 when it has none (or is no terminal)."""
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        return 0


def progress_bar(
    iterable: Iterable | None = None,
    total: int | None = None,
    desc: str = "",
    unit: str = "it",
    disable: bool = False,
    initial: int = 0,
    every_s: float = EVERY_S,
    **tqdm_options: Any,
):
    """A tqdm bar when stderr is interactive (``tqdm_options`` go to it, e.g. ``leave=False``), else a
    ``ProgressLines`` with the same ``update``, ``set_postfix``, ``close`` and iteration. ``total`` defaults to
    ``len(iterable)`` where it has one."""
    if total is None and isinstance(iterable, Sized):
        total = len(iterable)
    if disable or interactive():
        return tqdm(iterable, total=total, desc=desc, unit=unit, disable=disable, initial=initial, **tqdm_options)
    return ProgressLines(iterable, total, desc, unit, initial, every_s)


def close_bars() -> None:
    """Close every open tqdm bar (their lines end; a message printed next starts on a line of its own)."""
    for bar in list(getattr(tqdm, "_instances", ())):
        bar.close()


class ProgressLines:
    """What a progress bar tells, as plain lines in a log (see the module docstring)."""

    def __init__(
        self,
        iterable: Iterable | None,
        total: int | None,
        desc: str,
        unit: str,
        initial: int = 0,
        every_s: float = EVERY_S,
        clock=time.monotonic,
    ) -> None:
        self.iterable, self.total, self.desc, self.unit = iterable, total or None, desc, unit
        self.n = self.start_n = initial
        self.every_s, self.clock = every_s, clock
        self.started = self.last_line = clock()
        self.next_tenth = self._tenth_after(initial)
        self.postfix = ""
        self.closed = False
        self.said_at: int | None = None  # n of the last line

    def __iter__(self) -> Iterator:
        for item in self.iterable if self.iterable is not None else ():
            yield item
            self.update(1)
        self.close()

    def __enter__(self) -> ProgressLines:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def update(self, n: int = 1) -> None:
        self.n += n
        now = self.clock()
        due = self.total is not None and self.n >= self.next_tenth
        if due or now - self.last_line >= self.every_s:
            self.say(now)
            self.next_tenth = self._tenth_after(self.n)

    def set_postfix(self, ordered_dict: dict | None = None, refresh: bool = True, **values: Any) -> None:
        """Figures shown after the count (as tqdm's ``set_postfix``); they appear with the next line."""
        values = {**(ordered_dict or {}), **values}
        self.postfix = ", ".join(f"{k}={v}" for k, v in values.items())

    def set_description(self, desc: str = "", refresh: bool = True) -> None:
        self.desc = desc

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.n != self.said_at and self.n > self.start_n:
            self.say(self.clock())

    def line(self, now: float) -> str:
        """``desc n/total unit (p %), rate unit/s[, postfix]``."""
        count = f"{self.n}/{self.total}" if self.total else f"{self.n}"
        share = f" ({100 * self.n / self.total:.0f} %)" if self.total else ""
        elapsed = now - self.started
        rate = f", {(self.n - self.start_n) / elapsed:.3g} {self.unit}/s" if elapsed > 0 else ""
        text = f"{self.desc} {count} {self.unit}{share}{rate}".strip()
        return f"{text}, {self.postfix}" if self.postfix else text

    def say(self, now: float) -> None:
        log.info("%s", self.line(now))
        self.last_line, self.said_at = now, self.n

    def _tenth_after(self, n: int) -> float:
        """The next count at a whole tenth of the total past ``n`` (infinite without a total)."""
        if not self.total:
            return float("inf")
        tenth = self.total / 10
        return (int(n / tenth) + 1) * tenth
