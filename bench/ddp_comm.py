"""Collectives and bytes a DDP training step sends, in 2 CPU processes (gloo).

    python -m bench.ddp_comm [--preset config/quickstart.yaml] [--steps 3]

Each process wraps the preset's network as the trainer does (``engine.launch.Distributed``: plain BatchNorm on the
CPU, its statistics averaged after each step) and runs the trainer's step: forward and loss, backward (DDP's gradient
all-reduce), the ranks' agreement on a finite step, the optimiser step and ``sync_statistics``. torch's profiler
counts every collective the process group runs (``c10d::*`` operations, DDP's own included) over steps after DDP
has rebuilt its buckets (its second step). The bytes each sends are those of what it carries, counted from the model:
the gradients (DDP's buckets), the finite-step flag (int32), the BatchNorm running statistics (``sync_statistics``)
and, where DDP broadcasts buffers, every buffer (the profiler does not record a tensor list's shapes). Printed per
step, for the library's wrapping and for DDP's default ``broadcast_buffers=True`` (rank 0's buffers broadcast before
each forward pass: the former wrapping).
"""

from __future__ import annotations

import argparse
import os
import socket
from collections import Counter
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.profiler import ProfilerActivity, profile

from simplepose.config.config_file import load_config
from simplepose.config.skeleton_file import skeleton_of
from simplepose.engine.launch import Distributed
from simplepose.engine.optim import build_optimizer
from simplepose.engine.statistics_backup import running_statistics
from simplepose.models import build_model
from simplepose.models.loss import build_loss
from simplepose.models.posenet import output_shapes
from simplepose.utils import distributed as du
from simplepose.utils.torch_compat import buffers_left_alone, total_norm

ROOT = Path(__file__).resolve().parent.parent


def wrapped_model(cfg, rank: int, broadcast_buffers: bool) -> tuple[nn.Module, Distributed]:
    launcher = Distributed(torch.device("cpu"), rank, 2, sync_bn=True)
    torch.manual_seed(0)
    model = launcher.wrap(build_model(cfg).train(), nn.Identity())
    if broadcast_buffers:  # the former wrapping: DDP's default on top of the per-step average
        again = {key: True for key in buffers_left_alone()}  # broadcast_buffers (forward_sync_buffers) = True
        model = nn.parallel.DistributedDataParallel(model.module, gradient_as_bucket_view=True, **again)
    return model, launcher


def step_collectives(cfg, rank: int, steps: int, broadcast_buffers: bool) -> tuple[Counter, dict[str, int]]:
    """(count of each collective per step, bytes per step of what they carry) over ``steps`` profiled steps."""
    model, launcher = wrapped_model(cfg, rank, broadcast_buffers)
    loss_fn = build_loss(cfg)
    optimizer = build_optimizer(list(model.parameters()), cfg.train)
    size, batch = cfg.data.input_size, 2
    torch.manual_seed(rank)
    images = torch.rand(batch, 3, size, size)
    shapes = output_shapes(cfg.model, batch, size, size, skeleton_of(cfg))
    targets = [torch.rand(s) for s in shapes]
    masks = [torch.ones(s[0], 1, *s[2:]) for s in shapes]

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        total, _ = launcher.forward_loss(model, loss_fn, images, targets, masks)
        total.backward()
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        du.all_ranks(torch.isfinite(total) & torch.isfinite(total_norm(grads)))
        optimizer.step()
        launcher.sync_statistics(model)

    for _ in range(2):  # DDP rebuilds its buckets at the second step (a broadcast of their order, once)
        step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    count = Counter(e.name for e in prof.events() if e.name.startswith("c10d::"))
    count = Counter({k: v // steps for k, v in count.items()})
    carried = {
        "gradients (DDP all-reduce)": sum(nbytes(p) for p in model.parameters() if p.requires_grad),
        "finite-step flag (all-reduce)": 4,
        "BatchNorm statistics (all-reduce)": sum(nbytes(t) for t in running_statistics(model, training_only=True))
        * launcher.average_statistics,
        "every buffer (DDP broadcast)": sum(nbytes(b) for b in model.buffers()) * broadcast_buffers,
    }
    return count, carried


def nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def run_rank(rank: int, preset: str, steps: int, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        cfg = load_config(preset, ["train.optimizer=sgd"])
        for label, broadcast in (("broadcast_buffers=True (before)", True), ("the library's (after)", False)):
            count, carried = step_collectives(cfg, rank, steps, broadcast)
            if rank == 0:
                calls = ", ".join(f"{count[k]} {k.removeprefix('c10d::').rstrip('_')}" for k in sorted(count))
                print(f"{label}: {sum(count.values())} collectives a step ({calls}), "
                      f"{sum(carried.values()) / 1e6:.3f} MB sent by each process")  # fmt: skip
                for what, n in carried.items():
                    if n:
                        print(f"    {what:<36} {n / 1e6:.3f} MB")
    finally:
        dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default=str(ROOT / "config" / "quickstart.yaml"))
    p.add_argument("--steps", type=int, default=3)
    args = p.parse_args(argv)
    print(
        f"torch {torch.__version__}, 2 processes (gloo, CPU), {Path(args.preset).name}, batch 2 a process", flush=True
    )
    torch.multiprocessing.spawn(run_rank, args=(args.preset, args.steps, free_port()), nprocs=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
