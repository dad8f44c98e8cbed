"""Stall detection for multi-process runs: a process that makes no progress for ``dist.timeout_s`` ends the run.

A rank that hangs without dying (a dead network mount, a deadlock, a stuck data read) keeps every other process
waiting in its next collective until NCCL's or gloo's own timeout, often with no word on which rank or which step.
Each process runs a ``Watchdog`` thread; the training loop and the evaluator call ``beat(phase, where)`` as they
go. When no beat has come for ``timeout_s``, the watchdog looks at where its main thread is (inside a
torch.distributed collective, or busy elsewhere in the code), posts that to the rendezvous store, reads what the
other ranks posted, and prints one ``error:`` line naming the stuck rank(s), the phase, the step and the line of
code, ending with the checkpoint and the command that continue the run (``continue_hint``); then it ends the process
with ``EXIT_STALLED``. Under ``torchrun --max-restarts`` the group restarts and
resumes from ``last.pt``.

``beat`` is a no-op while no watchdog runs (one process, or evaluation alone).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch.distributed as dist

from simplepose.utils import distributed as du

log = logging.getLogger(__name__)

EXIT_STALLED = 75  # sysexits' EX_TEMPFAIL: try again (a restart resumes)
REPO_ROOT = Path(__file__).resolve().parents[1]
_WAITING_IN = (os.sep.join(("torch", "distributed")), os.sep.join(("torch", "nn", "parallel")))

_active: Watchdog | None = None
_continue_hint: Callable[[], str] | None = None  # where and how the run continues (``continue_hint``)


def beat(phase: str, where: str = "") -> None:
    """Record progress: this process is now in ``phase`` (e.g. "forward pass") at ``where`` (e.g. the step)."""
    if _active is not None:
        _active.phase, _active.where, _active.last = phase, where, time.monotonic()


@contextmanager
def continue_hint(hint: Callable[[], str]) -> Iterator[None]:
    """While the block runs, a stall's line ends with ``hint()``: the checkpoint the run continues from and the
    command that does it (``engine.run``)."""
    global _continue_hint
    previous, _continue_hint = _continue_hint, hint
    try:
        yield
    finally:
        _continue_hint = previous


def main_thread_location() -> tuple[bool, str]:
    """(waiting in a collective, ``file:line (function)`` of the innermost frame of this repository's code) of the
    main thread."""
    ident = threading.main_thread().ident
    frame = sys._current_frames().get(ident) if ident is not None else None
    waiting, code = False, "unknown"
    while frame is not None:
        name = frame.f_code.co_filename
        waiting = waiting or any(part in name for part in _WAITING_IN)
        if code == "unknown" and name.startswith(str(REPO_ROOT)):
            code = f"{Path(name).relative_to(REPO_ROOT)}:{frame.f_lineno} ({frame.f_code.co_name})"
        frame = frame.f_back
    return waiting, code


_stalled = threading.Event()  # this process's watchdog is reporting a stall, after which it ends the process


def stall_reported() -> bool:
    """True once this process's watchdog has begun its stall report (its line is this rank's one; it then exits)."""
    return _stalled.is_set()


class Watchdog:
    """Ends the process when no ``beat`` came for ``timeout_s`` seconds (see the module docstring).

    ``store``: the rendezvous store shared by the ranks (where they compare notes on a stall), or None."""

    def __init__(self, timeout_s: float, rank: int, world_size: int, store: dist.Store | None) -> None:
        self.timeout_s, self.rank, self.world_size, self.store = timeout_s, rank, world_size, store
        self.last, self.phase, self.where = time.monotonic(), "start-up", ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="stall-watchdog", daemon=True)

    def __enter__(self) -> Watchdog:
        global _active
        _active = self
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        global _active
        _active = None
        self._stop.set()

    def _watch(self) -> None:
        while not self._stop.wait(min(5.0, self.timeout_s / 5)):
            if time.monotonic() - self.last > self.timeout_s:
                _stalled.set()
                log.critical(self.report())
                sys.stderr.flush()
                # the first process to exit makes torchrun end the others: wait (briefly) until every rank that
                # answered has written its own line, so that no rank's report is lost
                self.wait_for_reports()
                os._exit(EXIT_STALLED)

    def _state(self) -> str:
        waiting, code = main_thread_location()
        where = f" at {self.where}" if self.where else ""
        return f"{int(waiting)}|{self.phase}{where}|{code}"

    def compare_notes(self, mine: str, wait_s: float = 3.0) -> dict[int, str]:
        """Post this rank's state and collect the others' (those that answer within ``wait_s``; a rank whose
        process has ended on this host is not waited for)."""
        return du.compare_notes(
            self.store, "stalled", self.rank, self.world_size, mine, wait_s,
            enough=lambda seen: all(r in seen or du.gone(r) for r in range(self.world_size)),
        )  # fmt: skip

    def wait_for_reports(self, wait_s: float = 3.0) -> None:
        """Mark this rank's report as written, then wait up to ``wait_s`` for the other ranks' marks."""
        if self.store is None:
            return
        try:
            du.post(self.store, f"reported/{self.rank}", "1")
            others = [f"reported/{r}" for r in range(self.world_size) if r != self.rank]
            deadline = time.monotonic() + wait_s
            while others and time.monotonic() < deadline and not all(du.posted(self.store, k) for k in others):
                time.sleep(0.1)
        except Exception:  # noqa: BLE001  a store gone with a dead rank: nothing more to wait for
            pass

    def report(self) -> str:
        """One line: this rank, where it stopped, and which rank(s) are stuck outside a collective."""
        seen = self.compare_notes(self._state())
        waiting, place, code = seen[self.rank].split("|", 2)
        state = "waiting in a collective" if waiting == "1" else f"busy in {code}"
        line = f"rank {self.rank} made no progress for {self.timeout_s:g} s (dist.timeout_s) in the {place}, {state}"
        stuck = {r: v.split("|", 2) for r, v in seen.items() if v.split("|", 1)[0] == "0"}
        if stuck and len(stuck) < self.world_size:
            line += "; stuck: " + "; ".join(f"rank {r} in the {p}, busy in {c}" for r, (_, p, c) in stuck.items())
        silent = sorted(set(range(self.world_size)) - set(seen))
        ended = [r for r in silent if du.gone(r)]
        if ended:
            line += f"; rank {', '.join(map(str, ended))} is gone (its process ended)"
        if silent != ended and self.store is not None:
            others = [r for r in silent if r not in ended]
            line += f"; no answer from rank {', '.join(map(str, others))} (dead, or hung outside Python)"
        tail = f"; {_continue_hint()}" if _continue_hint is not None else ""
        return (
            f"{line}. The run stops here (exit code {EXIT_STALLED}){tail}; under torchrun --max-restarts the group "
            f"restarts and resumes from last.pt by itself. If that process is only slow (a long validation, a slow "
            f"disk), raise dist.timeout_s"
        )
