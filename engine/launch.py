"""How a run places the model on devices. The three launchers differ only here; the loop is engine.trainer.

Every launcher is a ``Launcher``: the device, this process's rank and the world size, how the model is wrapped and
how a batch's loss is computed through the wrapped model.

- ``SingleDevice``: the model on one device, the loss beside it (train.py).
- ``DataParallelBalanced``: nn.DataParallel over a module that runs the model AND the loss in each replica, so
  only per-replica loss sums reach the first GPU, never the multi-scale outputs (train_parallel.py).
- ``Distributed``: DistributedDataParallel, one process per device, SyncBN on CUDA (train_distributed.py); under
  torchrun also with a single process, so one GPU runs the same code as many.
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import torch
from torch import nn

from simplepose.engine.statistics_backup import running_statistics
from simplepose.utils import distributed as du
from simplepose.utils.torch_compat import buffers_left_alone

log = logging.getLogger(__name__)


class ModelWithLoss(nn.Module):
    """Model + loss in one module; returns the loss summed over the samples it saw, and its breakdown sums.

    The model is ``.module`` (as in DataParallel / DDP), so ``models.weights.unwrap`` peels this wrapper too.
    """

    def __init__(self, model: nn.Module, loss: nn.Module) -> None:
        super().__init__()
        self.module, self.loss = model, loss

    def forward(self, images, targets, masks, labelled=None):
        total, breakdown = self.loss(self.module(images), targets, masks, labelled, reduction="sum")
        # A leading replica axis, so DataParallel's gather stacks replicas instead of mixing their entries.
        return total.unsqueeze(0), {k: v.unsqueeze(0) for k, v in breakdown.items()}


@dataclass
class Launcher:
    """Base of the launchers: the model as it is, its loss beside it."""

    device: torch.device
    rank: int = 0
    world_size: int = 1
    name: str = "launcher"

    def wrap(self, model: nn.Module, loss: nn.Module) -> nn.Module:
        return model

    def forward_loss(self, wrapped: nn.Module, loss: nn.Module, images, targets, masks, labelled=None):
        """(total loss, breakdown) of a batch, averaged over its samples (``labelled``: the loss's)."""
        return loss(wrapped(images), targets, masks, labelled)

    def no_sync(self, wrapped: nn.Module) -> AbstractContextManager:
        """Context for a backward pass whose gradients are not yet to be synchronised (accumulation)."""
        return nullcontext()

    def sync_statistics(self, wrapped: nn.Module) -> None:
        """After each optimiser step: make every process's BatchNorm statistics the same (one process: nothing)."""


@dataclass
class SingleDevice(Launcher):
    """One process, one device (train.py)."""

    name: str = "single"


def sync_batchnorm(model: nn.Module) -> nn.Module:
    """Every BatchNorm of ``model`` becomes a SyncBatchNorm (statistics over the whole global batch).

    Parameters and buffers are shared, not copied, and the state_dict keys stay the same, so checkpoints
    move freely between SyncBN and plain-BN runs."""
    return nn.SyncBatchNorm.convert_sync_batchnorm(model)


@dataclass
class Distributed(Launcher):
    """DistributedDataParallel over the process group; without one (not under torchrun) the bare model."""

    sync_bn: bool = True
    find_unused_parameters: bool = False
    # the same parameters get gradients in the same order every step (no unused parameters, no accumulation's
    # no_sync steps): DDP may then plan its buckets once
    static_graph: bool = False
    name: str = "distributed"
    average_statistics: bool = False  # set by wrap: plain BatchNorm in several processes (sync_statistics)

    def wrap(self, model: nn.Module, loss: nn.Module) -> nn.Module:
        if not torch.distributed.is_initialized():
            return model
        synced = self.sync_bn and self.device.type == "cuda"
        self.average_statistics = not synced and self.world_size > 1
        if synced:
            model = sync_batchnorm(model)
        elif self.rank == 0:
            why = "SyncBatchNorm needs CUDA; on the CPU" if self.sync_bn else "dist.sync_bn=false:"
            averaged = ", their running statistics averaged after every optimiser step" * self.average_statistics
            log.info(f"note: {why} each process keeps plain BatchNorm{averaged}")
        ids = [self.device.index] if self.device.type == "cuda" else None
        # gradients live in DDP's buckets (no copy into and out of them at each all-reduce). Buffers are not
        # broadcast before each forward pass: DDP makes them rank 0's once, when it wraps the model, and they stay the
        # same on every rank by themselves: SyncBatchNorm's statistics are those of the whole batch, plain BatchNorm's
        # are averaged after each step (sync_statistics), the batch counts advance alike. One mechanism, one
        # collective a step fewer (bench/ddp_comm.py, docs/benchmarks.md#ddp-communication)
        return nn.parallel.DistributedDataParallel(
            model,
            device_ids=ids,
            **buffers_left_alone(),
            find_unused_parameters=self.find_unused_parameters,
            gradient_as_bucket_view=True,
            static_graph=self.static_graph and not self.find_unused_parameters,
        )

    def no_sync(self, wrapped: nn.Module) -> AbstractContextManager:
        return wrapped.no_sync() if isinstance(wrapped, nn.parallel.DistributedDataParallel) else nullcontext()

    def sync_statistics(self, wrapped: nn.Module) -> None:
        """Plain BatchNorm under DDP (the CPU, or dist.sync_bn=false): each process's running mean and variance
        followed its own batches; they become their mean over the processes (one all-reduce), so that every
        process holds the same network, its weight average included, and validates with the same statistics.
        BatchNorms in eval mode (train.bn_eval) keep theirs."""
        if not self.average_statistics:
            return
        du.average_(running_statistics(wrapped, training_only=True))


@dataclass
class DataParallelBalanced(Launcher):
    device_ids: list[int] | None = None
    name: str = "data_parallel"

    def wrap(self, model: nn.Module, loss: nn.Module) -> nn.Module:
        module = ModelWithLoss(model, loss)
        if self.device.type != "cuda":
            return module
        return nn.DataParallel(module, device_ids=self.device_ids or None)

    def forward_loss(self, wrapped: nn.Module, loss: nn.Module, images, targets, masks, labelled=None):
        total, breakdown = wrapped(images, targets, masks, labelled)
        n = images.shape[0]  # the global batch: replica sums over it give the per-sample mean
        return total.sum(0) / n, {k: v.sum(0) / n for k, v in breakdown.items()}
