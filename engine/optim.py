"""What the optimiser sees: frozen parameters, BatchNorm mode, and the optimiser itself."""

from __future__ import annotations

import re

import torch
from torch import nn

from simplepose.config.schema import TrainConfig
from simplepose.utils.commands import command
from simplepose.utils.errors import UserError


def apply_freeze(model: nn.Module, patterns: list[str]) -> list[str]:
    """Set ``requires_grad=False`` on parameters whose name matches any regex; returns the frozen names.

    The original's ``--freeze`` meant "train only the output heads and merges", here
    ``train.freeze=['^(?!.*(heads|merge))']`` (names as printed by ``simplepose summary``).
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
        raise UserError(f"train.freeze={patterns} matches no parameter name (see `{command('models')}` for names)")
    return frozen


def batchnorm_eval(model: nn.Module) -> None:
    """Put every BatchNorm (incl. SyncBatchNorm) in eval mode: running statistics are used and kept fixed."""
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.eval()


# train.weight_decay=null: SGD the original's, Adam torch's (none), AdamW that of today's pose recipes
# (docs/training.md#weight-decay)
DEFAULT_WEIGHT_DECAY = {"sgd": 5e-4, "adam": 0.0, "adamw": 0.05}


def weight_decay_of(cfg: TrainConfig) -> float:
    """The weight decay the optimiser applies: ``train.weight_decay``, or the optimiser's default when it is null."""
    return DEFAULT_WEIGHT_DECAY[cfg.optimizer] if cfg.weight_decay is None else cfg.weight_decay


def describe_optimizer(cfg: TrainConfig) -> str:
    """The optimiser and its decay in words, e.g. ``adamw (weight decay 0.05: adamw's default; none on biases and
    norm weights)``."""
    decay = weight_decay_of(cfg)
    source = f"{cfg.optimizer}'s default" if cfg.weight_decay is None else "train.weight_decay"
    words = (f"weight decay {decay:g}" if decay else "no weight decay") + f": {source}"
    if decay and cfg.optimizer == "adamw":
        words += "; none on biases and norm weights"
    momentum = f"momentum {cfg.momentum:g}, " if cfg.optimizer == "sgd" else ""
    return f"{cfg.optimizer} ({momentum}{words})"


def build_optimizer(params: list[nn.Parameter], cfg: TrainConfig, fused: bool = False) -> torch.optim.Optimizer:
    """SGD, Adam or AdamW; ``fused``: one kernel per parameter group and dtype (ask ``fused_supported`` first).

    SGD and Adam decay every parameter, as the original did; AdamW decays the weights of convolutions and linear
    layers only: ``decay_groups``. The decay is ``weight_decay_of(cfg)``."""
    fused_or_default: dict = {"fused": True} if fused else {}  # none: torch's default (SGD takes none before 2.3)
    decay = weight_decay_of(cfg)
    if cfg.optimizer == "adamw":
        return torch.optim.AdamW(decay_groups(params, decay), lr=cfg.lr, **fused_or_default)
    if cfg.optimizer == "adam":
        return torch.optim.Adam(params, lr=cfg.lr, weight_decay=decay, **fused_or_default)
    opt = torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=decay, **fused_or_default)
    if fused and cfg.momentum:
        # fused SGD fills the momentum buffers with empty_like on its first step: a first step skipped on the
        # device (found_inf) would leave them uninitialised. Zeros give the same first update (buf = grad).
        for p in params:
            opt.state[p]["momentum_buffer"] = torch.zeros_like(p, memory_format=torch.preserve_format)
    return opt


def decay_groups(params: list[nn.Parameter], weight_decay: float) -> list[dict]:
    """Two parameter groups: tensors of 2+ dimensions (convolution and linear weights) with ``weight_decay``, the
    rest (biases, BatchNorm and other norm weights) without, as is usual with AdamW (decay pulls a norm's scale
    towards 0 and shifts its bias for no regularising gain). Order kept, so optimizer states line up on resume."""
    decayed = [p for p in params if p.ndim > 1]
    plain = [p for p in params if p.ndim <= 1]
    return [{"params": decayed, "weight_decay": weight_decay}, {"params": plain, "weight_decay": 0.0}]


def fused_supported(optimizer: str, device: torch.device, dtype: torch.dtype = torch.float32) -> bool:
    """Whether this torch has a fused ``optimizer`` step for parameters of ``dtype`` on ``device`` that honours
    ``found_inf`` (a step skipped on the device), found by running one on a 2-element tensor there."""
    try:
        p = torch.zeros(2, device=device, dtype=dtype, requires_grad=True)
        p.grad = torch.ones_like(p)
        opt: torch.optim.Optimizer
        if optimizer in ("adam", "adamw"):
            opt = (torch.optim.AdamW if optimizer == "adamw" else torch.optim.Adam)([p], lr=1.0, fused=True)
        else:
            opt = torch.optim.SGD([p], lr=1.0, momentum=0.9, fused=True)
        opt.found_inf = torch.ones((), device=device)  # type: ignore[union-attr]  # read by torch's fused step
        opt.step()
        return bool((p.detach() == 0).all())  # skipped, as asked
    except (RuntimeError, TypeError, ValueError, NotImplementedError):
        return False


def load_optimizer_state(optimizer: torch.optim.Optimizer, state: dict) -> None:
    """A saved optimiser state into ``optimizer``: its per-parameter state (moments, step counts) only; every group
    setting (learning rate, weight decay, momentum, betas, fused, ...) stays ``optimizer``'s, the run's config, as
    ``load_state_dict`` alone would overwrite them with the saved run's. ValueError or KeyError when it does not fit
    (other parameter groups or sizes)."""
    settings = [{k: v for k, v in group.items() if k != "params"} for group in optimizer.param_groups]
    optimizer.load_state_dict(state)
    for group, own in zip(optimizer.param_groups, settings):
        group.update(own)
