"""Two processes (gloo, CPU) train a small BatchNorm network under DDP without SyncBN, each on batches of its own,
with a weight average; each saves what it held, for tests/test_distributed.py to compare.

    torch.multiprocessing.start_processes(run_rank, args=(2, str(out_dir), 2), nprocs=2, start_method="fork")

Each step is ``micro_batches`` forward and backward passes (gradient accumulation: DDP's no_sync for all but the
last). Per rank, ``out_dir/rank{r}.pt``: ``before`` (its BatchNorm running statistics after its last forward pass,
before they were averaged), ``own`` (what its statistics become when its step's micro-batches alone update the
statistics the step started from, in a copy of the network), ``model`` and ``average`` (the state dicts after the
last step), ``in_sync_before`` / ``in_sync_after`` (the checkpointer's rank check at those two moments).
"""

from __future__ import annotations

import contextlib
import copy
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

from simplepose.engine.checkpointer import ranks_in_sync
from simplepose.engine.ema import WeightAverage
from simplepose.engine.launch import Distributed
from simplepose.engine.statistics_backup import running_statistics
from simplepose.models.weights import unwrap

STEPS = 3


def small_net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(2, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Conv2d(4, 1, 1))


def run_rank(rank: int, world_size: int, out_dir: str, micro_batches: int = 1) -> None:
    torch.set_num_threads(1)
    store = dist.FileStore(str(Path(out_dir) / "store"), world_size)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world_size)
    try:
        launcher = Distributed(torch.device("cpu"), rank, world_size, sync_bn=True)  # no CUDA: plain BatchNorm
        model = launcher.wrap(small_net(), nn.Identity())
        ema = WeightAverage(model, decay=0.5, warmup_steps=1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        data = torch.Generator().manual_seed(100 + rank)  # each rank's own batches, of different statistics
        for _ in range(STEPS):
            batches = [torch.randn(3, 2, 8, 8, generator=data) * (1 + rank) + 2 * rank for _ in range(micro_batches)]
            replay = copy.deepcopy(unwrap(model))
            with torch.no_grad():
                for images in batches:
                    replay(images)
            own = [t.clone() for t in running_statistics(replay, training_only=True)]
            optimizer.zero_grad()
            for i, images in enumerate(batches):
                with launcher.no_sync(model) if i < micro_batches - 1 else contextlib.nullcontext():
                    (model(images).square().mean() / micro_batches).backward()
            optimizer.step()
            before = [t.clone() for t in running_statistics(model, training_only=True)]
            in_sync_before = ranks_in_sync(unwrap(model))
            launcher.sync_statistics(model)
            ema.update(model, torch.tensor(True))
        record = {
            "before": before,
            "own": own,
            "model": unwrap(model).state_dict(),
            "average": ema.module.state_dict(),
            "in_sync_before": in_sync_before,
            "in_sync_after": ranks_in_sync(unwrap(model)) and ranks_in_sync(ema.module),
        }
        torch.save(record, Path(out_dir) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()
