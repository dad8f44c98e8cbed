"""The CUDA tier: what only a GPU shows, with the paper preset and the tests' synthetic sample.

    python -m pytest -m cuda        # these tests only, about 2-3 min on an H200 (python -m bench.gpu_check runs them)

Skipped without a CUDA GPU, so the plain CPU run of the suite skips them at once. SIMPLEPOSE_CUDA_TIER_ON_CPU=SIZE
runs the same code on the CPU with the paper preset at SIZE input (e.g. 64): a check of this file's code, not of
a GPU (the fp16 test and the CUDA-only assertions skip then).

- training steps of the paper preset at 512 on a fixed batch in fp16 + GradScaler, in bf16 and with channels_last,
  with the weight average (train.ema) counting the applied steps only;
- a resume on the GPU: 32 fp16 steps straight against 16 + train.resume=auto + 16, train.deterministic=true, the
  weight average continued bit for bit;
- python -m evaluate.coco_eval on the GPU against the CPU over images of odd sizes, same checkpoint;
- torchrun with one process and dist.sync_bn=true;
- DataLoader workers with pinned memory feeding the GPU.
"""

from __future__ import annotations

import gc
import json
import math
import os
import re
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Sampler

import simplepose.engine.batches as engine_batches
from simplepose.checkpoint.format import Checkpoint
from simplepose.config.config_file import config_from_args
from simplepose.data.conversion import Source, convert
from simplepose.data.synthetic_images import generate
from simplepose.engine.logger import read_metrics
from simplepose.engine.run import QUICKSTART_PRESET, parse_args
from simplepose.engine.trainer import Trainer
from simplepose.evaluate.metrics.keypoint_stats import coco_keypoint_stats
from simplepose.models.weights import unwrap
from tests.helpers import (
    flat_optimizer_state,
    pycocotools_coco,
    run_args,
    saved_state,
    subprocess_env,
    tiny_run_args,
    torchrun_command,
)
from tests.paths import PAPER_PRESET, REPO_ROOT

CPU_DRY_RUN_SIZE = int(os.environ.get("SIMPLEPOSE_CUDA_TIER_ON_CPU") or 0)
DEVICE = torch.device("cpu" if CPU_DRY_RUN_SIZE else "cuda")
SIZE = CPU_DRY_RUN_SIZE or 512  # input size of the paper preset here
NO_GPU = (
    "no CUDA GPU: torch.cuda.is_available() is False (SIMPLEPOSE_CUDA_TIER_ON_CPU=64 runs this file's code on the "
    "CPU as a dry run)"
)
CPU_DRY_RUN = "CUDA only: this is the CPU dry run (SIMPLEPOSE_CUDA_TIER_ON_CPU)"
pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not CPU_DRY_RUN_SIZE and not torch.cuda.is_available(),
                                                   reason=NO_GPU)]  # fmt: skip
# cuBLAS is deterministic only with a fixed workspace (train.deterministic=true needs it on CUDA)
# Optimizer steps on a fixed batch. The paper preset's first gradients are large (norm ~2e5, elements up to ~6e3 at
# 128 to 512 input, measured in float32 on the CPU: its convolutions start at N(0, 0.001^2) under BatchNorm), so in
# fp16 GradScaler skips about the first 13 steps, halving its scale from 2**16 each time, before the steps that
# train. (4 steps in the CPU dry run.)
FIXED_BATCH_STEPS = 30 if DEVICE.type == "cuda" else 4
# (width, height) of the evaluation images: odd shapes; at boxsize 192, 333x255, 427x444 and 640x374 are sizes where
# a bicubic resize by the exact factor gives one cell too few at scale 0.5 or 1.5 (a float rounding down)
ODD_SIZES = [(640, 198), (198, 640), (500, 333), (333, 255), (427, 444), (640, 374), (640, 427), (301, 449)]
EVAL_SCALES = ["0.5", "1", "1.5", "2"]
SMALL_MODEL_IMAGES, SMALL_MODEL_EPOCHS = 200, 4


def run_command(command: list[str], timeout: float = 600) -> subprocess.CompletedProcess:
    """Run a command of this repository from its root; fails the test with its output when it fails."""
    env = subprocess_env(CUBLAS_WORKSPACE_CONFIG=":4096:8")
    r = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{' '.join(command)}\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    return r


def paper_args(h5: Path, out_dir: Path, *extra: str) -> list[str]:
    """Command-line arguments of a short run of the paper preset: on DEVICE, no validation, a log line a step, no
    learning-rate warm-up (it would start at 0)."""
    return run_args(PAPER_PRESET, h5, out_dir, f"data.input_size={SIZE}", f"train.device={DEVICE.type}",
                    "train.val_every=0", "train.log_every=1", "train.warmup_epochs=0", *extra)  # fmt: skip


def train_losses(out_dir: Path) -> list[float]:
    return [r["loss"] for r in read_metrics(out_dir) if r["kind"] == "train"]


def assert_finite(losses: list) -> None:
    assert losses and all(isinstance(x, float) and math.isfinite(x) for x in losses), losses


def assert_updated(seen: Steps) -> None:
    """The optimizer moved every parameter that had a gradient. A few can have none: a per-channel constant added
    right before a train-mode BatchNorm is removed by it (in the CPU dry run at 64 input, the BatchNorm biases of
    the merges at the coarsest scale, whose maps are 1x1 there)."""
    assert not seen.unchanged_with_gradient, f"not updated despite a gradient: {seen.unchanged_with_gradient[:5]}"
    assert len(seen.unchanged) <= 0.01 * seen.trainable, f"{len(seen.unchanged)} never changed: {seen.unchanged[:9]}"


@pytest.fixture(scope="module")
def paper_h5(synthetic_sample_images, synthetic_sample_annotations, tmp_path_factory) -> Path:
    """The synthetic sample converted by data.coco_to_hdf5 for the paper preset (512 input)."""
    out = tmp_path_factory.mktemp("cuda_h5") / f"synthetic{SIZE}.h5"
    convert([Source(synthetic_sample_images, synthetic_sample_annotations)], out, input_size=SIZE, progress=False)
    return out


@pytest.fixture(autouse=True)
def restore_torch_switches():
    """A Trainer sets process-wide switches (deterministic algorithms, cuDNN benchmark): restore them after each
    test, and hand its cached GPU memory back."""
    saved = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    benchmark = torch.backends.cudnn.benchmark
    yield
    torch.use_deterministic_algorithms(saved[0], warn_only=saved[1])
    torch.backends.cudnn.benchmark = benchmark
    gc.collect()  # a Trainer with its spying loader (train_one_epoch) is a reference cycle
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


class SameBatch(Sampler[int]):
    """Samples 0 .. batch_size-1, ``steps`` times over: every batch of the epoch is the same batch (a sample's
    augmentation depends only on (seed, epoch, index))."""

    def __init__(self, batch_size: int, steps: int) -> None:
        self.indices = list(range(batch_size)) * steps

    def set_epoch(self, epoch: int, skip_batches: int = 0) -> None:
        pass

    def __iter__(self):
        return iter(self.indices)

    def __len__(self) -> int:
        return len(self.indices)


@dataclass
class Steps:
    """What one epoch of a Trainer did, seen from outside."""

    trainer: Trainer
    losses: list = field(default_factory=list)  # logged loss of every step
    unchanged: list[str] = field(default_factory=list)  # trainable parameters the epoch left as they were
    unchanged_with_gradient: list[str] = field(default_factory=list)  # ... though their last gradient was not 0
    trainable: int = 0  # trainable parameter tensors
    inputs: list[tuple] = field(default_factory=list)  # per forward: (device type, dtype, channels_last)
    loaders: list[DataLoader] = field(default_factory=list)
    pinned: list[bool] = field(default_factory=list)  # per batch: every tensor in pinned (page-locked) memory


def train_one_epoch(args: list[str], fixed_batch_steps: int = 0) -> Steps:
    """Build the Trainer of the train.py command line ``args`` in this process, train its first epoch, and record
    the batches its loader gave and the inputs its network got. With ``fixed_batch_steps``, the epoch is that
    many steps on one batch."""
    trainer = Trainer(config_from_args(parse_args("", args)))
    if fixed_batch_steps:
        trainer.batches.sampler = SameBatch(trainer.cfg.train.batch_size, fixed_batch_steps)
        trainer.batches.steps_per_epoch = fixed_batch_steps
    seen = Steps(trainer)
    make_loader = engine_batches.make_loader

    def spying_loader(*loader_args, **kwargs):
        loader = make_loader(*loader_args, **kwargs)
        seen.loaders.append(loader)
        for batch in loader:
            seen.pinned.append(all(x.is_pinned() for x in (batch["image"], *batch["targets"], *batch["masks"])))
            yield batch

    def record_input(module, inputs):
        x = inputs[0]
        seen.inputs.append((x.device.type, x.dtype, x.is_contiguous(memory_format=torch.channels_last)))

    engine_batches.make_loader = spying_loader
    model = unwrap(trainer.model)
    hook = model.register_forward_pre_hook(record_input)
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    before = [p.detach().clone() for p in trainer.params]
    try:
        trainer.train_epoch()
    finally:
        engine_batches.make_loader = make_loader
        hook.remove()
        trainer.hooks.after_train(trainer.position)  # closes the metrics log
    seen.trainable = len(names)
    seen.unchanged = [n for n, p, b in zip(names, trainer.params, before) if torch.equal(p, b)]
    seen.unchanged_with_gradient = [n for n, p, b in zip(names, trainer.params, before)
                                    if torch.equal(p, b) and p.grad is not None and bool(p.grad.any())]  # fmt: skip
    seen.losses = train_losses(trainer.out_dir)
    return seen


# ---------------------------------------------------------------------------------------------- training steps
@pytest.mark.parametrize(
    "amp, channels_last",
    [pytest.param("fp16", False, marks=pytest.mark.skipif(DEVICE.type != "cuda", reason=CPU_DRY_RUN)),
     ("bf16", False), ("auto", True)],
)  # fmt: skip
def test_paper_preset_trains_on_a_fixed_batch(paper_h5, tmp_path, amp, channels_last):
    steps = FIXED_BATCH_STEPS
    seen = train_one_epoch(paper_args(paper_h5, tmp_path, f"train.amp={amp}", f"train.channels_last={channels_last}",
                                      "data.num_workers=0", "train.batch_size=2", "train.optimizer=adam",
                                      "train.lr=1e-3", "train.weight_decay=0", "train.ema=0.9",
                                      "train.ema_warmup_steps=2"), steps)  # fmt: skip
    t = seen.trainer
    skipped = t.position.counters["skipped_nonfinite"]
    # fp16: GradScaler starts at 2**16 and halves once per step whose scaled gradients overflowed (the scaler skips
    # that update itself; not a non-finite step); it cannot grow back within 2000 steps
    overflows = round(math.log2(2.0**16 / t.scaler.get_scale())) if t.scaler.is_enabled() else 0
    print(f"amp={amp} ({t.precision.name}) channels_last={channels_last}: losses {[round(x, 2) for x in seen.losses]}, "
          f"{overflows} overflow(s), scale {t.scaler.get_scale() if t.scaler.is_enabled() else '-'}")  # fmt: skip
    assert_finite(seen.losses)
    assert len(seen.losses) == steps
    # the fixed batch is learnt: the last three steps' mean loss is below the first step's
    assert sum(seen.losses[-3:]) / 3 < seen.losses[0], seen.losses
    assert_updated(seen)
    assert {x[:2] for x in seen.inputs} == {(DEVICE.type, torch.float32)} and len(seen.inputs) == steps
    assert skipped == 0  # no non-finite loss
    if t.precision.dtype == torch.float16:
        assert t.scaler.is_enabled() and t.scaler.get_scale() == 2.0**16 / 2**overflows
        assert steps - overflows >= 6, f"{overflows} of {steps} steps overflowed"
    else:
        assert not t.scaler.is_enabled()
    # the weight average moved with the applied steps only (fp16: not with the overflows the scaler skipped), and
    # stays in float32 whatever the autocast
    assert t.ema.updates.item() == steps - overflows - skipped
    averaged = [v for v in t.ema.module.state_dict().values() if v.is_floating_point()]
    assert all(v.dtype == torch.float32 and torch.isfinite(v).all() for v in averaged)
    if channels_last:
        assert all(x[2] for x in seen.inputs)
        convs = [p for p in t.params if p.dim() == 4 and p.shape[2:] != (1, 1)]
        assert convs and all(p.is_contiguous(memory_format=torch.channels_last) for p in convs)


# ---------------------------------------------------------------------------------------------- resume
def state_distance(a: dict, b: dict) -> float:
    """Euclidean distance between the floating-point tensors of two state dicts."""
    return math.sqrt(sum(float((a[k].double() - b[k].double()).square().sum()) for k in a if a[k].is_floating_point()))


def test_resume_continues_the_run_exactly(paper_h5, tmp_path):
    """2 x 16 steps straight against 16, then train.resume=auto and 16 more, each a train.py process, in fp16 with
    GradScaler (train.amp=fp16; the first ~13 steps overflow and are skipped, see FIXED_BATCH_STEPS) and
    deterministic kernels (train.deterministic=true, CUBLAS_WORKSPACE_CONFIG set), with the weight average
    (train.ema). Bit-identical weights, weight average, optimizer state, logged losses and GradScaler state are
    asserted when no kernel reported itself nondeterministic (with warn_only, PyTorch warns once for each op lacking
    a deterministic CUDA implementation); otherwise the resumed weights must lie within 1 % of the distance the last
    16 steps moved them (atomic-add rounding, not a lost state)."""
    half_steps = 16 if DEVICE.type == "cuda" else 2
    common = ["train.deterministic=true", "train.batch_size=2", f"train.max_steps_per_epoch={half_steps}",
              "data.num_workers=0", f"train.amp={'fp16' if DEVICE.type == 'cuda' else 'off'}", "train.ema=0.9",
              "train.ema_warmup_steps=2"]  # fmt: skip
    train = [sys.executable, "train.py"]
    runs = [run_command([*train, *paper_args(paper_h5, tmp_path / "straight", *common, "train.epochs=2")])]
    runs.append(run_command([*train, *paper_args(paper_h5, tmp_path / "split", *common, "train.epochs=1")]))
    half = Checkpoint.load(tmp_path / "split" / "last.pt")
    runs.append(run_command([*train, *paper_args(paper_h5, tmp_path / "split", *common, "train.epochs=2",
                                                 "train.resume=auto")]))  # fmt: skip
    assert "resumed from" in runs[-1].stdout
    straight, resumed = (Checkpoint.load(tmp_path / d / "last.pt") for d in ("straight", "split"))
    assert saved_state(straight).position.global_step == saved_state(resumed).position.global_step == 2 * half_steps
    assert saved_state(half).position.global_step == half_steps
    assert saved_state(straight).position.counters == saved_state(resumed).position.counters
    assert saved_state(straight).scaler == saved_state(resumed).scaler  # fp16 on CUDA: scale and growth tracker
    warnings = "".join(r.stderr for r in runs)
    nondeterministic = sorted(set(re.findall(r"(\S+) does not have a deterministic implementation", warnings)))
    if "this operation is not deterministic because it uses CuBLAS" in warnings:
        nondeterministic.append("cuBLAS without CUBLAS_WORKSPACE_CONFIG")
    apart, moved = state_distance(straight.model, resumed.model), state_distance(straight.model, half.model)
    print(
        f"nondeterministic kernels reported: {nondeterministic or 'none'}; straight vs resumed weights {apart:.3g} "
        f"apart, the last {half_steps} steps moved them {moved:.3g}; GradScaler {saved_state(straight).scaler or 'off'}"
    )
    print(f"losses straight {train_losses(tmp_path / 'straight')}\nlosses split    {train_losses(tmp_path / 'split')}")
    assert moved > 0
    if nondeterministic:
        assert apart <= 0.01 * moved
        return
    assert train_losses(tmp_path / "straight") == train_losses(tmp_path / "split")
    for key in straight.model:
        assert torch.equal(straight.model[key], resumed.model[key]), key
    ema_a, ema_b = saved_state(straight).ema, saved_state(resumed).ema  # the weight average, continued exactly
    assert ema_a["updates"] == ema_b["updates"] > 0
    assert all(torch.equal(v, ema_b["model"][k]) for k, v in ema_a["model"].items())
    a, b = flat_optimizer_state(saved_state(straight).optimizer), flat_optimizer_state(saved_state(resumed).optimizer)
    assert len(a) == len(b) > 0 and all(torch.equal(x, y) for x, y in zip(a, b))


# ---------------------------------------------------------------------------------------------- evaluation
def paste_on_canvases(src: Path, out: Path, sizes: list[tuple[int, int]]) -> tuple[Path, Path]:
    """The first len(sizes) images of a data.synthetic set, each scaled (aspect kept) into the top-left corner of
    a grey canvas of the given (width, height), and their annotations scaled alike (crowd regions left out).
    Returns (image folder, annotation file)."""
    data = json.loads((src / "annotations" / "person_keypoints_train.json").read_text())
    (out / "images").mkdir(parents=True)
    images, annotations = [], []
    for info, (cw, ch) in zip(data["images"], sizes):
        image = cv2.imread(str(src / "images" / info["file_name"]))
        h, w = image.shape[:2]
        s = min(cw / w, ch / h)
        rw, rh = round(w * s), round(h * s)
        sx, sy = rw / w, rh / h
        canvas = np.full((ch, cw, 3), 127, np.uint8)
        canvas[:rh, :rw] = cv2.resize(image, (rw, rh), interpolation=cv2.INTER_AREA)
        assert cv2.imwrite(str(out / "images" / info["file_name"]), canvas)
        images.append({**info, "width": cw, "height": ch})
        for a in data["annotations"]:
            if a["image_id"] != info["id"] or a["iscrowd"]:
                continue
            kp = np.array(a["keypoints"], float).reshape(17, 3) * (sx, sy, 1)
            x, y, bw, bh = a["bbox"]
            polygons = [(np.array(p).reshape(-1, 2) * (sx, sy)).ravel().tolist() for p in a["segmentation"]]
            annotations.append({**a, "keypoints": kp.ravel().tolist(), "bbox": [x * sx, y * sy, bw * sx, bh * sy],
                                "area": a["area"] * sx * sy, "segmentation": polygons})  # fmt: skip
    ann_file = out / "person_keypoints.json"
    ann_file.write_text(json.dumps({**data, "images": images, "annotations": annotations}))
    return out / "images", ann_file


@pytest.fixture(scope="module")
def odd_sized_set(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("odd_sizes")
    generate(root / "synthetic", num_images=len(ODD_SIZES), seed=1, val_fraction=0)
    return paste_on_canvases(root / "synthetic", root / "odd", ODD_SIZES)


@pytest.fixture(scope="module")
def small_checkpoint(tmp_path_factory) -> Path:
    """config/quickstart.yaml's 1-stack model (192 input) trained on DEVICE for a few epochs on synthetic people:
    enough to find people, so that the AP compared below is not 0."""
    root = tmp_path_factory.mktemp("small_model")
    generate(root / "synthetic", num_images=SMALL_MODEL_IMAGES, seed=0, val_fraction=0)
    h5 = root / "train192.h5"
    source = Source(root / "synthetic" / "images", root / "synthetic" / "annotations" / "person_keypoints_train.json")
    convert([source], h5, input_size=192, progress=False)
    run_command([sys.executable, "train.py", *run_args(QUICKSTART_PRESET, h5, root / "run", "train.val_every=0",
                                                       f"train.epochs={SMALL_MODEL_EPOCHS}", "data.num_workers=4",
                                                       f"train.device={DEVICE.type}")])  # fmt: skip
    return root / "run" / "last.pt"


def keypoint_offsets(a: list[dict], b: list[dict]) -> list[float]:
    """For each person of the COCO results ``a``: the mean distance (pixels) of its keypoints to those of the
    nearest person of ``b`` in the same image, over the keypoints both found (inf when none is shared)."""
    people = defaultdict(list)
    for r in b:
        people[r["image_id"]].append(np.reshape(r["keypoints"], (17, 3)))
    offsets = []
    for r in a:
        kp, best = np.reshape(r["keypoints"], (17, 3)), math.inf
        for other in people[r["image_id"]]:
            both = (kp[:, 2] > 0) & (other[:, 2] > 0)
            if both.any():
                best = min(best, float(np.linalg.norm(kp[both, :2] - other[both, :2], axis=1).mean()))
        offsets.append(best)
    return offsets


def test_coco_eval_on_the_gpu_equals_the_cpu(small_checkpoint, odd_sized_set, tmp_path):
    """The same checkpoint evaluated by python -m evaluate.coco_eval on the GPU (its default resize path there)
    and on the CPU, multi-scale + flip over images of odd sizes. With TF32 off (float32 as on the CPU): AP and AR
    within 0.001 and the same keypoints (median offset below 0.05 px). With TF32 convolutions (PyTorch's default
    on CUDA): within 0.01; on a set this small one person crossing one OKS threshold moves AP by ~0.003, and
    outputs perturbed by 1e-3 (relative, random) did that in 2 of 3 trials on the CPU."""
    images, annotations = odd_sized_set
    args = ["--ckpt", str(small_checkpoint), "--images", str(images), "--annotations", str(annotations),
            "--scales", *EVAL_SCALES, "--flip"]  # fmt: skip
    without_tf32 = ("import sys, torch; torch.backends.cudnn.allow_tf32 = False; "
                    "torch.backends.cuda.matmul.allow_tf32 = False; "
                    "from simplepose.evaluate.coco_eval import main; sys.exit(main(sys.argv[1:]))")  # fmt: skip
    commands = {
        "cpu": ["-m", "evaluate.coco_eval", *args, "--device", "cpu"],
        "gpu": ["-c", without_tf32, *args, "--device", DEVICE.type],
        "gpu_tf32": ["-m", "evaluate.coco_eval", *args, "--device", DEVICE.type],
    }
    results = {}
    for label, command in commands.items():
        out = tmp_path / f"{label}.json"
        run_command([sys.executable, *command, "--out", str(out)])
        results[label] = json.loads(out.read_text())
    coco = pycocotools_coco(annotations)
    ids = sorted(coco.getImgIds())
    stats = {label: coco_keypoint_stats(coco, r, ids)[0] for label, r in results.items()}
    offsets = {label: keypoint_offsets(results[label], results["cpu"]) for label in ("gpu", "gpu_tf32")}
    for label, s in stats.items():
        moved = f", keypoints vs the CPU's: median {np.median(offsets[label]):.4f} px" if label in offsets else ""
        print(f"{label}: {len(results[label])} people, AP {s['AP']:.4f}, AR {s['AR']:.4f}{moved}")
    assert results["cpu"] and results["gpu"] and stats["cpu"]["AP"] > 0
    for key in ("AP", "AR"):
        assert abs(stats["gpu"][key] - stats["cpu"][key]) <= 1e-3, key
        assert abs(stats["gpu_tf32"][key] - stats["cpu"][key]) <= 1e-2, key
    assert np.median(offsets["gpu"]) < 0.05


# ---------------------------------------------------------------------------------------------- torchrun, SyncBN
def test_torchrun_with_one_process_trains_with_sync_batchnorm(synthetic_h5_64, tmp_path):  # noqa: F811
    probe = str(REPO_ROOT / "tests" / "batchnorm_probe.py")
    args = tiny_run_args(synthetic_h5_64, tmp_path, "dist.sync_bn=true", "train.max_steps_per_epoch=3")
    r = run_command(torchrun_command([probe, *args], 1))
    assert saved_state(tmp_path / "last.pt").position.global_step == 3
    assert_finite(train_losses(tmp_path))
    found = re.search(r"^batchnorm layers: (.*)$", r.stdout, re.M)
    assert found, r.stdout[-2000:]
    layers = json.loads(found.group(1))
    print("batchnorm layers of the trained model:", layers)
    if DEVICE.type != "cuda":
        pytest.skip(CPU_DRY_RUN)
    assert set(layers) == {"SyncBatchNorm"}, f"dist.sync_bn=true under torchrun on CUDA, yet the model holds {layers}"


# ---------------------------------------------------------------------------------------------- loader workers
def test_loader_workers_feed_pinned_batches_to_the_gpu(paper_h5, tmp_path):
    steps = 3
    # bf16: in fp16 these first steps would all be skipped (see FIXED_BATCH_STEPS), leaving the weights unchanged
    seen = train_one_epoch(paper_args(paper_h5, tmp_path, "data.num_workers=2", "data.pin_memory=true",
                                      "train.batch_size=4", f"train.max_steps_per_epoch={steps}",
                                      "train.amp=bf16"))  # fmt: skip
    cuda = DEVICE.type == "cuda"  # pin_memory only takes effect on CUDA
    assert len(seen.loaders) == 1 and seen.loaders[0].num_workers == 2 and seen.loaders[0].pin_memory == cuda
    assert len(seen.pinned) >= steps and all(p == cuda for p in seen.pinned)
    assert seen.inputs == [(DEVICE.type, torch.float32, False)] * steps
    assert_finite(seen.losses)
    assert len(seen.losses) == steps
    assert_updated(seen)
