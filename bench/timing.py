"""Timing helpers shared by the bench scripts: the median of repeated calls, a training DataLoader's rate."""

from __future__ import annotations

import dataclasses
import statistics
import time

import torch

from simplepose.data.dataset import SimplePoseDataset
from simplepose.engine.batches import make_loader


def median_ms(fn, warmup: int, iters: int, sync=None) -> float:
    """Median wall milliseconds of ``fn()`` over ``iters`` calls after ``warmup`` calls. ``sync()`` (e.g.
    torch.cuda.synchronize) runs before each clock reading, so that work queued on a GPU is counted."""
    sync = sync or (lambda: None)
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def loader_rate(
    ds: SimplePoseDataset,
    num_workers: int,
    batch_size: int,
    batches: int,
    device: torch.device,
    indices: list[int] | None = None,
) -> float:
    """Samples/s of a training DataLoader as the trainer builds it (engine.batches.make_loader: pinned memory on
    CUDA when data.pin_memory) with ``num_workers`` worker processes, every tensor of each batch moved to
    ``device``. The clock starts once each worker has handed over its first batch (worker start-up excluded) and
    runs for ``batches`` more. ``indices``: the samples read, in order (default: 0, 1, 2, ... round the dataset);
    at least ``(max(1, num_workers) + batches) * batch_size`` of them."""
    warm = max(1, num_workers)
    if indices is None:
        indices = [i % len(ds) for i in range((warm + batches) * batch_size)]
    loader = make_loader(ds, indices, batch_size, dataclasses.replace(ds.cfg.data, num_workers=num_workers), device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    start = 0.0
    for i, batch in enumerate(loader):
        for x in (batch["image"], *batch["targets"], *batch["masks"]):
            x.to(device, non_blocking=True)
        if i == warm - 1:
            sync()
            start = time.perf_counter()
    sync()
    return batches * batch_size / (time.perf_counter() - start)
