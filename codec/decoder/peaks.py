"""Keypoint peaks: 3x3 local maxima above a threshold, with sub-pixel refinement.

See docs/evaluation.md#peaks and docs/evaluation.md#peak-refinement.
Coordinates are map pixels, x to the right, y down, integer = pixel centre.
"""

from __future__ import annotations

import cv2
import numpy as np

from simplepose.codec.decoder.resample import cubic_weights
from simplepose.config.schema import DecodeSettings

_KERNEL_3X3 = np.ones((3, 3), np.uint8)
_CV_MAX_CHANNELS = 128  # OpenCV (5.0) filters take at most this many channels at once
_PRECEDING_OFFSETS = ((-1, -1), (-1, 0), (-1, 1), (0, -1))  # (dy, dx) before a pixel in row-major order


def local_maxima(
    heat: np.ndarray, threshold: float, one_per_plateau: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Positions where a (K, h, w) map is >= threshold and >= its 8 neighbours (the map's edge replicated).
    Returns (channel, y, x) int arrays, sorted by channel, then y, then x.

    ``one_per_plateau``: where neighbours tie at the top (a plateau, common in maps rounded to 16 bits), a peak must
    also be strictly above its 4 preceding neighbours (up-left, up, up-right, left): the plateau's first pixel in
    row-major order is its peak. False: every pixel of the plateau is a peak (the original), each a duplicate keypoint
    that breaks a person in two when a limb takes one copy and the next limb the other.

    OpenCV's 3x3 dilation of all channels at once: on image-sized grids several times faster than comparing each
    thresholded pixel with its neighbours in numpy."""
    k_all, h, w = heat.shape
    ks, ys, xs = [], [], []
    for c0 in range(0, k_all, _CV_MAX_CHANNELS):
        # channels last, as the maps are laid out in memory (a channels-first view of them)
        hwc = np.ascontiguousarray(np.moveaxis(heat[c0 : c0 + _CV_MAX_CHANNELS], 0, -1), dtype=np.float32)
        floor = cv2.dilate(hwc, _KERNEL_3X3, borderType=cv2.BORDER_REPLICATE).reshape(hwc.shape)
        found = hwc >= floor  # a peak is at least its neighbours and the threshold
        found &= hwc >= threshold
        # the flat positions of the few peaks, then their (y, x, channel)
        y, x_c = np.divmod(np.flatnonzero(found), w * hwc.shape[2])
        x, c = np.divmod(x_c, hwc.shape[2])
        ys.append(y)
        xs.append(x)
        ks.append(c + c0)
    k, y, x = (np.concatenate(a).astype(np.int64) for a in (ks, ys, xs))
    if one_per_plateau and k.size:
        value = heat[k, y, x]
        first = np.ones(k.size, bool)
        for dy, dx in _PRECEDING_OFFSETS:
            yy, xx = y + dy, x + dx
            inside = (yy >= 0) & (xx >= 0) & (xx < w)
            first &= ~inside | (value > heat[k, np.clip(yy, 0, h - 1), np.clip(xx, 0, w - 1)])
        k, y, x = k[first], y[first], x[first]
    order = np.lexsort((x, y, k))
    return k[order], y[order], x[order]


def refine_peaks(
    heat: np.ndarray,
    k: np.ndarray,
    y: np.ndarray,
    x: np.ndarray,
    params: DecodeSettings,
    window_step: tuple[float, float] = (1.0, 1.0),
) -> np.ndarray:
    """Sub-pixel peak positions and scores, with r = ``params.refine_radius``.

    ``refine_mode="centroid"`` (the original): a peak whose (2r+1)^2 window lies inside the map moves by the
    value-weighted mean offset of the window; peaks closer to the border keep their integer position.
    ``refine_xy_swap_bug=True`` reproduces the original, which added the row offset to x and the column offset to y.
    ``refine_mode="quadratic"``: the peak moves to the vertex of a parabola through the logarithms of the
    peak and its two neighbours, along x and along y (exact for a Gaussian peak, precise on coarse grids
    where the window centroid is pulled towards the pixel centre; needs only a 1-pixel margin).
    Score (``params.peak_score``, docs/evaluation.md#peak-refinement): ``"window_mean"`` (the original) the mean of the
    (2r+1)^2 map pixels around the peak where that window fits, else the peak value; ``"peak"`` the peak value;
    ``"input_window"`` the mean of (2r+1)^2 bicubic samples around the refined position, ``window_step`` (x, y) map
    pixels apart: one pixel of the network's scale-1 input, so that the window covers the same part of a keypoint
    whatever the decoding grid and the image size.

    Returns (N, 3) float64 rows (x, y, score).
    """
    radius, score_mode, xy_swap_bug = params.refine_radius, params.peak_score, params.refine_xy_swap_bug
    n = k.size
    out = np.empty((n, 3), np.float64)
    out[:, 0], out[:, 1] = x, y
    out[:, 2] = heat[k, y, x]
    if n == 0:
        return out
    h, w = heat.shape[1:]
    if params.refine_mode == "quadratic":
        d = max(radius, 1)
        shift_x = _axis_vertex(heat, k, y, x, 0, d, w)
        shift_y = _axis_vertex(heat, k, y, x, d, 0, h)
        if xy_swap_bug:
            shift_x, shift_y = shift_y, shift_x
        out[:, 0] += shift_x
        out[:, 1] += shift_y
    if radius > 0 and (params.refine_mode == "centroid" or score_mode == "window_mean"):
        _refine_in_window(heat, k, y, x, radius, out, score_mode == "window_mean", xy_swap_bug, params.refine_mode)
    if score_mode == "input_window":
        out[:, 2] = sampled_window_mean(heat, k, out[:, 0], out[:, 1], radius, window_step)
    return out


def _refine_in_window(heat, k, y, x, r: int, out: np.ndarray, window_score: bool, xy_swap_bug: bool, mode: str):
    """The original's (2r+1)^2 map-pixel window, for the peaks where it fits: centroid position (``mode``
    "centroid") and window-mean score (``window_score``), written into ``out`` (N, 3)."""
    h, w = heat.shape[1:]
    inside = (y >= r) & (y < h - r) & (x >= r) & (x < w - r)
    if not inside.any():
        return
    ki, yi, xi = k[inside], y[inside], x[inside]
    off = np.arange(-r, r + 1)
    grid_y, grid_x = np.meshgrid(off, off, indexing="ij")
    oy, ox = grid_y.ravel(), grid_x.ravel()
    window = heat[ki[:, None], yi[:, None] + oy, xi[:, None] + ox].astype(np.float64)  # (M, (2r+1)^2)
    if mode == "centroid":
        total = window.sum(1)
        total = np.where(total > 0, total, 1.0)
        shift_x = (window * ox).sum(1) / total
        shift_y = (window * oy).sum(1) / total
        if xy_swap_bug:
            shift_x, shift_y = shift_y, shift_x
        out[inside, 0] = xi + shift_x
        out[inside, 1] = yi + shift_y
    if window_score:
        out[inside, 2] = window.mean(1)


def sampled_window_mean(
    heat: np.ndarray, k: np.ndarray, x: np.ndarray, y: np.ndarray, radius: int, step: tuple[float, float]
) -> np.ndarray:
    """(N,) mean of channel k of a (K, h, w) map over a (2r+1)^2 grid of points centred on each (x, y), ``step``
    (x, y) map pixels apart. Each sample is bicubic (OpenCV's kernel, edges replicated), the interpolation the maps
    were resized with: bilinear samples fall short of a blob's top by a few % on a coarse grid.
    """
    h, w = heat.shape[1:]
    off = np.arange(-radius, radius + 1, dtype=np.float64)
    n, m = k.size, 4 * off.size
    xs = np.clip(x[:, None] + off * step[0], 0, w - 1)  # (N, 2r+1)
    ys = np.clip(y[:, None] + off * step[1], 0, h - 1)
    left, top = np.floor(xs).astype(np.int64), np.floor(ys).astype(np.int64)
    # the mean is separable: sum over rows and columns of (row weight) x map x (column weight), where each of the
    # 4 (2r+1) rows (columns) is a sample's tap at offset -1, 0, 1 or 2 from its floor; one gather for all of them
    taps = np.arange(-1, 3)
    rows = np.clip(top[:, :, None] + taps, 0, h - 1).reshape(n, m)  # (N, M), M = 4 (2r+1)
    cols = np.clip(left[:, :, None] + taps, 0, w - 1).reshape(n, m)
    row_weights = np.stack(cubic_weights(ys - top), -1).reshape(n, 1, m)
    col_weights = np.stack(cubic_weights(xs - left), -1).reshape(n, m, 1)
    patch = heat[k[:, None, None], rows[:, :, None], cols[:, None, :]]  # (N, M, M); heat may be a strided view
    return (row_weights @ patch @ col_weights)[:, 0, 0] / off.size**2


def _axis_vertex(heat, k, y, x, dy: int, dx: int, size: int) -> np.ndarray:
    """Parabola-vertex shift of each peak along one axis, through the values d = dx or dy pixels either side
    (a wider base than 1 pixel is robust to interpolation ripple on upsampled maps); a smaller base is used
    where the map border is closer, and 0 where it touches the border."""
    d = max(dx, dy)
    pos = x if dx else y
    d = np.minimum(d, np.minimum(pos, size - 1 - pos))
    ok = d >= 1
    d = np.maximum(d, 1)
    dy, dx = (d, 0) if dy else (0, d)
    h, w = heat.shape[1:]
    yl, xl = np.clip(y - dy, 0, h - 1), np.clip(x - dx, 0, w - 1)
    yr, xr = np.clip(y + dy, 0, h - 1), np.clip(x + dx, 0, w - 1)
    log = lambda v: np.log(np.maximum(v.astype(np.float64), 1e-6))  # noqa: E731
    shift = d * _parabola_vertex(log(heat[k, yl, xl]), log(heat[k, y, x]), log(heat[k, yr, xr]))
    return np.where(ok, np.clip(shift, -0.5, 0.5), 0.0)  # the true maximum is within half a pixel


def _parabola_vertex(left: np.ndarray, centre: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Offset in [-0.5, 0.5] of the vertex of the parabola through (-1, left), (0, centre), (1, right)."""
    curvature = left - 2 * centre + right
    safe = np.where(curvature < 0, curvature, -1.0)
    return np.where(curvature < 0, np.clip(0.5 * (left - right) / safe, -0.5, 0.5), 0.0)


def strongest_per_channel(
    k: np.ndarray, y: np.ndarray, x: np.ndarray, value: np.ndarray, limit: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Keep at most ``limit`` highest peaks per channel (a flat or saturated map makes every pixel a peak,
    and limb scoring is quadratic in the number of candidates). Order (channel, y, x) is preserved."""
    if limit <= 0 or k.size == 0 or np.bincount(k).max() <= limit:
        return k, y, x
    order = np.lexsort((-value, k))  # by channel, strongest first
    first = np.searchsorted(k[order], k[order], side="left")
    keep = np.sort(order[np.arange(k.size) - first < limit])
    return k[keep], y[keep], x[keep]


def find_peaks(heat: np.ndarray, params: DecodeSettings, window_step: tuple[float, float] = (1.0, 1.0)):
    """Peaks of every keypoint channel of a (K, h, w) map, as ``params`` says.

    Returns (peaks, part): peaks (N, 3) rows (x, y, score) in map pixels, ordered by part (ids are row
    indices, consecutive over parts as in the original), and part (N,) the channel of each peak.
    ``window_step``: map pixels (x, y) between the samples of the ``"input_window"`` score.
    """
    k, y, x = local_maxima(heat, params.peak_threshold, params.one_per_plateau)
    k, y, x = strongest_per_channel(k, y, x, heat[k, y, x], params.max_peaks)
    return refine_peaks(heat, k, y, x, params, window_step), k
