"""Resuming a run: the checkpoint every process agrees on, and checks that it fits this run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from config.loader import config_from_dict, to_dict
from config.schema import Config
from config.skeleton import Skeleton, carried_skeleton
from engine.checkpoint import resolve_resume
from models.posenet import WEIGHT_NEUTRAL_SETTINGS
from utils import distributed as du
from utils.errors import UserError


def agreed_resume_path(resume: str, out_dir: Path) -> Path | None:
    """The checkpoint to resume from, the same on every rank (a collective: no rank starts afresh while the
    others resume). Only rank 0 writes checkpoints, so every node must see ``out_dir``."""
    try:
        mine, error = resolve_resume(resume, out_dir), ""
    except UserError as e:
        mine, error = None, str(e)
    seen = du.all_gather_object((str(mine) if mine else None, error))
    errors = [e for _, e in seen if e]
    if errors:
        raise UserError(errors[0])
    if any(p != seen[0][0] for p, _ in seen):
        raise UserError(
            f"the processes disagree on the checkpoint to resume from ({[p for p, _ in seen]}, by rank): put "
            f"train.out_dir={out_dir} on a filesystem every node shares, or give train.resume=PATH on each"
        )
    return Path(seen[0][0]) if seen[0][0] else None


def check_same_model(ckpt: dict[str, Any], cfg: Config, path: Path) -> None:
    """UserError unless the checkpoint was trained with this run's ``model.*`` settings (those that only change
    how the network runs, such as ``model.checkpoint_activations``, may differ)."""
    if "config" not in ckpt:
        return
    saved, current = (architecture(c) for c in (config_from_dict(ckpt["config"]), cfg))
    if saved != current:
        raise UserError(
            f"checkpoint {path} was trained with model settings {saved}, this run has {current}; resume with the "
            f"same model.* settings"
        )


def check_same_skeleton(ckpt: dict[str, Any], skeleton: Skeleton, path: Path) -> None:
    """UserError unless the checkpoint was trained for a skeleton with this run's channels (one saved before
    checkpoints carried their skeleton was COCO's)."""
    saved = ckpt.get("skeleton")
    carried = carried_skeleton(saved, f"saved in {path}")
    if not carried.same_layout(skeleton):
        was = carried.describe() if isinstance(saved, dict) else "'coco' (saved before checkpoints carried one)"
        raise UserError(
            f"checkpoint {path} was trained for skeleton {was}, this run uses {skeleton.describe()}; resume with "
            f"the same data.skeleton, or start a new run (train.out_dir) with train.init_weights={path}"
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
