"""CPU speed of the network (forward and forward+backward milliseconds per iteration, median), and the peak GPU
memory of a training step with and without ``model.checkpoint_activations``.

    python -m bench.model                                   # everything (slow: the paper preset at 512)
    python -m bench.model --sizes 256 --presets paper --dtypes fp32 --channels-last off
    python -m bench.model --versus-original                 # A/B against the original's way of running it
    python -m bench.model --memory                          # CUDA: each preset at its input size, batch 1..16
    python -m bench.model --memory --device cpu --presets quickstart --batches 1   # the steps run, unmeasured

Reference figures of the original's network and ours: docs/benchmarks.md#network-on-the-cpu. Figures are printed,
never asserted; other processes on the machine make them noisy.
"""

from __future__ import annotations

import argparse
import gc
import math
import statistics
import time
from collections.abc import Callable

import torch

from bench.timing import median_ms
from simplepose.config.config_file import load_config
from simplepose.config.skeleton_file import skeleton_of
from simplepose.engine.optim import build_optimizer
from simplepose.engine.process_setup import seed_everything
from simplepose.models import build_model
from simplepose.models.loss import build_loss
from simplepose.models.posenet import PoseNet, output_shapes
from simplepose.utils.errors import UserError, cli_main
from simplepose.utils.precision import Precision, precision_for
from simplepose.utils.torch_compat import grad_scaler

PRESETS = {"paper": "config/simplepose_coco.yaml", "quickstart": "config/quickstart.yaml"}
DTYPE_SETTINGS = {"fp32": "off", "bf16": "bf16", "fp16": "fp16", "amp": "auto"}  # --dtypes -> train.amp
MEMORY_BATCHES = [1, 2, 4, 8, 16]
GiB = 2**30


def preset_config(preset: str, size: int, *overrides: str):
    """The preset's config at input ``size`` (``None``: the preset's own) with ``key=value`` overrides."""
    return load_config(PRESETS[preset], [*([f"data.input_size={size}"] if size else []), *overrides])


def loss_inputs(cfg, batch: int, size: int, device: torch.device | str = "cpu"):
    """Random targets, all-ones masks and the config's loss on ``device``, for timing a training step."""
    shapes = output_shapes(cfg.model, batch, size, size, skeleton_of(cfg))
    targets = [torch.rand(s, device=device) for s in shapes]
    masks = [torch.ones(s[0], 1, *s[2:], device=device) for s in shapes]
    return targets, masks, build_loss(cfg).to(device)


def model_and_image(cfg, batch: int, size: int, channels_last: bool, device: torch.device | str = "cpu"):
    """A freshly built model in training mode and a random (batch, 3, size, size) image, both on ``device`` and
    in channels_last memory when asked."""
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    with torch.device(device):  # initialised in place: the paper preset's 129 M parameters in milliseconds on a GPU
        model = build_model(cfg).train().to(memory_format=fmt)
    return model, torch.rand(batch, 3, size, size, device=device).contiguous(memory_format=fmt)


def bench_case(preset: str, size: int, dtype: str, channels_last: bool, batch: int, warmup: int, iters: int):
    cfg = preset_config(preset, size)
    model, image = model_and_image(cfg, batch, size, channels_last)
    targets, masks, loss_fn = loss_inputs(cfg, batch, size)
    cpu = torch.device("cpu")
    precision = precision_for(DTYPE_SETTINGS[dtype], cpu, "--dtypes")

    def forward():
        with torch.no_grad(), precision.autocast(cpu):
            model(image)

    def forward_backward():
        with precision.autocast(cpu):
            total, _ = loss_fn(model(image), targets, masks)
        total.backward()
        model.zero_grad(set_to_none=True)

    return median_ms(forward, warmup, iters), median_ms(forward_backward, warmup, iters)


def training_step(cfg, device: torch.device, precision: Precision, batch: int) -> Callable[[], None]:
    """One training step on random data as ``engine.trainer.Trainer.train_step`` runs it without accumulation
    (``zero_grad``; forward and loss under autocast; scaled backward; unscale, gradient norm, optimiser step), with
    the preset's optimiser and memory format. Returns the step; it waits for the device, so it can be timed."""
    size = cfg.data.input_size
    model, image = model_and_image(cfg, batch, size, cfg.train.channels_last, device)
    targets, masks, loss_fn = loss_inputs(cfg, batch, size, device)
    params = list(model.parameters())
    optimizer = build_optimizer(params, cfg.train)
    scaler = grad_scaler(device.type, precision.grad_scaler)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with precision.autocast(device):
            total, _ = loss_fn(model(image), targets, masks)
        scaler.scale(total).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(params, cfg.train.clip_grad_norm or math.inf)
        scaler.step(optimizer)
        scaler.update()
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    step.scaler = scaler  # callers check whether a timed fp16 step overflowed (the scale dropped)
    return step


def memory_case(cfg, device: torch.device, precision: Precision, batch: int, warmup: int, iters: int):
    """(peak bytes allocated during ``iters`` training steps after ``warmup`` ones, bytes still allocated after
    them, median ms per step); the byte counts are None off CUDA (PyTorch keeps no such statistics there)."""
    step = training_step(cfg, device, precision, batch)
    for _ in range(warmup):
        step()
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    ms = median_ms(step, 0, iters)
    if not cuda:
        return None, None, ms
    return torch.cuda.max_memory_allocated(device), torch.cuda.memory_allocated(device), ms


def try_memory_case(*args) -> tuple | str:
    """``memory_case(*args)``, or "OOM" when the device ran out of memory, or "error: ..." for any other failure
    (one case must not end a one-shot run on a borrowed GPU); the memory of a failed case is given back."""
    try:
        return memory_case(*args)
    except Exception as e:  # torch.cuda.OutOfMemoryError, and cuDNN's out-of-memory as a plain RuntimeError
        text = str(e)
        out_of_memory = isinstance(e, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text)
        outcome = "OOM" if out_of_memory else f"error: {type(e).__name__}: {text.splitlines()[0][:200] if text else ''}"
    gc.collect()  # the failed case's tensors are freed with its frames, once the exception is gone
    if torch.cuda.is_initialized():
        torch.cuda.empty_cache()
    return outcome


def memory_device(name: str) -> torch.device | None:
    """The device of ``--device`` (auto: the GPU when there is one, else None: nothing to measure)."""
    if name == "auto":
        return torch.device("cuda") if torch.cuda.is_available() else None
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"--device {name}: no CUDA device is visible here (use --device cpu or auto)")
    return device


def memory_table(presets, sizes, dtypes, batches, device: torch.device, warmup: int, iters: int) -> int:
    """Print the peak memory of a training step per preset, input size (None: the preset's), precision and batch
    size, plain and with ``model.checkpoint_activations``. Returns 1 when a case failed other than by running out of
    memory, else 0."""
    if device.type == "cuda":
        print(f"peak = torch.cuda.max_memory_allocated over {iters} training step(s) after {warmup} warm-up, on "
              f"{torch.cuda.get_device_name(device)}; held = allocated between steps (weights, gradients, "
              f"optimiser state)")  # fmt: skip
    else:
        print(f"memory is not measured on the {device.type} (PyTorch keeps no peak statistics there): the steps run "
              "to prove the code path, their times are printed")  # fmt: skip
    print(f"{'preset':<11}{'size':>5} {'dtype':<8}{'batch':>5}{'held GiB':>10}{'peak GiB':>10}{'ckpt GiB':>10}"
          f"{'saved':>7}{'step ms':>10}{'ckpt ms':>10}")  # fmt: skip
    failed = False
    for preset in presets:
        for size in sizes or [None]:
            for dtype in dtypes:
                failed |= memory_series(preset, size, dtype, batches, device, warmup, iters)
    return int(failed)


def memory_series(preset: str, size: int | None, dtype: str, batches, device, warmup: int, iters: int) -> bool:
    """The rows of one preset, input size and precision: per batch size, plain and checkpointed side by side; a
    setting stops at its first batch size that runs out of memory. True when a case failed otherwise."""
    precision = precision_for(DTYPE_SETTINGS[dtype], device, "--dtypes")
    cfgs = {on: preset_config(preset, size, f"model.checkpoint_activations={str(on).lower()}") for on in (False, True)}
    results: dict[bool, tuple | str] = {}
    failed = False
    for batch in batches:
        for on, cfg in cfgs.items():
            if results.get(on) != "OOM":
                seed_everything(cfg.train.seed, cfg.train.deterministic)  # cuDNN autotuning as in training
                results[on] = try_memory_case(cfg, device, precision, batch, warmup, iters)
                failed |= isinstance(results[on], str) and results[on].startswith("error")
        print(memory_row(preset, cfgs[False].data.input_size, precision.name, batch, results[False], results[True]),
              flush=True)  # fmt: skip
        if all(r == "OOM" for r in results.values()):
            break
    return failed


def memory_row(preset: str, size: int, dtype: str, batch: int, plain, ckpt) -> str:
    """One line of the memory table; ``plain`` and ``ckpt`` are ``memory_case`` results or failure strings."""

    def gib(x) -> str:
        return f"{x / GiB:10.2f}" if isinstance(x, int) else f"{'-':>10}"

    row = f"{preset:<11}{size:>5} {dtype:<8}{batch:>5}"
    measured = [r for r in (plain, ckpt) if not isinstance(r, str)]
    row += gib(measured[0][1] if measured else None)
    row += "".join(gib(r[0]) if not isinstance(r, str) else f"{r.split(':')[0]:>10}" for r in (plain, ckpt))
    both = not isinstance(plain, str) and not isinstance(ckpt, str) and plain[0] is not None
    row += f"{1 - ckpt[0] / plain[0]:>7.0%}" if both else f"{'-':>7}"
    row += "".join(f"{r[2]:10.0f}" if not isinstance(r, str) else f"{'-':>10}" for r in (plain, ckpt))
    errors = [r for r in (plain, ckpt) if isinstance(r, str) and r.startswith("error")]
    return row + "".join(f"\n  {e}" for e in errors)


class OriginalWay(PoseNet):
    """Our network run the way the original ran it: the input arrives NHWC and is permuted to NCHW inside (so
    activations are channels_last in memory), and each stack's scale-0 merge is computed twice (once for the next
    stack's input, once for its cache). Same parameters, same kernels."""

    def __init__(self, cfg, skeleton):
        super().__init__(cfg, skeleton)
        self._scale0_merge = None  # (module, (g, y)) of the latest scale-0 merge, recorded by a forward hook
        for merges in self.merges:
            merges[0].register_forward_hook(self._record_scale0_merge)

    def _record_scale0_merge(self, module, inputs, output) -> None:
        self._scale0_merge = (module, inputs)

    def forward(self, image_nhwc: torch.Tensor) -> list[list[torch.Tensor]]:
        return super().forward(image_nhwc.permute(0, 3, 1, 2))

    def next_stack_input(self, x: torch.Tensor, cache: list[torch.Tensor]) -> torch.Tensor:
        merge, inputs = self._scale0_merge
        return x + merge(*inputs)  # the scale-0 merge again, on the inputs that made cache[0]


def versus_original(size: int, batch: int, rounds: int) -> None:
    """Interleave forward+backward of ours (NCHW, merge once) and the original's way, same weights, float32;
    alternating cancels the drift of a shared machine."""
    cfg = preset_config("paper", size)
    ours = build_model(cfg).train()
    original = OriginalWay(cfg.model, skeleton_of(cfg)).train()
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
    p.add_argument("--memory", action="store_true", help="peak CUDA memory of a training step (see the docstring)")
    p.add_argument("--sizes", nargs="+", type=int, help="input sizes (default: 256 512; --memory: the preset's)")
    p.add_argument("--dtypes", nargs="+", choices=list(DTYPE_SETTINGS),
                   help="default: fp32 bf16; --memory: fp32 amp (bf16 or fp16, as train.amp=auto)")  # fmt: skip
    p.add_argument("--channels-last", nargs="+", default=["off", "on"], choices=["off", "on"])
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--batches", nargs="+", type=int, default=MEMORY_BATCHES, help="--memory: batch sizes")
    p.add_argument("--device", default="auto", help="--memory: auto (CUDA if present), cuda, cuda:N or cpu")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--iters", type=int, help="timed iterations (default 3; --memory: 1)")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: PyTorch's default)")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.memory:
        device = memory_device(args.device)
        if device is None:
            print(
                "bench.model --memory measures CUDA memory (torch.cuda.max_memory_allocated): no CUDA device "
                "here, so it does not measure memory on this machine (--device cpu runs the steps unmeasured)"
            )
            return 0
        return memory_table(args.presets, args.sizes, args.dtypes or ["fp32", "amp"], args.batches, device,
                            args.warmup, args.iters or 1)  # fmt: skip
    args.sizes, args.dtypes, args.iters = args.sizes or [256, 512], args.dtypes or ["fp32", "bf16"], args.iters or 3
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
