"""The network's input encoding: BGR uint8 pixels times float32(1/255), so float32 BGR in [0, 1]
(docs/data.md#dataset). Training (``data.batching.images_to_float``) and test time
(``evaluate.inference.multiscale``) both scale here, so the two give the network the same values.
"""

from __future__ import annotations

import numpy as np

INPUT_SCALE = 1 / 255  # network input = pixel value * float32(INPUT_SCALE)


def pixels_to_input(pixels: np.ndarray) -> np.ndarray:
    """uint8 (or any numeric) pixels -> float32 network input (numpy)."""
    return pixels.astype(np.float32) * np.float32(INPUT_SCALE)


def scale_input_(pixels):
    """A float32 torch tensor of pixel values scaled to the network's input in place (``Tensor.mul_``; the Python
    scalar becomes float32, as in ``pixels_to_input``); returns it."""
    return pixels.mul_(INPUT_SCALE)
