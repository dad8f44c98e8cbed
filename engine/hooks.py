"""Hooks: what runs around the training loop (engine/trainer.py), each given only what it needs when it is built.

The loop calls, in the order of the hook list:

    before_train(position)                     once, before the first step (also of a resumed run)
    before_epoch(position)                     each epoch, before its first step
    before_step(position)                      before each optimiser step (its batch is loaded)
    after_step(position, result)               after it (``result``: engine.trainer.StepResult)
    after_epoch(position, summary)             after the epoch's last step; ``summary`` is the epoch's dict of
                                               figures, filled by the hooks (``Trainer.fit`` returns the last)
    after_train(position)                      once, at the end, also when training stops with an error

``position`` (engine.position.TrainingPosition) is the run's position; hooks read it (the checkpoint hook alone records
the best metric in it). The base types (``Hook``, ``HookList``, ``StepResult``) are in engine/hook_base.py, beside
the loop. A hook that reads what another writes into the epoch's summary names it in ``runs_after``, and ``HookList``
refuses an order that breaks it. ``Trainer.default_hooks`` builds the standard list, in this order:

    WatchdogHook     the stall watchdog of multi-process runs (utils/watchdog.py)
    LoggingHook      progress bar, metrics.jsonl / TensorBoard records, the epoch's summary line
    ValidationHook   validation loss and COCO AP every train.val_every epochs (engine/validation.py)
    CheckpointHook   last.pt every train.checkpoint_every_steps and train.checkpoint_every_minutes, at each epoch
                     end and on a stop signal (SIGTERM, Ctrl-C: then it stops training); best.pt when the metric
                     improves

A new hook: subclass ``Hook``, override the methods it needs, give its constructor what it uses (a logger, a
collaborator, a few numbers; not the trainer), and register it: ``trainer.register_hooks([MyHook(...)])`` (it runs
after the standard ones), or ``engine.run.run(kind, ..., extra_hooks=lambda trainer: [MyHook(...)])`` for a
launcher. tests/harness/faulty_trainer.py's ``FaultHook`` is an example.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any

import torch

from simplepose.config.schema import DataConfig
from simplepose.engine.batch_errors import loader_errors
from simplepose.engine.checkpointer import Checkpointer
from simplepose.engine.hook_base import Hook, StepResult
from simplepose.engine.logger import Meter, MetricsLogger, step_values
from simplepose.engine.position import TrainingPosition
from simplepose.engine.validation import Validator, validation_metric
from simplepose.utils import distributed as du
from simplepose.utils import stop_signals
from simplepose.utils.progress_bar import progress_bar
from simplepose.utils.watchdog import Watchdog, beat

log = logging.getLogger(__name__)


class WatchdogHook(Hook):
    """Runs the stall watchdog (``utils.watchdog.Watchdog``) while a multi-process run trains, and reports the loop's
    data loading to it (the step reports its own phases)."""

    def __init__(self, timeout_s: float, rank: int, world_size: int) -> None:
        self.timeout_s, self.rank, self.world_size = timeout_s, rank, world_size
        self.watchdog: Watchdog | None = None

    def before_train(self, position: TrainingPosition) -> None:
        if self.world_size > 1:
            self.watchdog = Watchdog(self.timeout_s, self.rank, self.world_size, du.get_store()).__enter__()

    def before_epoch(self, position: TrainingPosition) -> None:
        beat("loading data", position.where())

    def after_step(self, position: TrainingPosition, result: StepResult) -> None:
        beat("loading data", position.where())

    def after_train(self, position: TrainingPosition) -> None:
        if self.watchdog is not None:
            self.watchdog.__exit__(None, None, None)
            self.watchdog = None


class LoggingHook(Hook):
    """The run's log: the epoch's progress bar; a ``train`` record every ``log_every`` steps and at the epoch's last
    (losses averaged over the processes: every rank takes part), an ``epoch`` record and a summary line at each epoch
    end; the data and compute time of the steps. Only the main process writes (``logger`` is disabled elsewhere)."""

    def __init__(
        self,
        logger: MetricsLogger,
        steps_per_epoch: int,
        log_every: int,
        samples_per_step: int,
        device: torch.device,
        is_main: bool,
    ) -> None:
        self.logger, self.steps_per_epoch, self.log_every = logger, steps_per_epoch, log_every
        self.samples_per_step, self.device, self.is_main = samples_per_step, device, is_main  # all processes
        self.bar: Any = None  # this epoch's progress bar (utils.progress_bar)

    def before_train(self, position: TrainingPosition) -> None:
        # records past the position were written by a run that died after its last checkpoint: every step once
        self.logger.truncate_after(position.global_step)

    def before_epoch(self, position: TrainingPosition) -> None:
        self.data_time, self.compute_time = Meter(), Meter()
        # the epoch's loss, summed over the samples of applied steps, on the device: read at log steps only
        self.loss_sum = torch.zeros((), dtype=torch.float64, device=self.device)
        self.loss_samples = torch.zeros((), dtype=torch.float64, device=self.device)
        self.bar = progress_bar(
            total=self.steps_per_epoch,
            initial=position.step,
            desc=f"epoch {position.epoch}",
            unit="step",
            disable=not self.is_main,
            dynamic_ncols=True,
            leave=False,
        )
        self.tic = time.perf_counter()

    def before_step(self, position: TrainingPosition) -> None:
        self.batch_ready = time.perf_counter()
        self.data_time.update(self.batch_ready - self.tic)

    def after_step(self, position: TrainingPosition, result: StepResult) -> None:
        self.tic = time.perf_counter()
        self.compute_time.update(self.tic - self.batch_ready)
        applied = result.applied
        self.loss_sum += torch.where(applied, result.loss.detach().double() * result.samples, 0.0)
        self.loss_samples += applied.double() * result.samples
        if position.step % self.log_every == 0 or position.step == self.steps_per_epoch:
            self.log_step(position, result)
            self.bar.set_postfix(loss=f"{self.epoch_loss():.4g}", lr=f"{result.lr:.3g}", refresh=False)
        self.bar.update(1)

    def epoch_loss(self) -> float:
        """This process's mean loss per sample over the epoch's applied steps so far (a host read)."""
        count = float(self.loss_samples.item())
        return float(self.loss_sum.item()) / count if count else float("nan")

    def log_step(self, position: TrainingPosition, result: StepResult) -> None:
        skipped = position.settle()
        if skipped and self.is_main:
            log.info(
                "%s: non-finite loss or gradient, %d step%s skipped since the last log (%d so far)",
                position.where(),
                skipped,
                "" if skipped == 1 else "s",
                position.counters["skipped_nonfinite"],
            )
        total = du.all_reduce_mean(result.loss)
        breakdown = {k: du.all_reduce_mean(v.detach()) for k, v in result.breakdown.items()}
        if not self.is_main:
            return
        step_time = self.data_time.mean + self.compute_time.mean
        values = step_values(total, breakdown, result.lr, result.grad_norm)
        values.update(
            data_time=self.data_time.mean,
            compute_time=self.compute_time.mean,
            samples_per_s=self.samples_per_step / max(step_time, 1e-9),
            skipped_nonfinite=position.counters["skipped_nonfinite"],
        )
        if result.loss_scale is not None:
            values["loss_scale"] = result.loss_scale
        self.logger.log("train", position.epoch, position.global_step, step=position.step, **values)

    def after_epoch(self, position: TrainingPosition, summary: dict[str, float]) -> None:
        if self.bar is not None:
            self.bar.close()
        mean_loss = du.all_reduce_mean(torch.tensor(self.epoch_loss(), device=self.device)).item()
        samples_per_s = self.samples_per_step / max(self.data_time.mean + self.compute_time.mean, 1e-9)
        stats = {
            "train_loss": mean_loss,
            "skipped_nonfinite": position.counters["skipped_nonfinite"],
            "samples_per_s": samples_per_s,
        }
        self.logger.log("epoch", position.epoch, position.global_step, **stats)
        if self.is_main:
            log.info("epoch %d: train loss %.4f, %.1f samples/s", position.epoch, mean_loss, samples_per_s)
        summary.update(stats)

    def after_train(self, position: TrainingPosition) -> None:
        if self.bar is not None:
            self.bar.close()
        self.logger.close()


class ValidationHook(Hook):
    """Validation every ``every`` epochs and after the last one (``epochs``); the figures go into the epoch's
    summary, a ``val`` record and a line. ``every`` = 0: never."""

    def __init__(
        self, validator: Validator, every: int, epochs: int, logger: MetricsLogger, data: DataConfig, is_main: bool
    ) -> None:
        self.validator, self.every, self.epochs, self.logger = validator, every, epochs, logger
        self.data, self.is_main = data, is_main

    def after_epoch(self, position: TrainingPosition, summary: dict[str, float]) -> None:
        e = position.epoch
        if not self.every or not ((e + 1) % self.every == 0 or e + 1 == self.epochs):
            return
        beat("validation", f"epoch {e}")
        with loader_errors(self.data.val, self.data, lambda: "validating"):
            figures = self.validator.validate(e)
        if figures:
            self.logger.log("val", e, position.global_step, **figures)
            if self.is_main:
                log.info("epoch %d validation: %s", e, ", ".join(f"{k} {v:.4f}" for k, v in figures.items()))
        summary.update(figures)


class TrainingStopped(Exception):
    """Training stopped at a step boundary on a stop signal (``signum``), after last.pt was written there."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {stop_signals.signal_name(signum)}")
        self.signum = signum


class CheckpointHook(Hook):
    """``last.pt`` every ``every_steps`` optimiser steps (0: never mid-epoch), every ``every_minutes`` of training
    (0: never by time; rank 0's clock decides), at each epoch end, and when a stop signal arrived
    (``utils.stop_signals``: then training stops with ``TrainingStopped``); ``best.pt`` when the epoch's validation
    metric (``engine.validation.validation_metric``, which ``ValidationHook`` writes into the summary: hence
    ``runs_after``) beats ``position.best_metric``. Every rank takes the same decisions at the same step
    (``utils.distributed.AgreedFlags``: under several processes, one step after a rank asked)."""

    runs_after = (ValidationHook,)

    def __init__(self, checkpointer: Checkpointer, every_steps: int, every_minutes: float = 0.0) -> None:
        self.checkpointer, self.every_steps, self.every_minutes = checkpointer, every_steps, every_minutes
        self.flags = du.AgreedFlags(2)  # (the stop signal, last.pt due by time)
        self.saved_at = time.monotonic()

    def before_train(self, position: TrainingPosition) -> None:
        self.saved_at = time.monotonic()

    def due(self) -> int:
        """1 when rank 0's last last.pt is ``every_minutes`` old (counted again from now on), else 0."""
        if not self.every_minutes or self.checkpointer.rank != 0:
            return 0
        if time.monotonic() - self.saved_at < self.every_minutes * 60:
            return 0
        self.saved_at = time.monotonic()
        return 1

    def save_last(self, position: TrainingPosition) -> None:
        self.checkpointer.save("last.pt", position)
        self.saved_at = time.monotonic()

    def after_step(self, position: TrainingPosition, result: StepResult) -> None:
        stop, timed = self.flags.exchange([stop_signals.requested(), self.due()])
        if stop or timed or (self.every_steps and position.global_step % self.every_steps == 0):
            self.save_last(position)
        if stop:
            raise TrainingStopped(stop)

    def after_epoch(self, position: TrainingPosition, summary: dict[str, float]) -> None:
        position.settle()  # before the copy below, which starts without the device-side count
        metric = validation_metric(summary)
        improved = metric is not None and metric > position.best_metric
        if metric is not None and improved:
            position.best_metric = metric
        end = dataclasses.replace(position, epoch=position.epoch + 1, step=0)  # where a resumed run starts
        if improved:
            self.checkpointer.save("best.pt", end)
        self.save_last(end)
        (stop, _) = self.flags.exchange([stop_signals.requested(), 0], now=True)  # asked during the epoch's end
        if stop and end.epoch < self.checkpointer.cfg.train.epochs:
            raise TrainingStopped(stop)

    def after_train(self, position: TrainingPosition) -> None:
        self.flags.drop()
