"""Test-time forward: multi-scale + flip, fused and averaged on one decoding grid.

A *map source* (evaluate/inference/map_source.py: a network, an ONNX file or the oracle) turns each scale's input
batch into maps: ``source(batch) -> (B, C, Hp/4, Wp/4)``, where ``batch.pixels`` is (n or 2n, 3, Hp, Wp) float32
BGR/255 (n images of one size, then their mirrors when flipping) and ``batch.metas`` says, per image, which image it
is and how it was resized and padded.

Difference from the original (documented on purpose): the original upsampled each output x4, cropped the
padding and resized again to the image size (two bicubic passes, full image resolution, all channels). Here
each fused output is resized once straight onto the decoding grid (``eval.decode_height`` rows, or the image
size when 0) with the same pixel-centre alignment, which is several times cheaper.

C = the skeleton's channels (``config.skeleton.Skeleton``, COCO: 50); the flip fusion swaps its left/right channels.
"""

from __future__ import annotations

import typing
from collections.abc import Hashable, Iterator, Sequence

import numpy as np
import torch

from simplepose.codec.network_input import scale_input_
from simplepose.config.schema import EvalConfig, ResizeBackend
from simplepose.config.skeleton import Skeleton
from simplepose.evaluate.inference.host_maps import (
    bucket_size,
    grid_crop,
    input_sizes,
    prepare_input,
    resize_on_host,
)
from simplepose.evaluate.inference.map_source import ImageMeta, InputBatch, MapSource
from simplepose.evaluate.inference.plan import InferencePlan, scale_factors


def make_batch(padded: list[np.ndarray], flip: bool, device: torch.device) -> torch.Tensor:
    """n padded (Hp, Wp, 3) images -> (n or 2n, 3, Hp, Wp): the images, then (when flipping) their mirrors."""
    x = torch.from_numpy(np.stack(padded)).permute(0, 3, 1, 2)
    if flip:
        x = torch.cat([x, x.flip(-1)])
    if device.type == "cuda":
        return x.pin_memory().to(device, non_blocking=True)
    return x.to(device)


def uses_buckets(setting: str, device: torch.device) -> bool:
    """Whether ``eval.shape_buckets=setting`` pads inputs to the ladder on ``device``."""
    return setting == "on" or (setting == "auto" and device.type == "cuda")


def uses_device_preprocess(setting: str, device: torch.device) -> bool:
    """Whether ``eval.preprocess=setting`` prepares the inputs with torch on ``device`` (else OpenCV on the host)."""
    return setting == "device" or (setting == "auto" and device.type != "cpu")


def upload_images(images: list[np.ndarray], device: torch.device) -> torch.Tensor:
    """n BGR uint8 (H, W, 3) images of one size -> (n, 3, H, W) uint8 on ``device``, copied once (from pinned
    memory on CUDA, so that the copy does not hold the host)."""
    x = torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2)
    if device.type == "cuda":
        x = x.pin_memory()
    return x.to(device, non_blocking=True)


def prepare_on_device(
    images: torch.Tensor, resized_hw: tuple[int, int], padded_hw: tuple[int, int], cfg: EvalConfig
) -> torch.Tensor:
    """``prepare_input`` + ``make_batch`` with torch on the images' device: (n, 3, H, W) uint8 -> (n or 2n, 3, Hp,
    Wp) float32 BGR/255, the images resized (bicubic, OpenCV's pixel centres, rounded and saturated to 0..255 as
    OpenCV's uint8 resize), padded bottom/right with ``pad_value``, then their mirrors when flipping."""
    (hr, wr), (hp, wp) = resized_hw, padded_hw
    n, _, h, w = images.shape
    x = images.float()
    if (hr, wr) != (h, w):
        x = bicubic_resize(x, (hr, wr), (hr / h, wr / w)).round_().clamp_(0, 255)
    batch = x.new_full((n, 3, hp, wp), float(cfg.pad_value))
    batch[:, :, :hr, :wr] = x
    if cfg.flip:
        batch = torch.cat([batch, batch.flip(-1)])
    return scale_input_(batch)


def fuse_flip(out: torch.Tensor, flip_index: torch.Tensor | None) -> torch.Tensor:
    """(2n, C, h, w) predictions on n images then their mirrors -> (n, C, h, w) float32: each mirrored
    prediction is mirrored back, its left/right channels swapped by ``flip_index`` (the codec's ``ChannelLayout.flip``
    on the outputs' device: ``InferencePlan.flip_index``) and averaged with the direct one. ``flip_index`` None (no
    flip): the (n, C, h, w) input is only cast to float32."""
    out = out.float()
    if flip_index is None:
        return out
    n = out.shape[0] // 2
    fused = out[n:].index_select(1, flip_index).flip(-1)
    return fused.add_(out[:n]).mul_(0.5)


def resize_to_grid(
    fused: torch.Tensor,
    valid_hw: tuple[int, int],
    grid_hw: tuple[int, int],
    stride: int,
    backend: ResizeBackend = "auto",
) -> np.ndarray | torch.Tensor:
    """Map fused outputs (n, C, h, w) onto the decoding grid, dropping the padding.

    The outputs cover ``valid_hw`` input pixels (the resized image) plus padding; cells are cropped to the
    ones touching the image, resized once (bicubic, by the exact factor that maps the image's extent onto
    ``grid_hw``), then cropped. ``backend``: "opencv" returns (n, rows, cols, C) numpy (faster on CPU);
    "torch" returns (n, C, rows, cols) on the tensor's device; "auto" picks OpenCV on CPU, torch elsewhere.
    Both give the grid's exact size and the same pixel-centre alignment.
    """
    gh, gw = grid_hw
    hc, wc, fx, fy = grid_crop(valid_hw, grid_hw, stride)
    crop = fused[:, :, :hc, :wc]
    if uses_torch_resize(backend, crop.device):
        if (fy, fx) == (1.0, 1.0):
            return crop[:, :, :gh, :gw]
        # CUDA's kernel copies an output of the input's size whatever the factors (the CPU kernel resamples):
        # ask for one more row then, and drop it
        extra = int((hc, wc) == (gh, gw))
        return bicubic_resize(crop, (gh + extra, gw), (fy, fx))[:, :, :gh]
    return resize_on_host(crop.cpu().numpy(), fx, fy, grid_hw)


def uses_torch_resize(backend: ResizeBackend, device: torch.device) -> bool:
    """Whether ``resize_to_grid`` resizes with torch (on ``device``) rather than OpenCV (on the CPU)."""
    if backend not in typing.get_args(ResizeBackend):
        raise ValueError(f"resize backend {backend!r} is not one of {typing.get_args(ResizeBackend)}")
    return backend == "torch" or (backend == "auto" and device.type != "cpu")


def bicubic_resize(x: torch.Tensor, size: tuple[int, int], factors: tuple[float, float]) -> torch.Tensor:
    """Bicubic resize of (n, C, h, w) to ``size`` (rows, cols), output pixel centres mapped by ``factors``
    (fy, fx): source = (out + 0.5) / f - 0.5, as OpenCV's resize with fx, fy.

    F.interpolate takes a size or a factor, not both: size= maps by h / rows (the image's extent drifts off
    the grid), scale_factor= outputs floor(h * fy) rows, one short when h * fy is rows less a rounding error.
    The ATen op under it takes both."""
    return torch.ops.aten.upsample_bicubic2d(x, list(size), False, *factors)


def scale_inputs(
    images: list[np.ndarray], cfg: EvalConfig, device: torch.device, keys: Sequence[Hashable] | None = None
) -> Iterator[InputBatch]:
    """For each test scale of BGR uint8 images of one size (named by ``keys``, by default their positions), the
    network's input batch on ``device``: (n or 2n, 3, Hp, Wp) float32 BGR/255, the images then their mirrors when
    flipping, with each image's meta (its key, and the resized (rows, cols) before padding). Prepared on the host
    (OpenCV) or on the device (``eval.preprocess``), padded to a multiple of ``max_downsample`` or to a shape bucket
    (``eval.shape_buckets``)."""
    h, w = images[0].shape[:2]
    keys = range(len(images)) if keys is None else keys
    on_device = uses_device_preprocess(cfg.preprocess, device)
    buckets = uses_buckets(cfg.shape_buckets, device)
    uploaded = upload_images(images, device) if on_device else None
    for m in scale_factors(h, w, cfg):
        (hr, wr), padded = input_sizes(h, w, m, cfg)
        if buckets:
            padded = (bucket_size(padded[0], cfg.max_downsample), bucket_size(padded[1], cfg.max_downsample))
        if uploaded is not None:  # on_device
            pixels = prepare_on_device(uploaded, (hr, wr), padded, cfg)
        else:
            prepared = [prepare_input(im, m, cfg, padded) for im in images]
            pixels = make_batch([p for p, _ in prepared], cfg.flip, device)
        metas = tuple(ImageMeta(key, (h, w), (hr, wr), (pixels.shape[2], pixels.shape[3])) for key in keys)
        yield InputBatch(pixels, metas, cfg.flip)


def multiscale_maps_batch(
    images: list[np.ndarray],
    plan: InferencePlan,
    source: MapSource,
    device: torch.device,
    keys: Sequence[Hashable] | None = None,
) -> list[tuple[np.ndarray, tuple[float, float]]]:
    """Average the fused maps of every test scale for BGR uint8 images of one size, in one batch per scale, as
    ``plan`` says (its ``eval`` settings, grid, flip index and channel check). ``keys``: what names each image for
    the map source (``ImageMeta.key``; default: its position in ``images``).

    Returns per image: maps (C, rows, cols) float32 on the decoding grid in the plan's layout and (sx, sy), image
    pixels per grid pixel (what ``decode_people`` takes as ``scale``).
    """
    h, w = images[0].shape[:2]
    if any(im.shape[:2] != (h, w) for im in images):
        raise ValueError("multiscale_maps_batch needs images of one size")
    cfg = plan.cfg
    grid = plan.grid(h, w)
    flip_index = plan.flip_index(device) if cfg.flip else None
    acc = None
    for batch in scale_inputs(images, cfg, device, keys):
        with torch.no_grad():
            out = source(batch)
        plan.check_channels(out.shape[1])
        valid = batch.metas[0].resized_hw
        maps = resize_to_grid(fuse_flip(out, flip_index), valid, grid, plan.stride, cfg.resize_backend)
        acc = maps if acc is None else acc + maps
    if acc is None:
        raise ValueError("multiscale_maps_batch: no test scale (eval.scales is empty)")
    n = len(cfg.scales)
    if isinstance(acc, torch.Tensor):
        maps = (acc / n).cpu().numpy()
    else:
        maps = np.asarray(acc / n).transpose(0, 3, 1, 2)
    maps = np.nan_to_num(maps, copy=False)
    scale = (w / grid[1], h / grid[0])
    return [(one, scale) for one in maps]


def multiscale_maps(
    image: np.ndarray,
    cfg: EvalConfig,
    source: MapSource,
    device: torch.device,
    *,
    skeleton: Skeleton,
    key: Hashable = 0,
) -> tuple[np.ndarray, tuple[float, float]]:
    """``multiscale_maps_batch`` for one image (named ``key`` for the source) under a plan made for it from
    ``skeleton`` and ``cfg``: (maps (C, rows, cols) float32, (sx, sy)). A loop over images builds one
    ``InferencePlan`` and calls ``multiscale_maps_batch`` instead."""
    return multiscale_maps_batch([image], InferencePlan.of(skeleton, cfg), source, device, keys=[key])[0]
