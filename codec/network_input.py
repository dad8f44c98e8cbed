"""The network's input encoding: BGR uint8 pixels times float32(1/255), so float32 BGR in [0, 1]
(docs/data.md#dataset). Training (``data.batching.images_to_float``) and test time
(``evaluate.inference.multiscale``) both scale here, so the two give the network the same values. The shapes the
network takes (``check_input_shape``) are checked here too, for PyTorch's network and the ONNX runtime alike.
"""

from __future__ import annotations

import numpy as np

from simplepose.config.schema import OUTPUT_STRIDE
from simplepose.utils.errors import UserError

INPUT_SCALE = 1 / 255  # network input = pixel value * float32(INPUT_SCALE)
SIZE_MULTIPLE = OUTPUT_STRIDE * 2**4  # 64: the stem divides by the output stride, the hourglass's four poolings by 16


def pixels_to_input(pixels: np.ndarray) -> np.ndarray:
    """uint8 (or any numeric) pixels -> float32 network input (numpy)."""
    return pixels.astype(np.float32) * np.float32(INPUT_SCALE)


def scale_input_(pixels):
    """A float32 torch tensor of pixel values scaled to the network's input in place (``Tensor.mul_``; the Python
    scalar becomes float32, as in ``pixels_to_input``); returns it."""
    return pixels.mul_(INPUT_SCALE)


class InputShapeError(UserError):
    """An input the network cannot take; ``shape``: the shape given."""

    def __init__(self, message: str, shape: tuple[int, ...]) -> None:
        super().__init__(message)
        self.shape = shape


def check_input_shape(shape: tuple[int, ...]) -> None:
    """Raise UserError unless ``shape`` is (B, 3, H, W) with H and W multiples of 64."""
    if len(shape) != 4 or shape[1] != 3:
        raise InputShapeError(
            f"the network takes images of shape (B, 3, H, W) (BGR/255, NCHW), got {tuple(shape)}", tuple(shape)
        )
    h, w = shape[2], shape[3]
    if h < SIZE_MULTIPLE or w < SIZE_MULTIPLE or h % SIZE_MULTIPLE or w % SIZE_MULTIPLE:
        raise InputShapeError(
            f"the network cannot take a {h}x{w} input: height and width must be multiples of {SIZE_MULTIPLE} "
            f"(64, 128, ..., 256, 320, 384, 448, 512, ...); pad or resize the image",
            tuple(shape),
        )
