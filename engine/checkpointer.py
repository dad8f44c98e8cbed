"""What a run saves and restores: the weights, the optimiser, the loss scaler, the position and every rank's RNG
states, as ``checkpoint.format.Checkpoint`` files in ``train.out_dir`` (rank 0 writes; every rank takes part).

    checkpointer = Checkpointer(cfg, skeleton, model, optimizer, scaler, rank, world_size)
    checkpointer.restore(progress, steps_per_epoch)      # train.resume: the agreed file, checked, into everything
    checkpointer.save("last.pt", progress)               # a collective
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

import torch
from torch import nn

from config.loader import config_from_dict, to_dict
from config.schema import Config
from config.skeleton import Skeleton
from config.skeleton_check import check_compatible
from checkpoint.format import (
    Checkpoint,
    CheckpointError,
    TrainState,
    code_version,
    resolve_resume,
    rng_state,
    set_rng_state,
)
from engine.progress import Progress
from models.posenet import WEIGHT_NEUTRAL_SETTINGS
from models.weights import unwrap
from utils import distributed as du
from utils.errors import UserError
from utils.io import WriteError
from utils.watchdog import beat

log = logging.getLogger(__name__)


class Checkpointer:
    """Saves and restores a run's state; ``model`` may be wrapped (DDP, DataParallel)."""

    def __init__(self, cfg: Config, skeleton: Skeleton, model: nn.Module, optimizer: torch.optim.Optimizer,
                 scaler: torch.amp.GradScaler, rank: int, world_size: int) -> None:  # fmt: skip
        self.cfg, self.skeleton, self.model, self.optimizer, self.scaler = cfg, skeleton, model, optimizer, scaler
        self.rank, self.world_size = rank, world_size
        self.out_dir = Path(cfg.train.out_dir)

    def save(self, name: str, progress: Progress) -> None:
        """Write ``out_dir/name`` holding ``progress`` (the position a resumed run starts at).

        Every rank takes part (RNG states and a weight fingerprint are gathered); rank 0 writes; then all learn
        whether it could, so a full disk stops every process with the same message instead of leaving the others
        waiting."""
        beat("checkpoint", f"{name} at {progress.where()}")
        progress.settle()
        rngs = du.all_gather_object(rng_state())
        in_sync = ranks_in_sync(unwrap(self.model))
        error: tuple[str, int | None] = ("", None)
        if self.rank == 0:
            if not in_sync:
                log.warning("the weights of the %d processes differ at global step %d; the checkpoint holds rank 0's",
                            self.world_size, progress.global_step)  # fmt: skip
            state = TrainState(self.optimizer.state_dict(), dataclasses.replace(progress), self.world_size, rngs,
                               self.scaler.state_dict() if self.scaler.is_enabled() else {}, in_sync)  # fmt: skip
            ckpt = Checkpoint(unwrap(self.model).state_dict(), to_dict(self.cfg), self.skeleton, state, code_version())
            try:
                ckpt.save(self.out_dir / name)
            except WriteError as e:
                error = (str(e), e.errno)
        message, code = du.broadcast_object(error)
        if message:
            raise WriteError(
                f"{message}. Training stopped at {progress.where()} without this checkpoint; once fixed, continue from "
                f"the previous one with train.resume=auto train.out_dir={self.out_dir}",
                self.out_dir / name, code,
            )

    def restore(self, progress: Progress, steps_per_epoch: int) -> Path | None:
        """Resume from ``train.resume`` (the file every rank agrees on; None: a fresh start): check that it fits this
        run, load the weights (strictly), the optimiser and scaler states, ``progress`` and (same world size) this
        rank's RNG states. Returns the file resumed from."""
        path = agreed_resume_path(self.cfg.train.resume, self.out_dir)
        if path is None:
            if self.rank == 0 and self.cfg.train.resume == "auto":
                log.info("train.resume=auto: %s holds no last.pt yet; the run starts from the beginning there",
                         self.out_dir)  # fmt: skip
            return None
        ckpt = Checkpoint.load(path)
        check_same_model(ckpt, self.cfg)
        check_compatible(self.skeleton, ckpt.trained_skeleton(), where=f"checkpoint {path}", need="layout",
                         fix=f"resume with the same data.skeleton, or start a new run (train.out_dir) with "
                         f"train.init_weights={path}", file=str(path))  # fmt: skip
        state = ckpt.train_state
        if state is None:
            raise CheckpointError(f"{path} holds weights only, no training state to resume; to start from its weights "
                                  f"use train.init_weights={path}", file=path, key="train_state")  # fmt: skip
        ckpt.load_into(self.model)
        try:
            self.optimizer.load_state_dict(state.optimizer)
        except (ValueError, KeyError) as e:
            raise CheckpointError(f"optimizer state in {path} does not fit this run ({e}); same train.freeze?",
                                  file=path, key="optimizer") from None  # fmt: skip
        if state.scaler:
            self.scaler.load_state_dict(state.scaler)
        saved = state.progress
        progress.epoch, progress.step, progress.global_step = saved.epoch, saved.step, saved.global_step
        progress.best_metric = saved.best_metric
        progress.counters.update(saved.counters)
        if progress.step and state.world_size != self.world_size:
            # Mid-epoch positions are counted in batches of the old world size: restart that epoch's order there.
            progress.step = min(steps_per_epoch, progress.step * state.world_size // self.world_size)
        if state.rng and state.world_size == self.world_size:
            set_rng_state(state.rng[self.rank])
        if self.rank == 0:
            if not state.ranks_in_sync:
                log.warning("%s was written while the processes' weights differed; it holds rank 0's", path)
            log.info("resumed from %s: epoch %d, step %d, global step %d%s", path, progress.epoch, progress.step,
                     progress.global_step, f" (written by code {ckpt.code_version})" if ckpt.code_version else "")
        return path


def agreed_resume_path(resume: str, out_dir: Path) -> Path | None:
    """The checkpoint to resume from, the same on every rank (a collective: no rank starts afresh while the
    others resume). Only rank 0 writes checkpoints, so every node must see ``out_dir``."""
    try:
        mine, error = resolve_resume(resume, out_dir), None
    except UserError as e:
        mine, error = None, e
    seen = du.all_gather_object((str(mine) if mine else None, str(error) if error else ""))
    if error is not None:
        raise error
    errors = [e for _, e in seen if e]
    if errors:
        raise CheckpointError(errors[0], key="train.resume")
    if any(p != seen[0][0] for p, _ in seen):
        raise CheckpointError(
            f"the processes disagree on the checkpoint to resume from ({[p for p, _ in seen]}, by rank): put "
            f"train.out_dir={out_dir} on a filesystem every node shares, or give train.resume=PATH on each",
            key="train.resume",
        )
    return Path(seen[0][0]) if seen[0][0] else None


def check_same_model(ckpt: Checkpoint, cfg: Config) -> None:
    """CheckpointError unless the checkpoint was trained with this run's ``model.*`` settings (those that only change
    how the network runs, such as ``model.checkpoint_activations``, may differ)."""
    if ckpt.config is None:
        return
    saved, current = (architecture(c) for c in (config_from_dict(ckpt.config), cfg))
    if saved != current:
        raise CheckpointError(
            f"checkpoint {ckpt.file} was trained with model settings {saved}, this run has {current}; resume with the "
            f"same model.* settings",
            file=ckpt.file, key="config",
        )


def architecture(cfg: Config) -> dict[str, Any]:
    """The ``model.*`` settings that decide the weights."""
    return {k: v for k, v in to_dict(cfg.model).items() if k not in WEIGHT_NEUTRAL_SETTINGS}


def parameter_fingerprint(model: nn.Module) -> list[float]:
    """Per-tensor float64 sums and sums of squares of the parameters: equal on all ranks unless they diverged.

    Buffers are left out: without SyncBN each rank's BatchNorm running statistics follow its own batches
    until DDP broadcasts rank 0's at the next forward."""
    with torch.no_grad():
        rows = [torch.stack([p.double().sum(), p.double().square().sum()]) for p in model.parameters()]
        return torch.stack(rows).flatten().cpu().tolist() if rows else []


def ranks_in_sync(model: nn.Module) -> bool:
    """True when every rank holds the same parameters (a collective)."""
    fingerprints = du.all_gather_object(parameter_fingerprint(model))
    return all(f == fingerprints[0] for f in fingerprints)
