"""DataLoader workers and stop signals: a job-wide SIGTERM or Ctrl-C leaves them to the training process, which
ends them itself (its SIGTERM, torch's shutdown, Python's exit); a loader's error ends its workers at once."""

from __future__ import annotations

import multiprocessing
import signal
import subprocess
import sys
import time

import pytest
import torch
from torch.utils.data import Dataset

from simplepose.data.batching import worker_init_fn
from simplepose.engine.batches import ForkSafeLoader
from simplepose.utils.stop_signals import stop_requests

pytestmark = pytest.mark.skipif(
    not hasattr(signal, "sigwaitinfo"), reason="sigwaitinfo is missing here: workers keep SIGTERM's default"
)


class Numbers(Dataset):
    def __init__(self, size: int = 64, fail_at: int = -1):
        self.size, self.fail_at = size, fail_at

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, i: int) -> torch.Tensor:
        if i == self.fail_at:
            raise ValueError(f"sample {i} is unreadable")
        return torch.tensor([i])


def wait_dead(process: multiprocessing.Process, seconds: float = 10.0) -> bool:
    process.join(seconds)
    return not process.is_alive()


def signal_from_elsewhere(pid: int, signum: int) -> None:
    """``signum`` sent to ``pid`` by another process, as a job manager sends it to every process of a job."""
    subprocess.run(["kill", f"-{signum}", str(pid)], check=True)


def serve(ready) -> None:
    """A DataLoader worker's life: set up as ours are, then serve until ended."""
    worker_init_fn(0)
    ready.set()
    while True:
        time.sleep(0.05)


def test_a_worker_outlives_a_job_wide_stop_and_ends_on_its_parents_sigterm():
    fork = multiprocessing.get_context("fork")  # as DataLoader starts its workers on Linux
    ready = fork.Event()
    with stop_requests(say=False):  # forked while training runs: the training process's handlers are inherited
        worker = fork.Process(target=serve, args=(ready,), daemon=True)
        worker.start()
    assert ready.wait(30)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal_from_elsewhere(worker.pid, signum)
    time.sleep(0.5)
    assert worker.is_alive()
    worker.terminate()  # SIGTERM from this process: what torch's shutdown and Python's exit send
    assert wait_dead(worker), "the worker ignored its parent's SIGTERM: an exit that joins it would wait for ever"
    assert worker.exitcode == -signal.SIGTERM


def test_a_loaders_error_ends_its_workers_before_the_traceback_is_dropped():
    before = set(multiprocessing.active_children())
    loader = ForkSafeLoader(Numbers(fail_at=5), batch_size=2, num_workers=2, worker_init_fn=worker_init_fn)
    with pytest.raises(ValueError, match="sample 5 is unreadable") as raised:
        for _ in loader:
            pass
    assert raised.value is not None  # the traceback, which holds torch's iterator, is still alive here
    workers = [p for p in multiprocessing.active_children() if p not in before]
    assert all(wait_dead(w, 5) for w in workers), f"workers left running after the error: {workers}"


def test_an_interpreter_holding_a_failed_loader_exits():
    """The hang this guards against: Python's exit sends SIGTERM to the loader's workers and joins them; a worker
    that ignored SIGTERM kept the process (and a CI job reading its output) waiting for ever."""
    code = (
        "import sys, torch\n"
        "from torch.utils.data import DataLoader\n"
        "from simplepose.data.batching import worker_init_fn\n"
        "class D(torch.utils.data.Dataset):\n"
        "    def __len__(self): return 8\n"
        "    def __getitem__(self, i): return torch.tensor([i])\n"
        "batches = iter(DataLoader(D(), batch_size=2, num_workers=2, worker_init_fn=worker_init_fn))\n"
        "next(batches)\n"
        "sys.modules['__main__'].kept = batches._workers  # alive at exit, as a kept traceback keeps them\n"
        "batches._shutdown_workers = lambda: None  # torch's own shutdown out of the way: only the exit's remains\n"
        "print('ready', flush=True)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ready", r.stderr[-2000:]
