"""The recipe a run trains with, in words: the line every run logs at its start (optimiser and weight decay, learning
rate and schedule, the weight average, batch, steps), and on a resume what changed against the checkpoint's run
(docs/training.md#training-logs, docs/training.md#resume)."""

from __future__ import annotations

from simplepose.config.schema import TrainConfig
from simplepose.engine.optim import describe_optimizer, weight_decay_of
from simplepose.engine.schedule import LRSchedule
from simplepose.utils.text import counted

# the train.* settings a resume may change that shape the optimisation, each with the optimisers or schedules it
# concerns (None: all)
RECIPE_SETTINGS: dict[str, tuple[str, ...] | None] = {
    "optimizer": None,
    "weight_decay": None,
    "momentum": ("sgd",),
    "lr": None,
    "lr_scale_world_size": None,
    "warmup_epochs": None,
    "lr_schedule": None,
    "lr_step_epochs": ("step",),
    "lr_gamma": ("step",),
    "lr_restart_epoch": ("step",),
    "lr_restart_step_epochs": ("step",),
    "lr_floor": ("cosine",),
    "epochs": None,
}


def recipe_line(t: TrainConfig, schedule: LRSchedule, world_size: int, global_step: int = 0) -> str:
    """One line: ``recipe: adamw (weight decay 0.05, adamw's default; ...), lr 0.001 (2.5e-4 x 4 processes),
    warm-up ..., then cosine ...; weight average ema 0.9998 (...); batch 16 (4 x 4 processes); 117 steps/epoch x 100
    epochs = 11,700 steps``; ``global_step``: where a resumed run starts."""
    factors = [f"{n} {what}" for n, what in ((world_size, "processes"), (t.accumulate_steps, "micro-batches")) if n > 1]
    lr = f"lr {schedule.base_lr:.3g}"
    if factors and t.lr_scale_world_size:
        lr += f" ({' x '.join([f'train.lr {t.lr:g}', *factors])})"
    average = f"weight average ema {t.ema:g} ({t.ema_warmup_steps:,} warm-up updates)" if t.ema else "no weight average"
    samples = t.batch_size * world_size * t.accumulate_steps
    batch = f"batch {samples}" + (f" ({' x '.join([str(t.batch_size), *factors])})" if factors else "")
    total = schedule.steps_per_epoch * t.epochs
    steps = f"{schedule.steps_per_epoch:,} steps/epoch x {counted(t.epochs, 'epoch')} = {total:,} steps"
    if global_step:
        steps += f", resumed at global step {global_step:,}"
    return f"recipe: {describe_optimizer(t)}, {lr}, {schedule.describe()}; {average}; {batch}; {steps}"


def recipe_changes(saved: TrainConfig, now: TrainConfig, saved_world_size: int, world_size: int) -> list[str]:
    """What a resume changes against the checkpoint's run, each named for what it is: ``train.optimizer adam ->
    adamw (...)``, ``train.weight_decay 0 -> 0.05 (adamw's default)``, ``train.lr_schedule step -> cosine``, ..."""
    changes = []
    for key, concerns in RECIPE_SETTINGS.items():
        if concerns is not None and not {saved.optimizer, now.optimizer, saved.lr_schedule, now.lr_schedule} & set(
            concerns
        ):
            continue
        before, after = (weight_decay_of(t) if key == "weight_decay" else getattr(t, key) for t in (saved, now))
        if before == after:
            continue
        words = f"train.{key} {_value(before)} -> {_value(after)}"
        if key == "optimizer":
            words += f" (a new {after} state: {before}'s moments and step counts are not carried over)"
        elif key == "weight_decay" and now.weight_decay is None:
            words += f" ({now.optimizer}'s default)"
        changes.append(words)
    if saved_world_size != world_size and now.lr_scale_world_size:
        changes.append(f"{saved_world_size} -> {world_size} processes (train.lr_scale_world_size: the rate with them)")
    return changes


def _value(x: object) -> str:
    """A setting's value as a config file spells it."""
    if x is None:
        return "null"
    return f"{x:g}" if isinstance(x, float) else str(x).lower() if isinstance(x, bool) else str(x)
