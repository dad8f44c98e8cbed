"""Numerical SyncBN check on GPUs: N processes x batch b with SyncBatchNorm must equal 1 GPU x batch N*b with plain
BatchNorm (outputs, BatchNorm running statistics, gradients). Needs CUDA and >= 2 GPUs; run from the repo root:

    torchrun --nproc_per_node=2 -m bench.syncbn_check            # config/tiny.yaml's PoseNet, global batch 8 at 64 x 64
    torchrun --nproc_per_node=4 -m bench.syncbn_check --config config/simplepose_coco.yaml --per-process-batch 2

It converts the model exactly as train_distributed.py does (engine.launch.sync_batchnorm, then DDP). Every rank
also runs the reference on the whole batch, compares its own slice, and rank 0 prints the largest relative
differences. Exit status 0 when all are below 1e-4 (TF32 is turned off), 1 otherwise.
"""

from __future__ import annotations

import argparse
import copy

import torch
import torch.distributed as dist
from torch import nn

from simplepose.config.config_file import add_config_arguments, config_from_args
from simplepose.engine.launch import sync_batchnorm
from simplepose.utils import distributed as du
from simplepose.utils.errors import UserError, cli_main
from tests.paths import TINY_PRESET

TOLERANCE = 1e-4


def relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-12)).item()


def output_loss(outputs: list[list[torch.Tensor]]) -> torch.Tensor:
    """Mean over the batch of a smooth function of every output map."""
    return sum(o.float().square().mean(dim=(1, 2, 3)).mean() for stack in outputs for o in stack)


@cli_main
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-process-batch", type=int, default=4)
    add_config_arguments(parser, default=str(TINY_PRESET))
    args = parser.parse_args(argv)
    if not torch.cuda.is_available() or du.env_world_size() < 2:
        raise UserError(
            "the SyncBN check needs CUDA and >= 2 processes: torchrun --nproc_per_node=2 -m bench.syncbn_check"
        )
    cfg = config_from_args(args)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = du.select_device("cuda")
    du.init_distributed(device, "nccl")
    rank, world, b = du.get_rank(), du.get_world_size(), args.per_process_batch

    from simplepose.models import build_model

    torch.manual_seed(0)
    reference = build_model(cfg).to(device).train()
    model = nn.parallel.DistributedDataParallel(sync_batchnorm(copy.deepcopy(reference)), device_ids=[device.index])
    size = cfg.data.input_size
    images = torch.randn(world * b, 3, size, size, generator=torch.Generator().manual_seed(1)).to(device) * 2 + 0.5

    ref_outputs = reference(images)
    output_loss(ref_outputs).backward()
    outputs = model(images[rank * b : (rank + 1) * b])
    output_loss(outputs).backward()  # DDP averages the per-rank means: the mean over the global batch

    errors = {"outputs": 0.0, "running stats": 0.0, "gradients": 0.0}
    for mine, ref in zip((o for s in outputs for o in s), (o for s in ref_outputs for o in s)):
        errors["outputs"] = max(errors["outputs"], relative_error(mine, ref[rank * b : (rank + 1) * b]))
    ref_bn = [m for m in reference.modules() if isinstance(m, nn.BatchNorm2d)]
    sync_bn = [m for m in model.module.modules() if isinstance(m, nn.SyncBatchNorm)]
    if len(ref_bn) != len(sync_bn) or not sync_bn:
        raise UserError(f"{len(sync_bn)} SyncBatchNorm layers for {len(ref_bn)} BatchNorm layers")
    for mine, ref in zip(sync_bn, ref_bn):
        for name in ("running_mean", "running_var"):
            errors["running stats"] = max(
                errors["running stats"], relative_error(getattr(mine, name), getattr(ref, name))
            )
    for mine, ref in zip(model.module.parameters(), reference.parameters()):
        errors["gradients"] = max(errors["gradients"], relative_error(mine.grad, ref.grad))

    worst = torch.tensor(list(errors.values()), device=device, dtype=torch.float64)
    dist.all_reduce(worst, op=dist.ReduceOp.MAX)
    ok = bool((worst < TOLERANCE).all())
    if rank == 0:
        print(f"SyncBN, {world} GPUs x batch {b} vs 1 GPU x batch {world * b} with BatchNorm ({len(sync_bn)} layers):")
        for name, value in zip(errors, worst.tolist()):
            print(f"  max relative difference of {name}: {value:.2e}")
        print("PASS" if ok else f"FAIL (tolerance {TOLERANCE:g})")
    du.cleanup()
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
