"""Stop requests by signal: SIGTERM (what SLURM, Kubernetes and torchrun send a job before they kill it) and SIGINT
(Ctrl-C) ask a training run to stop at its next step boundary, where it writes last.pt and says how to continue.

    with stop_requests():          # the training command, around the run (main thread; elsewhere: nothing)
        ...                        # the loop asks requested() at each step boundary (engine.hooks.CheckpointHook)

The handlers only record the signal; the loop decides when to act (every rank at the same step). A second Ctrl-C
stops at once (``KeyboardInterrupt``, as before: the steps since the last checkpoint are redone), except inside a
checkpoint's write (``uninterrupted``), which finishes first. A SIGINT less than ``ONE_CTRL_C_S`` after the first
SIGINT is that same Ctrl-C delivered twice, not a second: under torchrun the terminal sends a Ctrl-C to the agent
and its workers (one process group), and the agent passes it on to the workers again. A Ctrl-C after a SIGTERM is
always a second (no one Ctrl-C gives both). A second SIGTERM changes nothing (the job's manager sends SIGKILL when
its grace period ends). The exit status of a stopped run is ``128 + the signal`` (``exit_status``): 143 for SIGTERM,
130 for SIGINT, as a shell reports a process the signal ended.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
# seconds after a SIGINT within which another is the same Ctrl-C (torchrun's copy comes milliseconds after the
# terminal's); a person pressing Ctrl-C again after reading the line above takes longer
ONE_CTRL_C_S = 1.0
_received = 0  # the first stop signal received while the handlers are in place (0: none)
_received_at = 0.0  # when it came (time.monotonic)
_say = True  # whether the handler says that it received it
_saving = 0  # the depth of ``uninterrupted`` blocks under way
_interrupt_held = False  # a second Ctrl-C came during such a block
_ending = False  # this process ends on its stop (``ending``)


def requested() -> int:
    """The signal that asked this process to stop (``signal.SIGTERM``, ``signal.SIGINT``), 0 when none did."""
    return _received


def requested_in_group() -> int:
    """The stop signal of this process or of any process of its torchrun group (told through the group's rendezvous
    store: a process that received one posts it), 0 when none did: what a loop without a collective per step
    (validation) asks, so that every rank leaves it. One store lookup under torchrun; in one process, ``requested``."""
    from simplepose.utils import distributed as du

    store = du.get_store()
    if store is None:
        return _received
    key = f"simplepose/stop/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"
    if _received:
        du.post(store, key, str(_received))
        return _received
    return int(store.get(key)) if du.posted(store, key) else 0


@contextmanager
def uninterrupted() -> Iterator[None]:
    """A block (a checkpoint's write) that a second Ctrl-C does not cut short: its ``KeyboardInterrupt`` comes as
    the block ends."""
    global _saving, _interrupt_held
    _saving += 1
    try:
        yield
    finally:
        _saving -= 1
        if not _saving and _interrupt_held:
            _interrupt_held = False
            raise KeyboardInterrupt


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name


def stop_reason(signum: int) -> str:
    """How a stopped command's line begins: ``interrupted (SIGINT)`` or ``terminated (SIGTERM)``."""
    return "interrupted (SIGINT)" if signum == signal.SIGINT else f"terminated ({signal_name(signum)})"


def exit_status(signum: int) -> int:
    """The exit status of a run stopped by ``signum``: 128 + its number (143 for SIGTERM, 130 for SIGINT)."""
    return 128 + signum


def _same_ctrl_c() -> bool:
    """Whether a SIGINT now, after the first stop signal, is that first one's Ctrl-C delivered again."""
    return _received == signal.SIGINT and time.monotonic() - _received_at < ONE_CTRL_C_S


def _handle(signum: int, frame) -> None:
    global _received, _received_at, _interrupt_held
    if _received:
        if signum == signal.SIGINT and not _same_ctrl_c():
            if _saving:  # a checkpoint being written finishes first (``uninterrupted``)
                _interrupt_held = True
                return
            raise KeyboardInterrupt  # Ctrl-C again: stop now
        return
    _received, _received_at = signum, time.monotonic()
    if not _say:
        return
    # one write, safe in a handler (no lock taken); the progress bar shares stderr, hence the leading newline
    again = "; Ctrl-C again stops at once" if signum == signal.SIGINT else ""
    os.write(
        2, f"\n{signal_name(signum)} received: stopping after this step, with last.pt saved there{again}\n".encode()
    )


def ending() -> None:
    """This process ends on its stop, with its exit status (128 + the signal): SIGTERM stays ignored once the
    handlers go (torchrun's agent sends it to the processes left when the first exits, which would end one still
    leaving its process group with -15 instead)."""
    global _ending
    _ending = True


@contextmanager
def stop_requests(say: bool = True) -> Iterator[None]:
    """SIGTERM and SIGINT recorded (``requested``) instead of ending the process, while the block runs; the previous
    handlers back after it. ``say``: a line on stderr when the first arrives (one process of a group says it).
    Outside the main thread (where Python cannot set handlers) nothing changes."""
    global _received, _say, _interrupt_held, _ending
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, _handle) for s in STOP_SIGNALS}
    _received, _say = 0, say
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)
        if _ending:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        _received, _interrupt_held, _ending = 0, False, False
