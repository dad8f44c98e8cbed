"""DataLoader workers and stop signals: a job-wide SIGTERM or Ctrl-C leaves them serving; the training process ends
them (engine/loader_workers.py, utils/worker_signals.py) when an iteration fails, with the last epoch, at exit, and
with SIGKILL for one that cannot leave; they end when it is killed. Workers deaf to every SIGTERM once kept a finished
process, and the CI job reading its output, waiting for ever in Python's exit."""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from torch.utils.data import Dataset

from simplepose.data.batching import worker_init_fn
from simplepose.engine.batches import ForkSafeLoader, TrainBatches
from simplepose.engine.loader_workers import GRACE_S
from tests.helpers import tiny_cfg

START_METHODS = ["fork", "forkserver"]  # Linux's default up to Python 3.13, and from 3.14


class Numbers(Dataset):
    """``size`` one-number samples; ``fail_at`` raises, ``stuck_at`` sleeps (a worker stuck without dying),
    ``frozen_at`` sleeps in C holding the interpreter's lock (no Python thread of the worker runs any more)."""

    def __init__(self, size: int = 64, fail_at: int = -1, stuck_at: int = -1, frozen_at: int = -1):
        self.size, self.fail_at, self.stuck_at, self.frozen_at = size, fail_at, stuck_at, frozen_at

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, i: int) -> torch.Tensor:
        if i == self.fail_at:
            raise ValueError(f"sample {i} is unreadable")
        if i == self.stuck_at:
            time.sleep(600)
        if i == self.frozen_at:
            ctypes.PyDLL(None).sleep(600)  # a PyDLL call keeps the GIL
        return torch.tensor([i])


def loader(dataset: Dataset, start_method: str, **kwargs) -> ForkSafeLoader:
    return ForkSafeLoader(dataset, batch_size=2, num_workers=2, worker_init_fn=worker_init_fn,
                          multiprocessing_context=start_method, **kwargs)  # fmt: skip


def new_children(before: set) -> list:
    return [p for p in multiprocessing.active_children() if p not in before]


def all_ended(workers: list, seconds: float = 10.0) -> bool:
    for w in workers:
        w.join(seconds)
    return not any(w.is_alive() for w in workers)


def signal_from_elsewhere(pid: int, signum: int) -> None:
    """``signum`` sent to ``pid`` by another process, as a job manager sends it to every process of a job."""
    subprocess.run(["kill", f"-{signum}", str(pid)], check=True)


@pytest.mark.parametrize("start_method", START_METHODS)
def test_workers_serve_through_a_job_wide_stop_and_end_with_their_loader(start_method):
    before = set(multiprocessing.active_children())
    batches = iter(loader(Numbers(), start_method))
    # a batch from each worker: both have run worker_init_fn (a signal before it ends a worker, as any process)
    assert [next(batches).tolist() for _ in range(2)] == [[[0], [1]], [[2], [3]]]
    workers = new_children(before)
    assert len(workers) == 2
    for w in workers:
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal_from_elsewhere(w.pid, signum)
    time.sleep(0.5)
    assert all(w.is_alive() for w in workers)
    assert [b.tolist() for b in batches][-1] == [[62], [63]]  # every batch came
    assert all_ended(workers)


@pytest.mark.parametrize("start_method", START_METHODS)
def test_a_loaders_error_ends_its_workers_before_the_traceback_is_dropped(start_method):
    before = set(multiprocessing.active_children())
    batches = iter(loader(Numbers(fail_at=5), start_method))
    next(batches)
    workers = new_children(before)
    with pytest.raises(ValueError, match="sample 5 is unreadable") as raised:
        for _ in batches:
            pass
    assert raised.value is not None  # the traceback, which holds torch's iterator, is still alive here
    assert len(workers) == 2 and all_ended(workers, 0), f"workers left running after the error: {workers}"


def test_a_stuck_worker_is_released_when_its_loader_gives_up():
    """A worker stuck in a sample never reads torch's end-of-work sentinel: its loader's release flag ends it."""
    before = set(multiprocessing.active_children())
    batches = iter(loader(Numbers(stuck_at=6), "fork", timeout=15))  # slow starts too (a busy machine)
    next(batches)
    workers = new_children(before)
    with pytest.raises(RuntimeError, match="timed out"):
        for _ in batches:
            pass
    assert len(workers) == 2 and all_ended(workers, 0), f"workers left running: {workers}"
    assert [w.exitcode for w in workers] == [0, 0]


def test_a_worker_frozen_with_the_interpreters_lock_is_killed():
    """One that cannot act on its release (its watching thread never runs) is killed after the grace period."""
    before = set(multiprocessing.active_children())
    batches = iter(loader(Numbers(frozen_at=6), "fork", timeout=15))  # slow starts too (a busy machine)
    next(batches)
    workers = new_children(before)
    start = time.perf_counter()
    with pytest.raises(RuntimeError, match="timed out"):
        for _ in batches:
            pass
    assert len(workers) == 2 and all_ended(workers, 0), f"workers left running: {workers}"
    assert sorted(w.exitcode for w in workers) == [-signal.SIGKILL, 0]
    print(f"frozen worker ended in {time.perf_counter() - start:.1f} s (grace {GRACE_S} s)")


def test_a_worker_ends_when_its_parent_is_killed():
    """The training process killed outright (SIGKILL, the OOM killer): its workers, one stuck in a sample, leave."""
    code = (
        "import os, signal\n"
        "from simplepose.engine.batches import ForkSafeLoader\n"
        "from simplepose.data.batching import worker_init_fn\n"
        "from tests.test_worker_signals import Numbers\n"
        "batches = iter(ForkSafeLoader(Numbers(stuck_at=7), batch_size=2, num_workers=2,\n"
        "                              worker_init_fn=worker_init_fn, multiprocessing_context='fork'))\n"
        "next(batches)\n"
        "print(' '.join(str(p.pid) for p in __import__('multiprocessing').active_children()), flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == -signal.SIGKILL, p.stderr[-2000:]
    pids = [int(pid) for pid in p.stdout.split()]
    assert len(pids) == 2
    for _ in range(100):  # the workers check for their parent every second
        if not any(_running(pid) for pid in pids):
            break
        time.sleep(0.1)
    assert not any(_running(pid) for pid in pids), f"workers {pids} outlived their killed parent"


def _running(pid: int) -> bool:
    """Whether ``pid`` runs (an orphan is reaped by init: a pid gone or a zombie is no longer running)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


class Samples(Numbers):
    """Sample dicts as the training collate takes them, each with the pid of the process that made it."""

    def __getitem__(self, i: int) -> dict:
        return {"image": torch.zeros(3, 2, 2, dtype=torch.uint8), "index": super().__getitem__(i),
                "pid": torch.tensor(os.getpid())}  # fmt: skip


def served(batches: TrainBatches, epoch: int) -> tuple[list[int], set[int]]:
    """The sample indices of ``epoch`` and the pids of the processes that made them."""
    steps = [mb for step in batches.epoch(epoch) for mb in step]
    return sorted(int(i) for mb in steps for i in mb["index"]), {int(p) for mb in steps for p in mb["pid"]}


def test_persistent_workers_serve_every_epoch_through_a_job_wide_stop_and_end_with_the_last(tmp_path):
    """TrainBatches forks its workers once for the whole run where the dataset's epoch reaches them, and ends them
    with the last epoch."""
    cfg = tiny_cfg(tmp_path / "unused.h5", tmp_path / "run", "data.num_workers=2", "train.epochs=2")
    batches = TrainBatches(Samples(size=12), cfg, 0, 1, torch.device("cpu"))
    assert batches.persistent
    before = set(multiprocessing.active_children())
    first, first_pids = served(batches, 0)
    workers = new_children(before)
    assert len(workers) == 2 and all(w.is_alive() for w in workers)  # kept for the next epoch
    assert first_pids == {w.pid for w in workers}
    for w in workers:
        signal_from_elsewhere(w.pid, signal.SIGTERM)
    time.sleep(0.5)
    second, second_pids = served(batches, 1)
    assert first == second == list(range(12)) and second_pids == first_pids  # the same processes, not forked again
    assert all_ended(workers, 0) and [w.exitcode for w in workers] == [0, 0]


def test_a_dataset_whose_epoch_stays_in_the_parent_gets_new_workers_each_epoch(tmp_path):
    class Reseeded(Numbers):
        def set_epoch(self, epoch: int) -> None:  # a plain attribute: workers forked earlier would not see it
            self.epoch = epoch

    cfg = tiny_cfg(tmp_path / "unused.h5", tmp_path / "run", "data.num_workers=1", "train.epochs=2")
    assert not TrainBatches(Reseeded(size=8), cfg, 0, 1, torch.device("cpu")).persistent


def test_an_interpreter_holding_a_loader_at_exit_ends():
    """Python's exit ends leftover workers with SIGTERM and joins them: workers that ignore SIGTERM, one of them
    stuck, kept it waiting for ever. The loader's workers are ended before that join."""
    code = (
        "import sys\n"
        "from simplepose.data.batching import worker_init_fn\n"
        "from simplepose.engine.batches import ForkSafeLoader\n"
        "from tests.test_worker_signals import Numbers\n"
        "batches = iter(ForkSafeLoader(Numbers(stuck_at=7), batch_size=2, num_workers=2,\n"
        "                              worker_init_fn=worker_init_fn, multiprocessing_context='fork'))\n"
        "next(batches)\n"
        "print('ready', flush=True)  # exits with the loader alive, one worker stuck in sample 7\n"
    )
    start = time.perf_counter()
    # a session of its own: on failure its workers, which would hold the output pipes open, are killed with it
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)  # fmt: skip
    try:
        out, err = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        pytest.fail("the process did not end in 120 s: its exit waited for its loader's workers")
    assert p.returncode == 0 and out.strip() == "ready", err[-2000:]
    print(f"exit with a stuck worker: {time.perf_counter() - start:.1f} s")
