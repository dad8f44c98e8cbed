"""Stall detection for multi-process runs: a process that makes no progress for ``dist.timeout_s`` ends the run.

A rank that hangs without dying (stuck in a collective, a dead network mount, a deadlock) would otherwise keep
every process waiting until NCCL's or gloo's own timeout, often with no word on which rank or which step. Each
process runs a ``Watchdog`` thread; the training loop and the evaluator call ``beat(phase, step)`` as they go, and
each beat is also posted to the rendezvous store, so that when no beat has come for ``timeout_s`` the watchdog can
say which rank is behind, in which phase of which step. It prints one ``error:`` line and ends the process with
``EXIT_STALLED``; under ``torchrun --max-restarts`` the group restarts and resumes from ``last.pt``.

``beat`` is a no-op while no watchdog runs (one process, or evaluation alone).
"""

from __future__ import annotations

import datetime
import os
import sys
import threading
import time

import torch.distributed as dist

EXIT_STALLED = 75  # sysexits' EX_TEMPFAIL: try again (a restart resumes)
PHASES = ("loading data", "forward pass", "backward pass", "optimizer step", "checkpoint", "validation")

_active: Watchdog | None = None


def beat(phase: str, where: str = "") -> None:
    """Record progress: this process is now in ``phase`` (one of PHASES) at ``where`` (e.g. the step)."""
    if _active is not None:
        _active.beat(phase, where)


class Watchdog:
    """Ends the process when no ``beat`` came for ``timeout_s`` seconds (see the module docstring).

    ``store``: the rendezvous store shared by the ranks (heartbeats are posted there), or None.
    ``global_step``: a callable giving the run's global step, for ordering the ranks' positions."""

    def __init__(self, timeout_s: float, rank: int, world_size: int, store: dist.Store | None, global_step) -> None:
        self.timeout_s, self.rank, self.world_size, self.store = timeout_s, rank, world_size, store
        self.global_step = global_step
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

    def beat(self, phase: str, where: str = "") -> None:
        self.last, self.phase, self.where = time.monotonic(), phase, where
        if self.store is not None:
            try:
                self.store.set(f"heartbeat/{self.rank}", f"{self.global_step()}|{PHASES.index(phase)}|{where}")
            except Exception:  # noqa: BLE001  the store is only for the report; training must not depend on it
                self.store = None

    def _watch(self) -> None:
        while not self._stop.wait(min(5.0, self.timeout_s / 5)):
            if time.monotonic() - self.last > self.timeout_s:
                print(f"error: {self.report()}", file=sys.stderr, flush=True)
                os._exit(EXIT_STALLED)

    def positions(self) -> dict[int, tuple[int, int, str]]:
        """Every rank's last heartbeat (global step, phase index, where) that the store holds."""
        if self.store is None:
            return {}
        self.store.set_timeout(datetime.timedelta(seconds=5))
        out = {}
        for r in range(self.world_size):
            key = f"heartbeat/{r}"
            try:
                if self.store.check([key]):
                    step, phase, where = self.store.get(key).decode().split("|", 2)
                    out[r] = (int(step), int(phase), where)
            except Exception:  # noqa: BLE001  a store gone with a dead rank: report what this rank knows
                break
        return out

    def report(self) -> str:
        """One line: this rank, where it stopped, and which rank(s) are behind the others."""
        mine = f"{self.phase} at {self.where}" if self.where else self.phase
        line = (f"rank {self.rank} made no progress for {self.timeout_s:g} s (dist.timeout_s) in the {mine}")
        seen = self.positions()
        if len(seen) > 1:
            earliest = min((s, p) for s, p, _ in seen.values())
            behind = sorted(r for r, (s, p, _) in seen.items() if (s, p) == earliest)
            if len(behind) < len(seen):
                r = behind[0]
                s, p, where = seen[r]
                names = ", ".join(map(str, behind))
                line += f"; stuck: rank {names} in the {PHASES[p]}" + (f" at {where}" if where else "")
                line += f", while the other ranks are past it (global step {max(s for s, _, _ in seen.values())})"
        silent = [r for r in range(self.world_size) if seen and r not in seen]
        if silent:
            line += f"; no heartbeat at all from rank {', '.join(map(str, silent))}"
        return (
            f"{line}. The run stops here (exit code {EXIT_STALLED}); under torchrun --max-restarts the group restarts "
            f"and resumes from last.pt. If that process is only slow (a long validation, a slow disk), raise "
            f"dist.timeout_s"
        )
