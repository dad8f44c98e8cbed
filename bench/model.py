"""CPU speed of the network: forward and forward+backward milliseconds per iteration (median).

    python -m bench.model                                   # everything (slow: the paper preset at 512)
    python -m bench.model --sizes 256 --presets paper --dtypes fp32 --channels-last off
    python -m bench.model --versus-original                 # A/B against the original's way of running it

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
from models import build_model
from models.loss import build_loss
from models.posenet import PoseNet, output_shapes
from utils.errors import cli_main

PRESETS = {"paper": "config/simplepose_coco.yaml", "quickstart": "config/quickstart.yaml"}


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


def loss_inputs(cfg, batch: int, size: int):
    """Random targets, all-ones masks and the config's loss, for timing a training step."""
    shapes = output_shapes(cfg.model, batch, size, size)
    targets = [torch.rand(s) for s in shapes]
    masks = [torch.ones(s[0], 1, *s[2:]) for s in shapes]
    return targets, masks, build_loss(cfg)


def bench_case(preset: str, size: int, dtype: str, channels_last: bool, batch: int, warmup: int, iters: int):
    cfg = load_config(PRESETS[preset], [f"data.input_size={size}"])
    model = build_model(cfg).train()
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    model = model.to(memory_format=fmt)
    image = torch.rand(batch, 3, size, size).contiguous(memory_format=fmt)
    targets, masks, loss_fn = loss_inputs(cfg, batch, size)

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

    return median_ms(forward, warmup, iters), median_ms(forward_backward, warmup, iters)


class OriginalWay(PoseNet):
    """Our network run the way the original ran it (spec 8.2, 8.5): the input arrives NHWC and is permuted to
    NCHW inside (so activations are channels_last in memory), and each stack's scale-0 merge is computed twice
    (once for the next stack's input, once for its cache). Same parameters, same kernels."""

    def forward(self, image_nhwc: torch.Tensor) -> list[list[torch.Tensor]]:
        return super().forward(image_nhwc.permute(0, 3, 1, 2))

    def next_stack_input(self, x: torch.Tensor, t: int, pairs, cache: list[torch.Tensor]) -> torch.Tensor:
        return x + self.merges[t][0](*pairs[0])


def versus_original(size: int, batch: int, rounds: int) -> None:
    """Interleave forward+backward of ours (NCHW, merge once) and the original's way, same weights, float32;
    alternating cancels the drift of a shared machine."""
    cfg = load_config(PRESETS["paper"], [f"data.input_size={size}"])
    ours = build_model(cfg).train()
    original = OriginalWay(cfg.model).train()
    original.load_state_dict(ours.state_dict())
    targets, masks, loss_fn = loss_inputs(cfg, batch, size)
    image = torch.rand(batch, 3, size, size)
    image_nhwc = image.permute(0, 2, 3, 1).contiguous()
    ours_cl = build_model(cfg).train().to(memory_format=torch.channels_last)
    ours_cl.load_state_dict(ours.state_dict())
    image_cl = image.contiguous(memory_format=torch.channels_last)

    def step(model, x) -> float:
        t0 = time.perf_counter()
        total, _ = loss_fn(model(x), targets, masks)
        total.backward()
        model.zero_grad(set_to_none=True)
        return time.perf_counter() - t0

    cases = {"ours": (ours, image), "ours channels_last": (ours_cl, image_cl), "original way": (original, image_nhwc)}
    times: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(rounds + 1):  # the first round warms up
        for name, (model, x) in cases.items():
            times[name].append(step(model, x))
    a, c, b = (statistics.median(times[k][1:]) for k in ("ours", "ours channels_last", "original way"))
    print(f"paper preset, {size} input, batch {batch}, float32, forward+backward, {rounds} alternating rounds")
    print(f"  ours (NCHW, scale-0 merge once):             {a * 1000:8.1f} ms")
    print(f"  ours, channels_last (train.channels_last):   {c * 1000:8.1f} ms")
    print(f"  the original's way (NHWC input, merge twice): {b * 1000:8.1f} ms")
    print(f"  ours / original's way: {a / b:.3f}; channels_last / original's way: {c / b:.3f}")
    print("  (the original's published figure on this kind of machine: 3750 ms)")


@cli_main
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.model", description=__doc__.split("\n")[0])
    p.add_argument("--presets", nargs="+", default=list(PRESETS), choices=list(PRESETS))
    p.add_argument("--versus-original", action="store_true", help="A/B against the original's way (paper, 256)")
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
    if args.versus_original:
        versus_original(256, args.batch, max(args.iters, 5))
        return 0
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
