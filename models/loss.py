"""Multi-scale focal L2 loss (docs/network.md#loss).

Per pixel, with prediction p, target g, ignore mask M (1 = use, 0 = ignore) and channel weight w_c:

    positive (g >= pos_threshold):  st = p - alpha        negative: st = 1 - p - beta
    phi = |1 - st| ** gamma          loss = (p - g)^2 * phi * M * w_c

(alpha = beta = 0, gamma = 1 is the original code: |1 - p| on positives, |p| on negatives.) Then

    L[t, k] = sum over batch, channels, pixels
    total   = sum_k s_k / sum(s) * sum_t w_t / sum(w) * L[t, k] / divisor

with stack weights w, scale weights s and divisor = the actual batch size (``batch_divisor="actual"``), the
configured ``train.batch_size`` (``"configured"``, the original: docs/differences.md#batch-divisor) or 1
(``reduction="sum"``, for the DataParallel wrapper that divides the gathered sum by the global batch itself).

Deliberate differences: gamma is honoured (docs/differences.md#focal-exponent-gamma); nothing is printed per call
(docs/differences.md#loss-without-printing).
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn

from simplepose.codec.layout import channel_groups
from simplepose.config.config_file import ConfigError
from simplepose.config.schema import Config, LossConfig
from simplepose.config.skeleton import Skeleton
from simplepose.config.skeleton_check import KeypointSet, check_compatible
from simplepose.config.skeleton_file import skeleton_of
from simplepose.utils.errors import UserError


def channel_weights(cfg: LossConfig, skeleton: Skeleton) -> torch.Tensor:
    """(C,) float32 weight per output channel from the loss config's group weights."""
    w = torch.empty(skeleton.num_channels, dtype=torch.float32)
    for group, value in zip(
        channel_groups(skeleton).values(),
        (cfg.limb_weight, cfg.keypoint_weight, cfg.person_mask_weight, cfg.max_keypoint_weight),
    ):
        w[group] = value
    return w


class MultiTaskLoss(nn.Module):
    """``loss(outputs, targets, masks) -> (total, breakdown)``.

    Constructed from the whole ``Config`` (or a ``LossConfig`` plus the configured batch size) and the skeleton
    whose channel layout (C channels) sets the per-channel weights.
    Args (of ``forward``):
        outputs: ``outputs[t][k]`` (B, C, h_k, w_k), any float dtype (cast to at least float32).
        targets: ``targets[k]`` (B, C, h_k, w_k), already block-averaged to scale k by the data pipeline.
        masks: ``masks[k]`` (B, 1, h_k, w_k), already resized and thresholded (1 = use, 0 = ignore).
        labelled: (B, C) weight per sample and channel, or None (all 1): 0 leaves a channel its sample's source
            does not annotate out of the loss (several sources, data.keypoint_mapping): no gradient reaches it.
    Returns:
        total: 0-d tensor (float32, or float64 for float64 predictions).
        breakdown: detached tensors, each a share of ``total`` (the parts of one kind sum to it):
            ``stack`` (T,), ``scale`` (S,), ``stack_scale`` (T, S), and 0-d ``limb``, ``keypoint``,
            ``person_mask``, ``max_keypoint``.
    Runs without host-device synchronisation and outside autocast.
    """

    channel_weight: torch.Tensor  # (C,) buffers, registered in __init__
    stack_scale_weight: torch.Tensor  # (T, S)

    def __init__(
        self,
        cfg: Config | LossConfig | None,
        skeleton: Skeleton,
        configured_batch_size: int = 1,
        reduction: Literal["mean", "sum"] = "mean",
    ):
        super().__init__()
        if isinstance(cfg, Config):  # the whole config: its loss section and train.batch_size
            configured_batch_size = cfg.train.batch_size
            cfg = cfg.loss
        cfg = cfg or LossConfig()
        _check_reduction(reduction)
        if sum(cfg.stack_weights) <= 0 or sum(cfg.scale_weights) <= 0:
            raise ConfigError(
                "loss.stack_weights and loss.scale_weights must each have a positive sum",
                key="loss.stack_weights" if sum(cfg.stack_weights) <= 0 else "loss.scale_weights",
            )
        self.cfg = cfg
        self.skeleton = skeleton
        self.reduction = reduction
        self.configured_batch_size = configured_batch_size
        self.groups = channel_groups(skeleton)
        self.register_buffer("channel_weight", channel_weights(cfg, skeleton), persistent=False)
        stack_w = torch.tensor(cfg.stack_weights, dtype=torch.float64)
        scale_w = torch.tensor(cfg.scale_weights, dtype=torch.float64)
        stack_scale = torch.outer(stack_w / stack_w.sum(), scale_w / scale_w.sum())  # (T, S): w_t/sum(w) s_k/sum(s)
        self.register_buffer("stack_scale_weight", stack_scale.float(), persistent=False)

    def forward(
        self,
        outputs: list[list[torch.Tensor]],
        targets: list[torch.Tensor],
        masks: list[torch.Tensor],
        labelled: torch.Tensor | None = None,
        reduction: Literal["mean", "sum"] | None = None,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """``reduction`` overrides the constructor's for this call (the DataParallel wrapper asks for sums)."""
        self._check(outputs, targets, masks, labelled)
        reduction = reduction or self.reduction
        _check_reduction(reduction)
        device = outputs[0][0].device
        with torch.autocast(device.type, enabled=False):
            dtype = torch.promote_types(outputs[0][0].dtype, torch.float32)
            rows = []
            for stack_outputs in outputs:
                rows.append(
                    torch.stack(
                        [
                            self._channel_sums(p.to(dtype), targets[k], masks[k], labelled)
                            for k, p in enumerate(stack_outputs)
                        ]
                    )
                )
            weight = self.stack_scale_weight.to(device, dtype)[:, :, None] * self.channel_weight.to(device, dtype)
            weighted = torch.stack(rows) * weight / self._divisor(outputs[0][0].shape[0], reduction)  # (T, S, C)
            total = weighted.sum()
        parts = weighted.detach()
        breakdown = {
            "stack": parts.sum((1, 2)),
            "scale": parts.sum((0, 2)),
            "stack_scale": parts.sum(2),
            **{name: parts[:, :, group].sum() for name, group in self.groups.items()},
        }
        return total, breakdown

    def _channel_sums(
        self, p: torch.Tensor, g: torch.Tensor, m: torch.Tensor, labelled: torch.Tensor | None
    ) -> torch.Tensor:
        """(C,) masked focal-L2 sums over batch and pixels of one stack and scale."""
        c = self.cfg
        g, m = g.to(p.dtype), m.to(p.dtype)
        positive = g >= c.pos_threshold
        # 1 - st: 1 - p + alpha on positives, p + beta on negatives
        phi = torch.where(positive, 1 - p + c.alpha, p + c.beta).abs()
        if c.gamma != 1:
            phi = phi.pow(c.gamma)
        per_pixel = (p - g).square() * phi * m
        if labelled is None:
            return per_pixel.sum((0, 2, 3))
        # per sample and channel first, so that a channel left out contributes exactly nothing, gradient included
        return (per_pixel.sum((2, 3)) * labelled.to(p.dtype)).sum(0)

    def _divisor(self, batch: int, reduction: str) -> float:
        if reduction == "sum":
            return 1.0
        return float(self.configured_batch_size if self.cfg.batch_divisor == "configured" else batch)

    def _check(self, outputs, targets, masks, labelled=None) -> None:
        stacks, scales = len(outputs), len(outputs[0])
        if stacks != len(self.cfg.stack_weights) or scales != len(self.cfg.scale_weights):
            raise ConfigError(
                f"the model gives {stacks} stacks x {scales} scales but the loss has "
                f"{len(self.cfg.stack_weights)} stack weights and {len(self.cfg.scale_weights)} scale weights; "
                "make loss.stack_weights match model.stacks and loss.scale_weights match model.num_scales",
                key="loss.stack_weights" if stacks != len(self.cfg.stack_weights) else "loss.scale_weights",
            )
        if len(targets) < scales or len(masks) < scales:
            raise UserError(
                f"the loss needs targets and masks for {scales} scales, got {len(targets)} and {len(masks)}"
            )
        check_compatible(
            self.skeleton,
            KeypointSet(num_channels=outputs[0][0].shape[1]),
            where="the model's output",
            need="layout",
            expected_by="the loss",
            fix="build the model and the loss for the same skeleton (data.skeleton)",
        )
        if labelled is not None and tuple(labelled.shape) != tuple(outputs[0][0].shape[:2]):
            raise UserError(
                f"labelled has shape {tuple(labelled.shape)}, the predictions need (batch, channels) = "
                f"{tuple(outputs[0][0].shape[:2])}: one weight per sample and output channel"
            )
        for k in range(scales):
            want = tuple(outputs[0][k].shape)
            if tuple(targets[k].shape) != want or tuple(masks[k].shape) != (want[0], 1, *want[2:]):
                raise UserError(
                    f"scale {k}: predictions {want} but targets {tuple(targets[k].shape)} and masks "
                    f"{tuple(masks[k].shape)}; the data pipeline's input size must match the model input",
                    key="data.input_size",
                )


def _check_reduction(reduction: str) -> None:
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")


def build_loss(
    cfg: Config, reduction: Literal["mean", "sum"] = "mean", skeleton: Skeleton | None = None
) -> MultiTaskLoss:
    """The loss of a whole config for ``skeleton`` (default: the one ``cfg.data.skeleton`` names; the configured
    batch size only matters for ``batch_divisor=configured``)."""
    skeleton = skeleton or skeleton_of(cfg)
    return MultiTaskLoss(cfg.loss, skeleton, configured_batch_size=cfg.train.batch_size, reduction=reduction)
