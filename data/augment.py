"""Random augmentation: the parameters, the one affine matrix, colour tint and the warps.

See docs/data.md#augmentation. One affine maps the original image, both masks and every keypoint into the
network input. It centres the main person, scales its bbox height to ``target_dist`` of the input height, rotates,
flips and shifts. Randomness comes only from the ``numpy.random.Generator`` passed in (no global random state:
docs/differences.md#per-sample-random-generators).

Kept from the original on purpose, so the matrices equal its values (docs/differences.md#kept-on-purpose): the
``H/(H-1)`` scale tweak and the ``-0.5`` centring.
Fixed: OpenCV receives sizes as (width, height), so non-square inputs work (docs/differences.md#non-square-inputs);
the hue can wrap around the hue circle (``augment.hue_wrap``) instead of being clipped
(docs/differences.md#hue-wrap; clipping stays the default).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

from simplepose.config.schema import AugmentConfig
from simplepose.config.skeleton import Skeleton


@dataclass(frozen=True)
class AugmentParams:
    """One draw of the random augmentation. ``hsv`` are the integer offsets added when ``tint`` is set."""

    flip: bool = False
    tint: bool = False
    degree: float = 0.0
    scale: float = 1.0
    dx: int = 0  # shift of the crop centre, output pixels
    dy: int = 0
    hsv: tuple[int, int, int] = (0, 0, 0)


IDENTITY = AugmentParams()  # the original's "unrandom": no flip, no tint, no rotation, scale 1, no shift


def random_params(rng: np.random.Generator, cfg: AugmentConfig) -> AugmentParams:
    """Draw the parameters in the original's order, the tint offsets last (docs/data.md#random-parameters)."""
    flip = rng.random() < cfg.flip_prob
    tint = rng.random() < cfg.tint_prob
    degree = (rng.random() * 2 - 1) * cfg.max_rotate_degree
    scale = rng.uniform(cfg.scale_min, cfg.scale_max) if rng.random() < cfg.scale_prob else 1.0
    dx = int((rng.random() * 2 - 1) * cfg.center_perturb_max)  # int() truncates toward zero like the original
    dy = int((rng.random() * 2 - 1) * cfg.center_perturb_max)
    hsv = (int(rng.integers(-10, 11)), int(rng.integers(-20, 61)), int(rng.integers(-20, 41)))
    return AugmentParams(bool(flip), bool(tint), float(degree), float(scale), dx, dy, hsv)


def affine_matrix(
    center: tuple[float, float],
    bbox_height: float,
    params: AugmentParams,
    input_hw: tuple[int, int],
    target_dist: float,
) -> np.ndarray:
    """The 2x3 matrix mapping original-image pixels to input pixels (docs/data.md#the-affine-matrix).

    Args:
        center: (x, y) of the main person's bbox centre, original pixels.
        bbox_height: the main person's bbox height, original pixels (the original stored it divided by the
            input height as ``scale_provided``).
        input_hw: (H, W) of the network input.
    Returns:
        (2, 3) float64.
    """
    h, w = input_hw
    scale_provided = bbox_height / h * h / (h - 1)  # the H/(H-1) tweak of the original
    s = target_dist / scale_provided * params.scale
    theta = math.radians(params.degree)
    c, sn = math.cos(theta), math.sin(theta)
    f = -1.0 if params.flip else 1.0
    (a, b), (c2, d) = (f * s * c, f * s * sn), (-s * sn, s * c)
    cx, cy = float(center[0]), float(center[1])
    tx = w / 2 - 0.5 + params.dx - (a * cx + b * cy)
    ty = h / 2 - 0.5 + params.dy - (c2 * cx + d * cy)
    return np.array([[a, b, tx], [c2, d, ty]])


def linear_scale(matrix: np.ndarray) -> float:
    """Zoom factor of an affine (square root of the determinant's magnitude)."""
    (a, b, _), (c, d, _) = matrix.tolist()
    return math.sqrt(abs(a * d - b * c))


def tint(image_bgr: np.ndarray, hsv: tuple[int, int, int], hue_wrap: bool = False) -> np.ndarray:
    """Add integer HSV offsets to a BGR or BGRA uint8 image (OpenCV hue range 0..179; alpha is ignored); returns a
    new image, as BGRA (alpha 255: the form ``warp_image`` warps fastest).

    Saturation and value are clipped to 0..255; hue is clipped to 0..179 (the original) or wrapped."""
    levels = np.arange(256, dtype=np.int32)
    hue = (levels + hsv[0]) % 180 if hue_wrap else np.clip(levels + hsv[0], 0, 179)
    lut = np.stack([hue] + [np.clip(levels + off, 0, 255) for off in hsv[1:]], axis=1)  # (256, 3): one per channel
    shifted = cv2.LUT(cv2.cvtColor(image_bgr, cv2.COLOR_BGR2HSV), lut.astype(np.uint8)[:, None])
    return cv2.cvtColor(shifted, cv2.COLOR_HSV2BGR, dstCn=4)


def sampled_region(image_hw: tuple[int, int], matrix: np.ndarray, input_hw: tuple[int, int]) -> tuple[int, ...]:
    """(x0, y0, x1, y1), half-open: the part of an ``image_hw`` image that the warp to ``input_hw`` can sample,
    plus a 2-pixel margin, clipped to the image (x1 <= x0 or y1 <= y0 if the output sees none of it)."""
    # Plain Python floats: per sample, a dozen NumPy calls on 2x3 arrays cost more than this whole function.
    h, w = input_hw
    (a, b, tx), (c, d, ty) = matrix.tolist()
    det = a * d - b * c
    ia, ib, ic, id_ = d / det, -b / det, -c / det, a / det  # inverse of the linear part
    xs, ys = [], []
    for u in (-0.5, w - 0.5):
        for v in (-0.5, h - 0.5):
            xs.append(ia * (u - tx) + ib * (v - ty))
            ys.append(ic * (u - tx) + id_ * (v - ty))
    x0, y0 = max(math.floor(min(xs)) - 2, 0), max(math.floor(min(ys)) - 2, 0)
    x1, y1 = min(math.ceil(max(xs)) + 3, image_hw[1]), min(math.ceil(max(ys)) + 3, image_hw[0])
    return x0, y0, x1, y1


def crop_matrix(matrix: np.ndarray, x0: int, y0: int) -> np.ndarray:
    """``matrix`` for the crop of its source image that starts at pixel (x0, y0) (a new array)."""
    a, b, tx = matrix[0]
    c, d, ty = matrix[1]
    return np.array([[a, b, tx + a * x0 + b * y0], [c, d, ty + c * x0 + d * y0]])


def crop_to_output(image: np.ndarray, matrix: np.ndarray, input_hw: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """The ``sampled_region`` of ``image`` and the matrix for it.

    Warping the crop gives the same picture (up to OpenCV's rounding of sampling positions: a few values differ
    by 1); it saves work on per-pixel steps done before the warp (the tint) when zooming in.
    Returns the crop (a view) and the adjusted matrix.
    """
    x0, y0, x1, y1 = sampled_region(image.shape[:2], matrix, input_hw)
    if x1 <= x0 or y1 <= y0:
        return image, matrix
    return image[y0:y1, x0:x1], crop_matrix(matrix, x0, y0)


def warp_image(image: np.ndarray, matrix: np.ndarray, input_hw: tuple[int, int], border_bgr) -> np.ndarray:
    """Bilinear warp of a BGR or BGRA uint8 image to (H, W, 3) BGR with a constant border colour.

    Warped as BGRA: OpenCV's 4-channel bilinear warp gives the same values as its 3-channel one in about 2/3 of
    the time (even with the final drop of alpha). A BGR image is widened to BGRA only in its ``sampled_region``;
    the rest of the BGRA copy is left uninitialised, since the warp never reads it. Returns (H, W, 3), contiguous.
    """
    h, w = input_hw
    if image.shape[2] == 3:
        bgra = np.empty((*image.shape[:2], 4), np.uint8)
        x0, y0, x1, y1 = sampled_region(image.shape[:2], matrix, input_hw)
        if x1 > x0 and y1 > y0:
            cv2.cvtColor(image[y0:y1, x0:x1], cv2.COLOR_BGR2BGRA, dst=bgra[y0:y1, x0:x1])
        image = bgra
    warped = cv2.warpAffine(
        image,
        matrix,
        (w, h),
        flags=cv2.INTER_LINEAR,
        borderMode=cv2.BORDER_CONSTANT,
        borderValue=(*(int(v) for v in border_bgr), 0),
    )
    return cv2.cvtColor(warped, cv2.COLOR_BGRA2BGR)


def grid_matrix(matrix: np.ndarray, cell: float) -> np.ndarray:
    """Compose ``matrix`` with the input-pixel -> grid map for cells of ``cell`` input pixels
    (cell i has its centre at cell*i + cell/2 - 0.5)."""
    out = matrix / cell
    out[:, 2] -= (cell / 2 - 0.5) / cell
    return out


def warp_mask_to_grid(
    mask: np.ndarray, matrix: np.ndarray, input_hw: tuple[int, int], stride: int, border, supersample: int | None = None
) -> np.ndarray:
    """Warp a uint8 {0,255} mask (or a stack of masks, (H0, W0, C)) onto the output grid, as float in [0, 1].

    The mask is warped (bilinear) to ``supersample`` x the grid resolution, then area-averaged down to the grid.
    ``supersample = stride`` (the default) is the original: warp to the input size, then area-resize
    (docs/differences.md#mask-warp).
    Smaller values are cheaper approximations (1 = bilinear samples at the cell centres).
    Returns float32 (h, w) or (h, w, C).
    """
    h, w = input_hw
    gh, gw = h // stride, w // stride
    ss = stride if supersample is None else supersample
    if stride % ss:
        raise ValueError(f"supersample {ss} must divide the stride {stride}")
    borders = (border,) * 4 if np.isscalar(border) else tuple(border) + (0,) * (4 - len(border))
    m = matrix if ss == stride else grid_matrix(matrix, stride / ss)
    fine = cv2.warpAffine(mask, m, (gw * ss, gh * ss), flags=cv2.INTER_LINEAR, borderValue=borders)
    small = fine if ss == 1 else cv2.resize(fine, (gw, gh), interpolation=cv2.INTER_AREA)
    return small.astype(np.float32) * np.float32(1 / 255)


def transform_keypoints(keypoints: np.ndarray, matrix: np.ndarray, flip: bool, skeleton: Skeleton) -> np.ndarray:
    """Map (P, K, 3) internal keypoints with the affine; when flipped, swap the rows of ``skeleton``'s flip pairs.
    v is unchanged."""
    out = keypoints.astype(np.float32, copy=True)
    xy = keypoints[..., :2].astype(np.float64)
    out[..., :2] = xy @ matrix[:, :2].T + matrix[:, 2]
    return skeleton.flip_keypoints(out) if flip else out
