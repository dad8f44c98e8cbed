"""Images per second of ``PoseEstimator`` on the CPU: float32 / bf16 x NCHW / channels_last x PyTorch / ONNX Runtime,
1 scale + flip and 5 scales + flip, 1 thread and all, the network and the decoding timed apart.

    python -m bench.cpu_inference --model quickstart=runs/quickstart/best.pt:cache/synthetic/images \\
        --model paper=runs/paper/last.pt:../shared/data/coco_sample/images --images 3 --rounds 2
    ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 python -m bench.cpu_inference ... --variants fp32 fp32-cl ort

``--model NAME=CHECKPOINT:IMAGE_FOLDER`` (repeatable): each checkpoint runs with its own run's ``eval`` settings
(input size, thresholds) on the first ``--images`` .jpg files of its folder (sorted); ``--scales 1 5`` takes one
scale (1.0) + flip and the paper's five (0.5 1 1.5 2 3) + flip (``--images-5`` images there: a minute per image for
the paper network). Variants (``--variants``): ``fp32`` (eval.amp=off eval.channels_last=off: the default,
float32 NCHW), ``fp32-cl``, ``bf16``, ``bf16-cl`` (PyTorch, BatchNorm folded as always), ``ort`` (the ONNX export run by
ONNX Runtime's CPU provider, float32; its own graph optimisations and memory layout). For every model, scale set
and thread count the variants run in turns (A B C ... A B C ...) for ``--rounds`` rounds, each on the same images
after an untimed pass over them (steady state: a long run meets few input sizes, as inputs are padded to multiples
of 64); the table gives per variant the median images/s over the rounds (range), network and decoding milliseconds
per image, and the median of the per-round ratios to the first variant (``fp32``). The variant
``eval.amp=auto eval.channels_last=auto`` chooses on this CPU is marked "auto". Figures are printed, never
asserted (docs/benchmarks.md#inference-on-the-cpu).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

import cv2
import torch

from simplepose.config.schema import EvalConfig
from simplepose.evaluate.estimator import PoseEstimator
from simplepose.evaluate.estimator_base import Timing
from simplepose.evaluate.inference.checkpoint_model import load_model
from simplepose.evaluate.inference.inference_setup import choose_setup
from simplepose.evaluate.inference.map_source import MapSource, network_source
from simplepose.evaluate.inference.onnx_export import export_metadata, export_onnx
from simplepose.evaluate.inference.onnx_runner import OnnxSource
from simplepose.evaluate.inference.onnx_session import CPU_PROVIDER, import_onnxruntime
from simplepose.models.fold import fold_batchnorm
from simplepose.utils.errors import UserError, cli_main
from simplepose.utils.precision import probe_capabilities

VARIANTS = {"fp32": ("off", False), "fp32-cl": ("off", True), "bf16": ("bf16", False), "bf16-cl": ("bf16", True),
            "ort": None}  # fmt: skip
SCALE_SETS = {"1": [1.0], "5": [0.5, 1.0, 1.5, 2.0, 3.0]}
CPU = torch.device("cpu")


@dataclass
class Case:
    """The measurements of one variant in one (model, scales, threads) cell."""

    timings: list[Timing] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)  # images/s over fp32's of the same round


def parse_model(text: str) -> tuple[str, Path, Path]:
    name, eq, rest = text.partition("=")
    ckpt, colon, images = rest.rpartition(":")
    if not (eq and colon and name and ckpt and images):
        raise UserError(f"--model {text!r}: give NAME=CHECKPOINT:IMAGE_FOLDER", key="--model")
    return name, Path(ckpt), Path(images)


def read_images(folder: Path, n: int) -> list:
    files = sorted(folder.glob("*.jpg"))[:n]
    if len(files) < n:
        raise UserError(f"{folder}: {len(files)} .jpg files, {n} needed (--images)", file=folder)
    return [cv2.imread(str(f), cv2.IMREAD_COLOR) for f in files]


def torch_source(model: torch.nn.Module, amp: str, channels_last: bool) -> MapSource:
    network = fold_batchnorm(model)
    if channels_last:
        network = network.to(memory_format=torch.channels_last)
    setup = choose_setup(EvalConfig(amp=amp), CPU, probe_capabilities(CPU))
    return network_source(network, setup.precision, channels_last)


def onnx_source(model: torch.nn.Module, cfg, folder: Path, threads: int) -> OnnxSource:
    ort = import_onnxruntime()
    path = folder / "model.onnx"
    if not path.exists():
        size = max(64, cfg.eval.boxsize // 64 * 64)
        export_onnx(model, path, (size, size), metadata=export_metadata(cfg, model.skeleton))
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return OnnxSource(ort.InferenceSession(str(path), options, providers=[CPU_PROVIDER]), skeleton=model.skeleton)


def measure(estimator: PoseEstimator, images: list, threads: int) -> Timing:
    torch.set_num_threads(threads)
    estimator.predict_batch(images)  # warm-up, untimed: the kernels (and weight layouts) of these input sizes
    total = Timing()
    for image in images:
        estimator.predict_batch([image])
        total.add(estimator.timing)
    return total


def default_variant() -> str:
    setup = choose_setup(EvalConfig(), CPU, probe_capabilities(CPU))
    return {(None, False): "fp32", (None, True): "fp32-cl", (torch.bfloat16, False): "bf16",
            (torch.bfloat16, True): "bf16-cl"}[(setup.precision.dtype, setup.channels_last)]  # fmt: skip


def run_model(name: str, ckpt: Path, folder: Path, args, tmp: Path) -> list[str]:
    model, cfg = load_model(str(ckpt), None, None, CPU)
    sources: dict[tuple[str, int], MapSource] = {}
    rows = []
    all_threads = torch.get_num_threads()
    for scales in args.scales:
        n = args.images if scales == "1" else args.images_5
        if n <= 0:
            continue
        images = read_images(folder, n)
        cfg_eval = replace(cfg.eval, scales=SCALE_SETS[scales], flip=True)
        for threads in args.threads:
            threads = threads or all_threads
            cases = {v: Case() for v in args.variants}
            for _ in range(args.rounds):
                base = None
                for variant in args.variants:
                    key = (variant, threads if variant == "ort" else 0)
                    if key not in sources:
                        if variant == "ort":
                            sources[key] = onnx_source(model, cfg, tmp / name, threads)
                        else:
                            sources[key] = torch_source(model, *VARIANTS[variant])
                    estimator = PoseEstimator(sources[key], cfg_eval, model.skeleton, CPU)
                    t = measure(estimator, images, threads)
                    cases[variant].timings.append(t)
                    base = t.images_per_s if variant == args.variants[0] else base
                    cases[variant].ratios.append(t.images_per_s / base if base else float("nan"))
                    print(f"  {name} scales={scales} threads={threads} {variant}: {t.describe()}", flush=True)
            rows += table_rows(name, scales, threads, len(images), cases, args.variants[0])
    return rows


def table_rows(name: str, scales: str, threads: int, n: int, cases: dict[str, Case], first: str) -> list[str]:
    default = default_variant()
    out = []
    for variant, case in cases.items():
        speeds = [t.images_per_s for t in case.timings]
        net = statistics.median(t.network_s / t.images * 1000 for t in case.timings)
        dec = statistics.median(t.decoding_s / t.images * 1000 for t in case.timings)
        mark = " (auto)" if variant == default else ""
        out.append(f"| {name} | {scales} + flip | {threads} | {n} | {variant}{mark} | {statistics.median(speeds):.3f} "
                   f"({min(speeds):.3f}-{max(speeds):.3f}) | {net:.0f} | {dec:.0f} | "
                   f"{statistics.median(case.ratios):.2f}x |")  # fmt: skip
    return out


@cli_main
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.cpu_inference", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", action="append", required=True, type=parse_model, help="NAME=CHECKPOINT:IMAGE_FOLDER")
    p.add_argument(
        "--variants",
        nargs="+",
        default=list(VARIANTS),
        choices=list(VARIANTS),
        help="the first is the reference of the ratios (default fp32, the former default)",
    )
    p.add_argument("--scales", nargs="+", default=["1", "5"], choices=list(SCALE_SETS))
    p.add_argument("--threads", nargs="+", type=int, default=[1, 0], help="torch / ONNX Runtime threads; 0: all")
    p.add_argument("--images", type=int, default=3, help="timed images per case at one scale")
    p.add_argument("--images-5", type=int, default=1, help="timed images per case at five scales")
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args(argv)
    caps = probe_capabilities(CPU)
    limits = {k: os.environ[k] for k in ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA") if k in os.environ}
    print(
        f"CPU: {caps.description}; {os.cpu_count()} cores, torch {torch.__version__}, torch threads "
        f"{torch.get_num_threads()}; {limits or 'no ISA limits'}; eval.amp=auto here: {default_variant()}"
    )
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, ckpt, folder in args.model:
            (Path(tmp) / name).mkdir()
            rows += run_model(name, ckpt, folder, args, Path(tmp))
    print(
        "| model | scales | threads | images | variant | images/s, median (range) | network ms/image | "
        "decoding ms/image | vs " + args.variants[0] + " |"
    )
    print("|---|---|---:|---:|---|---|---:|---:|---:|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    main()
