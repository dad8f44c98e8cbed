"""Training targets drawn on the output grid: keypoint and limb heatmaps, person mask, max channel, scales.

Grid cell ``(i_y, i_x)`` has its centre at ``(stride*i_x + stride/2 - 0.5, stride*i_y + stride/2 - 0.5)`` in
input pixels (spec 7.1); every distance is measured in input pixels. Channel layout: ``config.skeleton``.

Two limb modes (``TargetConfig.limb_mode``):

* ``faithful`` (default) reproduces the original exactly (spec 7.3): distance to the *infinite line* through
  the two keypoints, evaluated only inside the segment's bounding box enlarged by ``limb_margin``; values
  ``<= limb_gaussian_thre`` are raised to ``limb_floor``; overlapping people are *averaged*.
* ``fixed``: distance to the *segment*, the Gaussian band is not clipped by a box (the window is where the
  Gaussian reaches ``limb_gaussian_thre``; values below it are 0), overlapping people combine by *max*.

``keypoint_gaussian_thre`` only sizes the keypoint window, it does not threshold values (spec bug 14).
Everything is vectorised per person and limb: each Gaussian is an outer product / outer sum of two 1-D vectors.
"""

from __future__ import annotations

import math

import cv2
import numpy as np

from config import skeleton as sk
from config.schema import TargetConfig

_KERNEL_3X3 = np.ones((3, 3), np.uint8)


def _cell_centres(start: int, stop: int, stride: int) -> np.ndarray:
    """Input-pixel coordinates of the centres of grid cells ``start .. stop-1``, float64."""
    return np.arange(start, stop, dtype=np.float64) * stride + (stride / 2 - 0.5)


def keypoint_window_radius(cfg: TargetConfig, stride: int) -> int:
    """Half-size, in cells, of the window a keypoint Gaussian is drawn in (7 at sigma 9, thre 0.015)."""
    return math.ceil(math.sqrt(-2 * cfg.sigma**2 * math.log(cfg.keypoint_gaussian_thre)) / stride)


def _visible(keypoints: np.ndarray) -> np.ndarray:
    return keypoints[..., 2] < 2


def _draw_keypoints(out: np.ndarray, keypoints: np.ndarray, stride: int, cfg: TargetConfig) -> None:
    """Max-combine every person's keypoint Gaussians into ``out`` (18, h, w), in place."""
    h, w = out.shape[1:]
    r = keypoint_window_radius(cfg, stride)
    inv = -1.0 / (2.0 * cfg.sigma**2)
    people, joints = np.nonzero(_visible(keypoints))
    if not len(people):
        return
    xy = keypoints[people, joints, :2].astype(np.float64)
    centre = np.rint(xy / stride).astype(np.int64)  # half-to-even like Python's round
    for (x, y), (cx, cy), j in zip(xy, centre, joints):
        x0, y0 = max(cx - r, 0), max(cy - r, 0)
        x1, y1 = min(cx + r + 1, w), min(cy + r + 1, h)
        if x1 <= x0 or y1 <= y0:
            continue
        gx = _cell_centres(x0, x1, stride)
        gy = _cell_centres(y0, y1, stride)
        ex = np.exp((gx - x) ** 2 * inv).astype(np.float32)
        ey = np.exp((gy - y) ** 2 * inv).astype(np.float32)
        block = out[j, y0:y1, x0:x1]
        np.maximum(block, ey[:, None] * ex[None, :], out=block)


def keypoint_heatmaps(keypoints: np.ndarray, grid_hw: tuple[int, int], stride: int, cfg: TargetConfig) -> np.ndarray:
    """Keypoint Gaussians, max over people.

    Args:
        keypoints: (P, 18, 3) (x, y, v) in input pixels, internal layout; a keypoint takes part iff v < 2.
        grid_hw: (h, w) cells of the output grid.
        stride: input pixels per cell.
    Returns:
        (18, h, w) float32 in [0, 1].
    """
    out = np.zeros((sk.NUM_KEYPOINTS, *grid_hw), np.float32)
    _draw_keypoints(out, np.asarray(keypoints).reshape(-1, sk.NUM_KEYPOINTS, 3), stride, cfg)
    return out


def _limb_geometry(p1: np.ndarray, p2: np.ndarray, gx: np.ndarray, gy: np.ndarray):
    """Signed distance to the line through p1, p2 and position along it, as separable row + column parts.

    Returns ``(perp_rows, perp_cols, along_rows, along_cols, length)`` so that for the cell (row i, col j)
    the signed line distance is ``perp_rows[i] + perp_cols[j]`` and the projection parameter (0 at p1, 1 at
    p2) is ``along_rows[i] + along_cols[j]``. The faithful formula divides by ``length + 1e-6``.
    """
    dx, dy = p2[0] - p1[0], p2[1] - p1[1]
    length = math.hypot(dx, dy)
    norm = length + 1e-6
    perp_rows = dx * (p1[1] - gy) / norm
    perp_cols = -dy * (p1[0] - gx) / norm
    along_rows = (gy - p1[1]) * dy / length**2
    along_cols = (gx - p1[0]) * dx / length**2
    return perp_rows, perp_cols, along_rows, along_cols, length


def _limb_window(p1, p2, pad: float, grid_hw, stride: int):
    """Cells of the segment's box enlarged by ``pad`` px: ``round((min-pad)/stride) .. round((max+pad)/stride)``
    inclusive, clipped to the grid. Returns ``((y0, y1, x0, x1), gx, gy)`` or None when off the grid."""
    h, w = grid_hw
    x0 = max(int(np.rint((min(p1[0], p2[0]) - pad) / stride)), 0)
    x1 = min(int(np.rint((max(p1[0], p2[0]) + pad) / stride)) + 1, w)
    y0 = max(int(np.rint((min(p1[1], p2[1]) - pad) / stride)), 0)
    y1 = min(int(np.rint((max(p1[1], p2[1]) + pad) / stride)) + 1, h)
    if x1 <= x0 or y1 <= y0:
        return None
    return (y0, y1, x0, x1), _cell_centres(x0, x1, stride), _cell_centres(y0, y1, stride)


def _outer_sum(rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    return rows.astype(np.float32)[:, None] + cols.astype(np.float32)[None, :]


def _limb_block_faithful(p1, p2, grid_hw, stride, cfg):
    """One person's limb values inside its clipped box (spec 7.3), or None if the box is off the grid."""
    window = _limb_window(p1, p2, cfg.limb_margin, grid_hw, stride)
    if window is None:
        return None
    box, gx, gy = window
    pr, pc, _, _, _ = _limb_geometry(p1, p2, gx, gy)
    d = _outer_sum(pr, pc)
    e = np.exp(d * d * np.float32(-1.0 / (2.0 * cfg.limb_sigma**2)))
    e[e <= cfg.limb_gaussian_thre] = cfg.limb_floor
    return box, e


def _limb_block_fixed(p1, p2, grid_hw, stride, cfg):
    """One person's limb values with the distance to the segment, windowed where the Gaussian >= thre."""
    reach = math.sqrt(-2 * cfg.limb_sigma**2 * math.log(cfg.limb_gaussian_thre))
    window = _limb_window(p1, p2, reach, grid_hw, stride)
    if window is None:
        return None
    box, gx, gy = window
    pr, pc, ar, ac, length = _limb_geometry(p1, p2, gx, gy)
    d = _outer_sum(pr, pc)
    t = _outer_sum(ar, ac)
    beyond = (t - np.clip(t, 0, 1)) * np.float32(length)
    e = np.exp((d * d + beyond * beyond) * np.float32(-1.0 / (2.0 * cfg.limb_sigma**2)))
    e[e < cfg.limb_gaussian_thre] = 0
    return box, e


def _draw_limbs(out: np.ndarray, keypoints: np.ndarray, stride: int, cfg: TargetConfig) -> None:
    """Write the 30 limb maps into ``out`` (30, h, w), which must be zero on entry."""
    grid_hw = out.shape[1:]
    faithful = cfg.limb_mode == "faithful"
    block_fn = _limb_block_faithful if faithful else _limb_block_fixed
    vis = _visible(keypoints)
    xy = keypoints[..., :2].astype(np.float64)
    total = count = None
    for k, (a, b) in enumerate(sk.LIMBS):
        people = np.nonzero(vis[:, a] & vis[:, b])[0]
        blocks = []
        for p in people:
            p1, p2 = xy[p, a], xy[p, b]
            if p1[0] == p2[0] and p1[1] == p2[1]:
                continue  # degenerate limb: no direction, skipped like the original
            blk = block_fn(p1, p2, grid_hw, stride, cfg)
            if blk is not None:
                blocks.append(blk)
        if not blocks:
            continue
        if len(blocks) == 1 or not faithful:
            for (y0, y1, x0, x1), e in blocks:
                region = out[k, y0:y1, x0:x1]
                np.maximum(region, e, out=region)
            continue
        # Faithful: mean over the people whose box covers the cell (spec 7.3, the 0.505 crossing case).
        if total is None:
            total = np.zeros(grid_hw, np.float32)
            count = np.zeros(grid_hw, np.float32)
        y0 = min(b[0][0] for b in blocks)
        y1 = max(b[0][1] for b in blocks)
        x0 = min(b[0][2] for b in blocks)
        x1 = max(b[0][3] for b in blocks)
        total[y0:y1, x0:x1] = 0
        count[y0:y1, x0:x1] = 0
        for (by0, by1, bx0, bx1), e in blocks:
            total[by0:by1, bx0:bx1] += e
            count[by0:by1, bx0:bx1] += 1
        t, c = total[y0:y1, x0:x1], count[y0:y1, x0:x1]
        np.divide(t, c, out=out[k, y0:y1, x0:x1], where=c > 0)


def limb_heatmaps(keypoints: np.ndarray, grid_hw: tuple[int, int], stride: int, cfg: TargetConfig) -> np.ndarray:
    """Scalar limb maps in ``config.skeleton.LIMBS`` order.

    Args: as ``keypoint_heatmaps``; a limb is drawn for a person iff both its keypoints have v < 2.
    Returns:
        (30, h, w) float32 in [0, 1].
    """
    out = np.zeros((sk.NUM_LIMBS, *grid_hw), np.float32)
    _draw_limbs(out, np.asarray(keypoints).reshape(-1, sk.NUM_KEYPOINTS, 3), stride, cfg)
    return out


def person_mask_channel(mask_all: np.ndarray | None, grid_hw: tuple[int, int]) -> np.ndarray:
    """Channel 48: 3x3 grey erosion of the person mask; the grid border is not eroded (OpenCV's default)."""
    if mask_all is None:
        return np.zeros(grid_hw, np.float32)
    return cv2.erode(np.ascontiguousarray(mask_all, dtype=np.float32), _KERNEL_3X3)


def draw_targets(
    keypoints: np.ndarray, mask_all: np.ndarray | None, grid_hw: tuple[int, int], stride: int, cfg: TargetConfig
) -> np.ndarray:
    """All 50 target channels (spec 7): limbs 0-29, keypoints 30-47, person mask 48, max keypoint 49.

    Args:
        keypoints: (P, 18, 3) (x, y, v), input pixels, internal layout.
        mask_all: (h, w) person mask at grid resolution in [0, 1], or None (channel 48 then stays 0).
        grid_hw: (h, w) cells.
    Returns:
        (50, h, w) float32 in [0, 1].
    """
    kp = np.asarray(keypoints).reshape(-1, sk.NUM_KEYPOINTS, 3)
    out = np.zeros((sk.NUM_CHANNELS, *grid_hw), np.float32)
    _draw_limbs(out[sk.LIMB_CHANNELS], kp, stride, cfg)
    _draw_keypoints(out[sk.KEYPOINT_CHANNELS], kp, stride, cfg)
    out[sk.PERSON_MASK_CHANNEL] = person_mask_channel(mask_all, grid_hw)
    np.max(out[sk.KEYPOINT_CHANNELS], axis=0, out=out[sk.MAX_KEYPOINT_CHANNEL])
    return out  # every channel is in [0, 1] by construction, so the original's final clip is not needed


def downscale_targets(targets: np.ndarray, num_scales: int) -> list[np.ndarray]:
    """Targets at ``num_scales`` resolutions, finest first: scale k is the mean of 2^k x 2^k blocks (spec 9.2).

    Computed by repeated 2x2 means (equal to the direct block mean), each one OpenCV area resize of the
    channels stacked as rows (row pairs never straddle two channels since heights are even).
    Args: (C, h, w) with h and w divisible by 2^(num_scales-1).
    Returns: list of (C, h/2^k, w/2^k) float32 arrays, the first being ``targets``.
    """
    c, h, w = targets.shape
    if h % 2 ** (num_scales - 1) or w % 2 ** (num_scales - 1):
        raise ValueError(f"target grid {h}x{w} is not divisible by 2^{num_scales - 1}")
    scales = [targets]
    for _ in range(num_scales - 1):
        t = scales[-1]
        th, tw = t.shape[1] // 2, t.shape[2] // 2
        half = cv2.resize(t.reshape(c * t.shape[1], t.shape[2]), (tw, c * th), interpolation=cv2.INTER_AREA)
        scales.append(half.reshape(c, th, tw))
    return scales
