"""Faults injected into real training, for tests only: a NaN loss at chosen steps, a process that dies, hangs or runs
out of memory at a step, a crash between micro-batches. A ``FaultHook`` (an engine hook) does it, through forward
hooks on the network as the trainer runs it (wrapped by the launcher: a hang then happens before DDP's forward, in
the trainer's "forward pass", as a hung data read or kernel would): it needs that network and the process's rank,
nothing else of the trainer.

    python -m tests.harness.faulty_trainer --launcher distributed --nan-steps 1 --nan-rank 1 -- --config ...
    torchrun ... -m tests.harness.faulty_trainer --launcher distributed --exit-step 3 --exit-rank 1 -- ...
    torchrun ... -m tests.harness.faulty_trainer --launcher distributed --hang-step 2 --hang-rank 1 -- ...
    python -m tests.harness.faulty_trainer --oom-step 2 -- ...
    torchrun ... -m tests.harness.faulty_trainer --launcher distributed --signal-step 2 --signal-parent -- ...
    python -m tests.harness.faulty_trainer --validation-signals SIGTERM SIGINT --validation-epoch 1 -- ...
    torchrun ... -m tests.harness.faulty_trainer --launcher distributed --validation-signals SIGTERM \
        --validation-rank 1 --validation-wait 3 -- ...

    trainer = with_faults(Trainer(cfg), nan_steps={5})       # in a test

Everything after ``--`` is the usual command line of train.py / train_distributed.py.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from dataclasses import dataclass, field

import torch
from torch import nn

from simplepose.engine.hook_base import Hook, StepResult
from simplepose.engine.position import TrainingPosition
from simplepose.engine.run import run
from simplepose.engine.trainer import Trainer
from simplepose.utils import stop_signals
from simplepose.utils.errors import cli_main


class Crash(Exception):
    """A simulated crash in the middle of a training step."""


def first_attempt() -> bool:
    """True unless this process is a torchrun restart."""
    return os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0"


@dataclass
class Faults:
    """Each at a global step (on one rank where a rank is named):

    - ``nan_steps``: the loss is NaN (on ``nan_rank``; -1: every rank);
    - ``exit_step``: process ``exit_rank`` dies (``os._exit(13)``) before the step;
    - ``hang_step``: process ``hang_rank`` hangs inside the forward pass (sleeps for an hour);
    - ``oom_step``: the forward pass raises torch.cuda.OutOfMemoryError;
    - ``crash_at_loss``: the N-th training forward pass of this process (0-based, micro-batches counted) raises
      ``Crash``;
    - ``signal_step``: process ``signal_rank`` sends SIGTERM before the step, to itself or (``signal_parent``) to its
      parent, torchrun's agent, which sends it on to every process, as a cluster stopping the job does;
    - ``validation_signals``: at the first forward pass of epoch ``validation_epoch``'s validation, this process
      (process ``validation_rank``; -1: every one) sends itself these signals (names: SIGTERM, SIGINT), one after the
      other, after waiting ``validation_wait`` seconds (a slow rank: the others reach validation's collectives);
    - ``step_sleep``: every step waits this many seconds first (a long run, for a second run to meet it alive).
    Exits, hangs and signals happen in the first attempt of a torchrun job only, so that an elastic restart can
    resume."""

    nan_steps: set[int] = field(default_factory=set)
    nan_rank: int = -1
    exit_step: int = -1
    exit_rank: int = 1
    oom_step: int = -1
    hang_step: int = -1
    hang_rank: int = 1
    crash_at_loss: int = -1
    signal_step: int = -1
    signal_rank: int = 0
    signal_parent: bool = False
    validation_signals: list[str] = field(default_factory=list)
    validation_epoch: int = 0
    validation_rank: int = -1
    validation_wait: float = 0.0
    step_sleep: float = 0.0


class FaultHook(Hook):
    """Injects ``faults`` into the training steps of ``network`` (``Trainer.model``: as the launcher wrapped it) on
    process ``rank``; forwards outside training steps (validation) are left alone."""

    def __init__(self, faults: Faults, network: nn.Module, rank: int) -> None:
        self.faults, self.rank = faults, rank
        self.step: int | None = None  # the global step being trained, None outside training steps
        self.forwards = 0
        network.register_forward_pre_hook(self._before_forward)
        network.register_forward_hook(self._after_forward)

    def before_step(self, progress: TrainingPosition) -> None:
        f, here = self.faults, progress.global_step
        time.sleep(f.step_sleep)
        if here == f.exit_step and self.rank == f.exit_rank and first_attempt():
            print(f"fault: rank {self.rank} dies at global step {here}", flush=True)
            os._exit(13)
        if here == f.signal_step and self.rank == f.signal_rank and first_attempt():
            target = os.getppid() if f.signal_parent else os.getpid()
            print(f"fault: rank {self.rank} sends SIGTERM to {'its parent' if f.signal_parent else 'itself'} at "
                  f"global step {here}", flush=True)  # fmt: skip
            os.kill(target, signal.SIGTERM)
            deadline = time.monotonic() + 30  # torchrun's agent sends it on: wait for it here, so the step is known
            while not stop_signals.requested() and time.monotonic() < deadline:
                time.sleep(0.01)
        self.step = here

    def after_step(self, progress: TrainingPosition, result: StepResult) -> None:
        self.step = None

    def after_epoch(self, progress: TrainingPosition, summary: dict[str, float]) -> None:
        """After the epoch end's last.pt: the next forward pass of any network (the validated one may be the weight
        average) is validation's first."""
        f = self.faults
        if not (f.validation_signals and progress.epoch == f.validation_epoch and first_attempt()):
            return
        if f.validation_rank not in (-1, self.rank):
            return

        def send(module: nn.Module, inputs) -> None:
            handle.remove()
            time.sleep(f.validation_wait)
            sent = " then ".join(f.validation_signals)
            print(f"fault: {sent} in the validation of epoch {progress.epoch}", flush=True)
            for name in f.validation_signals:
                os.kill(os.getpid(), signal.Signals[name])

        handle = nn.modules.module.register_module_forward_pre_hook(send)

    def _before_forward(self, module: nn.Module, inputs) -> None:
        f, here = self.faults, self.step
        if here is None:
            return
        if here == f.hang_step and self.rank == f.hang_rank and first_attempt():
            print(f"fault: rank {self.rank} hangs at global step {here}", flush=True)
            time.sleep(3600)
        if here == f.oom_step:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (injected)")
        if self.forwards == f.crash_at_loss:
            raise Crash(f"crash at loss {f.crash_at_loss} (global step {here})")
        self.forwards += 1

    def _after_forward(self, module: nn.Module, inputs, outputs):
        if self.step not in self.faults.nan_steps or self.faults.nan_rank not in (-1, self.rank):
            return None
        if isinstance(outputs, tuple):  # (loss, breakdown): a launcher whose model computes the loss (DataParallel)
            return outputs[0] * float("nan"), outputs[1]
        return [[o * float("nan") for o in stack] for stack in outputs]  # outputs[stack][scale]


def with_faults(trainer: Trainer, **faults) -> Trainer:
    """``trainer`` with a ``FaultHook`` of ``Faults(**faults)`` registered."""
    return add_faults(trainer, Faults(**faults))


def add_faults(trainer: Trainer, faults: Faults) -> Trainer:
    trainer.register_hooks([FaultHook(faults, trainer.model, trainer.rank)])
    return trainer


@cli_main
def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ours, rest = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    p = argparse.ArgumentParser(prog="python -m tests.harness.faulty_trainer")
    p.add_argument("--launcher", choices=["single", "data_parallel", "distributed"], default="single")
    p.add_argument("--nan-steps", type=int, nargs="*", default=[])
    p.add_argument("--nan-rank", type=int, default=-1)
    p.add_argument("--exit-step", type=int, default=-1)
    p.add_argument("--exit-rank", type=int, default=1)
    p.add_argument("--oom-step", type=int, default=-1)
    p.add_argument("--hang-step", type=int, default=-1)
    p.add_argument("--hang-rank", type=int, default=1)
    p.add_argument("--signal-step", type=int, default=-1)
    p.add_argument("--signal-rank", type=int, default=0)
    p.add_argument("--signal-parent", action="store_true", help="send the signal to torchrun's agent")
    p.add_argument("--validation-signals", nargs="*", default=[], choices=["SIGTERM", "SIGINT"])
    p.add_argument("--validation-epoch", type=int, default=0)
    p.add_argument("--validation-rank", type=int, default=-1, help="the process that sends them (-1: every one)")
    p.add_argument("--validation-wait", type=float, default=0.0, help="seconds it waits first")
    p.add_argument("--step-sleep", type=float, default=0.0)
    a = p.parse_args(ours)
    faults = Faults(set(a.nan_steps), a.nan_rank, a.exit_step, a.exit_rank, a.oom_step, a.hang_step, a.hang_rank,
                    signal_step=a.signal_step, signal_rank=a.signal_rank, signal_parent=a.signal_parent,
                    validation_signals=a.validation_signals, validation_epoch=a.validation_epoch,
                    validation_rank=a.validation_rank, validation_wait=a.validation_wait,
                    step_sleep=a.step_sleep)  # fmt: skip
    return run(a.launcher, __doc__, rest, extra_hooks=lambda trainer: [FaultHook(faults, trainer.model, trainer.rank)])


if __name__ == "__main__":
    raise SystemExit(main())
