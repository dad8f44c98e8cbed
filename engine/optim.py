"""What the optimiser sees: frozen parameters, BatchNorm mode, and the optimiser itself."""

from __future__ import annotations

import re

import torch
from torch import nn

from config.schema import TrainConfig
from utils.errors import UserError


def apply_freeze(model: nn.Module, patterns: list[str]) -> list[str]:
    """Set ``requires_grad=False`` on parameters whose name matches any regex; returns the frozen names.

    The original's ``--freeze`` meant "train only the output heads and merges", here
    ``train.freeze=['^(?!.*(heads|merge))']`` (names as printed by ``python -m models``).
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


def build_optimizer(params: list[nn.Parameter], cfg: TrainConfig) -> torch.optim.Optimizer:
    if cfg.optimizer == "adam":
        return torch.optim.Adam(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    return torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
