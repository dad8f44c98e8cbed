"""CPU speed of the network: forward and forward+backward milliseconds per iteration (median).

    python -m bench.model                                   # everything (slow: the paper preset at 512)
    python -m bench.model --sizes 256 --presets paper --dtypes fp32 --channels-last off

Reference: the original PoseNet takes 3.75 s per forward+backward at 256 input, batch 2, float32 on a
2-core CPU. Figures are printed, never asserted; other processes on the machine make them noisy.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time

import torch

from config.loader import load_config
from models import MultiTaskLoss, build_model
from models.posenet import output_shapes
from utils.errors import cli_main

PRESETS = {"paper": "config/simplepose_coco.yaml", "quickstart": "config/quickstart.yaml"}


def _median_ms(fn, warmup: int, iters: int) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def bench_case(preset: str, size: int, dtype: str, channels_last: bool, batch: int, warmup: int, iters: int):
    cfg = load_config(PRESETS[preset], [f"data.input_size={size}"])
    model = build_model(cfg).train()
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    model = model.to(memory_format=fmt)
    image = torch.rand(batch, 3, size, size).contiguous(memory_format=fmt)
    shapes = output_shapes(cfg.model, batch, size, size)
    targets = [torch.rand(s) for s in shapes]
    masks = [torch.ones(s[0], 1, *s[2:]) for s in shapes]
    loss_fn = MultiTaskLoss(cfg.loss)

    def autocast():
        if dtype == "bf16":
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def forward():
        with torch.no_grad(), autocast():
            model(image)

    def forward_backward():
        with autocast():
            total, _ = loss_fn(model(image), targets, masks)
        total.backward()
        model.zero_grad(set_to_none=True)

    return _median_ms(forward, warmup, iters), _median_ms(forward_backward, warmup, iters)


@cli_main
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.model", description=__doc__.split("\n")[0])
    p.add_argument("--presets", nargs="+", default=list(PRESETS), choices=list(PRESETS))
    p.add_argument("--sizes", nargs="+", type=int, default=[256, 512])
    p.add_argument("--dtypes", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"])
    p.add_argument("--channels-last", nargs="+", default=["off", "on"], choices=["off", "on"])
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: PyTorch's default)")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, batch {args.batch}, "
          f"median of {args.iters} after {args.warmup} warm-up")  # fmt: skip
    print(f"{'preset':<11}{'size':>5} {'dtype':<6}{'ch_last':<8}{'fwd ms':>10}{'fwd+bwd ms':>12}")
    for preset in args.presets:
        for size in args.sizes:
            for dtype in args.dtypes:
                for cl in args.channels_last:
                    fwd, fb = bench_case(preset, size, dtype, cl == "on", args.batch, args.warmup, args.iters)
                    print(f"{preset:<11}{size:>5} {dtype:<6}{cl:<8}{fwd:>10.1f}{fb:>12.1f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
