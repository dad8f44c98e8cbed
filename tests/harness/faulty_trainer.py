"""A Trainer that injects faults, for tests only: a NaN loss at chosen steps, a process that dies at a step.

    python -m tests.harness.faulty_trainer --launcher distributed --nan-steps 1 --nan-rank 1 -- --config ...
    torchrun ... -m tests.harness.faulty_trainer --launcher distributed --exit-step 3 --exit-rank 1 -- ...

Everything after ``--`` is the usual command line of train.py / train_distributed.py.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

from engine.run import run
from engine.trainer import Trainer
from utils.errors import cli_main


def faulty_trainer(nan_steps=(), nan_rank: int = -1, exit_step: int = -1, exit_rank: int = 1) -> type[Trainer]:
    """A Trainer subclass whose loss is NaN at the global steps ``nan_steps`` (on ``nan_rank``; -1: every rank),
    and whose process ``exit_rank`` dies (``os._exit(13)``) at global step ``exit_step``, in the first attempt of a
    torchrun job only (TORCHELASTIC_RESTART_COUNT=0), so that an elastic restart can resume."""

    class FaultyTrainer(Trainer):
        def compute_loss(self, images, targets, masks):
            total, breakdown = super().compute_loss(images, targets, masks)
            if self.global_step in nan_steps and nan_rank in (-1, self.rank):
                total = total * float("nan")
            return total, breakdown

        def before_step(self, epoch: int, step: int) -> None:
            first_attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0"
            if self.global_step == exit_step and self.rank == exit_rank and first_attempt:
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
    a = p.parse_args(ours)
    torch.set_printoptions(precision=6)
    trainer_cls = faulty_trainer(set(a.nan_steps), a.nan_rank, a.exit_step, a.exit_rank)
    return run(a.launcher, __doc__, rest, trainer_cls=trainer_cls)


if __name__ == "__main__":
    raise SystemExit(main())
