"""Batches of the dataset's samples: the DataLoader's collate and worker setup, and a batch moved to the device with
its uint8 images turned into the network's float input there (docs/data.md#dataset).

    loader = DataLoader(ds, batch_size=B, collate_fn=collate, worker_init_fn=worker_init_fn, ...)
    images, targets, masks = batch_to_device(batch, device)   # images (B, 3, H, W) float32 BGR/255
    labelled = labelled_to_device(batch, device)              # (B, C) or None: several sources only
"""

from __future__ import annotations

import cv2
import torch
from torch.utils.data import default_collate

from simplepose.codec.network_input import scale_input_


def images_to_float(images: torch.Tensor, channels_last: bool = False) -> torch.Tensor:
    """A batch of sample images, (B, 3, H, W) uint8 -> float32 in [0, 1] on the same device, channels-last in
    memory if asked (for a model converted with ``memory_format=torch.channels_last``), else contiguous NCHW.

    Training inputs are scaled here, by the codec's input encoding (``codec.network_input``): times float32(1/255),
    exactly the values the sample's float image had before images became uint8 (and those
    evaluate/inference/multiscale.py gives its inputs).
    Call it after moving the batch to the device, so that the uint8 pixels are what crosses to it.
    """
    if images.dtype != torch.uint8:
        raise TypeError(f"images_to_float expects the dataset's uint8 images, got {images.dtype}")
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    return scale_input_(images.to(dtype=torch.float32, memory_format=fmt))


def batch_to_device(
    batch: dict, device: torch.device, channels_last: bool = False
) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
    """A collated batch moved to ``device``: (images (B, 3, H, W) float32 BGR/255 by ``images_to_float``, the
    targets and the masks as lists of one batched tensor per scale). The uint8 images cross before they are
    converted; copies from pinned memory do not block."""
    images = images_to_float(batch["image"].to(device, non_blocking=True), channels_last)
    targets = [t.to(device, non_blocking=True) for t in batch["targets"]]
    masks = [m.to(device, non_blocking=True) for m in batch["masks"]]
    return images, targets, masks


def labelled_to_device(batch: dict, device: torch.device) -> torch.Tensor | None:
    """The batch's (B, C) channel weights (0: a channel its sample's source cannot teach; data.keypoint_mapping)
    on ``device``, or None for a batch of one source's samples, whose every channel is taught."""
    labelled = batch.get("labelled")
    return None if labelled is None else labelled.to(device, non_blocking=True)


def collate(samples: list[dict]) -> dict:
    """The DataLoader's collate: ``default_collate`` with the images stacked as (B, H, W, 3) and returned as a
    (B, 3, H, W) channels-last view (stacking the per-sample views as NCHW would transpose every picture)."""
    batch = default_collate([{**s, "image": s["image"].permute(1, 2, 0)} for s in samples])
    batch["image"] = batch["image"].permute(0, 3, 1, 2)
    return batch


def worker_init_fn(worker_id: int) -> None:
    """For DataLoader workers: one thread each for OpenCV and torch (the workers already run in parallel). The
    training loader (engine.batches.ForkSafeLoader) adds its stop handling: a job-wide SIGTERM or Ctrl-C leaves them
    serving, the training process ends them (engine/loader_workers.py)."""
    cv2.setNumThreads(1)
    torch.set_num_threads(1)
