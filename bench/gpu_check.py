"""One GPU, one report: the CUDA test tier, then the training, data and evaluation speed of the paper preset.

    python -m bench.gpu_check                         # minutes on an H200 (docs/benchmarks.md#gpu-nvidia-h200)
    python -m bench.gpu_check --sections train data   # some sections only
    python -m bench.gpu_check --device cpu            # a dry run of the same code at toy sizes (no figures)

Sections; one that fails prints its error and the others still run (the exit status is then 1):
  tests  python -m pytest -m cuda (tests/test_cuda.py): training in fp16/bf16/channels_last, exact resume, COCO
         evaluation GPU vs CPU, torchrun + SyncBN, loader workers with pinned memory;
  train  samples/s of the trainer's own step (Trainer.train_step) of the paper preset at 512 in bf16,
         channels_last, eager and compiled (train.compile), at batch 4 and 16 (halved until it fits); peak memory;
         model FLOPs utilisation; host syncs per step between logs (tests.host_syncs); the compile time; a profiler
         table of the top kernels of a compiled step. One batch of the sample, reused: the data is timed apart;
  data   samples/s of the training DataLoader with 1, 2, 4, 8 ... workers on the real COCO sample at 512, set
         beside the training rate: how many workers keep one GPU fed;
  eval   images/s of 5 scales + flip and of 1 scale + flip evaluation of the paper preset on the real sample
         images in float32 and bf16, preprocessing, network and decoding time apart (random weights); a profiler
         table of an evaluation image; COCO AP and people of the device path against the CPU path.
Without a CUDA GPU it says so and exits 0.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from bench.timing import loader_rate, median_ms
from simplepose.config.config_file import load_config
from simplepose.config.skeleton_file import skeleton_of
from simplepose.data.conversion import Source, convert
from simplepose.data.dataset import SimplePoseDataset
from simplepose.data.image_files import read_image
from simplepose.data.synthetic_images import generate
from simplepose.evaluate.estimator import PoseEstimator
from simplepose.evaluate.estimator_base import Timing
from simplepose.models import build_model
from simplepose.models.summary import macs_and_shapes
from simplepose.utils.errors import UserError, cli_main
from tests.paths import COCO_SAMPLE_ANNOTATIONS, PAPER_PRESET, REPO_ROOT, coco_sample_dir

SECTIONS = ("tests", "train", "data", "eval")
# Dense (no sparsity) bf16/fp16 tensor-core peak at boost clock, TFLOP/s, from NVIDIA's datasheets; the first
# name contained in the GPU's name wins.
PEAK_TFLOPS = (("H200 NVL", 835.5), ("H200", 989.4), ("H100 NVL", 835.5), ("H100 PCIe", 756.5), ("H100", 989.4),
               ("A100", 312.0))  # fmt: skip
# the CPU dry run's network: the tiny preset's (the paper's takes minutes per step there)
DRY_RUN_MODEL = ["model.stacks=1", "loss.stack_weights=[1]", "model.inp_dim=16", "model.increase=8",
                 "model.head_channels=16", "model.se_reduction=4"]  # fmt: skip
GIB = 2**30


@dataclass
class Rig:
    """The sizes of a check: the real one on a GPU, or the CPU dry run at toy sizes."""

    device: torch.device
    input_size: int
    max_batch: int  # the DataLoader's batch
    train_batches: list[int]  # the training batches timed (each halved until it fits)
    warmup: int  # training steps not timed (cuDNN autotuning)
    iters: int  # training steps timed
    workers: list[int]  # DataLoader worker counts
    eval_images: int  # 0: all sample images
    tier_timeout_s: float  # the CUDA tier is killed after this
    eval_overrides: list[str] = field(default_factory=list)
    model_overrides: list[str] = field(default_factory=list)  # the dry run's small network
    compile_backend: str = "inductor"
    cpu_reference_images: int = 3  # images also evaluated on the CPU's path, for the AP and keypoints compared

    @staticmethod
    def of(device: torch.device) -> Rig:
        if device.type == "cuda":
            cores = os.cpu_count() or 1
            workers = [n for n in (1, 2, 4, 8, 16, 32, 64) if n <= cores]
            return Rig(device, 512, 16, [4, 16], warmup=3, iters=10, workers=workers, eval_images=0,
                       tier_timeout_s=300)  # fmt: skip
        return Rig(device, 64, 2, [2], warmup=1, iters=2, workers=[1], eval_images=2, tier_timeout_s=3600,
                   eval_overrides=["eval.boxsize=64", "eval.scales=[0.5,1.0]"], model_overrides=DRY_RUN_MODEL,
                   compile_backend="eager", cpu_reference_images=1)  # fmt: skip

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


@dataclass
class Report:
    rows: list[tuple[str, str, str]] = field(default_factory=list)  # (what, figure, detail) of the summary table
    failed: list[str] = field(default_factory=list)
    train_rates: dict[str, float] = field(default_factory=dict)  # samples/s by precision
    train_batch: int = 0

    def row(self, what: str, figure: str, detail: str = "") -> None:
        self.rows.append((what, figure, detail))


def say(text: str = "") -> None:
    print(text, flush=True)


def peak_tflops(name: str) -> tuple[float | None, str]:
    """(dense bf16/fp16 peak TFLOP/s, which entry) for a GPU name, or (None, "unknown peak")."""
    for key, tflops in PEAK_TFLOPS:
        if key.lower() in name.lower():
            return tflops, f"{tflops:g} TFLOP/s, {key} dense bf16/fp16 tensor cores (NVIDIA datasheet)"
    return None, "unknown peak"


def largest_batch(measure: Callable[[int], dict], start: int) -> tuple[int, dict]:
    """``measure(batch)`` at batch = start, start/2, ... until one fits in GPU memory: (batch, its result)."""
    batch = start
    while True:
        try:
            return batch, measure(batch)
        except torch.cuda.OutOfMemoryError:
            if batch == 1:
                raise
        # out of the except block: the traceback and the tensors its frames held are gone; give their memory back
        gc.collect()
        torch.cuda.empty_cache()
        say(f"  batch {batch} does not fit in GPU memory; trying {batch // 2}")
        batch //= 2


# ---------------------------------------------------------------------------------------------- sections
def section_environment(rig: Rig, report: Report) -> None:
    cores = os.cpu_count()
    versions = f"torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}"
    if rig.device.type == "cuda":
        p = torch.cuda.get_device_properties(rig.device)
        name = p.name
        detail = (f"{p.total_memory / GIB:.1f} GiB, compute capability {p.major}.{p.minor}, "
                  f"{p.multi_processor_count} SMs; {versions}; {cores} CPU cores")  # fmt: skip
        tf32 = (f"TF32: cuDNN convolutions {'on' if torch.backends.cudnn.allow_tf32 else 'off'}, matmul "
                f"{'on' if torch.backends.cuda.matmul.allow_tf32 else 'off'} (PyTorch defaults)")  # fmt: skip
    else:
        name, detail, tf32 = f"CPU ({platform.processor() or platform.machine()})", f"{versions}; {cores} cores", ""
    say(f"device: {name}, {detail}")
    say(f"python {platform.python_version()}" + (f"; {tf32}" if tf32 else ""))
    report.row("device", name, detail)


def section_tests(rig: Rig, report: Report) -> None:
    """The CUDA tier in a pytest process of its own (killed with its children after rig.tier_timeout_s); the
    captured output of every test is shown (its stdout: figures the tests print)."""
    env = {k: v for k, v in os.environ.items() if k != "SIMPLEPOSE_CUDA_TIER_ON_CPU"}
    if rig.device.type != "cuda":
        env["SIMPLEPOSE_CUDA_TIER_ON_CPU"] = str(rig.input_size)
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "tier.xml"
        # a test module that fails to import is reported as an error without stopping the CUDA tests
        command = [sys.executable, "-m", "pytest", "-m", "cuda", "-rA", "--show-capture=stdout", "--tb=short",
                   "--durations=0", "--continue-on-collection-errors", "-p", "no:cacheprovider",
                   f"--junitxml={junit}"]  # fmt: skip
        say("$ python " + " ".join(command[1:]))
        start = time.perf_counter()
        proc = subprocess.Popen(command, cwd=REPO_ROOT, env=env, start_new_session=True)
        try:
            rc = proc.wait(timeout=rig.tier_timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise RuntimeError(f"the CUDA tier did not finish within {rig.tier_timeout_s:.0f} s; killed") from None
        seconds = time.perf_counter() - start
        if not junit.is_file():
            raise RuntimeError(f"pytest exited {rc} without a report")
        suite = ET.parse(junit).getroot()
        suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
        counts = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    passed = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    summary = f"{passed} passed, {counts['failures']} failed, {counts['errors']} errors, {counts['skipped']} skipped"
    report.row("CUDA test tier", summary, f"python -m pytest -m cuda, {seconds:.0f} s")
    if rc != 0:
        raise RuntimeError(f"pytest exited {rc}: {summary}")


def training_file(rig: Rig, tmp: Path) -> Path:
    """The sample (real, else synthetic) converted at the rig's input size, for the trainer's own batches."""
    images, annotations, what = sample_source(tmp)
    h5 = tmp / f"train{rig.input_size}.h5"
    convert([Source(images, annotations)], h5, input_size=rig.input_size, progress=False)
    say(f"training samples: {what} at {rig.input_size}, the trainer's own augmentation and targets")
    return h5


def trainer_step_rate(rig: Rig, h5: Path, batch: int, compiled: bool, out: Path) -> dict:
    """Samples/s of ``Trainer.train_step`` (engine/trainer.py: the real step, with its fused optimiser, device-side
    skip and, when ``compiled``, the compiled model + loss) of the paper preset in bf16 at ``batch``; the host
    syncs of a step between logs (tests.host_syncs) and the compile time."""
    import simplepose.engine.compile as ec
    from simplepose.engine.trainer import Trainer
    from tests.host_syncs import HostSyncCounter

    ec.BACKEND = rig.compile_backend
    cfg = load_config(PAPER_PRESET, [f"data.input_size={rig.input_size}", f"train.batch_size={batch}",
                                     "train.amp=bf16", "train.channels_last=true", f"train.out_dir={out}",
                                     f"data.train={h5}", f"train.compile={'on' if compiled else 'off'}",
                                     "train.val_every=0", "data.num_workers=0", *rig.model_overrides])  # fmt: skip
    t = Trainer(cfg)
    micro = next(iter(t.batches.epoch(0, 0)))  # one batch, reused: the data pipeline is timed apart
    t.model.train()
    start = time.perf_counter()
    t.train_step(micro, cfg.train.lr)  # compiles when asked
    rig.sync()
    first_s = time.perf_counter() - start
    for _ in range(rig.warmup):
        t.train_step(micro, cfg.train.lr)
    with HostSyncCounter() as syncs:
        t.train_step(micro, cfg.train.lr)
    ms = median_ms(lambda: t.train_step(micro, cfg.train.lr), 0, rig.iters, rig.sync)
    peak = torch.cuda.max_memory_allocated(rig.device) if rig.device.type == "cuda" else 0
    return {
        "samples/s": batch * 1000 / ms,
        "ms": ms,
        "peak": peak,
        "syncs": syncs.count,
        "sync_ops": sorted(set(syncs.ops + syncs.methods)),
        "first_s": first_s,
        "trainer": t,
        "micro": micro,
    }


def section_train(rig: Rig, report: Report) -> None:
    cfg = load_config(PAPER_PRESET, [f"data.input_size={rig.input_size}", *rig.model_overrides])
    macs = macs_and_shapes(cfg.model, rig.input_size, rig.input_size, skeleton_of(cfg))[0]
    flops = 3 * 2 * macs  # per sample: forward 2 FLOPs per multiply-accumulate; backward twice the forward
    name = torch.cuda.get_device_name(rig.device) if rig.device.type == "cuda" else "cpu"
    peak, peak_text = peak_tflops(name)
    say(f"paper preset at {rig.input_size}: {macs / 1e9:.2f} G multiply-accumulates per forward (models.summary), "
        f"{flops / 1e12:.3f} TFLOP per training sample; peak: {peak_text}")  # fmt: skip
    say(f"Trainer.train_step in bf16, channels_last, optimizer {cfg.train.optimizer}; median of {rig.iters} steps "
        f"after {rig.warmup} warm-up steps, each timed between CUDA synchronisations; compiled with "
        f"{rig.compile_backend}")  # fmt: skip
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        h5 = training_file(rig, Path(tmp))
        for batch in rig.train_batches:
            for compiled in (False, True):
                label = f"bf16 {'compiled' if compiled else 'eager'}"
                try:
                    # each measurement trains into a new folder (a run never writes into another run's)
                    used, res = largest_batch(lambda b, c=compiled: trainer_step_rate(
                        rig, h5, b, c, Path(tempfile.mkdtemp(prefix="run_", dir=tmp))), batch)  # fmt: skip
                except Exception:  # the other settings still run
                    traceback.print_exc(file=sys.stdout)
                    failed.append(f"{label} batch {batch}")
                    continue
                rate = report.train_rates[f"{label} batch {used}"] = res["samples/s"]
                report.train_batch = max(report.train_batch, used)
                mfu = f"MFU {100 * flops * rate / (peak * 1e12):.1f} % of {peak:g} TFLOP/s" if peak else "MFU: -"
                memory = f"peak memory {res['peak'] / GIB:.1f} GiB" if rig.device.type == "cuda" else "peak memory -"
                syncs = f"{res['syncs']} host syncs per step between logs" + (
                    f" ({', '.join(res['sync_ops'])})" if res["sync_ops"] else ""
                )
                say(f"  {label:<14} batch {used:>2}: {rate:8.1f} samples/s ({res['ms']:.1f} ms per step), {memory}, "
                    f"{mfu}; {syncs}; first step {res['first_s']:.1f} s")  # fmt: skip
                report.row(f"training, {label}, batch {used}", f"{rate:.1f} samples/s",
                           f"{mfu}, {memory}, {syncs}, first step {res['first_s']:.0f} s")  # fmt: skip
                if compiled and batch == rig.train_batches[-1]:
                    profile_table("training step", lambda r=res: r["trainer"].train_step(r["micro"], 1e-4), rig)
                del res
                gc.collect()
                if rig.device.type == "cuda":
                    torch.cuda.empty_cache()
    if failed:
        raise RuntimeError(f"training step failed: {', '.join(failed)} (traceback above)")


def profile_table(what: str, fn: Callable[[], object], rig: Rig, rows: int = 12) -> None:
    """torch.profiler's table of the top kernels (device time on CUDA, CPU time otherwise) of two calls of fn."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if rig.device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        for _ in range(2):
            fn()
        rig.sync()
    key = "self_cuda_time_total" if rig.device.type == "cuda" else "self_cpu_time_total"
    say(f"  top kernels of {what} (2 calls, by {key}):")
    say(prof.key_averages().table(sort_by=key, row_limit=rows, max_name_column_width=60))


def sample_source(tmp: Path) -> tuple[Path, Path, str]:
    """(images, annotations, what they are): the real COCO sample, or a synthetic set when it cannot be found."""
    try:
        root = coco_sample_dir()
        return root / "images", root / COCO_SAMPLE_ANNOTATIONS, f"the real COCO sample ({root})"
    except UserError as e:
        say(f"note: {e}; using a synthetic set (data.synthetic) instead")
        generate(tmp / "synthetic", num_images=27, seed=0, val_fraction=0)
        annotations = tmp / "synthetic" / "annotations" / "person_keypoints_train.json"
        return tmp / "synthetic" / "images", annotations, "a synthetic set (data.synthetic, 27 images)"


def section_data(rig: Rig, report: Report) -> None:
    cfg = load_config(PAPER_PRESET, [f"data.input_size={rig.input_size}"])
    batch = report.train_batch or rig.max_batch
    with tempfile.TemporaryDirectory() as tmp:
        images, annotations, what = sample_source(Path(tmp))
        h5 = Path(tmp) / f"train{rig.input_size}.h5"
        convert([Source(images, annotations)], h5, input_size=rig.input_size, progress=False)
        ds = SimplePoseDataset(h5, cfg, train=True)
        say(f"{what}: {len(ds)} training samples at {rig.input_size}, training augmentation, all "
            f"{cfg.model.num_scales} target scales; batch {batch}, pinned memory on CUDA, each batch moved to the "
            "device")  # fmt: skip
        rates = {n: loader_rate(ds, n, batch, batches=max(8, 6 * n), device=rig.device) for n in rig.workers}
    train = max(report.train_rates.values(), default=0.0)
    for n, rate in rates.items():
        versus = f" = {rate / train:.2f} x the training rate" if train else ""
        say(f"  {n:>2} worker(s): {rate:8.1f} samples/s{versus}")
    enough = [n for n, rate in rates.items() if train and rate >= train]
    if not train:
        verdict = "no training rate to compare with (train section not run)"
    elif enough:
        verdict = f"keeps one GPU fed from {enough[0]} worker(s) on ({train:.0f} samples/s to feed)"
    else:
        verdict = f"slower than training with every count tried ({train:.0f} samples/s to feed)"
    say(f"data pipeline: {verdict}; the training process itself also needs a core")
    best = max(rates, key=rates.get)
    report.row(f"data pipeline, {best} workers", f"{rates[best]:.1f} samples/s",
               ", ".join(f"{n}: {r:.0f}" for n, r in rates.items()) + f" samples/s by workers; {verdict}")  # fmt: skip


def preprocess_ms(estimator: PoseEstimator, images: list, rig: Rig) -> float:
    """Milliseconds per image of the input preparation alone (upload, every scale's resize, pad, mirror, scale),
    as ``multiscale_maps_batch`` does it, timed between synchronisations."""
    from simplepose.evaluate.inference.multiscale import scale_inputs

    rig.sync()
    start = time.perf_counter()
    for im in images:
        for _ in scale_inputs([im], estimator.cfg, estimator.device):
            pass
    rig.sync()
    return (time.perf_counter() - start) * 1000 / len(images)


def section_eval(rig: Rig, report: Report) -> None:
    cfg = load_config(PAPER_PRESET, [f"data.input_size={rig.input_size}", *rig.model_overrides, *rig.eval_overrides])
    model = build_model(cfg).to(rig.device).eval()
    with tempfile.TemporaryDirectory() as tmp:
        images_dir, annotations, what = sample_source(Path(tmp))
        paths = sorted(images_dir.glob("*.jpg"))[: rig.eval_images or None]
        images = [read_image(p) for p in paths]
        sizes = [f"{h}x{w}" for h, w in sorted({im.shape[:2] for im in images})]
        say(
            f"{what}: {len(images)} images ({len(sizes)} sizes, {sizes[0]} to {sizes[-1]} rows x cols); paper preset "
            f"with random weights, BatchNorm folded; boxsize {cfg.eval.boxsize}; device-side preprocessing and shape "
            "buckets (eval.preprocess=auto, eval.shape_buckets=auto); the first image is a warm-up, not timed"
        )
        say("  random weights give flat maps with few peaks: decoding is faster here than with a trained model "
            "(python -m bench.grouping times it on ground-truth maps)")  # fmt: skip
        for scales in (cfg.eval.scales, [1.0]):
            for amp in ("off", "bf16"):
                eval_cfg = dataclasses.replace(cfg.eval, amp=amp, scales=list(scales), flip=True)
                estimator = PoseEstimator.from_model(model, eval_cfg, rig.device)
                estimator(images[0])
                estimator.total_timing = times = Timing()  # the warm-up left out
                for im in images[1:] or images:  # one image per call, as a user's loop would run
                    estimator(im)
                prep = preprocess_ms(estimator, images[1:] or images, rig)
                net, dec = times.network_s / times.images * 1000, times.decoding_s / times.images * 1000
                rate = times.images_per_s
                dtype = "float32" if amp == "off" else amp
                label = f"{len(scales)} scale{'s' if len(scales) > 1 else ''} + flip, {dtype}"
                say(f"  {label:<26}: {rate:6.2f} images/s; per image: preprocessing {prep:6.1f} ms, network "
                    f"{net - prep:7.1f} ms (forward, flip fusion, averaging), decoding {dec:6.1f} ms")  # fmt: skip
                report.row(f"evaluation, {label}", f"{rate:.2f} images/s",
                           f"preprocessing {prep:.0f} + network {net - prep:.0f} + decoding {dec:.0f} ms per image, "
                           f"{times.images} images, random weights")  # fmt: skip
                if amp == "off" and len(scales) > 1:
                    profile_table("an evaluation image", lambda e=estimator: e(images[-1]), rig)
        compare_with_cpu(model, cfg, images_dir, annotations, rig, report)


def compare_with_cpu(model, cfg, images_dir: Path, annotations: Path, rig: Rig, report: Report) -> None:
    """COCO AP and keypoints of the device's path (device preprocessing, buckets) against the CPU's (OpenCV, no
    buckets) on the first images, 1 scale + flip, the same random weights."""
    import json

    from simplepose.evaluate.evaluation import evaluate_model

    subset = dataclasses.replace(cfg.eval, scales=[1.0], flip=True, max_images=rig.cpu_reference_images)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, device in (("device", rig.device), ("cpu", torch.device("cpu"))):
            c = dataclasses.replace(cfg, eval=subset)
            out = Path(tmp) / f"{label}.json"
            net = model.to(device)
            stats, _ = evaluate_model(net, images_dir, annotations, c, device, out, progress=False)
            results[label] = (stats, json.loads(out.read_text()))
        model.to(rig.device)
    (a, ra), (b, rb) = results["device"], results["cpu"]
    say(
        f"  AP on {rig.cpu_reference_images} images, 1 scale + flip: {rig.device.type} path {a['AP']:.4f}, CPU path "
        f"{b['AP']:.4f}; {len(ra)} and {len(rb)} people (random weights: AP near 0, the people are what compares)"
    )
    report.row("evaluation AP vs the CPU path", f"{a['AP']:.3f} vs {b['AP']:.3f}",
               f"{len(ra)} vs {len(rb)} people on {rig.cpu_reference_images} images, 1 scale + flip")  # fmt: skip


def print_table(report: Report) -> None:
    say("\n| what | figure | detail |\n|---|---|---|")
    for what, figure, detail in report.rows:
        say(f"| {what} | {figure} | {detail} |")


@cli_main
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.gpu_check", description=__doc__.split("\n\n")[0])
    p.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                   help="cpu: a dry run of every section at toy sizes, to check the code without a GPU")  # fmt: skip
    args = p.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        say("no CUDA GPU: torch.cuda.is_available() is False, so there is nothing to check here "
            "(python -m bench.gpu_check --device cpu runs the same code at toy sizes as a dry run)")  # fmt: skip
        return 0
    rig = Rig.of(torch.device(args.device))
    report = Report()
    start = time.perf_counter()
    say(f"GPU check{' (CPU DRY RUN: toy sizes, the figures mean nothing)' if rig.device.type == 'cpu' else ''}")
    sections = {"environment": ("environment", section_environment), "tests": ("CUDA test tier", section_tests),
                "train": ("training speed", section_train), "data": ("data pipeline", section_data),
                "eval": ("evaluation", section_eval)}  # fmt: skip
    for name in ["environment", *[s for s in SECTIONS if s in args.sections]]:
        title, run_section = sections[name]
        say(f"\n== {title} ==")
        t0 = time.perf_counter()
        try:
            run_section(rig, report)
        except Exception as e:  # printed in the report's order; the next section still runs
            traceback.print_exc(file=sys.stdout)
            report.failed.append(name)
            report.row(title, "FAILED", f"{type(e).__name__}: {e}".splitlines()[0][:200])
        say(f"({time.perf_counter() - t0:.0f} s)")
    print_table(report)
    failed = f"; FAILED: {', '.join(report.failed)}" if report.failed else ""
    say(f"\ngpu_check done in {(time.perf_counter() - start) / 60:.1f} min{failed}")
    return 1 if report.failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
