"""The inference plan: what every image of one estimator is run with, built once from its map source's skeleton and
its ``eval`` settings (``InferencePlan.of``), so that nothing per image rebuilds it.

    plan = InferencePlan.of(skeleton, cfg.eval)
    plan.grid(h, w)              # (rows, cols) the maps are averaged and decoded on
    plan.flip_index(device)      # the mirror's channel permutation, (C,) int64 on the device (made once per device)
    plan.check_channels(c)       # the source's output fits the skeleton's layout (checked once per channel count)

It needs no PyTorch (only ``flip_index`` imports it), so the runtime without PyTorch shares it. Also the geometry of
the test scales (``scale_factors``, ``decode_grid``), which the plan and the multi-scale forward
(evaluate/inference/multiscale.py) share.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from simplepose.codec.pose_codec import PoseCodec
from simplepose.config.schema import OUTPUT_STRIDE, EvalConfig
from simplepose.config.skeleton import Skeleton
from simplepose.config.skeleton_check import KeypointSet, check_compatible

if TYPE_CHECKING:
    import torch

# the fewest rows eval.decode_height=auto decodes on: a single-scale or small-input network's own output grid is too
# coarse to keep apart the keypoints of people close together, and the bicubic maps lose nothing when upsampled
AUTO_MIN_ROWS = 192


def scale_factors(height: int, width: int, cfg: EvalConfig) -> list[float]:
    """Resize factor of every test scale: ``s * boxsize / height``, capped to max_height x max_width."""
    out = []
    for s in cfg.scales:
        m = s * cfg.boxsize / height
        if m * height > cfg.max_height or m * width > cfg.max_width:
            m = min(cfg.max_height / height, cfg.max_width / width)
        out.append(m)
    return out


def decode_grid(height: int, width: int, cfg: EvalConfig, stride: int = OUTPUT_STRIDE) -> tuple[int, int]:
    """(rows, cols) of the grid the maps are averaged and decoded on (``eval.decode_height``); ``auto``: the rows of
    the finest test scale's output (its input's, capped as ``scale_factors`` caps it, over ``stride``), at least
    ``AUTO_MIN_ROWS``, at most the image's."""
    if isinstance(cfg.decode_height, int):
        rows = cfg.decode_height
    else:  # "auto"
        finest = max(scale_factors(height, width, cfg), default=1.0)
        rows = min(height, max(AUTO_MIN_ROWS, math.ceil(height * finest / stride)))
    if rows <= 0 or rows == height:
        return height, width
    return rows, max(1, round(width * rows / height))


@dataclass(frozen=True)
class InferencePlan:
    """The ``cfg`` (``eval`` settings) of every image and the ``codec`` that decodes its maps (which holds the
    skeleton and its channel layout), on a grid of ``stride`` input pixels per output cell; the flip index per device
    and the channel counts checked are kept once made."""

    cfg: EvalConfig
    codec: PoseCodec
    stride: int = OUTPUT_STRIDE
    _flip_index: dict[torch.device, torch.Tensor] = field(default_factory=dict, compare=False, repr=False)
    _checked: set[int] = field(default_factory=set, compare=False, repr=False)

    @classmethod
    def of(cls, skeleton: Skeleton, cfg: EvalConfig) -> InferencePlan:
        """The plan of ``skeleton``'s maps under ``cfg`` (its decoding fields are the codec's settings)."""
        return cls(cfg, PoseCodec(skeleton, decoding=cfg))

    @property
    def skeleton(self) -> Skeleton:
        return self.codec.skeleton

    def grid(self, height: int, width: int) -> tuple[int, int]:
        """``decode_grid`` of a height x width image under this plan's settings."""
        return decode_grid(height, width, self.cfg, self.stride)

    def flip_index(self, device: torch.device) -> torch.Tensor:
        """The codec's ``layout.flip`` as an index tensor on ``device``, made at its first use there (torch is
        imported here only: the plan also serves the runtime without PyTorch, evaluate/inference/host_maps.py)."""
        index = self._flip_index.get(device)
        if index is None:
            import torch

            index = self._flip_index[device] = torch.tensor(self.codec.layout.flip, device=device)
        return index

    def check_channels(self, num_channels: int) -> None:
        """``SkeletonMismatch`` unless a map source's ``num_channels`` output channels are the skeleton's layout."""
        if num_channels in self._checked:
            return
        check_compatible(
            self.skeleton,
            KeypointSet(num_channels=num_channels),
            where="the network's output",
            need="layout",
            expected_by="decoding",
            fix="the network was trained for another skeleton: give its data.skeleton (a checkpoint carries its own)",
        )
        self._checked.add(num_channels)
