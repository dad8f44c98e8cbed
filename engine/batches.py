"""The training data of a run: a DataLoader fork-safe with OpenCV and with the data.* settings applied, and the
batches of each epoch in optimiser steps (``TrainBatches``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import cv2
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from simplepose.config.schema import Config, DataConfig
from simplepose.data.batching import collate, worker_init_fn
from simplepose.engine.loader_workers import ended_with
from simplepose.engine.sampler import EpochSampler, groups_of


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
            batches = super().__iter__()  # forks the workers (non-persistent ones: at every epoch)
        finally:
            cv2.setNumThreads(threads)
        return ended_with(batches)  # its workers end with the iteration (engine/loader_workers.py)


def make_loader(dataset: Dataset, sampler: Sampler, batch_size: int, cfg: DataConfig, device: torch.device):
    """Batches of ``dataset`` in ``sampler``'s order (``data.batching.collate``); a stuck worker raises after
    ``cfg.loader_timeout`` seconds (engine.batch_errors turns that into a message naming the batch)."""
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


class TrainBatches:
    """This process's training batches, epoch by epoch: each item is one optimiser step, a list of
    ``train.accumulate_steps`` micro-batches of ``train.batch_size`` samples (engine/sampler.py decides which).

    ``steps_per_epoch``: optimiser steps per epoch (at most ``train.max_steps_per_epoch`` when set)."""

    def __init__(self, dataset: Any, cfg: Config, rank: int, world_size: int, device: torch.device) -> None:
        t = cfg.train
        self.dataset, self.data_cfg, self.device = dataset, cfg.data, device
        self.batch_size, self.accumulate_steps = t.batch_size, t.accumulate_steps
        # the sampler's batch is one optimiser step: accumulate_steps micro-batches of batch_size
        weights = dataset.sample_weights() if hasattr(dataset, "sample_weights") else None  # several sources
        step_size = t.batch_size * t.accumulate_steps
        self.sampler = EpochSampler(len(dataset), t.seed, True, rank, world_size, step_size, weights)
        self.steps_per_epoch = self.sampler.batches_per_epoch()
        if t.max_steps_per_epoch > 0:
            self.steps_per_epoch = min(self.steps_per_epoch, t.max_steps_per_epoch)

    def epoch(self, epoch: int, start_step: int = 0) -> Iterator[list[dict]]:
        """The optimiser steps of ``epoch`` from ``start_step`` on (a resumed run continues mid-epoch)."""
        self.sampler.set_epoch(epoch, start_step)
        if hasattr(self.dataset, "set_epoch"):  # any map-style dataset of sample dicts trains; ours reseeds
            self.dataset.set_epoch(epoch)
        loader = make_loader(self.dataset, self.sampler, self.batch_size, self.data_cfg, self.device)
        for step, micro_batches in enumerate(groups_of(loader, self.accumulate_steps), start_step):
            if step >= self.steps_per_epoch:
                break
            yield micro_batches

    def describe(self, epoch: int, step: int) -> str:
        """``samples [..], image ids [..]`` of this process's batch ``step`` of ``epoch``, for messages."""
        samples = self.sampler.batch_at(epoch, step)
        ds = self.dataset
        if callable(getattr(ds, "image_id", None)):  # several sources
            return f"samples {samples}, image ids {[ds.image_id(i) for i in samples]}"
        if not hasattr(ds, "image_id"):
            return f"samples {samples}"
        return f"samples {samples}, image ids {[int(ds.image_id[ds.sample_image[i]]) for i in samples]}"
