"""Hooks: what runs around the training loop (engine/trainer.py), each given only what it needs when it is built.

The loop calls, in the order of the hook list:

    before_train(position)                     once, before the first step (also of a resumed run)
    before_epoch(position)                     each epoch, before its first step
    before_step(position)                      before each optimiser step (its batch is loaded)
    after_step(position, result)               after it (``result``: engine.trainer.StepResult)
    after_epoch(position, summary)             after the epoch's last step; ``summary`` is the epoch's dict of
                                               figures, filled by the hooks (``Trainer.fit`` returns the last)
    validate(position, summary)                then, where the epoch is validated (``position``: the next epoch's
                                               start, ``validation_due``); also first thing after a resume from a
                                               checkpoint of an epoch end whose validation a stop cut short
    after_validation(position, summary)        after it, ``summary`` holding the validation figures
    after_train(position)                      once, at the end, also when training stops with an error

``position`` (engine.position.TrainingPosition) is the run's position; hooks read it (the checkpoint hook alone records
the best metric in it). The base types (``Hook``, ``HookList``, ``StepResult``) are in engine/hook_base.py, beside
the loop. A hook that reads what another writes into the epoch's summary names it in ``runs_after``, and ``HookList``
refuses an order that breaks it. ``Trainer.default_hooks`` builds the standard list, in this order:

    WatchdogHook     the stall watchdog of multi-process runs (utils/watchdog.py)
    LoggingHook      progress bar, metrics.jsonl / TensorBoard records, the epoch's summary line
    ValidationHook   validation loss and COCO AP every train.val_every epochs (engine/validation.py); a stop
                     signal ends it within a batch
    CheckpointHook   last.pt every train.checkpoint_every_steps and train.checkpoint_every_minutes, at each epoch
                     end before validation and again after it, and on a stop signal (SIGTERM, Ctrl-C: then it stops
                     training); best.pt when the metric of a finished validation improves

A new hook: subclass ``Hook``, override the methods it needs, give its constructor what it uses (a logger, a
collaborator, a few numbers; not the trainer), and register it: ``trainer.register_hooks([MyHook(...)])`` (it runs
after the standard ones), or ``engine.run.run(kind, ..., extra_hooks=lambda trainer: [MyHook(...)])`` for a
launcher. tests/harness/faulty_trainer.py's ``FaultHook`` is an example.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any

import torch

from simplepose.config.schema import DataConfig
from simplepose.engine.batch_errors import loader_errors
from simplepose.engine.checkpointer import Checkpointer
from simplepose.engine.hook_base import Hook, StepResult
from simplepose.engine.logger import Meter, MetricsLogger, step_values
from simplepose.engine.position import TrainingPosition
from simplepose.engine.run_life import TrainingStopped
from simplepose.engine.validation import ValidationStopped, Validator, validation_metric
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
        # records past the position were written by a run that died after its last checkpoint: every step once; at
        # the position itself, the records of what is done again: mid-epoch (also at its last step) the epoch's end
        # and validation, a validation still due
        again = ("epoch", "val") if position.step else ("val",) if position.validation_due else ()
        self.logger.truncate_after(position.global_step, drop_at_end=again)

    def before_epoch(self, position: TrainingPosition) -> None:
        self.data_time, self.compute_time = Meter(), Meter()
        # the epoch's loss, summed over the samples of applied steps, on the device: read at log steps only; a run
        # resumed mid-epoch continues the sums its checkpoint holds
        carried = position.epoch_loss if position.step and position.epoch_loss is not None else None
        zeros = torch.zeros(2, dtype=torch.float64, device=self.device)
        position.epoch_loss = carried.to(self.device) if carried is not None else zeros
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
        added = torch.stack([torch.where(applied, result.loss.detach().double() * result.samples, 0.0),
                             applied.double() * result.samples])  # fmt: skip
        position.epoch_loss = added if position.epoch_loss is None else position.epoch_loss + added
        if position.step % self.log_every == 0 or position.step == self.steps_per_epoch:
            self.log_step(position, result)
            self.bar.set_postfix(loss=f"{self.epoch_loss(position):.4g}", lr=f"{result.lr:.3g}", refresh=False)
        self.bar.update(1)

    @staticmethod
    def epoch_loss(position: TrainingPosition) -> float:
        """This process's mean loss per sample over the epoch's applied steps so far (a host read)."""
        total, count = position.epoch_loss.tolist() if position.epoch_loss is not None else (0.0, 0.0)
        return total / count if count else float("nan")

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
        mean_loss = du.all_reduce_mean(torch.tensor(self.epoch_loss(position), device=self.device)).item()
        samples = position.epoch_loss[1] if position.epoch_loss is not None else torch.zeros((), device=self.device)
        samples_per_s = self.samples_per_step / max(self.data_time.mean + self.compute_time.mean, 1e-9)
        stats = {
            "train_loss": mean_loss,
            "samples": round(du.all_reduce_mean(samples).item() * du.get_world_size()),
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
    """The validation of the epoch that ended (the trainer calls ``validate`` where it is due: every
    ``train.val_every`` epochs and after the last, ``engine.validation.validation_due``); the figures go into the
    epoch's summary, a ``val`` record and a line. A stop signal ends it within a batch: ``TrainingStopped``, every
    rank at one point (``engine.validation.StopAgreement``; last.pt of the epoch end was written before)."""

    def __init__(self, validator: Validator, logger: MetricsLogger, data: DataConfig, is_main: bool) -> None:
        self.validator, self.logger, self.data, self.is_main = validator, logger, data, is_main

    def validate(self, position: TrainingPosition, summary: dict[str, float]) -> None:
        e = position.epoch - 1
        beat("validation", f"epoch {e}")
        try:
            with loader_errors(self.data.val, self.data, lambda: "validating"):
                figures = self.validator.validate(e)
        except ValidationStopped as stop:
            raise TrainingStopped(stop.signum) from None
        if figures:
            self.logger.log("val", e, position.global_step, **figures)
            if self.is_main:
                log.info("epoch %d validation: %s", e, ", ".join(f"{k} {v:.4f}" for k, v in figures.items()))
        summary.update(figures)


class CheckpointHook(Hook):
    """``last.pt`` every ``every_steps`` optimiser steps (0: never mid-epoch), every ``every_minutes`` of training
    (0: never by time; rank 0's clock decides), at each epoch end, and when a stop signal arrived
    (``utils.stop_signals``: then training stops with ``TrainingStopped``); ``best.pt`` when the epoch's validation
    metric (``engine.validation.validation_metric``, which ``ValidationHook`` writes into the summary: hence
    ``runs_after``) beats ``position.best_metric``. Every rank takes the same decisions at the same step
    (``utils.distributed.AgreedFlags``: under several processes, one step after a rank asked). ``validates(e)``:
    whether epoch ``e`` is validated (last.pt of its end then holds ``validation_due``, and is written again after
    the validation)."""

    runs_after = (ValidationHook,)

    def __init__(
        self,
        checkpointer: Checkpointer,
        every_steps: int,
        every_minutes: float = 0.0,
        validates: Callable[[int], bool] = lambda epoch: False,
    ) -> None:
        self.checkpointer, self.every_steps, self.every_minutes = checkpointer, every_steps, every_minutes
        self.validates = validates
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
        """last.pt of the epoch end, before its validation: what a stop during validation keeps."""
        position.settle()  # before the copy below, which starts without the device-side count
        # where a resumed run starts
        end = dataclasses.replace(
            position, epoch=position.epoch + 1, step=0, validation_due=self.validates(position.epoch)
        )
        self.save_last(end)
        self.stop_if_asked(end)

    def after_validation(self, position: TrainingPosition, summary: dict[str, float]) -> None:
        """best.pt when the finished validation's metric improved; last.pt again, its validation done."""
        metric = validation_metric(summary)
        position.validation_due = False
        if metric is not None and metric > position.best_metric:
            position.best_metric = metric
            self.checkpointer.save("best.pt", position)
        self.save_last(position)
        self.stop_if_asked(position)

    def stop_if_asked(self, saved: TrainingPosition) -> None:
        """``TrainingStopped`` when a stop signal came during the epoch's end (on any rank) and the run saved at
        ``saved`` has something left to do."""
        (stop, _) = self.flags.exchange([stop_signals.requested(), 0], now=True)
        if stop and (saved.epoch < self.checkpointer.cfg.train.epochs or saved.validation_due):
            raise TrainingStopped(stop)

    def after_train(self, position: TrainingPosition) -> None:
        self.flags.drop()
