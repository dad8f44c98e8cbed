"""The training loop shared by every launcher.

One ``Trainer`` owns the optimiser, the learning-rate schedule, torch.amp, gradient clipping, layer freezing,
non-finite step handling, validation (loss and COCO AP), checkpoints (``last.pt``, ``best.pt``), resume and
logging. A launcher (engine.launch) only decides how the model is wrapped and which process sees which samples.
"""

from __future__ import annotations

import math
import os
import random
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader
from tqdm import tqdm

from config.loader import config_from_dict, save_config, to_dict
from config.schema import Config
from data.dataset import collate, images_to_float, worker_init_fn
from engine.checkpoint import (
    code_version,
    load_checkpoint,
    remove_stale_temporaries,
    resolve_resume,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from engine.launch import SingleDevice
from engine.logger import Meter, MetricsLogger
from engine.sampler import EpochSampler
from engine.schedule import LRSchedule
from models.weights import unwrap
from utils import distributed as du
from utils.errors import UserError


def seed_everything(seed: int, deterministic: bool) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if deterministic:
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.benchmark = False
    else:
        torch.backends.cudnn.benchmark = True


def configure_cpu_threads(device: torch.device, num_workers: int) -> None:
    """On the CPU, leave one core per DataLoader worker: more busy threads than cores stalls every OpenMP
    barrier in the network (measured 10x slower on 2 cores). OMP_NUM_THREADS, when set, wins."""
    if device.type == "cpu" and "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) - num_workers))


def apply_freeze(model: nn.Module, patterns: list[str]) -> list[str]:
    """Set ``requires_grad=False`` on parameters whose name matches any regex; returns the frozen names.

    The original's ``--freeze`` meant "train only the heads", here
    ``train.freeze=['^(?!.*(outs|merge|before_regress))']``.
    """
    if not patterns:
        return []
    compiled = [re.compile(p) for p in patterns]
    frozen = []
    for name, p in model.named_parameters():
        if any(c.search(name) for c in compiled):
            p.requires_grad_(False)
            frozen.append(name)
    if not frozen:
        raise UserError(f"train.freeze={patterns} matches no parameter name (see `python -m models` for names)")
    return frozen


def batchnorm_eval(model: nn.Module) -> None:
    """Put every BatchNorm (incl. SyncBatchNorm) in eval mode: running statistics are used and kept fixed."""
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.eval()


def parameter_fingerprint(model: nn.Module) -> list[float]:
    """Per-tensor float64 sums and sums of squares of the parameters: equal on all ranks unless they diverged.

    Buffers are left out: without SyncBN each rank's BatchNorm running statistics follow its own batches
    until DDP broadcasts rank 0's at the next forward."""
    with torch.no_grad():
        rows = [torch.stack([p.double().sum(), p.double().square().sum()]) for p in model.parameters()]
        return torch.stack(rows).flatten().cpu().tolist() if rows else []


def autocast_dtype(amp: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype for ``train.amp`` on this device, or None for float32."""
    if amp == "off":
        return None
    if amp == "auto":
        return torch.float16 if device.type == "cuda" else torch.bfloat16
    if amp == "fp16" and device.type != "cuda":
        raise UserError("train.amp=fp16 needs CUDA; on the CPU use train.amp=bf16 or train.amp=off")
    return torch.float16 if amp == "fp16" else torch.bfloat16


def build_optimizer(params: list[nn.Parameter], cfg: Config) -> torch.optim.Optimizer:
    t = cfg.train
    if t.optimizer == "adam":
        return torch.optim.Adam(params, lr=t.lr, weight_decay=t.weight_decay)
    return torch.optim.SGD(params, lr=t.lr, momentum=t.momentum, weight_decay=t.weight_decay)


class ForkSafeLoader(DataLoader):
    """A DataLoader whose workers are forked while OpenCV runs single-threaded in this process.

    A worker forked while OpenCV's thread pool is alive here (it is after any multi-threaded cv2 call in this
    process: COCO evaluation, or loading with data.num_workers=0) hangs for ever in its first OpenCV call
    (worker_init_fn's cv2.setNumThreads included): the pool's threads do not exist in the child. Seen here as
    a test process that hung for ever at its first batch after having trained with data.num_workers=0."""

    def __iter__(self):
        if self.num_workers == 0:
            return super().__iter__()
        import cv2

        threads = cv2.getNumThreads()
        cv2.setNumThreads(1)
        try:
            return super().__iter__()  # forks the workers (non-persistent ones: at every epoch)
        finally:
            cv2.setNumThreads(threads)


def worker_error_message(message: str) -> str:
    """The original exception's own message from the text of a DataLoader worker failure ("Caught X in
    DataLoader worker process N. Original Traceback ..."), without the worker's traceback."""
    lines = message.rstrip().splitlines()
    last_frame = max((i for i, line in enumerate(lines) if line.startswith("  ")), default=0)
    detail = "\n".join(lines[last_frame + 1 :]).strip() or lines[0]
    kind, sep, text = detail.partition(": ")
    if sep and kind.rsplit(".", 1)[-1] == "UserError":
        return text
    worker = lines[0].removeprefix("Caught ").rstrip(".")
    return f"{detail} (raised in a DataLoader worker: {worker}); rerun with data.num_workers=0 for the full traceback"


class Trainer:
    def __init__(self, cfg: Config, launcher: SingleDevice | None = None) -> None:
        from models import MultiTaskLoss, build_model

        self.cfg = cfg
        self.launcher = launcher or SingleDevice(du.select_device(cfg.train.device))
        self.device = self.launcher.device
        self.rank, self.world_size = self.launcher.rank, self.launcher.world_size
        self.is_main = self.rank == 0
        self.out_dir = Path(cfg.train.out_dir)
        seed_everything(cfg.train.seed, cfg.train.deterministic)
        configure_cpu_threads(self.device, cfg.data.num_workers)

        self.train_set = self._dataset(cfg.data.train, "data.train", train=True)
        self.val_set = self._dataset(cfg.data.val, "data.val", train=False) if cfg.data.val else None
        self.sampler = EpochSampler(len(self.train_set), cfg.train.seed, True, self.rank, self.world_size,
                                    cfg.train.batch_size)  # fmt: skip
        self.steps_per_epoch = self.sampler.batches_per_epoch()
        if cfg.train.max_steps_per_epoch > 0:
            self.steps_per_epoch = min(self.steps_per_epoch, cfg.train.max_steps_per_epoch)
        if self.steps_per_epoch == 0:
            raise UserError(
                f"{cfg.data.train} holds {len(self.train_set)} samples, fewer than one batch of "
                f"{cfg.train.batch_size} x {self.world_size} processes; lower train.batch_size"
            )

        model = build_model(cfg).to(self.device)
        if cfg.train.init_weights:
            from models.weights import load_weights

            load_weights(model, cfg.train.init_weights)
        self.frozen = apply_freeze(model, cfg.train.freeze)
        if cfg.train.channels_last:
            model = model.to(memory_format=torch.channels_last)
        self.loss_fn = MultiTaskLoss(cfg).to(self.device)
        self.model = self.launcher.wrap(model, self.loss_fn)
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = build_optimizer(self.params, cfg)
        self.schedule = LRSchedule.from_config(cfg.train, self.steps_per_epoch, self.world_size)
        self.amp_dtype = autocast_dtype(cfg.train.amp, self.device)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.amp_dtype == torch.float16)

        self.epoch, self.start_step, self.global_step = 0, 0, 0
        self.best_metric = -math.inf
        self.counters = {"skipped_nonfinite": 0}
        self.logger = MetricsLogger(self.out_dir, enabled=self.is_main)
        if self.is_main:
            remove_stale_temporaries(self.out_dir)  # left by a process killed while writing a checkpoint
        self._resume()
        if self.is_main:
            save_config(cfg, self.out_dir / "config.yaml")
            self._say(
                f"{self.launcher.name}: {self.world_size} process(es) on {self.device}, "
                f"{len(self.train_set)} samples, {self.steps_per_epoch} steps/epoch, "
                f"{sum(p.numel() for p in self.params):,} trainable parameters"
                + (f" ({len(self.frozen)} tensors frozen)" if self.frozen else "")
                + f", amp={self.amp_dtype or 'off'}"
            )

    # ------------------------------------------------------------------ setup helpers
    def _dataset(self, path: str, key: str, train: bool):
        from data.dataset import SimplePoseDataset

        if not path:
            raise UserError(f"{key} is empty: give the HDF5 file made by `python -m data.coco_to_hdf5` ({key}=FILE)")
        if not Path(path).is_file():
            raise UserError(f"{key}={path}: no such file (make it with `python -m data.coco_to_hdf5 ... --out {path}`)")
        return SimplePoseDataset(path, self.cfg, train=train)

    def _loader(self, dataset, sampler, batch_size: int) -> DataLoader:
        d = self.cfg.data
        return ForkSafeLoader(
            dataset,
            batch_size=batch_size,
            sampler=sampler,
            num_workers=d.num_workers,
            timeout=d.loader_timeout if d.num_workers > 0 else 0,  # a stuck worker: see loader_errors
            pin_memory=d.pin_memory and self.device.type == "cuda",
            drop_last=False,
            worker_init_fn=worker_init_fn,
            collate_fn=collate,
        )

    def _say(self, msg: str) -> None:
        if self.is_main:
            tqdm.write(msg)

    def _resume_path(self) -> Path | None:
        """The checkpoint to resume from, the same on every rank (a collective: no rank starts afresh while the
        others resume). Only rank 0 writes checkpoints, so every node must see its out_dir."""
        try:
            mine, error = resolve_resume(self.cfg.train.resume, self.out_dir), ""
        except UserError as e:
            mine, error = None, str(e)
        seen = du.all_gather_object((str(mine) if mine else None, error))
        errors = [e for _, e in seen if e]
        if errors:
            raise UserError(errors[0])
        if any(p != seen[0][0] for p, _ in seen):
            raise UserError(
                f"the processes disagree on the checkpoint to resume from ({[p for p, _ in seen]}, by rank): put "
                f"train.out_dir={self.out_dir} on a filesystem every node shares, or give train.resume=PATH on each"
            )
        return Path(seen[0][0]) if seen[0][0] else None

    def _resume(self) -> None:
        path = self._resume_path()
        if path is None:
            # A fresh start (also an elastic restart before the first checkpoint): the metrics start empty.
            self.logger.truncate_after(0)
            return
        ckpt = load_checkpoint(path)
        saved = config_from_dict(ckpt["config"]) if "config" in ckpt else None
        if saved is not None and to_dict(saved.model) != to_dict(self.cfg.model):
            raise UserError(
                f"checkpoint {path} was trained with model settings {to_dict(saved.model)}, this run has "
                f"{to_dict(self.cfg.model)}; resume with the same model.* settings"
            )
        from models.weights import load_weights

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

    def autocast(self):
        """torch.autocast for the configured precision, or a no-op context for float32."""
        if self.amp_dtype is None:
            return nullcontext()
        return torch.autocast(self.device.type, dtype=self.amp_dtype)

    # ------------------------------------------------------------------ checkpoints
    def checkpoint_state(self, epoch: int, step: int) -> dict[str, Any]:
        rngs = du.all_gather_object(rng_state())
        fingerprints = du.all_gather_object(parameter_fingerprint(unwrap(self.model)))
        if any(f != fingerprints[0] for f in fingerprints):
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
            "ranks_in_sync": all(f == fingerprints[0] for f in fingerprints),
            "config": to_dict(self.cfg),
            "version": code_version(),
        }

    def save(self, name: str, epoch: int, step: int) -> None:
        """Every rank takes part (RNG states are gathered); rank 0 writes; then all learn whether it could, so
        a full disk stops every process with the same message instead of leaving the others waiting."""
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
        cfg = self.cfg.train
        last: dict[str, Any] = {}
        for epoch in range(self.epoch, cfg.epochs):
            with self.loader_errors(epoch, self.train_set):
                train_stats = self.train_epoch(epoch, self.start_step)
            self.start_step = 0
            last = {"epoch": epoch, **train_stats}
            if cfg.val_every and ((epoch + 1) % cfg.val_every == 0 or epoch + 1 == cfg.epochs):
                with self.loader_errors(epoch, self.val_set):
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
        cfg = self.cfg
        self.model.train()
        if cfg.train.bn_eval:
            batchnorm_eval(self.model)
        self.sampler.set_epoch(epoch, start_step)
        if hasattr(self.train_set, "set_epoch"):
            self.train_set.set_epoch(epoch)
        loader = self._loader(self.train_set, self.sampler, cfg.train.batch_size)
        loss_meter, data_time, compute_time = Meter(), Meter(), Meter()
        autocast = self.autocast()
        bar = tqdm(total=self.steps_per_epoch, initial=start_step, desc=f"epoch {epoch}", disable=not self.is_main,
                   dynamic_ncols=True, leave=False)  # fmt: skip
        step = start_step
        tic = time.perf_counter()
        for batch in loader:
            if step >= self.steps_per_epoch:
                break
            self._fault_exit()
            t_data = time.perf_counter()
            images = images_to_float(batch["image"].to(self.device, non_blocking=True), cfg.train.channels_last)
            targets = [t.to(self.device, non_blocking=True) for t in batch["targets"]]
            masks = [m.to(self.device, non_blocking=True) for m in batch["masks"]]
            lr = self.schedule.lr(epoch, step)
            for group in self.optimizer.param_groups:
                group["lr"] = lr

            with autocast:
                total, breakdown = self.launcher.forward_loss(self.model, self.loss_fn, images, targets, masks)
            if self.global_step in cfg.train.fault_nan_steps and cfg.train.fault_nan_rank in (-1, self.rank):
                total = total * float("nan")  # test hook: prove the non-finite guard works
            self.optimizer.zero_grad(set_to_none=True)
            # Backward runs even for a non-finite loss so that every DDP rank takes part in the same all-reduce.
            self.scaler.scale(total).backward()
            self.scaler.unscale_(self.optimizer)
            max_norm = cfg.train.clip_grad_norm if cfg.train.clip_grad_norm else math.inf
            grad_norm = torch.nn.utils.clip_grad_norm_(self.params, max_norm)
            finite = bool(torch.isfinite(total).item()) and bool(torch.isfinite(grad_norm).item())
            if du.any_rank(not finite, self.device):
                self.counters["skipped_nonfinite"] += 1
                self.optimizer.zero_grad(set_to_none=True)
                if self.scaler.is_enabled():
                    self.scaler.update(self.scaler.get_scale() / 2)
                self._say(f"epoch {epoch} step {step}: non-finite loss or gradient, step skipped "
                          f"({self.counters['skipped_nonfinite']} so far)")  # fmt: skip
            else:
                self.scaler.step(self.optimizer)
                self.scaler.update()
                loss_meter.update(float(total.item()), images.shape[0])
            step += 1
            self.global_step += 1
            toc = time.perf_counter()
            data_time.update(t_data - tic)
            compute_time.update(toc - t_data)
            tic = toc
            bar.update(1)
            if step % cfg.train.log_every == 0 or step == self.steps_per_epoch:
                # every rank joins the averaging (the same steps everywhere); only rank 0 writes
                total = du.all_reduce_mean(total.detach())
                breakdown = {k: du.all_reduce_mean(v) for k, v in breakdown.items()}
                if self.is_main:
                    self._log_step(epoch, step, total, breakdown, lr, grad_norm, data_time, compute_time)
                    bar.set_postfix(loss=f"{loss_meter.mean:.4g}", lr=f"{lr:.3g}")
            if cfg.train.checkpoint_every_steps and self.global_step % cfg.train.checkpoint_every_steps == 0:
                self.save("last.pt", epoch, step)
        bar.close()
        mean_loss = du.all_reduce_mean(torch.tensor(loss_meter.mean, device=self.device)).item()
        stats = {
            "train_loss": mean_loss,
            "skipped_nonfinite": self.counters["skipped_nonfinite"],
            "samples_per_s": self.world_size * cfg.train.batch_size / max(data_time.mean + compute_time.mean, 1e-9),
        }
        self.logger.log("epoch", epoch, self.global_step, **stats)
        self._say(f"epoch {epoch}: train loss {mean_loss:.4f}, {stats['samples_per_s']:.1f} samples/s")
        return stats

    @contextmanager
    def loader_errors(self, epoch: int, dataset) -> Iterator[None]:
        """Turn a DataLoader worker's failure into a UserError: a sample that raised inside a worker gives its
        own message (the dataset names the sample) instead of the worker's traceback; a worker that died (killed
        by a signal, e.g. the out-of-memory killer) or that gave no batch within data.loader_timeout gives the
        epoch, the step and the samples then loading."""
        try:
            yield
        except BaseException as e:
            for bar in list(getattr(tqdm, "_instances", ())):
                bar.close()  # the message then starts on a line of its own, not after a progress bar
            if not isinstance(e, Exception):
                raise
            message = str(e)
            path = getattr(dataset, "path", "the data")
            if isinstance(e, RuntimeError) and message.startswith("DataLoader timed out after"):
                raise UserError(
                    f"no batch came from a DataLoader worker within data.loader_timeout="
                    f"{self.cfg.data.loader_timeout:g} s while loading {path} ({self._where(epoch, dataset)}): a "
                    f"worker is stuck without dying (a deadlock, or a read hanging on a network file system). Check "
                    f"that {path} reads at normal speed from this machine (or copy it to a local disk); if batches "
                    f"are only slow, raise data.loader_timeout (0 waits for ever); data.num_workers=0 loads in this "
                    f"process, where a stack dump (e.g. `py-spy dump --pid PID`) shows where it hangs. Then continue "
                    f"with train.resume=auto"
                ) from None
            died = isinstance(e, RuntimeError) and "DataLoader worker (pid" in message
            # a worker killed while handing over a batch breaks the connection the batch's memory comes through
            if isinstance(e, (ConnectionError, EOFError)) and self.cfg.data.num_workers > 0:
                message = f"the connection to a DataLoader worker broke ({type(e).__name__}: {e})"
            elif not (message.startswith("Caught ") and " in DataLoader worker process " in message) and not died:
                raise
            if message.startswith("Caught "):
                raise UserError(worker_error_message(message)) from None
            raise UserError(
                f"a DataLoader worker died while loading {path} ({self._where(epoch, dataset)}): "
                f"{message.strip().rstrip('.')}. This is most often the out-of-memory killer (see `dmesg`): lower "
                f"data.num_workers or train.batch_size (data.num_workers=0 loads in this process and reports any "
                f"sample error directly), then continue with train.resume=auto"
            ) from None

    def _where(self, epoch: int, dataset) -> str:
        return "validating" if dataset is self.val_set else f"epoch {epoch}, {self._loading_batch(epoch)}"

    def _loading_batch(self, epoch: int) -> str:
        """``step S (next batch: samples [..], image ids [..])`` for the step the run was at in ``epoch``."""
        step = min(max(self.global_step - epoch * self.steps_per_epoch, 0), self.steps_per_epoch)
        sampler = EpochSampler(self.sampler.size, self.sampler.seed, self.sampler.shuffle, self.rank,
                               self.world_size, self.sampler.batch_size)  # fmt: skip
        sampler.set_epoch(epoch, step)
        samples = list(sampler)[: self.sampler.batch_size]
        ds = self.train_set
        ids = [int(ds.image_id[ds.sample_image[i]]) for i in samples] if hasattr(ds, "image_id") else []
        return f"step {step} (next batch: samples {samples}" + (f", image ids {ids})" if ids else ")")

    def _fault_exit(self) -> None:
        t = self.cfg.train
        if (self.global_step == t.fault_exit_step and self.rank == t.fault_exit_rank
                and os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0"):  # fmt: skip
            print(f"fault_exit_step: rank {self.rank} dies at global step {self.global_step}", flush=True)
            os._exit(13)

    def _log_step(self, epoch, step, total, breakdown, lr, grad_norm, data_time, compute_time) -> None:
        values = {"loss": float(total.item()), "lr": lr, "grad_norm": float(grad_norm.item())}
        for k, v in breakdown.items():
            v = v.detach().float().cpu()
            for idx in np.ndindex(*v.shape):  # e.g. loss/stack_scale/1_4 for stack 1, scale 4
                values["/".join(["loss", k, *(["_".join(map(str, idx))] if idx else [])])] = float(v[idx])
        batch = self.cfg.train.batch_size * self.world_size
        values.update(
            data_time=data_time.mean,
            compute_time=compute_time.mean,
            samples_per_s=batch / max(data_time.mean + compute_time.mean, 1e-9),
            skipped_nonfinite=self.counters["skipped_nonfinite"],
        )
        self.logger.log("train", epoch, self.global_step, step=step, **values)

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
            from evaluate.coco_eval import evaluate_coco

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
        loader = self._loader(self.val_set, sampler, batch_size=1)
        meter = Meter()
        autocast = self.autocast()
        for batch in loader:
            images = images_to_float(batch["image"].to(self.device), self.cfg.train.channels_last)
            targets = [t.to(self.device) for t in batch["targets"]]
            masks = [m.to(self.device) for m in batch["masks"]]
            with autocast:
                total, _ = self.loss_fn(model(images), targets, masks)
            meter.update(float(total.item()), images.shape[0])
        return du.all_reduce_mean(torch.tensor(meter.mean, device=self.device)).item()
