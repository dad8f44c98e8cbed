"""OpenCV's bicubic kernel, shared by the decoder's sampled peak score (``peaks.sampled_window_mean``) and the
test-time inference's resize of maps onto the decoding grid (``evaluate.inference.multiscale``)."""

from __future__ import annotations

import numpy as np


def cubic_weights(t: np.ndarray, a: float = -0.75) -> list[np.ndarray]:
    """Bicubic convolution weights (OpenCV's a = -0.75) of the 4 taps at offsets -1, 0, 1, 2 from floor."""
    d = [1 + t, t, 1 - t, 2 - t]
    return [np.where(x <= 1, ((a + 2) * x - (a + 3)) * x * x + 1, ((a * x - 5 * a) * x + 8 * a) * x - 4 * a) for x in d]
