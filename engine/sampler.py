"""The order in which a run visits the training samples: one sampler for one process and for many.

Each epoch's permutation (or, with sampling weights, its draws) depends only on (seed, epoch), so a resumed run sees
the same order. Under DDP rank r
takes every world_size-th index of that permutation, so the i-th batches of all ranks together are exactly
the i-th batch of a single process whose batch is world_size times larger.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import torch
from torch.utils.data import Sampler


class EpochSampler(Sampler[int]):
    def __init__(
        self,
        size: int,
        seed: int = 0,
        shuffle: bool = True,
        rank: int = 0,
        world_size: int = 1,
        batch_size: int = 1,
        weights: torch.Tensor | None = None,
    ) -> None:
        """Yield the indices of this rank, in whole batches (a trailing partial batch is dropped). ``weights``: (size,)
        drawing weights (several sources, each with its share): each epoch is then ``size`` draws with replacement
        in those proportions instead of a permutation."""
        if weights is not None and (weights.shape != (size,) or not bool((weights >= 0).all()) or weights.sum() <= 0):
            raise ValueError(f"sampler weights must be ({size},), non-negative, not all 0; got {tuple(weights.shape)}")
        self.size, self.seed, self.shuffle, self.weights = size, seed, shuffle, weights
        self.rank, self.world_size, self.batch_size = rank, world_size, batch_size
        self.epoch = 0
        self.skip_batches = 0

    def set_epoch(self, epoch: int, skip_batches: int = 0) -> None:
        """Select the epoch's permutation; ``skip_batches`` resumes mid-epoch after that many batches."""
        self.epoch, self.skip_batches = epoch, skip_batches

    def batches_per_epoch(self) -> int:
        return self.size // (self.world_size * self.batch_size)

    def __len__(self) -> int:
        return (self.batches_per_epoch() - self.skip_batches) * self.batch_size

    def __iter__(self) -> Iterator[int]:
        return iter(self._indices(self.epoch)[self.skip_batches * self.batch_size :])

    def batch_at(self, epoch: int, step: int) -> list[int]:
        """The sample indices of this rank's batch ``step`` of ``epoch`` (without changing the sampler)."""
        return self._indices(epoch)[step * self.batch_size : (step + 1) * self.batch_size]

    def _indices(self, epoch: int) -> list[int]:
        if self.shuffle:
            g = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
            if self.weights is not None:
                order = torch.multinomial(self.weights, self.size, replacement=True, generator=g).tolist()
            else:
                order = torch.randperm(self.size, generator=g).tolist()
        else:
            order = list(range(self.size))
        used = self.batches_per_epoch() * self.world_size * self.batch_size
        return order[:used][self.rank :: self.world_size]


def groups_of(items: Iterable, n: int) -> Iterator[list]:
    """Consecutive lists of ``n`` items (a shorter last one is dropped: it would not make a whole step)."""
    group = []
    for item in items:
        group.append(item)
        if len(group) == n:
            yield group
            group = []
