"""Learning-rate schedule: linear warm-up, then a step decay (the original) or a cosine decay to a floor
(docs/training.md#schedule), as a pure function of the step.

The rate depends only on (epoch, step in epoch), the config and, for the cosine, its plan: where its decay starts
(the warm-up's end) and ends (the run's last step). A checkpoint stores that plan (``state_dict``); a resume with the
same train.epochs continues it, one with another re-plans from the rate reached (``resume``: the rate never jumps
back up). Other changed train.* settings are followed as they are (engine/recipe.py names them). The rate is set
before every iteration exactly as the original did.

    base = lr x world_size x accumulate_steps   (when train.lr_scale_world_size)
    lr   = base x gamma^(epoch // step_epochs)
    lr  *= (global_step + 1) / warmup_steps            while global_step < warmup_steps
    with the original's restart (train.lr_restart_epoch=78): from that epoch on,
    lr   = base x gamma^((epoch - restart) // restart_step_epochs)
    cosine (train.lr_schedule=cosine), per optimiser step t after the warm-up, T the run's last step:
    lr   = base x (floor + (1 - floor) x (1 + cos(pi x (t - warmup_steps) / (T - warmup_steps))) / 2)
    re-planned at step t0 (train.epochs changed on resume) from the factor f0 reached there:
    lr   = base x (floor + (f0 - floor) x (1 + cos(pi x (t - t0) / (T - t0))) / 2)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

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
    # cosine: where its decay starts, in epochs (None: at the warm-up's end), and the factor it falls from there
    decay_from: float | None = None
    decay_from_factor: float = 1.0

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

    @property
    def last_step(self) -> int:
        """The run's last optimiser step (0-based global step)."""
        return self.epochs * self.steps_per_epoch - 1

    @property
    def decay_start(self) -> int:
        """The global step the cosine decay falls from: the warm-up's end, or where a resume re-planned it."""
        if self.decay_from is None:
            return self.warmup_steps
        return round(self.decay_from * self.steps_per_epoch)

    def cosine_factor(self, global_step: float) -> float:
        """``decay_from_factor`` (1) until the decay starts, then down a half cosine to ``floor`` at the run's last
        optimiser step."""
        start = self.decay_start
        span = self.last_step - start
        if span <= 0 or global_step <= start:
            return self.decay_from_factor
        progress = min(1.0, (global_step - start) / span)
        return self.floor + (self.decay_from_factor - self.floor) * 0.5 * (1.0 + math.cos(math.pi * progress))

    def at_floor(self, factor: float) -> bool:
        """Whether the cosine ``factor`` is its floor (to rounding)."""
        return math.isclose(factor, self.floor, rel_tol=1e-9, abs_tol=1e-12)

    def state_dict(self) -> dict[str, Any]:
        """The plan a checkpoint keeps: what ``resume`` needs to continue this schedule."""
        return {"kind": self.kind, "epochs": self.epochs, "floor": self.floor, "decay_from": self.decay_from,
                "decay_from_factor": self.decay_from_factor}  # fmt: skip

    def resume(self, saved: Mapping[str, Any], epoch: int, step: int) -> str | None:
        """Continue the saved run's cosine plan (its ``state_dict``) from (``epoch``, ``step``): as it was when
        train.epochs is the same; otherwise re-planned from the factor the saved plan reached there down to this
        run's floor at its last step, so that the rate never jumps back up (a finished run trains on at its floor).
        Returns the line that says what happened (None: nothing changed). A change of kind is followed as is."""
        if self.kind != "cosine" or saved.get("kind") != "cosine":
            return None
        decay_from = saved.get("decay_from")
        old = dataclasses.replace(
            self,
            epochs=int(saved["epochs"]),
            floor=float(saved.get("floor", self.floor)),
            decay_from=None if decay_from is None else float(decay_from),
            decay_from_factor=float(saved.get("decay_from_factor", 1.0)),
        )
        self.decay_from, self.decay_from_factor = old.decay_from, old.decay_from_factor
        if old.epochs == self.epochs:
            return None
        here = epoch * self.steps_per_epoch + step
        change = f"train.epochs {old.epochs} -> {self.epochs} on resume"
        end = f"this run's last step ({self.last_step:,}, epoch {self.epochs - 1})"
        if here <= old.decay_start:
            return f"{change}: the cosine decay has not begun yet; it falls to its floor at {end}"
        factor = old.cosine_factor(here)
        self.decay_from, self.decay_from_factor = here / self.steps_per_epoch, factor
        reached = f"{factor:.3g} x base, lr {self.base_lr * factor:.3g}"
        if self.at_floor(factor):
            return (
                f"{change}: the cosine decay had reached its floor ({reached}) at global step {here:,}; the run "
                f"trains on at that rate to {end}, without jumping back up"
            )
        return (
            f"{change}: the cosine decay is re-planned from the rate reached at global step {here:,} ({reached}) "
            f"down to its floor ({self.floor:g} x base, lr {self.base_lr * self.floor:.3g}) at {end}, without jumping "
            f"back up"
        )

    def describe(self) -> str:
        """The schedule's shape in words, e.g. ``warm-up 3 epochs (351 steps), then cosine down to 0.05 x base at
        global step 11,699``."""
        warm = f"warm-up {self.warmup_epochs:g} epochs ({self.warmup_steps:,} steps), then " * bool(self.warmup_steps)
        if self.kind == "cosine":
            if self.decay_from is None:
                return f"{warm}cosine down to {self.floor:g} x base at global step {self.last_step:,}"
            if self.at_floor(self.decay_from_factor):
                return f"cosine, ended: at its floor {self.floor:g} x base from global step {self.decay_start:,} on"
            return (
                f"cosine from {self.decay_from_factor:.3g} x base at global step {self.decay_start:,} (re-planned on "
                f"resume) down to {self.floor:g} x base at global step {self.last_step:,}"
            )
        shape = f"step decay: x {self.gamma:g} every {self.step_epochs} epochs" if self.step_epochs > 0 else "constant"
        if self.restart_epoch is not None:
            shape += (
                f", back to 1 x base at epoch {self.restart_epoch}, then x {self.gamma:g} every "
                f"{self.restart_step_epochs} epochs"
            )
        return warm + shape
