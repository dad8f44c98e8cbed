"""A Trainer that injects faults, for tests only: a NaN loss at chosen steps, a process that dies at a step.

    python -m tests.harness.faulty_trainer --launcher distributed --nan-steps 1 --nan-rank 1 -- --config ...
    torchrun ... -m tests.harness.faulty_trainer --launcher distributed --exit-step 3 --exit-rank 1 -- ...
    torchrun ... -m tests.harness.faulty_trainer --launcher distributed --hang-step 2 --hang-rank 1 -- ...
    python -m tests.harness.faulty_trainer --oom-step 2 -- ...

Everything after ``--`` is the usual command line of train.py / train_distributed.py.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

from engine.run import run
from engine.trainer import Trainer
from utils.errors import cli_main


class Crash(Exception):
    """A simulated crash in the middle of a training step."""


def first_attempt() -> bool:
    """True unless this process is a torchrun restart."""
    return os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0"


def faulty_trainer(nan_steps=(), nan_rank: int = -1, exit_step: int = -1, exit_rank: int = 1, oom_step: int = -1,
                   hang_step: int = -1, hang_rank: int = 1, crash_at_loss: int = -1) -> type[Trainer]:  # fmt: skip
    """A Trainer subclass with faults, each at a global step (on one rank where a rank is named):

    - ``nan_steps``: the loss is NaN (on ``nan_rank``; -1: every rank);
    - ``exit_step``: process ``exit_rank`` dies (``os._exit(13)``) before the step;
    - ``hang_step``: process ``hang_rank`` hangs inside the forward pass (sleeps for an hour);
    - ``oom_step``: the forward pass raises torch.cuda.OutOfMemoryError;
    - ``crash_at_loss``: the N-th loss computed by this process (0-based, micro-batches counted) raises ``Crash``.
    Exits and hangs happen in the first attempt of a torchrun job only, so that an elastic restart can resume."""

    class FaultyTrainer(Trainer):
        losses_computed = 0

        def compute_loss(self, images, targets, masks):
            here = self.global_step
            if here == hang_step and self.rank == hang_rank and first_attempt():
                print(f"fault: rank {self.rank} hangs at global step {here}", flush=True)
                time.sleep(3600)
            if here == oom_step:
                raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (injected)")
            if self.losses_computed == crash_at_loss:
                raise Crash(f"crash at loss {crash_at_loss} (global step {here})")
            self.losses_computed += 1
            total, breakdown = super().compute_loss(images, targets, masks)
            if here in nan_steps and nan_rank in (-1, self.rank):
                total = total * float("nan")
            return total, breakdown

        def before_step(self, epoch: int, step: int) -> None:
            if self.global_step == exit_step and self.rank == exit_rank and first_attempt():
                print(f"fault: rank {self.rank} dies at global step {self.global_step}", flush=True)
                os._exit(13)

    return FaultyTrainer


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
    a = p.parse_args(ours)
    trainer_cls = faulty_trainer(set(a.nan_steps), a.nan_rank, a.exit_step, a.exit_rank, a.oom_step, a.hang_step,
                                 a.hang_rank)  # fmt: skip
    return run(a.launcher, __doc__, rest, trainer_cls=trainer_cls)


if __name__ == "__main__":
    raise SystemExit(main())
