"""Test-time forward on the host with NumPy and OpenCV alone: multi-scale + flip, fused and averaged on one decoding
grid, for a network that takes and returns NumPy arrays (ONNX Runtime: the runtime without PyTorch,
``evaluate.onnx_estimator``). No torch is imported here: the PyTorch path (evaluate/inference/multiscale.py) prepares
its inputs and resizes its CPU maps with the same functions, so both give the same maps.

Shapes: an image (H, W, 3) uint8 BGR; a scale's input batch (n or 2n, 3, Hp, Wp) float32 BGR/255, the images then
their mirrors when flipping, Hp and Wp multiples of ``eval.max_downsample``; the network's maps (n or 2n, C, Hp/4,
Wp/4); the averaged maps (n, C, rows, cols) on the decoding grid (``InferencePlan.grid``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import cv2
import numpy as np

from simplepose.codec.decoder.resample import cubic_weights
from simplepose.codec.network_input import pixels_to_input
from simplepose.config.schema import EvalConfig
from simplepose.evaluate.inference.plan import InferencePlan, scale_factors

HostNetwork = Callable[[np.ndarray], np.ndarray]  # (B, 3, Hp, Wp) float32 -> (B, C, Hp/4, Wp/4) float32


def input_sizes(height: int, width: int, m: float, cfg: EvalConfig) -> tuple[tuple[int, int], tuple[int, int]]:
    """(rows, cols) of a height x width image resized by m, and of that image padded to max_downsample."""
    hr, wr = max(1, round(height * m)), max(1, round(width * m))
    step = cfg.max_downsample
    return (hr, wr), (math.ceil(hr / step) * step, math.ceil(wr / step) * step)


def bucket_size(n: int, step: int) -> int:
    """``n`` (a multiple of ``step``) rounded up to the shape ladder of ``eval.shape_buckets``: multiples of
    ``step`` up to 16 steps, of 2 steps up to 32, of 4 steps up to 64, ... (8 sizes per octave, at most 1/8
    more)."""
    unit = step
    while n > 16 * unit:
        unit *= 2
    return math.ceil(n / unit) * unit


def prepare_input(
    image: np.ndarray, m: float, cfg: EvalConfig, padded_hw: tuple[int, int] | None = None
) -> tuple[np.ndarray, tuple[int, int]]:
    """Resize a BGR uint8 image by m (bicubic), pad bottom/right to a multiple of max_downsample (or to
    ``padded_hw``, a shape bucket).

    Returns the padded (Hp, Wp, 3) float32 BGR/255 array and the resized (rows, cols) before padding.
    """
    height, width = image.shape[:2]
    (hr, wr), (hp, wp) = input_sizes(height, width, m, cfg)
    if padded_hw is not None:
        hp, wp = padded_hw
    resized = cv2.resize(image, (wr, hr), interpolation=cv2.INTER_CUBIC)
    padded = np.full((hp, wp, 3), cfg.pad_value, np.uint8)
    padded[:hr, :wr] = resized
    return pixels_to_input(padded), (hr, wr)


def host_batch(padded: list[np.ndarray], flip: bool) -> np.ndarray:
    """n padded (Hp, Wp, 3) images -> (n or 2n, 3, Hp, Wp) contiguous float32: the images, then (when flipping) their
    mirrors."""
    x = np.stack(padded).transpose(0, 3, 1, 2)
    if flip:
        x = np.concatenate([x, x[..., ::-1]])
    return np.ascontiguousarray(x)


def fuse_flip_host(out: np.ndarray, flip: tuple[int, ...] | None) -> np.ndarray:
    """``multiscale.fuse_flip`` in NumPy: (2n, C, h, w) maps of n images then their mirrors -> (n, C, h, w) float32,
    each mirror's maps mirrored back, its channels permuted by ``flip`` (``ChannelLayout.flip``) and averaged with
    the direct ones, in the same order of float32 operations. ``flip`` None: only cast to float32."""
    out = out.astype(np.float32, copy=False)
    if flip is None:
        return out
    n = out.shape[0] // 2
    fused = out[n:][:, list(flip), :, ::-1] + out[:n]
    fused *= np.float32(0.5)
    return fused


def resize_on_host(crop: np.ndarray, fx: float, fy: float, grid_hw: tuple[int, int]) -> np.ndarray:
    """Fused maps cropped to the cells touching the image, (n, C, hc, wc) float32 -> (n, rows, cols, C) on the
    decoding grid: each resized by OpenCV (bicubic, by the exact factors ``fx``, ``fy`` that map the image's extent
    onto the grid, pixel centres aligned), then cut to ``grid_hw``."""
    gh, gw = grid_hw
    n, _, hc, wc = crop.shape
    out = []
    for hwc in crop.transpose(0, 2, 3, 1):
        hwc = np.ascontiguousarray(hwc)
        if (fy, fx) != (1.0, 1.0):
            if (round(hc * fy), round(wc * fx)) != (hc, wc):
                hwc = cubic_resize_channels(hwc, fx, fy)
            else:  # OpenCV ignores the factors and copies when the rounded size is unchanged
                hwc = _cubic_resample(_cubic_resample(hwc, 0, fy, gh), 1, fx, gw)
        out.append(hwc[:gh, :gw])
    return out[0][None] if n == 1 else np.stack(out)  # no copy for a single image


def grid_crop(valid_hw: tuple[int, int], grid_hw: tuple[int, int], stride: int) -> tuple[int, int, float, float]:
    """(hc, wc, fx, fy): the output cells touching a resized image of ``valid_hw`` input pixels, and the exact
    factors (not rounded sizes, which would drift the image's extent off the grid) that map them onto ``grid_hw``."""
    (hr, wr), (gh, gw) = valid_hw, grid_hw
    return math.ceil(hr / stride), math.ceil(wr / stride), gw * stride / wr, gh * stride / hr


CV_MAX_RESIZE_CHANNELS = 128  # cv2.resize refuses arrays of more channels


def cubic_resize_channels(hwc: np.ndarray, fx: float, fy: float) -> np.ndarray:
    """``cv2.resize`` (bicubic, by the factors) of an (h, w, C) array of any number of channels: OpenCV takes at
    most 128 at once, so wider maps (whole-body skeletons: ~280) are resized in slices of 128 channels, each
    with the same kernel (channels are independent); the cost stays linear in C."""
    c = hwc.shape[2]
    if c <= CV_MAX_RESIZE_CHANNELS:
        resized = cv2.resize(hwc, None, fx=fx, fy=fy, interpolation=cv2.INTER_CUBIC)
        return resized.reshape(*resized.shape[:2], c)  # OpenCV drops the axis of one channel
    parts = [
        cubic_resize_channels(np.ascontiguousarray(hwc[:, :, i : i + CV_MAX_RESIZE_CHANNELS]), fx, fy)
        for i in range(0, c, CV_MAX_RESIZE_CHANNELS)
    ]
    return np.concatenate(parts, axis=2)


def _cubic_resample(a: np.ndarray, axis: int, factor: float, size: int) -> np.ndarray:
    """Resample one axis by ``factor`` (pixel centres aligned, edge replicated) to ``size`` samples."""
    if factor == 1.0 and a.shape[axis] >= size:
        return a
    src = (np.arange(size) + 0.5) / factor - 0.5
    base = np.floor(src).astype(np.int64)
    weights = cubic_weights((src - base).astype(np.float32))
    n = a.shape[axis]
    shape = [1] * a.ndim
    shape[axis] = size
    out = np.zeros(a.shape[:axis] + (size,) + a.shape[axis + 1 :], np.float32)
    for tap, w in zip(range(-1, 3), weights):
        out += np.take(a, np.clip(base + tap, 0, n - 1), axis=axis) * w.reshape(shape)
    return out


def host_maps_batch(
    images: list[np.ndarray], plan: InferencePlan, network: HostNetwork
) -> list[tuple[np.ndarray, tuple[float, float]]]:
    """``multiscale.multiscale_maps_batch`` for a NumPy network on the host: BGR uint8 images of one size, one batch
    per test scale (prepared with OpenCV, padded to multiples of ``max_downsample``, or to the shape ladder with
    ``eval.shape_buckets=on``), fused with their mirrors, resized onto the grid and averaged over the scales.

    Returns per image: maps (C, rows, cols) float32 in the plan's layout and (sx, sy), image pixels per grid pixel.
    """
    h, w = images[0].shape[:2]
    if any(im.shape[:2] != (h, w) for im in images):
        raise ValueError("host_maps_batch needs images of one size")
    cfg = plan.cfg
    grid = plan.grid(h, w)
    flip = plan.codec.layout.flip if cfg.flip else None
    acc = None
    for m in scale_factors(h, w, cfg):
        (hr, wr), padded = input_sizes(h, w, m, cfg)
        if cfg.shape_buckets == "on":
            padded = (bucket_size(padded[0], cfg.max_downsample), bucket_size(padded[1], cfg.max_downsample))
        pixels = host_batch([prepare_input(im, m, cfg, padded)[0] for im in images], cfg.flip)
        out = network(pixels)
        plan.check_channels(out.shape[1])
        hc, wc, fx, fy = grid_crop((hr, wr), grid, plan.stride)
        maps = resize_on_host(fuse_flip_host(out, flip)[:, :, :hc, :wc], fx, fy, grid)
        acc = maps if acc is None else acc + maps
    if acc is None:
        raise ValueError("host_maps_batch: no test scale (eval.scales is empty)")
    maps = np.nan_to_num(np.asarray(acc / len(cfg.scales)).transpose(0, 3, 1, 2), copy=False)
    scale = (w / grid[1], h / grid[0])
    return [(one, scale) for one in maps]
