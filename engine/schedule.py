"""Learning-rate schedule: linear warm-up, then a step decay (the original) or a cosine decay to a floor
(docs/training.md#schedule), as a pure function of the step.

Because the rate depends only on (epoch, step in epoch) and the config, a checkpoint stores no schedule state:
resuming needs the position alone (a resumed run with changed train.* settings follows the new ones), and the rate
is set before every iteration exactly as the original did.

    base = lr x world_size x accumulate_steps   (when train.lr_scale_world_size)
    lr   = base x gamma^(epoch // step_epochs)
    lr  *= (global_step + 1) / warmup_steps            while global_step < warmup_steps
    with the original's restart (train.lr_restart_epoch=78): from that epoch on,
    lr   = base x gamma^((epoch - restart) // restart_step_epochs)
    cosine (train.lr_schedule=cosine), per optimiser step t after the warm-up, T the run's last step:
    lr   = base x (floor + (1 - floor) x (1 + cos(pi x (t - warmup_steps) / (T - warmup_steps))) / 2)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simplepose.config.schema import TrainConfig


@dataclass
class LRSchedule:
    base_lr: float
    steps_per_epoch: int
    warmup_epochs: float = 0.0
    step_epochs: int = 15
    gamma: float = 0.2
    restart_epoch: int | None = None
    restart_step_epochs: int = 5
    kind: str = "step"  # or "cosine"
    epochs: int = 1  # the run's length (cosine)
    floor: float = 0.0  # cosine: the last step's rate / base_lr

    @classmethod
    def from_config(cls, cfg: TrainConfig, steps_per_epoch: int, world_size: int = 1) -> LRSchedule:
        """``steps_per_epoch`` counts optimiser steps; the rate scales with the batch of one optimiser step."""
        scale = world_size * cfg.accumulate_steps if cfg.lr_scale_world_size else 1
        return cls(
            base_lr=cfg.lr * scale,
            steps_per_epoch=max(1, steps_per_epoch),
            warmup_epochs=cfg.warmup_epochs,
            step_epochs=cfg.lr_step_epochs,
            gamma=cfg.lr_gamma,
            restart_epoch=cfg.lr_restart_epoch,
            restart_step_epochs=cfg.lr_restart_step_epochs,
            kind=cfg.lr_schedule,
            epochs=cfg.epochs,
            floor=cfg.lr_floor,
        )

    @property
    def warmup_steps(self) -> int:
        return round(self.warmup_epochs * self.steps_per_epoch)

    def decay_factor(self, epoch: int) -> float:
        if self.restart_epoch is not None and epoch >= self.restart_epoch:
            return self.gamma ** ((epoch - self.restart_epoch) // self.restart_step_epochs)
        return self.gamma ** (epoch // self.step_epochs) if self.step_epochs > 0 else 1.0

    def lr(self, epoch: int, step: int) -> float:
        """Learning rate of iteration ``step`` (0-based, within the epoch) of ``epoch`` (0-based)."""
        global_step = epoch * self.steps_per_epoch + step
        if self.kind == "cosine":
            lr = self.base_lr * self.cosine_factor(global_step)
        else:
            lr = self.base_lr * self.decay_factor(epoch)
        if global_step < self.warmup_steps:
            lr *= (global_step + 1) / self.warmup_steps
        return lr

    def cosine_factor(self, global_step: int) -> float:
        """1 until the warm-up ends, then down a half cosine to ``floor`` at the run's last optimiser step."""
        last = self.epochs * self.steps_per_epoch - 1
        span = last - self.warmup_steps
        if span <= 0 or global_step <= self.warmup_steps:
            return 1.0
        progress = min(1.0, (global_step - self.warmup_steps) / span)
        return self.floor + (1.0 - self.floor) * 0.5 * (1.0 + math.cos(math.pi * progress))
