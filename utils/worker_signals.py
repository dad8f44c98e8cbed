"""Stop signals in a helper process (a DataLoader worker): deaf to the job's, released by the process it serves.

A job's manager (Slurm, torchrun, a terminal's Ctrl-C) may signal every process of a job at once. A worker that died
of it would make torch's loader fail the step in progress (its SIGCHLD handler raises for a dead worker), while the
training process finishes that step and saves before it stops (utils/stop_signals.py). So a worker ignores SIGTERM and
SIGINT, and a thread of its own ends it (exit status 0) when

* ``release`` (a shared ``multiprocessing.RawValue`` of its loader, ``engine.loader_workers``) turns non-zero: the
  training process is done with it, also while it is inside a sample;
* its parent is gone (killed outright: SIGKILL, the OOM killer).

Both are looked at every ``CHECK_S`` seconds. The flag takes no lock: a worker frozen while holding one (a C call that
keeps the interpreter's lock stops its every thread) would block the training process that sets it.
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

from simplepose.utils.stop_signals import STOP_SIGNALS

CHECK_S = 0.1


def serve_through_job_stops(release: Any = None) -> None:
    """In a worker process, before it serves (a DataLoader's ``worker_init_fn``): SIGTERM and SIGINT ignored, the
    process ended when ``release`` (a ``multiprocessing.RawValue``; None: never) turns non-zero or its parent is
    gone."""
    for s in STOP_SIGNALS:
        signal.signal(s, signal.SIG_IGN)
    parent = os.getppid()
    threading.Thread(target=_until_released, args=(release, parent), name="release", daemon=True).start()


def _until_released(release: Any, parent: int) -> None:
    pause = threading.Event()  # never set: a sleep
    while not (release is not None and release.value) and os.getppid() == parent:
        pause.wait(CHECK_S)
    os._exit(0)
