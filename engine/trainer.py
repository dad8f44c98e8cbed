"""The training loop shared by every launcher.

``Trainer`` builds a run from its config (data, model, loss, optimiser, schedule, precision, freezing; it resumes
when ``train.resume`` says so, and refuses a folder holding another run: engine/run_folder.py) and runs the loop:
``fit`` over epochs, ``train_epoch`` over steps, ``train_step`` for one optimiser step (mixed precision,
accumulation, clipping, non-finite skip). Everything around the loop is a hook (engine/hooks.py): logging,
validation, checkpoints, the stall watchdog. A launcher (engine/launch.py) only decides how the model is wrapped and
which process sees which samples. Walk-through: docs/training.md#training-engine-loop-hooks-checkpoint.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import nullcontext
from functools import partial
from pathlib import Path
from typing import Any

import torch

from simplepose.checkpoint.format import Checkpoint
from simplepose.config.config_file import save_config
from simplepose.config.schema import Config
from simplepose.config.skeleton_file import skeleton_of
from simplepose.data.batching import batch_to_device, labelled_to_device
from simplepose.engine.batch_errors import loader_errors, out_of_memory
from simplepose.engine.batches import TrainBatches
from simplepose.engine.checkpointer import Checkpointer, remove_stale_temporaries
from simplepose.engine.compile import choose_compile, compile_forward_loss
from simplepose.engine.ema import WeightAverage
from simplepose.engine.hook_base import Hook, HookList, StepResult
from simplepose.engine.hooks import CheckpointHook, LoggingHook, ValidationHook, WatchdogHook
from simplepose.engine.launch import Launcher, SingleDevice
from simplepose.engine.logger import MetricsLogger, check_tensorboard
from simplepose.engine.optim import apply_freeze, batchnorm_eval, build_optimizer, fused_supported
from simplepose.engine.position import TrainingPosition
from simplepose.engine.preflight import open_inputs
from simplepose.engine.process_setup import configure_cpu_threads, seed_everything
from simplepose.engine.recipe import recipe_line
from simplepose.engine.run_folder import claim_run_folder
from simplepose.engine.schedule import LRSchedule
from simplepose.engine.statistics_backup import StatisticsBackup
from simplepose.engine.validation import Validator, validation_due, validation_sets
from simplepose.models import MultiTaskLoss, build_model
from simplepose.models.weights import LoadReport, carried_skeleton, unwrap
from simplepose.utils import distributed as du
from simplepose.utils.errors import DataFileError
from simplepose.utils.precision import precision_for
from simplepose.utils.torch_compat import grad_scaler, total_norm
from simplepose.utils.watchdog import beat

log = logging.getLogger(__name__)


class Trainer:
    """One training run of ``cfg`` on ``launcher`` (default: one device, ``train.device``)."""

    def __init__(self, cfg: Config, launcher: Launcher | None = None) -> None:
        self.cfg = cfg
        t = cfg.train
        self.launcher = launcher or SingleDevice(du.select_device(t.device))
        self.device, self.rank, self.world_size = self.launcher.device, self.launcher.rank, self.launcher.world_size
        self.is_main = self.rank == 0
        self.out_dir = Path(t.out_dir)
        check_tensorboard(t.tensorboard)
        self.skeleton = skeleton_of(cfg)  # handed to the data, the model and the loss; saved in checkpoints
        inputs = open_inputs(cfg, self.skeleton)  # everything the run reads, checked before anything is written
        claim_run_folder(t, self.rank)  # before anything is written: a new run never overwrites an earlier one
        self.compile = choose_compile(t.compile, self.device, self.launcher.name)
        if self.is_main:
            log.info("compile: %s (%s)", "on" if self.compile.enabled else "off", self.compile.reason)
        seed_everything(t.seed, t.deterministic)
        configure_cpu_threads(self.device, cfg.data.num_workers)
        self.precision = precision_for(t.amp, self.device, "train.amp")
        self.train_set, self.val_set, self.ground_truth = inputs.train_set, inputs.val_set, inputs.ground_truth
        self.batches = TrainBatches(self.train_set, cfg, self.rank, self.world_size, self.device)
        if self.steps_per_epoch == 0:
            raise DataFileError(
                f"{training_data(cfg)} holds {len(self.train_set)} samples, fewer than one optimiser step of "
                f"{t.batch_size} x {t.accumulate_steps} micro-batches x {self.world_size} processes; lower "
                f"train.batch_size or train.accumulate_steps",
                file=training_data(cfg),
            )

        model = build_model(cfg, self.skeleton).to(self.device)
        self.initial_weights = init_weights(model, inputs.init_weights, self.is_main) if inputs.init_weights else None
        self.frozen = apply_freeze(model, t.freeze)
        if t.channels_last:
            model = model.to(memory_format=torch.channels_last)
        self.loss_fn = MultiTaskLoss(cfg, self.skeleton).to(self.device)
        self.model = self.launcher.wrap(model, self.loss_fn)
        self.params = [p for p in model.parameters() if p.requires_grad]
        fused = fused_supported(t.optimizer, self.device)
        self.optimizer = build_optimizer(self.params, t, fused=fused)
        self.step_forward: Callable[..., Any] = partial(self.launcher.forward_loss, self.model, self.loss_fn)
        if self.compile.enabled:
            self.step_forward = compile_forward_loss(
                self.step_forward, say=self.is_main, fall_back=t.compile == "auto", state=(model, self.loss_fn)
            )
        # the weight average starts at the initial (or init_weights') weights; a resume below replaces it
        self.ema = WeightAverage(model, t.ema, t.ema_warmup_steps) if t.ema else None
        self.statistics = StatisticsBackup(model)  # put back when a step is skipped
        self.schedule = LRSchedule.from_config(t, self.steps_per_epoch, self.world_size)
        self.scaler = grad_scaler(self.device.type, self.precision.grad_scaler)
        # a fused step takes the skip as a device flag; without one (or with fp16 loss scaling) it is read back
        self.device_skip = fused and not self.scaler.is_enabled()

        self.position = TrainingPosition()
        self.checkpointer = Checkpointer(
            cfg, self.skeleton, self.model, self.optimizer, self.scaler, self.rank, self.world_size, self.ema,
            self.schedule)  # fmt: skip
        if self.is_main:
            remove_stale_temporaries(self.out_dir)  # left by a process killed while writing a checkpoint
        self.checkpointer.restore(self.position, self.steps_per_epoch, inputs.resume, inputs.resolved)
        self.hooks = HookList(self.default_hooks())
        if self.is_main:
            save_config(cfg, self.out_dir / "config.yaml")
            log.info("precision: %s (%s)", self.precision.name, self.precision.reason)
            log.info(
                f"{self.launcher.name}: {self.world_size} process(es) on {self.device}, {len(self.train_set)} "
                f"samples (one per main person, of {self.train_set.num_images} images), {self.steps_per_epoch} "
                f"steps/epoch, {sum(p.numel() for p in self.params):,} trainable "
                f"parameters" + (f" ({len(self.frozen)} tensors frozen)" if self.frozen else "")
            )
            log.info(recipe_line(t, self.schedule, self.world_size, self.position.global_step))

    @property
    def steps_per_epoch(self) -> int:
        return self.batches.steps_per_epoch

    def default_hooks(self) -> list[Hook]:
        """The standard hooks (engine/hooks.py), each given what it uses."""
        t = self.cfg.train
        logger = MetricsLogger(self.out_dir, enabled=self.is_main, tensorboard=t.tensorboard)
        validated = self.ema.module if self.ema else self.model  # the weights best.pt keeps
        validator = Validator(
            self.cfg,
            validated,
            self.loss_fn,
            self.val_set,
            self.device,
            self.precision,
            self.rank,
            self.world_size,
            self.ground_truth,
        )
        samples_per_step = self.world_size * t.batch_size * t.accumulate_steps
        return [
            WatchdogHook(self.cfg.dist.timeout_s, self.rank, self.world_size),
            LoggingHook(logger, self.steps_per_epoch, t.log_every, samples_per_step, self.device, self.is_main),
            ValidationHook(validator, logger, self.cfg.data, self.is_main),
            CheckpointHook(self.checkpointer, t.checkpoint_every_steps, t.checkpoint_every_minutes, self.validates),
        ]

    def validates(self, epoch: int) -> bool:
        """Whether the end of ``epoch`` is validated (``train.val_every``, the last epoch; something to validate)."""
        t = self.cfg.train
        anything = self.val_set is not None or bool(validation_sets(self.cfg.data))
        return anything and validation_due(epoch, t.val_every, t.epochs)

    def register_hooks(self, hooks: list[Hook]) -> None:
        """Add hooks, called after the standard ones."""
        self.hooks.extend(hooks)

    # ------------------------------------------------------------------ the loop
    def fit(self) -> dict[str, float]:
        """Train from the current position to ``train.epochs``; returns the last epoch's summary (training and
        validation figures)."""
        p = self.position
        summary: dict[str, float] = {}
        try:
            self.hooks.before_train(p)
            # resumed from an epoch end's last.pt whose validation a stop cut short: that validation first
            summary = self.validate({"epoch": p.epoch - 1}) if p.validation_due else summary
            while p.epoch < self.cfg.train.epochs:
                self.train_epoch()
                summary = {"epoch": p.epoch}
                self.hooks.after_epoch(p, summary)  # the epoch's record, its last.pt (before validation)
                p.epoch, p.step, p.validation_due = p.epoch + 1, 0, self.validates(p.epoch)
                if p.validation_due:
                    summary = self.validate(summary)
        finally:
            self.batches.close()  # persistent loader workers
            self.hooks.after_train(p)
            for dataset in (self.train_set, self.val_set):  # their HDF5 files (read again on a later use)
                if dataset is not None:
                    dataset.close()
        return summary

    def validate(self, summary: dict[str, float]) -> dict[str, float]:
        """The validation due at the current position (that of the epoch before it) and what follows it (best.pt,
        last.pt); returns ``summary`` with its figures."""
        self.hooks.validate(self.position, summary)
        self.hooks.after_validation(self.position, summary)
        return summary

    def train_epoch(self) -> None:
        """The remaining steps of the current epoch (``position``), with their hooks."""
        p, t = self.position, self.cfg.train
        self.model.train()
        if t.bn_eval:
            batchnorm_eval(self.model)
        self.hooks.before_epoch(p)
        where = lambda: f"{p.where()}, next batch: {self.batches.describe(p.epoch, p.step)}"  # noqa: E731
        with loader_errors(training_data(self.cfg), self.cfg.data, where):
            for micro_batches in self.batches.epoch(p.epoch, p.step):
                self.hooks.before_step(p)
                result = self.train_step(micro_batches, self.schedule.lr(p.epoch, p.step))
                p.step, p.global_step = p.step + 1, p.global_step + 1
                self.hooks.after_step(p, result)

    def train_step(self, micro_batches: list[dict], lr: float) -> StepResult:
        """One optimiser step: forward and loss under autocast and backward for each micro-batch (its loss divided
        by their number, so the gradient is that of their union), then unscale, clip, and the update unless the
        loss or the gradient is non-finite on any rank (then every rank skips it, counted). A CUDA out-of-memory
        error becomes one line naming the batch and what to change."""
        where = self.position.where()
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.optimizer.zero_grad(set_to_none=True)
        self.statistics.save()
        losses, breakdowns, samples = [], [], 0
        for i, batch in enumerate(micro_batches):
            images, targets, masks = batch_to_device(batch, self.device, self.cfg.train.channels_last)
            labelled = labelled_to_device(batch, self.device)
            last = i == len(micro_batches) - 1
            try:
                # gradients are all-reduced once, with the last micro-batch's backward
                with nullcontext() if last else self.launcher.no_sync(self.model):
                    beat("forward pass", where)
                    with self.precision.autocast(self.device):
                        total, breakdown = self.step_forward(images, targets, masks, labelled)
                    beat("backward pass", where)
                    # backward runs even for a non-finite loss so that every DDP rank joins the same all-reduce
                    self.scaler.scale(total / len(micro_batches)).backward()
            except torch.cuda.OutOfMemoryError:
                raise out_of_memory(self.cfg, self.precision, self.device, where, images.shape) from None
            losses.append(total.detach())
            breakdowns.append(breakdown)
            samples += images.shape[0]
        beat("optimizer step", where)
        total = torch.stack(losses).mean()
        breakdown = {k: torch.stack([b[k].detach() for b in breakdowns]).mean(0) for k in breakdowns[0]}
        applied, skipped, grad_norm = self.scaled_update(total) if self.scaler.is_enabled() else self.update(total)
        self.launcher.sync_statistics(self.model)  # plain BatchNorm under DDP: every process's the same
        if self.ema is not None:
            self.ema.update(self.model, applied)
        self.position.count_skip(skipped)
        scale = self.scaler.get_scale() if self.scaler.is_enabled() else None
        return StepResult(total, breakdown, grad_norm, applied, samples, lr, scale)

    def gradient_norm(self) -> torch.Tensor:
        """The gradients' total 2-norm, clipped to ``train.clip_grad_norm`` when set. Without clipping only the
        norm is computed (it decides the non-finite skip and is logged), no gradient is rescaled."""
        clip = self.cfg.train.clip_grad_norm
        if clip:
            return torch.nn.utils.clip_grad_norm_(self.params, clip)
        grads = [p.grad for p in self.params if p.grad is not None]
        return total_norm(grads)

    def update(self, total: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The optimiser step without loss scaling, unless the loss (on any rank) or the gradient is non-finite;
        returns 0-d tensors (applied, skipped, the gradient norm before clipping). With a fused optimiser the
        decision stays on the device (the step's ``found_inf``), so the step reads nothing back to the host; otherwise
        it is read once here."""
        grad_norm = self.gradient_norm()
        # gradients are the same on every rank (all-reduced), losses are not: agree on the flag
        applied = du.all_ranks(torch.isfinite(total) & torch.isfinite(grad_norm))
        if self.device_skip:
            self.optimizer.found_inf = (~applied).to(torch.float32)  # type: ignore[attr-defined]  # the fused step reads it
            self.optimizer.step()
            self.statistics.keep_if(applied)
        elif bool(applied):
            self.optimizer.step()
        else:
            self.statistics.restore()
        return applied, (~applied).to(torch.int32), grad_norm

    def scaled_update(self, total: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The fp16 step through the GradScaler: its overflow skips are its own; a non-finite loss on any rank is
        skipped and counted (decided on the host: this path reads the flags back). Returns what ``update`` does."""
        self.scaler.unscale_(self.optimizer)
        grad_norm = self.gradient_norm()
        loss_finite = bool(du.all_ranks(torch.isfinite(total)))
        if loss_finite:
            # overflowing gradients are normal while the scale settles: the scaler skips that step itself and
            # lowers the scale
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.zero_grad(set_to_none=True)
            self.scaler.update(self.scaler.get_scale() / 2)
        applied = loss_finite and bool(torch.isfinite(grad_norm))
        if not loss_finite:
            self.statistics.restore()  # an overflow of the gradients alone leaves them: its forward pass was finite
        skipped = torch.tensor(int(not loss_finite), device=self.device)
        return torch.tensor(applied, device=self.device), skipped, grad_norm


def training_data(cfg: Config) -> str:
    """The training file, or the files of ``data.train_sources``, for messages."""
    return ", ".join(cfg.data.train_sources) if cfg.data.train_sources else cfg.data.train


def init_weights(model: torch.nn.Module, ckpt: Checkpoint, say: bool = True) -> LoadReport:
    """``train.init_weights``: a checkpoint's weights (ours or the original's; read by engine.preflight) into a
    fresh ``model``, as the start of a new run. A checkpoint of another skeleton loads every tensor but the
    skeleton-dependent ones, which keep their initialisation (listed in the log and in the report's
    ``reinitialised``); another network size is still refused."""
    report = ckpt.load_into(model, other_skeleton=True)
    path = ckpt.file
    if report.reinitialised and say:
        loaded = len(unwrap(model).state_dict()) - len(report.reinitialised)
        log.info(
            f"train.init_weights={path} was trained for {ckpt.keypoints().describe()}, this run uses "
            f"{carried_skeleton(model).describe()}: loaded the {loaded} tensors that do not depend on the skeleton; "
            f"re-initialised the {len(report.reinitialised)} that do:\n  " + "\n  ".join(report.reinitialised)
        )
    return report
