"""The types the training loop and its hooks share: ``Hook`` (what runs around the loop, engine/hooks.py),
``HookList`` (hooks called in order) and ``StepResult`` (what one optimiser step leaves for the hooks). They stand
apart from both, so the loop (engine/trainer.py) and the hooks import them without importing each other."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch

from simplepose.engine.position import TrainingPosition


@dataclass
class StepResult:
    """What one optimiser step leaves for the hooks."""

    loss: torch.Tensor  # scalar, this process's batch
    breakdown: dict[str, torch.Tensor]
    grad_norm: torch.Tensor  # before clipping
    applied: torch.Tensor  # 0-d bool, False when skipped for a non-finite loss or gradient (on every rank)
    samples: int
    lr: float
    loss_scale: float | None  # the fp16 GradScaler's scale, None without loss scaling


class Hook:
    """Base of the hooks: every method does nothing. ``runs_after``: the hook types that must come before this one
    in a ``HookList`` when both are there (this one reads what they write into the epoch's summary)."""

    runs_after: tuple[type[Hook], ...] = ()

    def before_train(self, position: TrainingPosition) -> None:
        pass

    def before_epoch(self, position: TrainingPosition) -> None:
        pass

    def before_step(self, position: TrainingPosition) -> None:
        pass

    def after_step(self, position: TrainingPosition, result: StepResult) -> None:
        pass

    def after_epoch(self, position: TrainingPosition, summary: dict[str, float]) -> None:
        pass

    def validate(self, position: TrainingPosition, summary: dict[str, float]) -> None:
        pass

    def after_validation(self, position: TrainingPosition, summary: dict[str, float]) -> None:
        pass

    def after_train(self, position: TrainingPosition) -> None:
        pass


class HookList(Hook):
    """Hooks called in order; ValueError when a hook comes before one it ``runs_after``."""

    def __init__(self, hooks: Iterable[Hook] = ()) -> None:
        self.hooks: list[Hook] = []
        self.extend(hooks)

    def extend(self, hooks: Iterable[Hook]) -> None:
        hooks = [*self.hooks, *hooks]
        for i, hook in enumerate(hooks):
            later = [h for h in hooks[i + 1 :] if isinstance(h, hook.runs_after)]
            if later:
                raise ValueError(
                    f"{type(hook).__name__} reads what {type(later[0]).__name__} writes into the epoch's "
                    f"summary, so it must come after it in the hook list"
                )
        self.hooks = hooks

    def before_train(self, position: TrainingPosition) -> None:
        for h in self.hooks:
            h.before_train(position)

    def before_epoch(self, position: TrainingPosition) -> None:
        for h in self.hooks:
            h.before_epoch(position)

    def before_step(self, position: TrainingPosition) -> None:
        for h in self.hooks:
            h.before_step(position)

    def after_step(self, position: TrainingPosition, result: StepResult) -> None:
        for h in self.hooks:
            h.after_step(position, result)

    def after_epoch(self, position: TrainingPosition, summary: dict[str, float]) -> None:
        for h in self.hooks:
            h.after_epoch(position, summary)

    def validate(self, position: TrainingPosition, summary: dict[str, float]) -> None:
        for h in self.hooks:
            h.validate(position, summary)

    def after_validation(self, position: TrainingPosition, summary: dict[str, float]) -> None:
        for h in self.hooks:
            h.after_validation(position, summary)

    def after_train(self, position: TrainingPosition) -> None:
        for h in self.hooks:
            h.after_train(position)
