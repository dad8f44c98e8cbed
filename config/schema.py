"""Typed configuration of the whole project.

Dataclass defaults are the faithful values of the original Simple Pose code (docs/design.md#configuration);
``config/simplepose_coco.yaml`` restates them explicitly and ``config/quickstart.yaml`` shrinks the job for
a CPU. Where the original had a bug, the field that restores the original behaviour is named in its
comment. Units: input pixels unless stated otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

OUTPUT_STRIDE = 4  # input pixels per cell of the finest output grid (the network's stem), not a setting


@dataclass(frozen=True)
class Range:
    """The values a numeric setting (or each item of a list setting) may take: finite numbers from ``low`` to
    ``high`` (None: unbounded; ``*_open``: the bound itself excluded); a list holds ``min_items`` to ``max_items``
    items. ``note`` says what the ends mean ("0: never"). Declared once per field, checked by
    config.config_file.validate."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    min_items: int = 0
    max_items: int | None = None
    note: str = ""

    def holds(self, x: float) -> bool:
        """Whether the number ``x`` is in the range."""
        if not math.isfinite(x):
            return False
        above = self.low is None or (x > self.low if self.low_open else x >= self.low)
        below = self.high is None or (x < self.high if self.high_open else x <= self.high)
        return above and below

    def bounds(self) -> str:
        """The range of one number in words: ``>= 1``, ``> 0``, ``in [0, 1]``, ``a finite number``."""
        if self.low is not None and self.high is not None:
            return f"in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}{')' if self.high_open else ']'}"
        if self.low is not None:
            return f"{'>' if self.low_open else '>='} {self.low:g}"
        if self.high is not None:
            return f"{'<' if self.high_open else '<='} {self.high:g}"
        return "a finite number"

    def describe(self, is_list: bool = False) -> str:
        """The whole range in words, with its note."""
        text = self.bounds()
        if is_list:
            n, m = self.min_items, self.max_items
            count = f"{n}" if n == m else f"at least {n}" if m is None else f"{n} to {m}"
            text = f"a list of {count} item(s), each {text}"
        return f"{text} ({self.note})" if self.note else text


COUNT = Range(1)  # a whole number of things, at least one
NON_NEGATIVE = Range(0)
POSITIVE = Range(0, low_open=True)
FRACTION = Range(0, 1)  # probabilities, shares and thresholds of maps in [0, 1]


def ranged(default: Any, limits: Range) -> Any:
    """A dataclass field with ``default`` (a list is copied for every instance) and its ``Range``."""
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata={"range": limits})
    return field(default=default, metadata={"range": limits})


def range_of(f: Any) -> Range | None:
    """The ``Range`` a dataclass field declares (None for text, booleans and choices)."""
    return f.metadata.get("range")


@dataclass
class DataConfig:
    train: str = ""  # HDF5 file made by `python -m simplepose.data.coco_to_hdf5` (training samples)
    val: str = ""  # HDF5 file for the validation loss (optional)
    val_images: str = ""  # image folder for validation AP (optional)
    val_annotations: str = ""  # COCO person_keypoints JSON for validation AP (optional)
    # Several training files at once (docs/data.md#several-datasets), each converted with its own keypoints and
    # matched onto data.skeleton's by name; when given, data.train is not read.
    train_sources: list[str] = field(default_factory=list)
    # each source's share of an epoch's samples (relative; empty: in proportion to the sources' sizes)
    source_weights: list[float] = ranged([], Range(0, low_open=True, note="one per data.train_sources entry"))
    # per source (aligned with data.train_sources; "" for none): validation images and annotations in data.skeleton's
    # keypoint names (python -m simplepose.data.map_keypoints maps other names); validation reports AP per source
    source_val_images: list[str] = field(default_factory=list)
    source_val_annotations: list[str] = field(default_factory=list)
    # square network input, pixels; the HDF5 file must be built for it
    input_size: int = ranged(512, Range(64, note="a multiple of 64"))
    # The keypoint set: a name in config/skeletons/ or the path of a skeleton YAML file
    # (docs/skeleton.md#skeleton-files).
    # The HDF5 files must be converted with the same --skeleton; checkpoints carry it, so evaluation needs nothing.
    skeleton: str = "coco"
    num_workers: int = ranged(2, Range(0, note="0: load in the training process"))  # DataLoader worker processes
    pin_memory: bool = True  # only takes effect on CUDA
    # Seconds to wait for one batch from a DataLoader worker before stopping with an error naming the batch (a
    # worker stuck without dying: a deadlock, a hung network file system); 0 waits for ever; only applies with
    # num_workers > 0. A healthy worker hands over a batch in well under a second (a few seconds for the first
    # of an epoch, or from a cold network disk), so 600 never fires on slow but working storage, yet stops a
    # hung run within 10 min, before DDP's 30 min collective timeout would hide the cause on the other ranks.
    loader_timeout: float = ranged(600.0, Range(0, note="0: wait for ever"))
    # The quick start (train.py without --config and without data.train) makes synthetic data here, once.
    synthetic_dir: str = "cache/synthetic"
    synthetic_images: int = ranged(600, COUNT)
    synthetic_seed: int = ranged(0, NON_NEGATIVE)


@dataclass
class AugmentConfig:
    """Random augmentation (docs/data.md#augmentation)."""

    target_dist: float = ranged(0.6, POSITIVE)  # main person's bbox height as a fraction of the input size
    scale_prob: float = ranged(0.8, FRACTION)
    scale_min: float = ranged(0.7, POSITIVE)
    scale_max: float = ranged(1.3, POSITIVE)
    max_rotate_degree: float = ranged(40.0, Range(0, 180))
    center_perturb_max: float = ranged(50.0, NON_NEGATIVE)  # output pixels
    flip_prob: float = ranged(0.5, FRACTION)
    tint_prob: float = ranged(0.2, FRACTION)
    hue_wrap: bool = False  # False: clip hue like the original; True: wrap around the hue circle
    border_bgr: list[int] = ranged([124, 127, 127], Range(0, 255, min_items=3, max_items=3, note="blue, green, red"))
    # data pipeline speed-ups (data owner). reduced_decode: decode the JPEG at 1/2, 1/4 or 1/8 size when the
    # affine shrinks the image at least that much (False: always full size, like the original).
    reduced_decode: bool = True
    # How the two masks reach the output grid. faithful: warp at the input size, then area-resize (the original);
    # half: warp at half the input size, then area-resize (several times cheaper, masks nearly equal to faithful);
    # grid: bilinear samples at the cell centres (cheapest, furthest from faithful). Times and differences:
    # docs/benchmarks.md#data-pipeline-stages.
    mask_warp: Literal["faithful", "half", "grid"] = "half"


@dataclass
class TargetConfig:
    """Training targets (docs/data.md#targets)."""

    sigma: float = ranged(9.0, POSITIVE)  # keypoint Gaussian sigma, input pixels
    # only sizes the keypoint window (half-size 7 cells at sigma 9)
    keypoint_gaussian_thre: float = ranged(0.015, Range(0, 1, low_open=True, high_open=True))
    limb_sigma: float = ranged(7.0, POSITIVE)  # limb Gaussian sigma of the distance to the limb, input pixels
    # margin around a limb's bounding box, input pixels (original paf_thre)
    limb_margin: float = ranged(4.0, NON_NEGATIVE)
    limb_gaussian_thre: float = ranged(0.015, FRACTION)  # faithful mode: limb values <= this are replaced by limb_floor
    limb_floor: float = ranged(0.01, FRACTION)
    # faithful: distance to the infinite line inside the segment's box, floor, mean over people
    #           (reproduces the original and its golden values);
    # fixed: distance to the segment, Gaussian band not clipped by the box, max over people, no floor.
    limb_mode: Literal["faithful", "fixed"] = "faithful"


@dataclass
class ModelConfig:
    """Identity-Mapping Hourglass Network (docs/network.md#network)."""

    stacks: int = ranged(4, COUNT)
    inp_dim: int = ranged(256, COUNT)  # channels entering each hourglass; the stem makes exactly 256
    increase: int = ranged(128, NON_NEGATIVE)  # channel increment per hourglass level
    # output scales per stack (strides 4, 8, 16, 32, 64)
    num_scales: int = ranged(5, Range(1, 5, note="the hourglass has 5 levels"))
    bn: bool = True
    head_channels: int = ranged(256, COUNT)
    se_reduction: int = ranged(16, COUNT)
    # Training keeps only the inputs of the stem, of each hourglass and of each stack's heads, and recomputes
    # their activations in the backward pass (torch.utils.checkpoint): a fraction of the activation memory for
    # longer steps (docs/benchmarks.md#activation-checkpointing); the same gradients and BatchNorm statistics.
    # The weights are the same either way, so a run may resume with it changed; evaluation never recomputes. Why
    # these units: models.posenet.PoseNet.recomputes_activations.
    checkpoint_activations: bool = False


@dataclass
class LossConfig:
    """Multi-scale focal L2 loss (docs/network.md#loss)."""

    gamma: float = ranged(1.0, NON_NEGATIVE)  # the original code's effective value; its README credits gamma = 2
    alpha: float = ranged(0.0, NON_NEGATIVE)
    beta: float = ranged(0.0, NON_NEGATIVE)
    pos_threshold: float = ranged(0.01, FRACTION)  # target >= this is a positive pixel
    limb_weight: float = ranged(1.0, NON_NEGATIVE)
    keypoint_weight: float = ranged(3.0, NON_NEGATIVE)
    person_mask_weight: float = ranged(0.1, NON_NEGATIVE)
    max_keypoint_weight: float = ranged(1.0, NON_NEGATIVE)
    stack_weights: list[float] = ranged([1.0, 1.0, 1.0, 1.0], Range(0, min_items=1, note="one per stack"))
    scale_weights: list[float] = ranged([0.1, 0.2, 0.4, 1.6, 6.4], Range(0, min_items=1, note="one per output scale"))
    mask_threshold: float = ranged(0.5, FRACTION)  # resized ignore-mask values below this become 0
    # actual: divide by the batch the loss really sees (fixed); configured: by train.batch_size (original)
    batch_divisor: Literal["actual", "configured"] = "actual"


@dataclass
class TrainConfig:
    """Optimiser, schedule and run control (docs/training.md#schedule, docs/training.md#one-optimiser-step,
    docs/training.md#training-engine-loop-hooks-checkpoint)."""

    epochs: int = ranged(100, COUNT)
    batch_size: int = ranged(4, COUNT)  # per process and micro-batch
    # Gradient accumulation: micro-batches of batch_size per optimiser step (effective batch: batch_size x
    # accumulate_steps x processes). The schedule, the logs and checkpoint_every_steps count optimiser steps.
    accumulate_steps: int = ranged(1, Range(1, note="1: no accumulation"))
    # per process and micro-batch; multiplied by processes x accumulate_steps when lr_scale_world_size (linear
    # scaling: 1 GPU x accumulate_steps=4 then trains like 4 GPUs)
    lr: float = ranged(2.5e-5, NON_NEGATIVE)
    lr_scale_world_size: bool = True
    # sgd, adam: the original's (weight decay on every parameter); adamw: decoupled weight decay, none on norm
    # weights and biases (docs/training.md#modern-recipe)
    optimizer: Literal["sgd", "adam", "adamw"] = "sgd"
    momentum: float = ranged(0.9, FRACTION)
    # null: the optimiser's own default, sgd 5e-4 (the original's), adam 0, adamw 0.05 (docs/training.md#weight-decay);
    # the run's recipe line says which applies
    weight_decay: float | None = ranged(None, NON_NEGATIVE)
    # linear warm-up over the first epochs
    warmup_epochs: float = ranged(3.0, Range(0, note="0: no warm-up"))
    # after the warm-up: step (the original: x lr_gamma every lr_step_epochs, the restart below) or cosine (from the
    # base LR down to lr_floor x base at the last optimiser step, stepped per optimiser step)
    lr_schedule: Literal["step", "cosine"] = "step"
    # step: multiply the LR by lr_gamma every this many epochs
    lr_step_epochs: int = ranged(15, Range(0, note="0: no step decay"))
    lr_gamma: float = ranged(0.2, POSITIVE)
    # original: 78 (restart to the base LR, then step every 5 epochs)
    lr_restart_epoch: int | None = ranged(None, NON_NEGATIVE)
    lr_restart_step_epochs: int = ranged(5, COUNT)
    # cosine: the last step's LR as a fraction of the base LR
    lr_floor: float = ranged(0.05, FRACTION)
    # weight averaging: the decay of an exponential moving average of the weights (and BatchNorm statistics), updated
    # after every optimiser step; validation and best.pt use the average (engine/ema.py)
    ema: float = ranged(0.0, Range(0, 1, high_open=True, note="0: off, the original"))
    # the decay ramps up as ema x (1 - exp(-updates / ema_warmup_steps)): early averages follow the fast-moving
    # weights instead of their random start
    ema_warmup_steps: int = ranged(2000, COUNT)
    # the original's clipping was commented out
    clip_grad_norm: float | None = ranged(None, Range(0, note="0 or null: no clipping"))
    freeze: list[str] = field(default_factory=list)  # regex patterns of parameter names to freeze
    # auto: bf16 where the device computes it natively (AVX512-BF16/AMX CPUs, CUDA compute >= 8.0), fp16 with
    # loss scaling on older GPUs, else float32 (utils/precision.py has the table); the run log says which
    amp: Literal["auto", "off", "fp16", "bf16"] = "auto"
    channels_last: bool = False
    # torch.compile of the model and the loss as one function (engine/compile.py). auto: on for CUDA, off on the
    # CPU, where it measured no gain (docs/benchmarks.md#compiled-training); the run's first lines say which and why
    compile: Literal["auto", "on", "off"] = "auto"
    seed: int = ranged(0, NON_NEGATIVE)
    deterministic: bool = False
    # the run's folder; a new run refuses a folder holding another run's files (engine/run_folder.py): continue
    # that run with resume=auto, or give a free folder
    out_dir: str = "runs/simplepose"
    resume: str = ""  # "", "auto" (out_dir/last.pt if present) or a checkpoint path
    init_weights: str = ""  # weights to start from (ours or the original's), not a resume
    val_every: int = ranged(1, Range(0, note="0: no validation"))  # epochs between validations
    log_every: int = ranged(10, COUNT)  # steps between log lines
    # TensorBoard event files in out_dir/tensorboard beside metrics.jsonl (an optional package: pip install
    # tensorboard). auto: when installed, else one line at the start says so; on: refuse to start without it; off
    tensorboard: Literal["auto", "on", "off"] = "auto"
    # also write last.pt every N steps
    checkpoint_every_steps: int = ranged(0, Range(0, note="0: at epoch ends only"))
    # also write last.pt at the first step after this many minutes since the last one: what a hard kill (SIGKILL, a
    # lost node) can lose; SIGTERM and Ctrl-C write it at the step they stop at (docs/training.md#fault-handling)
    checkpoint_every_minutes: float = ranged(30.0, Range(0, note="0: not by time"))
    # one run per folder: a run holds train.out_dir with a lock file (host, pid, start time) refreshed every minute;
    # a lock not refreshed for this many minutes on another host is a dead run's, taken over (utils/folder_lock.py)
    lock_stale_minutes: float = ranged(5.0, POSITIVE)
    # shortens epochs (smoke runs)
    max_steps_per_epoch: int = ranged(0, Range(0, note="0: the whole epoch"))
    device: str = "auto"  # auto, cpu, cuda, cuda:1, ...
    # BatchNorm layers stay in eval mode while training (running statistics fixed, affine parameters still
    # trained): for fine-tuning with small per-device batches, and what makes N processes x batch b exactly
    # equal to 1 process x batch N*b (per-process batch statistics differ otherwise). False: the original.
    bn_eval: bool = False


@dataclass
class DistConfig:
    sync_bn: bool = True  # DDP on CUDA only; SyncBatchNorm needs GPU modules
    # A process that makes no progress for this long (stuck in a collective, a hung network file system) ends
    # the run with an error naming the rank and the step; torchrun --max-restarts then resumes from last.pt.
    # Keep it above the longest silent stretch of a healthy run (a validation of rank-sharded images beats per
    # batch; a checkpoint write on a slow disk does not). The collectives themselves wait 60 s longer (gloo, NCCL),
    # so that the watchdog names the stuck rank first; a peer that dies is named at once (utils/peers.py).
    timeout_s: float = ranged(1800.0, Range(0, low_open=True, note="seconds"))
    backend: Literal["auto", "nccl", "gloo"] = "auto"
    find_unused_parameters: bool = False
    dp_device_ids: list[int] = ranged([], NON_NEGATIVE)  # DataParallel: empty = all visible GPUs


ResizeBackend = Literal["auto", "opencv", "torch"]  # eval.resize_backend
PeakScore = Literal["window_mean", "peak", "input_window"]  # eval.peak_score
RefineMode = Literal["centroid", "quadratic"]  # eval.refine_mode
Grouping = Literal["limb_order", "strongest_first"]  # eval.grouping
NameMatch = Literal["exact", "spelling", "position"]  # eval.keypoint_names (config/skeleton_check.py)


@dataclass
class DecodeSettings:
    """How the decoder reads the network's maps back into people (docs/evaluation.md#decoding): every setting of
    ``codec.decoder`` (peaks, limb scoring, assembly), in one object. ``EvalConfig`` inherits these fields, so each
    is the flat key ``eval.<field>`` of command lines, presets and saved configs; the decoder's functions take an
    ``EvalConfig`` as they take a ``DecodeSettings``."""

    # peaks (codec/decoder/peaks.py)
    peak_threshold: float = ranged(0.1, FRACTION)  # thre1
    # half-size of the peak windows: decoding-grid pixels for the refinement (and window_mean), pixels of the
    # scale-1 network input for the input_window score
    refine_radius: int = ranged(2, NON_NEGATIVE)
    # sub-pixel peak position: value-weighted centroid of the refinement window (original) or the vertex of
    # a parabola through the log values of the peak and its neighbours (exact for Gaussian peaks)
    refine_mode: RefineMode = "quadratic"
    refine_xy_swap_bug: bool = False  # True: the original's swapped x/y peak refinement
    # score of a refined peak: the mean of its (2 refine_radius + 1)^2 window of decoding-grid pixels (original: its
    # share of a keypoint's blob grows as the grid gets coarser), the peak value, or the mean of as many samples one
    # pixel of the scale-1 network input apart (input_window: the original's window on a COCO-sized image, whatever
    # the decoding grid and the image size). Chosen by measurement: docs/benchmarks.md#decoder-settings
    peak_score: PeakScore = "input_window"
    # keep at most this many strongest peaks per keypoint type (guards flat maps of untrained models, where
    # every pixel is a peak); 0: no limit, as the original
    max_peaks: int = ranged(100, Range(0, note="0: no limit"))
    # where neighbouring pixels tie at a peak's top (a plateau: maps rounded to bf16 or fp16 have many), one of them
    # is the peak; false: each is (the original), duplicates of one keypoint that split its person in two
    one_per_plateau: bool = True
    # scale 1 resizes the image height to this; the input_window score samples one pixel of that input apart
    boxsize: int = ranged(512, COUNT)
    # limb scoring (codec/decoder/limbs.py)
    limb_threshold: float = ranged(0.1, FRACTION)  # thre2
    connect_ratio: float = ranged(0.8, FRACTION)  # fraction of limb samples above limb_threshold
    limb_samples: int = ranged(20, COUNT)  # mid_num
    # assembly into people (codec/decoder/assemble.py)
    # how connections become people: strongest_first (every accepted connection of every limb type, strongest
    # first, joins two partial people whose keypoint types do not overlap) or limb_order (the original: limb by
    # limb in the skeleton's order, one-to-one per limb, then connection_tolerance and remove_recon settle the
    # rest). docs/evaluation.md#person-assembly
    grouping: Grouping = "strongest_first"
    len_rate: float = ranged(16.0, POSITIVE)  # a merged limb may be at most this many times a person's longest
    connection_tolerance: float = ranged(0.7, NON_NEGATIVE)  # limb_order: merge two people through a link this strong
    remove_recon: bool = False  # limb_order: a contested keypoint goes to its stronger link
    # after the connections, join partial people that no limb joined (a person whose middle keypoints are hidden, or
    # not found, falls apart into pieces) when one completes the other (no keypoint type in common) and their nearest
    # keypoints are within this many times the larger one's size (its keypoints' box diagonal), nearest first;
    # 0: never (the original). docs/benchmarks.md#grouping-in-crowds
    join_fragments: float = ranged(0.75, Range(0, note="0: never"))
    # strongest_first: two partial people join (through a connection, or as fragments) only when at least this
    # fraction of the skeleton's limbs between their keypoints is accepted by the limb maps, each by the criterion a
    # limb within one person passes: the maps draw every limb of one person, so two people the maps do not join
    # stay two (fragments that no limb could join are not affected). 0: no check (the behaviour before issue 60).
    # docs/evaluation.md#person-assembly
    join_limbs: float = ranged(0.5, FRACTION)
    # strongest_first: a person lacking a keypoint type also takes another person's peak of that type when an accepted
    # connection links it to one of its keypoints, scoring at least this fraction of the strongest connection to that
    # peak (and join_limbs' test passes): two people's keypoints of one type a few pixels apart make one peak, which
    # both keep. 0: each peak in one person only (before issue 60)
    share_peaks: float = ranged(0.7, Range(0, 1, note="0: never"))
    # strongest_first: a join (a connection, two fragments' nearest keypoints, a shared peak's connection) also needs
    # the person channel's mean along its segment to reach this: a join that crosses background is refused. Only for
    # a model taught silhouettes (the channel is blank where training had boxes: CrowdPose). 0: no check (the
    # default: every value tried lowered the oracle's AP, docs/benchmarks.md#no-two-people-in-one-issue-60)
    join_person: float = ranged(0.0, FRACTION)
    # drop people with fewer keypoints; 1 also returns keypoints no limb reached as one-keypoint people
    # (ranked after every person of 2+ keypoints, so they only add recall: docs/benchmarks.md#decoder-settings).
    # The original's filter (count < 2) never fired.
    min_parts: int = ranged(1, COUNT)
    # drop people whose total / count is below this
    min_mean_score: float = ranged(0.45, Range(0, note="0 keeps every person"))


@dataclass
class EvalConfig(DecodeSettings):
    """Test-time inference and grouping (docs/evaluation.md#test-time-inference, docs/evaluation.md#decoding).

    One flat section, so that ``eval.<field>=...`` overrides stay short: the decoding fields are inherited from
    ``DecodeSettings`` (what ``codec.decoder`` reads), the rest is the multi-scale inference
    (evaluate/inference/multiscale.py) and how it runs."""

    scales: list[float] = ranged(
        [0.5, 1.0, 1.5, 2.0, 3.0], Range(0, low_open=True, min_items=1, note="multiples of eval.boxsize")
    )
    flip: bool = True
    pad_value: int = ranged(128, Range(0, 255))
    max_downsample: int = ranged(64, COUNT)  # pad the input to a multiple of this
    max_height: int = ranged(2600, COUNT)  # cap of the resized image, pixels
    max_width: int = ranged(3800, COUNT)
    # rows of the grid the scales are averaged and decoded on: a speed setting. 192 decodes several times faster than
    # the image's size and loses nothing on COCO-like scenes, 1.4 oracle AP where people crowd (same-type keypoints a
    # few pixels apart merge: docs/benchmarks.md#grouping-in-crowds). auto: as many rows as the finest test scale's
    # output (boxsize x max(scales) / 4: 384 at the defaults), at least 192, at most the image's: the averaged maps
    # hold no finer detail. 0: the image's own size (original).
    # Original decoder: decode_height=0 refine_mode=centroid refine_xy_swap_bug=true min_parts=2
    # peak_score=window_mean max_peaks=0 grouping=limb_order one_per_plateau=false join_fragments=0
    decode_height: int | Literal["auto"] = ranged(192, Range(0, note="0: the image's own size"))
    max_images: int = ranged(0, Range(0, note="0: all images"))
    # Bad images and annotations of an evaluation's annotation file (missing, truncated or other-size images, bad
    # values, annotations of unlisted images) stop it naming the file (false), or are left out with a warning and
    # counted (true; more than half of the images left out stops it all the same): the converter's --skip-bad.
    skip_bad: bool = False
    # How the keypoint names of the annotation file's category are compared with the skeleton's (same order always):
    # exact; spelling (case, spaces, hyphens, underscores, dots ignored); position (not compared, on your word). The
    # converter's --keypoint-names (config/skeleton_check.py).
    keypoint_names: NameMatch = "exact"
    # autocast of the network's forward at test time. off (float32: the same people and AP on every CPU); auto: bf16
    # on CPUs that compute it natively (AVX512-BF16 or AMX), float32 elsewhere, GPUs included (bf16 measured no
    # faster there); evaluate/inference/inference_setup.py. auto is in evaluate.FAST and the demo's --fast; not the
    # default because bf16 changes some people found (docs/benchmarks.md#bf16-against-float32-at-test-time)
    amp: Literal["auto", "off", "fp16", "bf16"] = "off"
    # the network and its inputs in channels_last memory at test time. auto: on the CPU in bf16 (measured faster;
    # in float32 it was not: docs/benchmarks.md#inference-on-the-cpu), off on GPUs (not measured there yet)
    channels_last: Literal["auto", "on", "off"] = "auto"
    # images of one size per forward (their mirrors join the same batch when flipping)
    batch_size: int = ranged(1, COUNT)
    # what resizes each scale's maps onto the decoding grid: OpenCV (on the CPU; the maps are copied there)
    # or torch (on the network's device); auto: OpenCV when the network runs on the CPU, torch otherwise.
    # Both give the same maps (bicubic, same pixel-centre alignment) to float32 rounding.
    resize_backend: ResizeBackend = "auto"
    # where each scale's input is resized, padded, mirrored and scaled to [0, 1]: OpenCV/NumPy on the host, or
    # torch on the network's device (the uint8 image uploaded once, pinned on CUDA); auto: the device unless it is
    # the CPU, where OpenCV is faster. The inputs agree to one grey level (OpenCV's fixed-point bicubic).
    preprocess: Literal["auto", "host", "device"] = "auto"
    # pad each input further, to 8 sizes per octave (multiples of max_downsample up to 16 of them, then of 2,
    # 4, ... max_downsample: at most 1/8 more rows or columns), so cuDNN's plans are reused across image sizes; the maps
    # of the padding are dropped as always. auto: on for CUDA; on the CPU the extra pixels only cost time.
    shape_buckets: Literal["auto", "on", "off"] = "auto"
    # the network's BatchNorms folded into its convolutions for inference (models/fold.py)
    fold_batchnorm: bool = True
    # in-training validation also diagnoses where its AP goes (keypoint errors, scoring, background:
    # evaluate/metrics/diagnosis.py) into train.out_dir/diagnosis_epoch{N}/;
    # python -m simplepose.evaluate.coco_eval takes --diagnose DIR
    diagnose: bool = False


@dataclass
class TrackConfig:
    """Identities across video frames and keypoint smoothing (evaluate/track.py, docs/evaluation.md#tracking), for
    ``python -m simplepose.evaluate.demo --track [--smooth]`` and ``evaluate.PoseTracker``."""

    # People scored below this are not tracked (nor reported): the decoder's fragments of a person (a few keypoints,
    # ranked last for AP) would each start a track. 0.9167 = 0.5 + 0.5 * 5 / 6: a total keypoint and link score of
    # 5 (codec/decoder/assemble.py person_scores); 0: everyone.
    min_score: float = ranged(0.9167, Range(note="0: every person is tracked"))
    # A person may continue a track when their OKS with the track's last pose moved on by the track's velocity (the
    # skeleton's sigmas, over the keypoints found in both, scale: the larger of the two poses' whole-body sizes,
    # evaluate/metrics/oks.py:person_area) is at least min_oks; when fewer than min_shared_keypoints are found in both,
    # when
    # the IoU of their boxes is at least min_iou.
    min_oks: float = ranged(0.3, Range(0, 1, low_open=True))
    min_iou: float = ranged(0.3, Range(0, 1, low_open=True))
    min_shared_keypoints: int = ranged(2, COUNT)
    # frames an unmatched track waits for its person (occlusion, a missed detection)
    max_lost_frames: int = ranged(30, Range(0, note="0: a track ends on its first unmatched frame"))
    # frames in a row a new track must be matched in before it gets an id and its people are reported (1: at once);
    # fewer false tracks from one-frame detections, for a person's first min_hits - 1 frames unreported
    min_hits: int = ranged(3, Range(1, note="1: every new person gets an id at once"))
    smooth: bool = False  # One-Euro smoothing of each track's keypoints (False: the detector's keypoints as they are)
    # One-Euro filter per keypoint: cutoff (Hz) = min_cutoff + beta x speed (px/s). Lower min_cutoff: steadier
    # keypoints at rest, more lag when moving slowly; higher beta: less lag when moving fast, more jitter then.
    # Speeds are in pixels: for people n times as large in the picture, divide beta by n. The defaults were chosen
    # on synthetic walkers 80-140 px tall at 30 fps: docs/benchmarks.md#tracking.
    min_cutoff: float = ranged(1.0, Range(0, low_open=True, note="Hz"))
    beta: float = ranged(0.04, Range(0, note="0: a fixed cutoff"))
    # Hz: how much the speed that drives the cutoff is itself smoothed
    derivative_cutoff: float = ranged(1.0, Range(0, low_open=True, note="Hz"))


@dataclass
class Config:
    data: DataConfig = field(default_factory=DataConfig)
    augment: AugmentConfig = field(default_factory=AugmentConfig)
    targets: TargetConfig = field(default_factory=TargetConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    dist: DistConfig = field(default_factory=DistConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    track: TrackConfig = field(default_factory=TrackConfig)
