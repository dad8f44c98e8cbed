"""The life of a training run, in the order it happens (engine/run.py drives it; docs/design.md#a-runs-life):

    one_process_launch(kind)                 train.py / train_parallel.py under torchrun: refused, naming
                                             train_distributed.py
    with held_folder(cfg.train, rank):       1. hold the folder: rank 0 takes train.out_dir's lock
                                                (utils/folder_lock.py), refreshed while the run lives; a live
                                                run's folder is refused, a dead run's lock taken over
        with stop_requests(rank == 0):       2. stop on a signal: SIGTERM / SIGINT only recorded from here on
            trainer = Trainer(cfg, ...)      3. start or resume: the inputs checked, the folder claimed, the
                                                checkpoint of train.resume restored (engine/checkpointer.py)
            stop_before_training()              a signal during the start stops before the first step
            trainer.fit()                    4. train; save: last.pt every N steps / minutes, at each epoch end
                                                before validation, at the step a signal stopped
                                                (engine.hooks.CheckpointHook); validation cut short by a signal
            (TrainingStopped) -> stopped()   5. the stop's line: where, which last.pt, the command that continues
                                                (exit status 128 + the signal)
                                             6. release: the lock removed at every exit (a hard kill's is taken over
                                                by the next run)

``stop_line`` is the one line every stop ends with (how, where, the global step last.pt holds, the resume command).
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from simplepose.config.schema import TrainConfig
from simplepose.engine.position import TrainingPosition
from simplepose.engine.run_folder import launch_id
from simplepose.utils import distributed as du
from simplepose.utils.commands import command
from simplepose.utils.errors import Stopped, UserError
from simplepose.utils.folder_lock import FolderHeld, FolderLock
from simplepose.utils.stop_signals import ending, exit_status, requested, signal_name, stop_reason


# ------------------------------------------------------------------------------------- 0. the right launcher
def one_process_launch(kind: str, launcher: str, argv: list[str]) -> None:
    """``UserError`` (rank 0; the other ranks exit quietly with the same status) when a one-process launcher
    (``kind`` single or data_parallel) was started by torchrun with several processes: each would train the whole
    run into the same folder."""
    n = du.env_world_size()
    if kind == "distributed" or n <= 1:
        return
    if du.launch_rank() != 0:
        raise Stopped("", 2)
    use = command("train_distributed", shlex.join(argv), torchrun=f"--nproc_per_node={n}")
    raise UserError(
        f"{command(launcher)} trains in one process, but torchrun started {n} (WORLD_SIZE={n}): each would train "
        f"the whole run into one folder; for {n} processes use: {use}"
    )


# ------------------------------------------------------------------------------------- 1. hold the folder
@contextmanager
def held_folder(train: TrainConfig, rank: int) -> Iterator[None]:
    """Rank 0 holds ``train.out_dir`` while the block runs (a collective: every rank gets the verdict). A live run's
    folder is refused (``FolderHeld``) before anything is written; the lock of a dead run, or of this torchrun
    launch's earlier attempt, is taken over with a line saying so."""
    owners = frozenset(du.all_gather_object(launch_id())) if du.under_torchrun() else frozenset()
    lock, message = None, ""
    if rank == 0:
        try:
            what = f"train.out_dir={train.out_dir}"
            owner = launch_id() if owners else ""
            lock = FolderLock.acquire(train.out_dir, train.lock_stale_minutes * 60, what, owners, owner)
        except FolderHeld as e:
            message = str(e)
    message = du.broadcast_object(message)
    if message:
        raise FolderHeld(message, file=train.out_dir, key="train.out_dir")
    try:
        yield
    finally:
        if lock is not None:
            lock.release()


# ------------------------------------------------------------------------------------- 2.-5. stop on a signal
class TrainingStopped(Exception):
    """Training stopped on a stop signal (``signum``) after last.pt was written, every rank at one point: a step
    boundary, an epoch's end, or a collective of its validation (``engine.validation.StopAgreement``)."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal_name(signum)}")
        self.signum = signum


def stop_before_training() -> None:
    """``TrainingStopped`` when a stop signal came while the run was starting, on any rank (a collective)."""
    (signum,) = du.AgreedFlags(1).exchange([requested()], now=True)
    if signum:
        raise TrainingStopped(signum)


def stop_line(signum: int, position: TrainingPosition, last_pt: Path, saved_step: int | None, again: str) -> str:
    """The line a run stopped by ``signum`` ends with: how (``terminated (SIGTERM)``), where it stopped
    (``position``), the checkpoint ``last_pt`` and the global step it holds (``saved_step``; None: none yet) and
    ``again``, the command that continues."""
    reason = stop_reason(signum)
    if saved_step is None:
        before = "first checkpoint, nothing kept" if position.global_step else "first step, nothing trained or kept"
        return f"{reason}: stopped before the {before}; start the run with: {again}"
    at = f"at {position.where()}"
    if position.validation_due:  # left validation: last.pt of the epoch end, which the resume validates first
        at = f"in the validation of epoch {position.epoch - 1} (global step {position.global_step})"
    if saved_step == position.global_step:
        return f"{reason}: stopped {at}, where {last_pt} was written; continue the run with: {again}"
    redo = position.global_step - saved_step
    return (f"{reason}: stopped {at}; {last_pt} holds global step {saved_step} ({redo} step{'s' * (redo != 1)} to "
            f"redo); continue the run with: {again}")  # fmt: skip


def stopped(line: str | None, stop: TrainingStopped) -> Stopped:
    """Every rank at the stop: rank 0 (``line`` given; None on the others) says it while the stop handlers still
    hold back a second signal (torchrun sends one to the processes left when the first exits), and every rank waits
    for it; returns the command's ``Stopped`` (exit status 128 + the signal). Under torchrun, SIGTERM stays ignored
    while the process ends (``utils.stop_signals.ending``): each rank exits with that status, not torchrun's -15."""
    if line is not None:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    du.barrier()
    if du.under_torchrun():
        ending()
    return Stopped("", exit_status(stop.signum))
