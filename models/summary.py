"""Size and cost of a PoseNet: parameters per part, multiply-accumulates per image, output shapes."""

from __future__ import annotations

import torch
from torch.utils.flop_counter import FlopCounterMode

from simplepose.config.schema import ModelConfig
from simplepose.config.skeleton import Skeleton
from simplepose.models.posenet import PoseNet

# Parts as in docs/network.md#shapes-and-size; "features" are the heads without their final 1x1 prediction conv
# ("outs").
PARTS = ("stem", "hourglasses", "features", "outs", "merges")


def part_of(name: str) -> str:
    """The part (one of ``PARTS``) a parameter or buffer name belongs to."""
    top = name.split(".", 1)[0]
    if top == "heads":
        return "outs" if ".predict." in name else "features"
    return top


def parameter_counts(model: PoseNet) -> dict[str, int]:
    """Trainable parameters per part plus ``total`` (BN affine included, running statistics excluded)."""
    counts = dict.fromkeys(PARTS, 0)
    for name, p in model.named_parameters():
        counts[part_of(name)] += p.numel()
    counts["total"] = sum(counts.values())
    return counts


def meta_model(cfg: ModelConfig, skeleton: Skeleton) -> PoseNet:
    """A PoseNet without storage (shapes and counts only, instant even for the paper preset)."""
    with torch.device("meta"):
        return PoseNet(cfg, skeleton).eval()


def macs_and_shapes(cfg: ModelConfig, height: int, width: int, skeleton: Skeleton) -> tuple[int, list[tuple[int, ...]]]:
    """Multiply-accumulates of one forward pass on one (3, height, width) image, and the output shapes
    (of one stack), counted on the meta device (no computation)."""
    model = meta_model(cfg, skeleton)
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        outputs = model(torch.empty(1, 3, height, width, device="meta"))
    return counter.get_total_flops() // 2, [tuple(o.shape) for o in outputs[-1]]
