"""The training loop shared by every launcher.

One ``Trainer`` owns the optimiser, the learning-rate schedule, mixed precision, gradient clipping, layer
freezing, non-finite step handling, validation (loss and COCO AP), checkpoints (``last.pt``, ``best.pt``),
resume and logging. A launcher (engine.launch) only decides how the model is wrapped and which process sees
which samples. ``docs/design.md#training-engine-loop-hooks-checkpoint`` walks through the loop.
"""

from __future__ import annotations

import math
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from tqdm import tqdm

from config.loader import save_config, to_dict
from config.schema import Config
from config.skeleton import skeleton_of
from data.dataset import SimplePoseDataset, images_to_float
from engine.checkpoint import (
    code_version,
    load_checkpoint,
    remove_stale_temporaries,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from engine.launch import Launcher, SingleDevice
from engine.loader import make_loader
from engine.loader_errors import loader_errors, next_batch, out_of_memory_message
from engine.logger import Meter, MetricsLogger, step_values
from engine.optim import apply_freeze, batchnorm_eval, build_optimizer
from engine.resume import agreed_resume_path, check_same_model, check_same_skeleton, ranks_in_sync
from engine.runtime import configure_cpu_threads, seed_everything
from engine.sampler import EpochSampler, groups_of
from engine.schedule import LRSchedule
from evaluate.coco_eval import evaluate_coco
from models import MultiTaskLoss, build_model, load_weights
from models.weights import load_initial_weights, reinitialised_note, unwrap
from utils import distributed as du
from utils.errors import UserError
from utils.precision import precision_for
from utils.watchdog import Watchdog, beat


@dataclass
class StepResult:
    """What one optimiser step leaves for logging."""

    loss: torch.Tensor  # scalar, this process's batch
    breakdown: dict[str, torch.Tensor]
    grad_norm: torch.Tensor  # before clipping
    applied: bool  # False when skipped for a non-finite loss or gradient (on every rank)
    samples: int


class Trainer:
    def __init__(self, cfg: Config, launcher: Launcher | None = None) -> None:
        self.cfg = cfg
        self.launcher = launcher or SingleDevice(du.select_device(cfg.train.device))
        self.device = self.launcher.device
        self.rank, self.world_size = self.launcher.rank, self.launcher.world_size
        self.is_main = self.rank == 0
        self.out_dir = Path(cfg.train.out_dir)
        seed_everything(cfg.train.seed, cfg.train.deterministic)
        configure_cpu_threads(self.device, cfg.data.num_workers)
        self.precision = precision_for(cfg.train.amp, self.device, "train.amp")
        self.skeleton = skeleton_of(cfg)  # handed to the data, the model and the loss; saved in checkpoints

        self.train_set = self._dataset(cfg.data.train, "data.train", train=True)
        self.val_set = self._dataset(cfg.data.val, "data.val", train=False) if cfg.data.val else None
        t = cfg.train
        # the sampler's batch is one optimiser step: accumulate_steps micro-batches of batch_size
        step_batch = t.batch_size * t.accumulate_steps
        self.sampler = EpochSampler(len(self.train_set), t.seed, True, self.rank, self.world_size, step_batch)
        self.steps_per_epoch = self.sampler.batches_per_epoch()
        if t.max_steps_per_epoch > 0:
            self.steps_per_epoch = min(self.steps_per_epoch, t.max_steps_per_epoch)
        if self.steps_per_epoch == 0:
            raise UserError(
                f"{cfg.data.train} holds {len(self.train_set)} samples, fewer than one optimiser step of "
                f"{t.batch_size} x {t.accumulate_steps} micro-batches x {self.world_size} processes; lower "
                f"train.batch_size or train.accumulate_steps"
            )

        model = build_model(cfg, self.skeleton).to(self.device)
        if t.init_weights:
            note = reinitialised_note(*load_initial_weights(model, t.init_weights), model, t.init_weights)
            if note:
                self._say(note)
        self.frozen = apply_freeze(model, t.freeze)
        if t.channels_last:
            model = model.to(memory_format=torch.channels_last)
        self.loss_fn = MultiTaskLoss(cfg, self.skeleton).to(self.device)
        self.model = self.launcher.wrap(model, self.loss_fn)
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = build_optimizer(self.params, t)
        self.schedule = LRSchedule.from_config(t, self.steps_per_epoch, self.world_size)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.precision.grad_scaler)

        self.epoch, self.start_step, self.global_step = 0, 0, 0
        self.best_metric = -math.inf
        self.counters = {"skipped_nonfinite": 0}
        self.logger = MetricsLogger(self.out_dir, enabled=self.is_main)
        if self.is_main:
            remove_stale_temporaries(self.out_dir)  # left by a process killed while writing a checkpoint
        self._resume()
        if self.is_main:
            save_config(cfg, self.out_dir / "config.yaml")
            self._say(f"precision: {self.precision.name} ({self.precision.reason})")
            self._say(
                f"{self.launcher.name}: {self.world_size} process(es) on {self.device}, "
                f"{len(self.train_set)} samples, {self.steps_per_epoch} steps/epoch, "
                f"{sum(p.numel() for p in self.params):,} trainable parameters"
                + (f" ({len(self.frozen)} tensors frozen)" if self.frozen else "")
            )

    # ------------------------------------------------------------------ setup helpers
    def _dataset(self, path: str, key: str, train: bool) -> SimplePoseDataset:
        if not path:
            raise UserError(f"{key} is empty: give the HDF5 file made by `python -m data.coco_to_hdf5` ({key}=FILE)")
        if not Path(path).is_file():
            raise UserError(f"{key}={path}: no such file (make it with `python -m data.coco_to_hdf5 ... --out {path}`)")
        return SimplePoseDataset(path, self.cfg, train=train, skeleton=self.skeleton)

    def _say(self, msg: str) -> None:
        if self.is_main:
            tqdm.write(msg)

    def _resume(self) -> None:
        path = agreed_resume_path(self.cfg.train.resume, self.out_dir)
        if path is None:
            # A fresh start (also an elastic restart before the first checkpoint): the metrics start empty.
            self.logger.truncate_after(0)
            return
        ckpt = load_checkpoint(path)
        check_same_model(ckpt, self.cfg, path)
        check_same_skeleton(ckpt, self.skeleton, path)
        load_weights(unwrap(self.model), {"model": ckpt["model"]}, source=str(path))
        try:
            self.optimizer.load_state_dict(ckpt["optimizer"])
        except (ValueError, KeyError) as e:
            raise UserError(f"optimizer state in {path} does not fit this run ({e}); same train.freeze?") from None
        if ckpt.get("scaler"):
            self.scaler.load_state_dict(ckpt["scaler"])
        self.epoch, self.start_step = int(ckpt["epoch"]), int(ckpt["step"])
        self.global_step = int(ckpt["global_step"])
        self.best_metric = float(ckpt.get("best_metric", -math.inf))
        self.counters.update(ckpt.get("counters", {}))
        saved_world = int(ckpt.get("world_size", self.world_size))
        if self.start_step and saved_world != self.world_size:
            # Mid-epoch positions are counted in batches of the old world size: restart that epoch's order there.
            self.start_step = min(self.steps_per_epoch, self.start_step * saved_world // self.world_size)
        if "rng" in ckpt and saved_world == self.world_size:
            set_rng_state(ckpt["rng"][self.rank] if isinstance(ckpt["rng"], list) else ckpt["rng"])
        self.logger.truncate_after(self.global_step)
        self._say(f"resumed from {path}: epoch {self.epoch}, step {self.start_step}, global step {self.global_step}")

    # ------------------------------------------------------------------ checkpoints
    def checkpoint_state(self, epoch: int, step: int) -> dict[str, Any]:
        """The checkpoint dict (a collective: every rank's RNG state and a weight fingerprint are gathered)."""
        rngs = du.all_gather_object(rng_state())
        in_sync = ranks_in_sync(unwrap(self.model))
        if not in_sync:
            self._say(f"warning: the weights of the {self.world_size} processes differ at global step "
                      f"{self.global_step}; the checkpoint holds rank 0's")  # fmt: skip
        return {
            "model": unwrap(self.model).state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.schedule.state_dict(),
            "scaler": self.scaler.state_dict() if self.scaler.is_enabled() else {},
            "epoch": epoch,
            "step": step,
            "global_step": self.global_step,
            "world_size": self.world_size,
            "best_metric": self.best_metric,
            "counters": dict(self.counters),
            "rng": rngs if self.world_size > 1 else rngs[0],
            "ranks_in_sync": in_sync,
            "config": to_dict(self.cfg),
            "skeleton": self.skeleton.to_dict(),
            "version": code_version(),
        }

    def save(self, name: str, epoch: int, step: int) -> None:
        """Every rank takes part (RNG states are gathered); rank 0 writes; then all learn whether it could, so
        a full disk stops every process with the same message instead of leaving the others waiting."""
        beat("checkpoint", f"{name} of epoch {epoch}, step {step}")
        state = self.checkpoint_state(epoch, step)
        error = ""
        if self.is_main:
            try:
                save_checkpoint(self.out_dir / name, state)
            except UserError as e:
                error = str(e)
        error = du.broadcast_object(error)
        if error:
            raise UserError(
                f"{error}. Training stopped at epoch {epoch}, step {step} (global step {self.global_step}) without "
                f"this checkpoint; once fixed, continue from the previous one with train.resume=auto "
                f"train.out_dir={self.out_dir}"
            )

    # ------------------------------------------------------------------ the loop
    def fit(self) -> dict[str, Any]:
        if self.world_size > 1:
            store = du.get_store()
            with Watchdog(self.cfg.dist.timeout_s, self.rank, self.world_size, store):
                return self._fit()
        return self._fit()

    def _fit(self) -> dict[str, Any]:
        cfg = self.cfg.train
        last: dict[str, Any] = {}
        for epoch in range(self.epoch, cfg.epochs):
            with loader_errors(self.cfg.data.train, self.cfg.data, lambda e=epoch: next_batch(self, e)):
                last = {"epoch": epoch, **self.train_epoch(epoch, self.start_step)}
            self.start_step = 0
            if cfg.val_every and ((epoch + 1) % cfg.val_every == 0 or epoch + 1 == cfg.epochs):
                beat("validation", f"epoch {epoch}")
                with loader_errors(self.cfg.data.val, self.cfg.data, lambda: "validating"):
                    val = self.validate(epoch)
                last.update(val)
                metric = val.get("AP", -val.get("val_loss", math.inf))
                if metric > self.best_metric:
                    self.best_metric = metric
                    self.save("best.pt", epoch + 1, 0)
            self.save("last.pt", epoch + 1, 0)
        self.logger.close()
        return last

    def train_epoch(self, epoch: int, start_step: int = 0) -> dict[str, float]:
        t = self.cfg.train
        self.model.train()
        if t.bn_eval:
            batchnorm_eval(self.model)
        self.sampler.set_epoch(epoch, start_step)
        if hasattr(self.train_set, "set_epoch"):  # any map-style dataset of sample dicts trains; ours reseeds
            self.train_set.set_epoch(epoch)
        loader = make_loader(self.train_set, self.sampler, t.batch_size, self.cfg.data, self.device)
        loss_meter, data_time, compute_time = Meter(), Meter(), Meter()
        bar = tqdm(total=self.steps_per_epoch, initial=start_step, desc=f"epoch {epoch}", disable=not self.is_main,
                   dynamic_ncols=True, leave=False)  # fmt: skip
        step, tic = start_step, time.perf_counter()
        beat("loading data", self._where(epoch, step))
        for micro_batches in groups_of(loader, t.accumulate_steps):
            if step >= self.steps_per_epoch:
                break
            self.before_step(epoch, step)
            t_data = time.perf_counter()
            lr = self.schedule.lr(epoch, step)
            result = self.train_step(micro_batches, lr, epoch, step)
            if result.applied:
                loss_meter.update(float(result.loss.item()), result.samples)
            step += 1
            self.global_step += 1
            beat("loading data", self._where(epoch, step))
            toc = time.perf_counter()
            data_time.update(t_data - tic)
            compute_time.update(toc - t_data)
            tic = toc
            bar.update(1)
            if step % t.log_every == 0 or step == self.steps_per_epoch:
                self._log_step(epoch, step, result, lr, data_time.mean + compute_time.mean, data_time.mean)
                bar.set_postfix(loss=f"{loss_meter.mean:.4g}", lr=f"{lr:.3g}")
            if t.checkpoint_every_steps and self.global_step % t.checkpoint_every_steps == 0:
                self.save("last.pt", epoch, step)
        bar.close()
        mean_loss = du.all_reduce_mean(torch.tensor(loss_meter.mean, device=self.device)).item()
        samples_per_s = self.world_size * self.step_batch / max(data_time.mean + compute_time.mean, 1e-9)
        stats = {"train_loss": mean_loss, "skipped_nonfinite": self.counters["skipped_nonfinite"],
                 "samples_per_s": samples_per_s}  # fmt: skip
        self.logger.log("epoch", epoch, self.global_step, **stats)
        self._say(f"epoch {epoch}: train loss {mean_loss:.4f}, {samples_per_s:.1f} samples/s")
        return stats

    def train_step(self, micro_batches: list[dict], lr: float, epoch: int, step: int) -> StepResult:
        """One optimiser step: forward and loss under autocast and backward for each micro-batch (its loss divided
        by their number, so the gradient is that of their union), then unscale, clip, and the update unless the
        loss or the gradient is non-finite on any rank (then every rank skips it, counted). A CUDA out-of-memory
        error becomes one line naming the batch and what to change."""
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.optimizer.zero_grad(set_to_none=True)
        losses, breakdowns, samples = [], [], 0
        for i, batch in enumerate(micro_batches):
            images = images_to_float(batch["image"].to(self.device, non_blocking=True), self.cfg.train.channels_last)
            targets = [t.to(self.device, non_blocking=True) for t in batch["targets"]]
            masks = [m.to(self.device, non_blocking=True) for m in batch["masks"]]
            last = i == len(micro_batches) - 1
            try:
                # gradients are all-reduced once, with the last micro-batch's backward
                with nullcontext() if last else self.launcher.no_sync(self.model):
                    beat("forward pass", self._where(epoch, step))
                    with self.precision.autocast(self.device):
                        total, breakdown = self.compute_loss(images, targets, masks)
                    beat("backward pass", self._where(epoch, step))
                    # backward runs even for a non-finite loss so that every DDP rank joins the same all-reduce
                    self.scaler.scale(total / len(micro_batches)).backward()
            except torch.cuda.OutOfMemoryError:
                raise UserError(out_of_memory_message(self, self._where(epoch, step), images.shape)) from None
            losses.append(total.detach())
            breakdowns.append(breakdown)
            samples += images.shape[0]
        beat("optimizer step", self._where(epoch, step))
        total = torch.stack(losses).mean()
        breakdown = {k: torch.stack([b[k].detach() for b in breakdowns]).mean(0) for k in breakdowns[0]}
        self.scaler.unscale_(self.optimizer)
        grad_norm = torch.nn.utils.clip_grad_norm_(self.params, self.cfg.train.clip_grad_norm or math.inf)
        # gradients are the same on every rank (all-reduced), losses are not: agree on the loss
        loss_finite = not du.any_rank(not bool(torch.isfinite(total).item()), self.device)
        grads_finite = bool(torch.isfinite(grad_norm).item())
        applied = loss_finite and grads_finite
        if loss_finite and (grads_finite or self.scaler.is_enabled()):
            # with fp16 loss scaling, overflowing gradients are normal while the scale settles: the scaler skips
            # that step itself and lowers the scale
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.counters["skipped_nonfinite"] += 1
            self.optimizer.zero_grad(set_to_none=True)
            if self.scaler.is_enabled():
                self.scaler.update(self.scaler.get_scale() / 2)
            self._say(f"epoch {epoch} step {step}: non-finite loss or gradient, step skipped "
                      f"({self.counters['skipped_nonfinite']} so far)")  # fmt: skip
        return StepResult(total, breakdown, grad_norm, applied, samples)

    def compute_loss(self, images: torch.Tensor, targets: list[torch.Tensor], masks: list[torch.Tensor]):
        """(total loss, breakdown) of one batch through the launcher's wrapped model."""
        return self.launcher.forward_loss(self.model, self.loss_fn, images, targets, masks)

    def before_step(self, epoch: int, step: int) -> None:
        """Called before every training step; a no-op here (tests override it to inject faults)."""

    def _log_step(self, epoch: int, step: int, result: StepResult, lr: float, step_time: float, data_time: float):
        # every rank joins the averaging (the same steps everywhere); only rank 0 writes
        total = du.all_reduce_mean(result.loss)
        breakdown = {k: du.all_reduce_mean(v.detach()) for k, v in result.breakdown.items()}
        if self.is_main:
            values = step_values(total, breakdown, lr, result.grad_norm)
            values.update(data_time=data_time, compute_time=step_time - data_time,
                          samples_per_s=self.step_batch * self.world_size / max(step_time, 1e-9),
                          skipped_nonfinite=self.counters["skipped_nonfinite"])  # fmt: skip
            if self.scaler.is_enabled():
                values["loss_scale"] = self.scaler.get_scale()
            self.logger.log("train", epoch, self.global_step, step=step, **values)

    @property
    def step_batch(self) -> int:
        """Samples per process in one optimiser step."""
        return self.cfg.train.batch_size * self.cfg.train.accumulate_steps

    def _where(self, epoch: int, step: int) -> str:
        return f"epoch {epoch}, step {step} (global step {self.global_step})"

    # ------------------------------------------------------------------ validation
    @torch.no_grad()
    def validate(self, epoch: int) -> dict[str, float]:
        out: dict[str, float] = {}
        model = unwrap(self.model)
        was_training = model.training
        model.eval()
        if self.val_set is not None:
            out["val_loss"] = self._val_loss(model)
        d = self.cfg.data
        if d.val_images and d.val_annotations:
            out_json = self.out_dir / f"val_results_epoch{epoch}.json" if self.is_main else None
            stats = evaluate_coco(model, d.val_images, d.val_annotations, self.cfg, self.device, out_json=out_json)
            out.update({k: float(v) for k, v in stats.items()})
        model.train(was_training)
        if out:
            self.logger.log("val", epoch, self.global_step, **out)
            self._say(f"epoch {epoch} validation: " + ", ".join(f"{k} {v:.4f}" for k, v in out.items()))
        return out

    def _val_loss(self, model: nn.Module) -> float:
        sampler = EpochSampler(len(self.val_set), shuffle=False, rank=self.rank, world_size=self.world_size,
                               batch_size=1)  # fmt: skip
        meter = Meter()
        for batch in make_loader(self.val_set, sampler, 1, self.cfg.data, self.device):
            images = images_to_float(batch["image"].to(self.device), self.cfg.train.channels_last)
            targets = [t.to(self.device) for t in batch["targets"]]
            masks = [m.to(self.device) for m in batch["masks"]]
            with self.precision.autocast(self.device):
                total, _ = self.loss_fn(model(images), targets, masks)
            meter.update(float(total.item()), images.shape[0])
        return du.all_reduce_mean(torch.tensor(meter.mean, device=self.device)).item()
