"""Test-time forward: multi-scale + flip, fused and averaged on one decoding grid (spec 11.2).

A *predictor* turns a padded batch into maps: ``predict(batch, resize_xy) -> (B, 50, Hp/4, Wp/4)``, where
``batch`` is (1 or 2, 3, Hp, Wp) float32 BGR/255 (the image, then its mirror when flipping) and
``resize_xy`` the factors the image was resized by. ``model_predictor`` wraps a network; the oracle
(evaluate/oracle.py) draws ground-truth maps instead.

Difference from the original (documented on purpose): the original upsampled each output x4, cropped the
padding and resized again to the image size (two bicubic passes, full image resolution, 50 channels). Here
each fused output is resized once straight onto the decoding grid (``eval.decode_height`` rows, or the image
size when 0) with the same pixel-centre alignment, which is several times cheaper.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import cv2
import numpy as np
import torch
import torch.nn.functional as F

from config.schema import EvalConfig
from config.skeleton import CHANNEL_FLIP, NUM_CHANNELS

Predictor = Callable[[torch.Tensor, tuple[float, float]], torch.Tensor]

_FLIP_INDEX: dict[torch.device, torch.Tensor] = {}


def scale_factors(height: int, width: int, cfg: EvalConfig) -> list[float]:
    """Resize factor of every test scale: ``s * boxsize / height``, capped to max_height x max_width."""
    out = []
    for s in cfg.scales:
        m = s * cfg.boxsize / height
        if m * height > cfg.max_height or m * width > cfg.max_width:
            m = min(cfg.max_height / height, cfg.max_width / width)
        out.append(m)
    return out


def decode_grid(height: int, width: int, cfg: EvalConfig) -> tuple[int, int]:
    """(rows, cols) of the grid the maps are averaged and decoded on."""
    if cfg.decode_height <= 0:
        return height, width
    return cfg.decode_height, max(1, round(width * cfg.decode_height / height))


def prepare_input(image: np.ndarray, m: float, cfg: EvalConfig) -> tuple[np.ndarray, tuple[int, int]]:
    """Resize a BGR uint8 image by m (bicubic), pad bottom/right to a multiple of max_downsample.

    Returns the padded (Hp, Wp, 3) float32 BGR/255 array and the resized (rows, cols) before padding.
    """
    h, w = image.shape[:2]
    hr, wr = max(1, round(h * m)), max(1, round(w * m))
    resized = cv2.resize(image, (wr, hr), interpolation=cv2.INTER_CUBIC)
    step = cfg.max_downsample
    hp, wp = math.ceil(hr / step) * step, math.ceil(wr / step) * step
    padded = np.full((hp, wp, 3), cfg.pad_value, np.uint8)
    padded[:hr, :wr] = resized
    return padded.astype(np.float32) / 255.0, (hr, wr)


def make_batch(padded: np.ndarray, flip: bool, device: torch.device) -> torch.Tensor:
    """(Hp, Wp, 3) -> (1 or 2, 3, Hp, Wp): the image and, when flipping, its horizontal mirror."""
    x = torch.from_numpy(padded).permute(2, 0, 1).unsqueeze(0)
    if flip:
        x = torch.cat([x, x.flip(-1)])
    return x.to(device)


def fuse_flip(out: torch.Tensor) -> torch.Tensor:
    """(1 or 2, C, h, w) -> (C, h, w) float32; a mirrored prediction is mirrored back, its left/right
    channels swapped (config.skeleton.CHANNEL_FLIP) and averaged with the direct one."""
    out = out.float()
    if out.shape[0] == 1:
        return out[0]
    idx = _FLIP_INDEX.get(out.device)
    if idx is None:
        idx = _FLIP_INDEX[out.device] = torch.tensor(CHANNEL_FLIP, device=out.device)
    return 0.5 * (out[0] + out[1].flip(-1).index_select(0, idx))


def resize_to_grid(
    fused: torch.Tensor, valid_hw: tuple[int, int], grid_hw: tuple[int, int], stride: int
) -> np.ndarray | torch.Tensor:
    """Map a fused output (C, h, w) onto the decoding grid, dropping the padding.

    The output covers ``valid_hw`` input pixels (the resized image) plus padding; cells are cropped to the
    ones touching the image, resized once (bicubic, by the exact factor that maps the image's extent onto
    ``grid_hw``), then cropped. CPU: OpenCV (faster there), returns (rows, cols, C) numpy; other devices:
    torch, returns (C, rows, cols) on the device.
    """
    (hr, wr), (gh, gw) = valid_hw, grid_hw
    hc, wc = math.ceil(hr / stride), math.ceil(wr / stride)
    # exact factors (not rounded sizes) keep the image's extent aligned with the grid to the sub-cell
    fy, fx = gh * stride / hr, gw * stride / wr
    crop = fused[:, :hc, :wc]
    if crop.device.type != "cpu":
        if (fy, fx) != (1.0, 1.0):
            crop = F.interpolate(
                crop[None], scale_factor=(fy, fx), mode="bicubic", align_corners=False, recompute_scale_factor=False
            )[0]
        return crop[:, :gh, :gw]
    hwc = crop.permute(1, 2, 0).contiguous().numpy()
    if (fy, fx) != (1.0, 1.0):
        if round(hc * fy) != hc and round(wc * fx) != wc:
            hwc = cv2.resize(hwc, None, fx=fx, fy=fy, interpolation=cv2.INTER_CUBIC)
        else:  # OpenCV ignores the factors and copies when the rounded size is unchanged
            hwc = _cubic_resample(_cubic_resample(hwc, 0, fy, gh), 1, fx, gw)
    return hwc[:gh, :gw]


def _cubic_weights(t: np.ndarray, a: float = -0.75) -> list[np.ndarray]:
    """Bicubic convolution weights (OpenCV's a = -0.75) of the 4 taps at offsets -1, 0, 1, 2 from floor."""
    d = [1 + t, t, 1 - t, 2 - t]
    return [np.where(x <= 1, ((a + 2) * x - (a + 3)) * x * x + 1, ((a * x - 5 * a) * x + 8 * a) * x - 4 * a) for x in d]


def _cubic_resample(a: np.ndarray, axis: int, factor: float, size: int) -> np.ndarray:
    """Resample one axis by ``factor`` (pixel centres aligned, edge replicated) to ``size`` samples."""
    if factor == 1.0 and a.shape[axis] >= size:
        return a
    src = (np.arange(size) + 0.5) / factor - 0.5
    base = np.floor(src).astype(np.int64)
    weights = _cubic_weights((src - base).astype(np.float32))
    n = a.shape[axis]
    shape = [1] * a.ndim
    shape[axis] = size
    out = np.zeros(a.shape[:axis] + (size,) + a.shape[axis + 1 :], np.float32)
    for tap, w in zip(range(-1, 3), weights):
        out += np.take(a, np.clip(base + tap, 0, n - 1), axis=axis) * w.reshape(shape)
    return out


def multiscale_maps(
    image: np.ndarray, cfg: EvalConfig, predict: Predictor, device: torch.device, stride: int = 4
) -> tuple[np.ndarray, tuple[float, float]]:
    """Average the fused maps of every test scale for one BGR uint8 image.

    Returns maps (50, rows, cols) float32 on the decoding grid and (sx, sy), image pixels per grid pixel
    (what ``decode_people`` takes as ``scale``).
    """
    h, w = image.shape[:2]
    grid = decode_grid(h, w, cfg)
    acc = None
    for m in scale_factors(h, w, cfg):
        padded, (hr, wr) = prepare_input(image, m, cfg)
        batch = make_batch(padded, cfg.flip, device)
        with torch.no_grad():
            out = predict(batch, (wr / w, hr / h))
        if out.shape[1] != NUM_CHANNELS:
            raise ValueError(f"predictor returned {out.shape[1]} channels, expected {NUM_CHANNELS}")
        maps = resize_to_grid(fuse_flip(out), (hr, wr), grid, stride)
        acc = maps if acc is None else acc + maps
    n = len(cfg.scales)
    if isinstance(acc, torch.Tensor):
        maps = (acc / n).cpu().numpy()
    else:
        maps = (acc / n).transpose(2, 0, 1)
    maps = np.nan_to_num(maps, copy=False)
    return maps, (w / grid[1], h / grid[0])


def model_predictor(model: torch.nn.Module) -> Predictor:
    """Predictor of a network returning outputs[stack][scale]: the last stack's finest output."""

    def predict(batch: torch.Tensor, resize_xy: tuple[float, float]) -> torch.Tensor:
        return model(batch)[-1][0]

    return predict
