"""``PoseCodec``: the contract between what the network is taught and how its maps are read back, in one object.

    codec = PoseCodec(skeleton, cfg.targets, cfg.eval)          # cfg.eval: the decoding settings (DecodeSettings)
    targets = codec.encode(keypoints, mask_all, grid_hw, num_scales)   # [(C, h/2^k, w/2^k)] float32, finest first
    masks = codec.encode_masks(mask_miss, num_scales, cfg.loss.mask_threshold)
    people = codec.decode(maps, scale)                           # list[Person]: dataset-order keypoints, a score each
    codec.layout.keypoints, codec.layout.flip, codec.layout.groups()   # the channel layout (codec.layout)

Encoding: ``codec.targets`` (docs/data.md#targets); decoding: ``codec.decoder`` (docs/evaluation.md#decoding); the
network's input: ``codec.network_input``. The free functions stay available for the parts that need one stage.
"""

from __future__ import annotations

import numpy as np

from simplepose.codec.decoder.decode import decode_people
from simplepose.codec.layout import ChannelLayout
from simplepose.codec.person import Person
from simplepose.codec.targets import downscale_targets, draw_targets, mask_scales
from simplepose.config.schema import OUTPUT_STRIDE, DecodeSettings, TargetConfig
from simplepose.config.skeleton import Skeleton


class PoseCodec:
    """Targets of annotated people (``encode``) and people of predicted maps (``decode``) for ``skeleton``'s
    channel layout, on a grid of ``stride`` input pixels per cell.

    ``targets``: how targets are drawn (``cfg.targets``); ``decoding``: the decoder's settings (``cfg.eval`` or any
    ``DecodeSettings``), read at each ``decode``; either defaults to its config's defaults."""

    def __init__(
        self,
        skeleton: Skeleton,
        targets: TargetConfig | None = None,
        decoding: DecodeSettings | None = None,
        stride: int = OUTPUT_STRIDE,
    ):
        self.skeleton = skeleton
        self.targets = TargetConfig() if targets is None else targets
        self.decoding = DecodeSettings() if decoding is None else decoding
        self.stride = stride
        self.layout = ChannelLayout.of(skeleton)

    def encode(
        self, keypoints: np.ndarray, mask_all: np.ndarray | None, grid_hw: tuple[int, int], num_scales: int = 1
    ) -> list[np.ndarray]:
        """The target maps at ``num_scales`` resolutions, finest first (``codec.targets.draw_targets`` then
        ``downscale_targets``): keypoints (P, K, 3) in input pixels, internal layout; ``mask_all`` the person mask
        on the grid (or None); ``grid_hw`` the finest grid's (h, w) cells."""
        drawn = draw_targets(keypoints, mask_all, grid_hw, self.stride, self.targets, self.skeleton)
        return downscale_targets(drawn, num_scales)

    @staticmethod
    def encode_masks(mask_miss: np.ndarray, num_scales: int, threshold: float) -> list[np.ndarray]:
        """The ignore mask (1 = supervise) at every scale, finest first (``codec.targets.mask_scales``)."""
        return mask_scales(mask_miss, num_scales, threshold)

    def decode(self, maps: np.ndarray, scale: float | tuple[float, float] = 1.0) -> list[Person]:
        """The people of one image's averaged maps (``codec.decoder.decode.decode_people``): ``scale`` image pixels
        per map pixel, one number or (sx, sy)."""
        return decode_people(maps, self.decoding, scale, skeleton=self.skeleton, layout=self.layout)
