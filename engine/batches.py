"""The training data of a run: a DataLoader fork-safe with OpenCV and with the data.* settings applied, and the
batches of each epoch in optimiser steps (``TrainBatches``)."""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from functools import partial
from typing import Any

import cv2
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from simplepose.config.schema import Config, DataConfig
from simplepose.data.batching import collate, worker_init_fn
from simplepose.engine.loader_workers import WorkerGroup, ended_with, released_by
from simplepose.engine.sampler import EpochSampler, groups_of


class ForkSafeLoader(DataLoader):
    """A DataLoader whose workers are forked while OpenCV runs single-threaded in this process, and end at once when
    an iteration raises (``engine.loader_workers``; ``end_workers`` ends persistent ones).

    A worker forked while OpenCV's thread pool is alive here (it is after any multi-threaded cv2 call in this
    process: COCO evaluation, or loading with data.num_workers=0) hangs for ever in its first OpenCV call
    (worker_init_fn's cv2.setNumThreads included): the pool's threads do not exist in the child. Seen here as
    a test process that hung for ever at its first batch after having trained with data.num_workers=0."""

    workers: WorkerGroup | None = None  # the workers of the latest iterator (persistent ones: of the first)

    def __iter__(self):
        if self.num_workers == 0:
            return super().__iter__()
        fresh = self.workers is None or not self.persistent_workers  # workers start (persistent: the first time)
        release = None
        if fresh:
            # the workers about to start end when this flag is set (engine/loader_workers.py)
            release = (self.multiprocessing_context or multiprocessing).RawValue("b", 0)
            init = self.worker_init_fn
            init = init.keywords["init"] if isinstance(init, partial) and init.func is released_by else init
            self.worker_init_fn = partial(released_by, release=release, init=init)
        threads = cv2.getNumThreads()
        cv2.setNumThreads(1)
        try:
            batches, started = WorkerGroup.started_by(super().__iter__, release)
        finally:
            cv2.setNumThreads(threads)
        if fresh:
            self.workers = started
        assert self.workers is not None
        return ended_with(batches, self.workers)

    def end_workers(self) -> None:
        """End the workers (persistent ones outlive each iteration): released, SIGKILL for a stuck one."""
        if self.workers is not None:
            self.workers.end()
            self.workers = None


def make_loader(
    dataset: Dataset, sampler: Sampler, batch_size: int, cfg: DataConfig, device: torch.device, persistent: bool = False
) -> ForkSafeLoader:
    """Batches of ``dataset`` in ``sampler``'s order (``data.batching.collate``); a stuck worker raises after
    ``cfg.loader_timeout`` seconds (engine.batch_errors turns that into a message naming the batch). ``persistent``:
    the workers serve every epoch (no fork per epoch; end them with ``end_workers``)."""
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
        persistent_workers=persistent and cfg.num_workers > 0,
    )


def epoch_reaches_workers(dataset: Any) -> bool:
    """Whether workers that already exist see ``dataset.set_epoch`` (``epoch_reaches_workers``, data/dataset.py: the
    epoch in shared memory); true of a dataset without ``set_epoch``. Only then may workers persist across epochs."""
    return getattr(dataset, "epoch_reaches_workers", not hasattr(dataset, "set_epoch"))


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
        # one loader, its workers forked once, for every epoch where the dataset's epoch reaches them
        self.persistent = cfg.data.num_workers > 0 and epoch_reaches_workers(dataset)
        self.last_epoch = t.epochs - 1
        self.loader: ForkSafeLoader | None = None

    def epoch(self, epoch: int, start_step: int = 0) -> Iterator[list[dict]]:
        """The optimiser steps of ``epoch`` from ``start_step`` on (a resumed run continues mid-epoch)."""
        self.sampler.set_epoch(epoch, start_step)
        if hasattr(self.dataset, "set_epoch"):  # any map-style dataset of sample dicts trains; ours reseeds
            self.dataset.set_epoch(epoch)
        loader = self.loader or make_loader(
            self.dataset, self.sampler, self.batch_size, self.data_cfg, self.device, self.persistent
        )
        self.loader = loader if self.persistent else None  # fmt: skip
        finished = False
        try:
            for step, micro_batches in enumerate(groups_of(loader, self.accumulate_steps), start_step):
                if step >= self.steps_per_epoch:
                    break
                yield micro_batches
            finished = True
        finally:
            if not finished or epoch >= self.last_epoch:
                self.close()  # a stop, an error, the last epoch: persistent workers end with it

    def close(self) -> None:
        """End the persistent workers, if any (the next epoch, if one is asked for, forks new ones)."""
        if self.loader is not None:
            self.loader.end_workers()
            self.loader = None

    def describe(self, epoch: int, step: int) -> str:
        """``samples [..], image ids [..]`` of this process's batch ``step`` of ``epoch``, for messages."""
        samples = self.sampler.batch_at(epoch, step)
        ds = self.dataset
        if callable(getattr(ds, "image_id", None)):  # several sources
            return f"samples {samples}, image ids {[ds.image_id(i) for i in samples]}"
        if not hasattr(ds, "image_id"):
            return f"samples {samples}"
        return f"samples {samples}, image ids {[int(ds.image_id[ds.sample_image[i]]) for i in samples]}"
