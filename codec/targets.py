"""The codec's encode side: training targets drawn on the output grid (keypoint and limb heatmaps, person mask, max
channel) and the targets and ignore masks at every scale.

Grid cell ``(i_y, i_x)`` has its centre at ``(stride*i_x + stride/2 - 0.5, stride*i_y + stride/2 - 0.5)`` in
input pixels (docs/data.md#output-grid); every distance is measured in input pixels. Channel layout: the
``config.skeleton.Skeleton`` passed in (K internal keypoints, L limbs, C = L + K + 2 channels; COCO: 18, 30, 50).

Two limb modes (``TargetConfig.limb_mode``):

* ``faithful`` (default) reproduces the original exactly (docs/data.md#limb-maps): distance to the *infinite
  line* through the two keypoints, evaluated only inside the segment's bounding box enlarged by ``limb_margin``;
  values ``<= limb_gaussian_thre`` are raised to ``limb_floor``; overlapping people are *averaged*.
* ``fixed``: distance to the *segment*, the Gaussian band is not clipped by a box (the window is where the
  Gaussian reaches ``limb_gaussian_thre``; values below it are 0), overlapping people combine by *max*.

``keypoint_gaussian_thre`` only sizes the keypoint window, it does not threshold values (the original's name,
kept; docs/data.md#keypoint-maps).
Everything is vectorised per person and limb: each Gaussian is an outer product / outer sum of two 1-D vectors.
"""

from __future__ import annotations

import math

import cv2
import numpy as np

from simplepose.codec.layout import ChannelLayout
from simplepose.config.schema import TargetConfig
from simplepose.config.skeleton import Skeleton

_KERNEL_3X3 = np.ones((3, 3), np.uint8)


def _cell_centres(start: int, stop: int, stride: int) -> np.ndarray:
    """Input-pixel coordinates of the centres of grid cells ``start .. stop-1``, float64."""
    return np.arange(start, stop, dtype=np.float64) * stride + (stride / 2 - 0.5)


def keypoint_window_radius(cfg: TargetConfig, stride: int) -> int:
    """Half-size, in cells, of the window a keypoint Gaussian is drawn in (7 at sigma 9, thre 0.015)."""
    return math.ceil(math.sqrt(-2 * cfg.sigma**2 * math.log(cfg.keypoint_gaussian_thre)) / stride)


def _visible(keypoints: np.ndarray) -> np.ndarray:
    return keypoints[..., 2] < 2


def _draw_keypoints(
    out: np.ndarray, keypoints: np.ndarray, stride: int, cfg: TargetConfig, max_map: np.ndarray | None = None
) -> None:
    """Max-combine every person's keypoint Gaussians into ``out`` (K, h, w), C-contiguous, in place, and into
    ``max_map`` (h, w) if given (their max over keypoints, without reading the K maps back).

    Window: cells round(x/stride) - r .. + r (r = ``keypoint_window_radius``), clipped to the grid
    (docs/data.md#keypoint-maps).
    The 1-D Gaussians of all windows are computed at once, each window is their outer product, and all windows are
    max-combined into ``out`` in one unbuffered ``np.maximum.at``.
    """
    h, w = out.shape[1:]
    r = keypoint_window_radius(cfg, stride)
    people, joints = np.nonzero(_visible(keypoints))
    if not len(people):
        return
    if not out.flags.c_contiguous:
        raise ValueError("the keypoint maps must be C-contiguous")
    xy = keypoints[people, joints, :2].astype(np.float64)
    first = np.rint(xy / stride).astype(np.int64) - r  # half-to-even like Python's round
    cells = first[:, :, None] + np.arange(2 * r + 1)  # (N, 2, 2r+1): x cells, then y cells
    centres = cells * stride + (stride / 2 - 0.5)
    gauss = np.exp((centres - xy[:, :, None]) ** 2 * (-1.0 / (2.0 * cfg.sigma**2))).astype(np.float32)
    windows = gauss[:, 1, :, None] * gauss[:, 0, None, :]  # (N, 2r+1, 2r+1): rows y, columns x
    cx, cy = cells[:, 0, None, :], cells[:, 1, :, None]
    inside = (cy >= 0) & (cy < h) & (cx >= 0) & (cx < w)
    cell = cy * w + cx  # (N, 2r+1, 2r+1) flat index within a map
    values = windows[inside]
    np.maximum.at(out.reshape(-1), (joints[:, None, None] * (h * w) + cell)[inside], values)
    if max_map is not None:
        np.maximum.at(max_map.reshape(-1), cell[inside], values)


def keypoint_heatmaps(keypoints: np.ndarray, grid_hw: tuple[int, int], stride: int, cfg: TargetConfig) -> np.ndarray:
    """Keypoint Gaussians, max over people.

    Args:
        keypoints: (P, K, 3) (x, y, v) in input pixels, internal layout; a keypoint takes part iff v < 2.
        grid_hw: (h, w) cells of the output grid.
        stride: input pixels per cell.
    Returns:
        (K, h, w) float32 in [0, 1].
    """
    kp = np.asarray(keypoints)
    out = np.zeros((kp.shape[-2], *grid_hw), np.float32)
    _draw_keypoints(out, kp.reshape(-1, *kp.shape[-2:]), stride, cfg)
    return out


def _limb_segments(keypoints: np.ndarray, pad: float, grid_hw, stride: int, limb_ends: tuple[np.ndarray, np.ndarray]):
    """Every drawable (limb, person) segment whose padded box touches the grid, vectorised.

    The box is the segment's bounding box enlarged by ``pad`` px, in cells ``round((min-pad)/stride) ..
    round((max+pad)/stride)`` inclusive, clipped to the grid (docs/data.md#limb-maps). Degenerate segments (both
    ends equal) are skipped like the original. Returns limb indices (N,), end points p1, p2 (N, 2) float64 and the
    boxes (N, 4) as half-open cell ranges (y0, y1, x0, x1), sorted by limb. ``limb_ends``: the (L,) from and to
    keypoint indices (``Skeleton.limb_ends``).
    """
    h, w = grid_hw
    limb_from, limb_to = limb_ends
    vis = _visible(keypoints)
    ok = vis[:, limb_from] & vis[:, limb_to]  # (P, L)
    people, limbs = np.nonzero(ok.T)[::-1]  # limb-major order
    xy = keypoints[..., :2].astype(np.float64)
    p1, p2 = xy[people, limb_from[limbs]], xy[people, limb_to[limbs]]
    lo = np.rint((np.minimum(p1, p2) - pad) / stride).astype(np.int64)
    hi = np.rint((np.maximum(p1, p2) + pad) / stride).astype(np.int64) + 1
    x0, y0 = np.maximum(lo[:, 0], 0), np.maximum(lo[:, 1], 0)
    x1, y1 = np.minimum(hi[:, 0], w), np.minimum(hi[:, 1], h)
    keep = (x1 > x0) & (y1 > y0) & (p1 != p2).any(axis=1)
    boxes = np.stack([y0, y1, x0, x1], axis=1)[keep]
    return limbs[keep], p1[keep], p2[keep], boxes


def _limb_fields(p1: np.ndarray, p2: np.ndarray, grid_hw, stride: int, along: bool = True):
    """Separable parts of every segment's geometry over the whole grid, float32, all segments at once.

    For segment n and cell (row i, col j): signed distance to the line = ``perp_r[n, i] + perp_c[n, j]``
    (the original's ``cross / (length + 1e-6)``), projection parameter along the segment (0 at p1, 1 at p2)
    = ``along_r[n, i] + along_c[n, j]`` (None unless ``along``). Returns (perp_r, perp_c, along_r, along_c, length).
    """
    gx = _cell_centres(0, grid_hw[1], stride)
    gy = _cell_centres(0, grid_hw[0], stride)
    d = p2 - p1
    length = np.hypot(d[:, 0], d[:, 1])[:, None]
    norm = length + 1e-6  # the original's guard, kept for exact values
    perp_r = (d[:, :1] * (p1[:, 1:] - gy) / norm).astype(np.float32)
    perp_c = (-d[:, 1:] * (p1[:, :1] - gx) / norm).astype(np.float32)
    if not along:
        return perp_r, perp_c, None, None, length[:, 0].astype(np.float32)
    along_r = ((gy - p1[:, 1:]) * d[:, 1:] / length**2).astype(np.float32)
    along_c = ((gx - p1[:, :1]) * d[:, :1] / length**2).astype(np.float32)
    return perp_r, perp_c, along_r, along_c, length[:, 0].astype(np.float32)


def _box_cells(boxes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every cell of every box, flattened: (segment, row, col) int64 arrays, box after box, row-major within."""
    heights, widths = boxes[:, 1] - boxes[:, 0], boxes[:, 3] - boxes[:, 2]
    sizes = heights * widths
    seg = np.repeat(np.arange(len(boxes)), sizes)
    k = np.arange(len(seg)) - np.repeat(np.cumsum(sizes) - sizes, sizes)  # position within the box
    row, col = np.divmod(k, widths[seg])
    return seg, row + boxes[seg, 0], col + boxes[seg, 2]


def _draw_limbs(out: np.ndarray, keypoints: np.ndarray, stride: int, cfg: TargetConfig, skeleton: Skeleton) -> None:
    """Write the L limb maps into ``out`` (L, h, w), C-contiguous and zero on entry.

    All segments' box cells are evaluated in one flat pass and scattered into ``out`` (no per-segment loop).
    """
    grid_hw = out.shape[1:]
    faithful = cfg.limb_mode == "faithful"
    if faithful:
        pad = cfg.limb_margin
    else:  # the Gaussian band reaches limb_gaussian_thre at this distance
        pad = math.sqrt(-2 * cfg.limb_sigma**2 * math.log(cfg.limb_gaussian_thre))
    limbs, p1, p2, boxes = _limb_segments(keypoints, pad, grid_hw, stride, skeleton.limb_ends)
    if not len(limbs):
        return
    if not out.flags.c_contiguous:
        raise ValueError("the limb maps must be C-contiguous")
    perp_r, perp_c, along_r, along_c, length = _limb_fields(p1, p2, grid_hw, stride, along=not faithful)
    h, w = grid_hw
    seg, row, col = _box_cells(boxes)
    at_row, at_col = seg * h + row, seg * w + col
    d = perp_r.take(at_row) + perp_c.take(at_col)
    scale = np.float32(-1.0 / (2.0 * cfg.limb_sigma**2))
    cell = limbs[seg] * (h * w) + row * w + col  # flat index into out
    flat = out.reshape(-1)
    if not faithful:  # beyond the ends, the distance is to the nearer end point; max over people
        t = along_r.take(at_row) + along_c.take(at_col)
        beyond = (t - np.clip(t, 0, 1)) * length[seg]
        e = np.exp((d * d + beyond * beyond) * scale)
        e[e < cfg.limb_gaussian_thre] = 0
        np.maximum.at(flat, cell, e)
        return
    e = np.exp(d * d * scale)
    e[e <= cfg.limb_gaussian_thre] = cfg.limb_floor
    # Faithful: mean over the people whose box covers the cell (docs/data.md#limb-maps, the 0.505 crossing case):
    # sums in person order, then divided by the count where a limb has several people.
    np.add.at(flat, cell, e)
    shared = (np.bincount(limbs, minlength=skeleton.num_limbs) > 1)[limbs][seg]
    if shared.any():
        cells, count = np.unique(cell[shared], return_counts=True)
        cells, count = cells[count > 1], count[count > 1]
        flat[cells] /= count.astype(np.float32)


def limb_heatmaps(
    keypoints: np.ndarray, grid_hw: tuple[int, int], stride: int, cfg: TargetConfig, skeleton: Skeleton
) -> np.ndarray:
    """Scalar limb maps in ``skeleton.limbs`` order.

    Args: as ``keypoint_heatmaps``; a limb is drawn for a person iff both its keypoints have v < 2.
    Returns:
        (L, h, w) float32 in [0, 1].
    """
    out = np.zeros((skeleton.num_limbs, *grid_hw), np.float32)
    _draw_limbs(out, np.asarray(keypoints).reshape(-1, skeleton.num_keypoints, 3), stride, cfg, skeleton)
    return out


def person_mask_channel(mask_all: np.ndarray | None, grid_hw: tuple[int, int]) -> np.ndarray:
    """The person-mask channel: 3x3 grey erosion of the person mask; the grid border is not eroded (OpenCV's
    default)."""
    if mask_all is None:
        return np.zeros(grid_hw, np.float32)
    return cv2.erode(np.ascontiguousarray(mask_all, dtype=np.float32), _KERNEL_3X3)


def draw_targets(
    keypoints: np.ndarray,
    mask_all: np.ndarray | None,
    grid_hw: tuple[int, int],
    stride: int,
    cfg: TargetConfig,
    skeleton: Skeleton,
) -> np.ndarray:
    """All C target channels in ``skeleton``'s layout (docs/data.md#targets): limbs, keypoints, person mask, max
    keypoint (COCO: 0-29, 30-47, 48, 49).

    Args:
        keypoints: (P, K, 3) (x, y, v), input pixels, internal layout.
        mask_all: (h, w) person mask at grid resolution in [0, 1], or None (the person-mask channel then stays 0).
        grid_hw: (h, w) cells.
    Returns:
        (C, h, w) float32 in [0, 1].
    """
    kp = np.asarray(keypoints).reshape(-1, skeleton.num_keypoints, 3)
    layout = ChannelLayout.of(skeleton)
    out = np.zeros((layout.num_channels, *grid_hw), np.float32)
    _draw_limbs(out[layout.limbs], kp, stride, cfg, skeleton)
    _draw_keypoints(out[layout.keypoints], kp, stride, cfg, max_map=out[layout.max_keypoint])
    out[layout.person_mask] = person_mask_channel(mask_all, grid_hw)
    return out  # every channel is in [0, 1] by construction, so the original's final clip is not needed


def downscale_targets(targets: np.ndarray, num_scales: int) -> list[np.ndarray]:
    """Targets at ``num_scales`` resolutions, finest first: scale k is the mean of 2^k x 2^k blocks
    (docs/data.md#five-scales).

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


def mask_scales(mask: np.ndarray, num_scales: int, threshold: float) -> list[np.ndarray]:
    """The ignore mask at every scale (docs/data.md#five-scales), finest first.

    Scale k is the bilinear resize (align_corners=False, no antialias) by 1/2^k, which for an integer factor
    f >= 2 is the mean of the 2x2 pixels at rows/cols f*i + f/2 - 1 and f*i + f/2; then values < threshold
    become 0. Args: (h, w) float32 in [0, 1]. Returns: list of (h/2^k, w/2^k) float32.
    """
    out = []
    for k in range(num_scales):
        f = 2**k
        if f == 1:
            m = mask.copy()
        else:
            a = f // 2 - 1
            m = (
                mask[a::f, a::f] + mask[a::f, a + 1 :: f] + mask[a + 1 :: f, a::f] + mask[a + 1 :: f, a + 1 :: f]
            ) * 0.25
        m[m < threshold] = 0
        out.append(m)
    return out
