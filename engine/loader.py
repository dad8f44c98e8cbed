"""The DataLoader of a run: fork-safe with OpenCV, with the data.* settings applied."""

from __future__ import annotations

import cv2
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from config.schema import DataConfig
from data.dataset import collate, worker_init_fn


class ForkSafeLoader(DataLoader):
    """A DataLoader whose workers are forked while OpenCV runs single-threaded in this process.

    A worker forked while OpenCV's thread pool is alive here (it is after any multi-threaded cv2 call in this
    process: COCO evaluation, or loading with data.num_workers=0) hangs for ever in its first OpenCV call
    (worker_init_fn's cv2.setNumThreads included): the pool's threads do not exist in the child. Seen here as
    a test process that hung for ever at its first batch after having trained with data.num_workers=0."""

    def __iter__(self):
        if self.num_workers == 0:
            return super().__iter__()
        threads = cv2.getNumThreads()
        cv2.setNumThreads(1)
        try:
            return super().__iter__()  # forks the workers (non-persistent ones: at every epoch)
        finally:
            cv2.setNumThreads(threads)


def make_loader(dataset: Dataset, sampler: Sampler, batch_size: int, cfg: DataConfig, device: torch.device):
    """Batches of ``dataset`` in ``sampler``'s order (``data.dataset.collate``); a stuck worker raises after
    ``cfg.loader_timeout`` seconds (engine.loader_errors turns that into a message naming the batch)."""
    return ForkSafeLoader(
        dataset,
        batch_size=batch_size,
        sampler=sampler,
        num_workers=cfg.num_workers,
        timeout=cfg.loader_timeout if cfg.num_workers > 0 else 0,
        pin_memory=cfg.pin_memory and device.type == "cuda",
        drop_last=False,
        worker_init_fn=worker_init_fn,
        collate_fn=collate,
    )
