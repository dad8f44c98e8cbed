"""Map sources: what turns a batch of prepared test-time inputs into the network's maps.

A map source is any callable ``source(batch: InputBatch) -> (B, C, Hp/4, Wp/4)`` tensor in the skeleton's channel
layout. Three are provided, each carrying its ``skeleton``: a PyTorch network (``NetworkSource``), an exported ONNX
file (``evaluate.inference.onnx_runner.OnnxSource``) and the oracle, which draws the ground truth's own target maps
(``evaluate.inference.oracle.OracleSource``). Each input batch carries, beside its pixels, the meta of every image
in it (``ImageMeta``: which image, and how it was resized and padded), so that a source which needs the transform
(the oracle) reads it there and the others ignore it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Protocol

import torch

from simplepose.config.skeleton import Skeleton
from simplepose.utils.precision import Precision


@dataclass(frozen=True)
class ImageMeta:
    """How one image became one test scale's network input: resized to ``resized_hw``, padded bottom/right to
    ``padded_hw``. ``key`` names the image for a source that needs to know it (the oracle: the image id of an
    evaluation, the file of a demo picture, the index of a video frame)."""

    key: Hashable
    image_hw: tuple[int, int]  # (rows, cols) of the image
    resized_hw: tuple[int, int]  # (rows, cols) of the resized image inside the input
    padded_hw: tuple[int, int]  # (rows, cols) of the input

    @property
    def resize_xy(self) -> tuple[float, float]:
        """(fx, fy): input pixels per image pixel along x and y."""
        return self.resized_hw[1] / self.image_hw[1], self.resized_hw[0] / self.image_hw[0]


@dataclass(frozen=True)
class InputBatch:
    """n images of one size at one test scale: ``pixels`` (n or 2n, 3, Hp, Wp) float32 BGR/255, the images and then,
    when ``flipped``, their mirrors; ``metas`` one per image (not per mirror)."""

    pixels: torch.Tensor
    metas: tuple[ImageMeta, ...]
    flipped: bool  # the mirrors follow the images (eval.flip), said by whoever made the batch

    def __post_init__(self) -> None:
        if self.pixels.shape[0] != (2 if self.flipped else 1) * len(self.metas):
            raise ValueError(
                f"{self.pixels.shape[0]} inputs for {len(self.metas)} images {'and their mirrors' * self.flipped}"
            )


class MapSource(Protocol):
    """Batch in, maps out: (B, C, Hp/4, Wp/4), B = ``batch.pixels.shape[0]``, on the batch's device."""

    def __call__(self, batch: InputBatch) -> torch.Tensor: ...


class NetworkSource:
    """The map source of a network returning outputs[stack][scale]: the last stack's finest output, as float32;
    ``skeleton``: the network's (``model.skeleton``; None for a bare module without one)."""

    def __init__(self, model: torch.nn.Module, precision: Precision | None = None, channels_last: bool = False):
        finest = getattr(model, "finest_prediction", None)  # a PoseNet skips the heads evaluation never reads
        self.forward: Callable[[torch.Tensor], torch.Tensor] = (
            finest if finest is not None else (lambda pixels: model(pixels)[-1][0])
        )
        self.skeleton: Skeleton | None = getattr(model, "skeleton", None)
        self.precision = precision
        self.channels_last = channels_last

    def __call__(self, batch: InputBatch) -> torch.Tensor:
        pixels = batch.pixels
        if self.channels_last:
            pixels = pixels.contiguous(memory_format=torch.channels_last)
        if self.precision is None:
            return self.forward(pixels)
        with self.precision.autocast(pixels.device):
            return self.forward(pixels).float()


def network_source(
    model: torch.nn.Module, precision: Precision | None = None, channels_last: bool = False
) -> NetworkSource:
    """The map source of ``model`` (``NetworkSource``). ``precision``: the forward runs under its autocast
    (``evaluate.inference.inference_setup.inference_setup(cfg.eval, device).precision``); None: float32. The output is
    cast back to float32 before any further step (averaging scales in half precision would lose the small values the
    thresholds compare against). ``channels_last``: each batch is given to the network in channels_last memory (the
    network should be converted too: ``model.to(memory_format=torch.channels_last)``); the maps are the same up to
    rounding."""
    return NetworkSource(model, precision, channels_last)
