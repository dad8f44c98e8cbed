"""COCO AP and AR of every candidate decoder setting, on ground-truth, network and degraded maps.

    python -m bench.decoder_table [--ckpt runs/quickstart/best.pt [--val-dir cache/synthetic]] [--limit N]
        [--decode-height 192 0] [--refine quadratic centroid] [--min-parts 1 2]
        [--peak-score window_mean peak input_window] [--max-peaks 100 0] [--config FILE] [key=value ...]

Three kinds of maps (the table's column groups), each scored by pycocotools against its own annotations:

(a) oracle: the ground-truth target maps (evaluate/inference/oracle.py) of the real COCO sample (27 images), at the eval
    settings of ``--config`` and ``key=value`` (default: config/schema.py, 5 scales + flip);
(b) model: the predictions of a trained checkpoint (``--ckpt``; the quick start writes runs/quickstart/best.pt) on
    its synthetic validation split (``--val-dir``: images/ and annotations/person_keypoints_val.json; default: the
    checkpoint's data.synthetic_dir), at the checkpoint's own eval settings; left out without ``--ckpt``;
(c) degraded: the oracle maps of (a) made to look like a network's output. Each network-shaped output (every test
    scale, the image and its mirror) is changed, in this order, on its keypoint and limb channels (cells: of the
    stride-4 output grid; seeded by ``--seed`` and the image id, so the table is deterministic):
    1. noise: Gaussian, standard deviation 0.1, independent per cell (smoothed by the blur that follows: a network's
       errors are smooth at its own resolution, so they do not multiply into many small peaks on a finer grid);
    2. blur: Gaussian, sigma 1 cell (a network's peaks and limbs are wider than the targets);
    3. attenuation: each channel x a gain drawn per image and channel, uniform in [0.4, 0.8] (a network's peaks fall
       short of 1, more for some keypoint types than for others);
    4. spurious peaks: 2 bumps per keypoint type and image, Gaussians of the keypoint targets' sigma (9 input
       pixels) and height uniform in [0.2, 0.6], at uniform random image positions, max-combined with the map.
    Gains and bumps are the same in every scale and, on the mirrored channel, in the mirror, as a network's errors
    would be on the same picture: averaging the scales does not remove them.

Rows: every combination of the candidate decoding settings (the product of the lists), then the original decoder
(image-size grid, centroid refinement with its x/y swap, min_parts 2, window mean, no peak limit). "default" marks the
defaults of config/schema.py. The network (or the oracle drawing) runs once per image and test scale, each decoding
grid's maps are made once per image, and every candidate only decodes them: the whole table takes minutes.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import torch

from bench.map_cache import cached
from simplepose.codec.decoder.decode import decode_people
from simplepose.codec.layout import ChannelLayout
from simplepose.codec.person import Person
from simplepose.config.config_file import add_config_arguments, config_from_args
from simplepose.config.schema import OUTPUT_STRIDE, Config, EvalConfig
from simplepose.config.skeleton import Skeleton
from simplepose.config.skeleton_file import skeleton_of
from simplepose.data.image_files import image_path, read_image
from simplepose.evaluate.estimator import PoseEstimator
from simplepose.evaluate.inference.checkpoint_model import load_model
from simplepose.evaluate.inference.map_source import InputBatch, MapSource
from simplepose.evaluate.inference.multiscale import multiscale_maps_batch
from simplepose.evaluate.inference.oracle import annotation_oracle
from simplepose.evaluate.inference.plan import InferencePlan
from simplepose.evaluate.metrics.annotations import load_ground_truth
from simplepose.evaluate.metrics.coco_results import coco_results
from simplepose.evaluate.metrics.keypoint_stats import coco_keypoint_stats
from simplepose.models.weights import carried_skeleton
from simplepose.utils.distributed import select_device
from simplepose.utils.errors import UserError, cli_main
from simplepose.utils.progress_bar import progress_bar
from tests.paths import inputs_or_sample

_EVAL_DEFAULTS = EvalConfig()
_EVAL_TYPES = typing.get_type_hints(EvalConfig)


@dataclass(frozen=True)
class Candidate:
    """The decoding settings a row of the table changes (``eval.*``); the rest stays as configured."""

    decode_height: int
    refine_mode: str
    min_parts: int
    peak_score: str
    max_peaks: int
    refine_xy_swap_bug: bool = False

    def apply(self, cfg: EvalConfig) -> EvalConfig:
        return dataclasses.replace(cfg, **dataclasses.asdict(self))

    def note(self) -> str:
        if self == ORIGINAL:
            return "original decoder"
        defaults = {k: getattr(_EVAL_DEFAULTS, k) for k in dataclasses.asdict(self)}
        return "default" if dataclasses.asdict(self) == defaults else ""


ORIGINAL = Candidate(0, "centroid", 2, "window_mean", 0, True)


@dataclass(frozen=True)
class Degradation:
    """How (c) turns oracle outputs into network-like ones (module docstring); lengths in output cells."""

    noise_std: float = 0.1
    blur_sigma: float = 1.0
    gain: tuple[float, float] = (0.4, 0.8)
    bumps_per_keypoint: int = 2
    bump_height: tuple[float, float] = (0.2, 0.6)


@dataclass
class ImageErrors:
    """The errors (c) puts on every output of one image (``random_errors``)."""

    gains: np.ndarray  # (C,) factor of each output channel (1 where unchanged)
    bumps: np.ndarray  # (N, 4) spurious peaks: keypoint channel, x, y (image pixels), height


@dataclass
class Source:
    """One column group: images with annotations, the config they are evaluated at, and their map sources."""

    name: str
    coco: typing.Any  # pycocotools COCO
    image_ids: list[int]
    images_dir: Path
    cfg: Config
    source_for: Callable[[int, tuple[int, int]], MapSource]  # (image id, image (rows, cols)) -> map source
    device: torch.device
    skeleton: Skeleton


def degraded_channels(skeleton: Skeleton) -> np.ndarray:
    """The channels (c) changes: the limb and keypoint maps, the ones the decoder reads."""
    layout = ChannelLayout.of(skeleton)
    return np.r_[layout.limbs, layout.keypoints]


def random_errors(
    rng: np.random.Generator, image_hw: tuple[int, int], d: Degradation, skeleton: Skeleton
) -> ImageErrors:
    """The channel gains and spurious peaks of one image of ``image_hw`` (rows, cols)."""
    changed = degraded_channels(skeleton)
    gains = np.ones(skeleton.num_channels)
    gains[changed] = rng.uniform(*d.gain, changed.size)
    keypoints = ChannelLayout.of(skeleton).keypoints
    channel = np.repeat(np.arange(keypoints.start, keypoints.stop), d.bumps_per_keypoint)
    xy = rng.uniform(0, 1, (channel.size, 2)) * (image_hw[1], image_hw[0])
    return ImageErrors(gains, np.column_stack([channel, xy, rng.uniform(*d.bump_height, channel.size)]))


def draw_bumps(maps: np.ndarray, bumps: np.ndarray, sigma: float, stride: int) -> None:
    """Max-combine Gaussian bumps (rows: channel, x, y in input pixels, height) into (C, h, w) maps, in place."""
    h, w = maps.shape[1:]
    cy = np.arange(h) * stride + (stride / 2 - 0.5)
    cx = np.arange(w) * stride + (stride / 2 - 0.5)
    for c, x, y, height in bumps.tolist():
        gy = np.exp(-((cy - y) ** 2) / (2 * sigma**2))
        gx = np.exp(-((cx - x) ** 2) / (2 * sigma**2))
        np.maximum(maps[int(c)], (height * gy[:, None] * gx[None, :]).astype(np.float32), out=maps[int(c)])


def degraded_source(
    source: MapSource,
    errors: ImageErrors,
    rng: np.random.Generator,
    d: Degradation,
    flip_test: bool,
    sigma: float,
    stride: int,
    skeleton: Skeleton,
) -> MapSource:
    """``source`` followed by the degradation ``d`` (module docstring) on every output of a batch of one image:
    the image, then its mirror when ``flip_test``. ``errors``: ``random_errors`` of the image; ``sigma`` (of the
    bumps) in input pixels; ``rng`` draws the noise."""
    flip = np.asarray(ChannelLayout.of(skeleton).flip)
    changed = degraded_channels(skeleton)

    def run(batch: InputBatch) -> torch.Tensor:
        out = source(batch).cpu().numpy().astype(np.float32, copy=True)
        resize_xy = batch.metas[0].resize_xy
        bumps = errors.bumps.copy()
        bumps[:, 1] = (bumps[:, 1] + 0.5) * resize_xy[0] - 0.5  # OpenCV's resize maps pixel centres
        bumps[:, 2] = (bumps[:, 2] + 0.5) * resize_xy[1] - 0.5
        mirrored = bumps.copy()
        mirrored[:, 0] = flip[bumps[:, 0].astype(np.int64)]  # mirror channel c holds what channel flip[c] holds
        mirrored[:, 1] = batch.pixels.shape[3] - 1 - bumps[:, 1]
        for i, maps in enumerate(out):
            is_mirror = flip_test and i >= len(out) // 2
            noisy = maps[changed] + rng.normal(0.0, d.noise_std, maps[changed].shape).astype(np.float32)
            hwc = np.ascontiguousarray(noisy.transpose(1, 2, 0))
            blurred = cv2.GaussianBlur(hwc, (0, 0), d.blur_sigma, borderType=cv2.BORDER_REPLICATE)
            gains = errors.gains[flip] if is_mirror else errors.gains
            maps[changed] = blurred.reshape(hwc.shape).transpose(2, 0, 1) * gains[changed, None, None]
            draw_bumps(maps, mirrored if is_mirror else bumps, sigma, stride)
        return torch.from_numpy(out)

    return run


def decode_source(
    source: Source, candidates: list[Candidate], progress: bool = True
) -> dict[Candidate, list[list[Person]]]:
    """Every candidate's people on every image of ``source``, in ``source.image_ids`` order."""
    people: dict[Candidate, list[list[Person]]] = {c: [] for c in candidates}
    heights = sorted({c.decode_height for c in candidates}, reverse=True)
    plans = {
        h: InferencePlan.of(source.skeleton, dataclasses.replace(source.cfg.eval, decode_height=h)) for h in heights
    }
    for image_id in progress_bar(source.image_ids, desc=source.name, unit="img", disable=not progress):
        image = read_image(image_path(source.images_dir, source.coco.imgs[image_id], "the annotation file"))
        maps_source = cached(source.source_for(image_id, image.shape[:2]))
        for height in heights:
            ((maps, scale),) = multiscale_maps_batch(
                [image], plans[height], maps_source, source.device, keys=[image_id]
            )
            for c in candidates:
                if c.decode_height == height:
                    people[c].append(decode_people(maps, c.apply(source.cfg.eval), scale, skeleton=source.skeleton))
    return people


def score(source: Source, people: list[list[Person]]) -> tuple[float, float]:
    """(AP, AR) of one candidate's people on ``source``."""
    results = coco_results(source.image_ids, people)
    stats, _ = coco_keypoint_stats(source.coco, results, source.image_ids, source.skeleton.sigmas)
    return stats["AP"], stats["AR"]


def candidate_grid(args: argparse.Namespace) -> list[Candidate]:
    """The product of the candidate lists, then the original decoder (once)."""
    rows = [Candidate(*v) for v in itertools.product(
        args.decode_height, args.refine, args.min_parts, args.peak_score, args.max_peaks
    )]  # fmt: skip
    return rows + [ORIGINAL] if ORIGINAL not in rows else rows


def oracle_sources(args: argparse.Namespace, cfg: Config, device: torch.device) -> list[Source]:
    """(a) and (c) on the real COCO sample (or --images / --annotations)."""
    images, annotations = inputs_or_sample(args.images, args.annotations)
    skeleton = skeleton_of(cfg)
    gt = load_ground_truth(annotations, skeleton, cfg.eval)  # eval.skip_bad: bad images left out
    coco, ids = gt.coco, sorted(gt.images)[: args.limit or None]
    sigma, d = cfg.targets.sigma, Degradation()

    truth = annotation_oracle(coco, cfg.targets, skeleton)

    def oracle(image_id: int, image_hw: tuple[int, int]) -> MapSource:
        return truth

    def degraded(image_id: int, image_hw: tuple[int, int]) -> MapSource:
        rng = np.random.default_rng([args.seed, image_id])
        errors = random_errors(rng, image_hw, d, skeleton)
        return degraded_source(truth, errors, rng, d, cfg.eval.flip, sigma, OUTPUT_STRIDE, skeleton)

    return [Source("(a) oracle", coco, ids, images, cfg, oracle, device, skeleton),
            Source("(c) degraded", coco, ids, images, cfg, degraded, device, skeleton)]  # fmt: skip


def model_source(args: argparse.Namespace, device: torch.device) -> Source:
    """(b): the checkpoint's predictions on its synthetic validation split, at its own eval settings."""
    model, cfg = load_model(args.ckpt, args.config, args.overrides, device)
    val_dir = Path(args.val_dir or cfg.data.synthetic_dir)
    annotations = val_dir / "annotations" / "person_keypoints_val.json"
    if not annotations.is_file():
        raise UserError(f"{annotations} not found: give --val-dir, the folder the quick start made (python -m "
                        "data.synthetic --out DIR makes one)")  # fmt: skip
    skeleton = carried_skeleton(model)
    gt = load_ground_truth(annotations, skeleton, cfg.eval)
    coco, ids = gt.coco, sorted(gt.images)[: args.limit or None]
    network = PoseEstimator.from_model(model, cfg.eval, device).source  # the API's network, maps cached here
    return Source("(b) model", coco, ids, val_dir / "images", cfg, lambda image_id, hw: network, device, skeleton)


def markdown_table(candidates: list[Candidate], columns: dict[str, dict[Candidate, tuple[float, float]]]) -> str:
    head = ["decode_height", "refine", "min_parts", "peak_score", "max_peaks"]
    head += [f"{name} {stat}" for name in columns for stat in ("AP", "AR")] + ["note"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in candidates:
        refine = c.refine_mode + (" (x/y swapped)" if c.refine_xy_swap_bug else "")
        height = str(c.decode_height) if c.decode_height > 0 else "full"
        cells = [height, refine, str(c.min_parts), c.peak_score, str(c.max_peaks)]
        cells += [f"{v:.3f}" for col in columns.values() for v in col[c]] + [c.note()]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.decoder_table", description=__doc__.split("\n\n")[0])
    p.add_argument("--ckpt", help="trained checkpoint for (b), e.g. runs/quickstart/best.pt (without: no (b))")
    p.add_argument("--val-dir", help="(b)'s synthetic dataset (default: the checkpoint's data.synthetic_dir)")
    p.add_argument("--images", type=Path, help="(a), (c): image folder (default: the real COCO sample's)")
    p.add_argument("--annotations", type=Path, help="(a), (c): annotations (default: the real COCO sample's)")
    p.add_argument("--limit", type=int, default=0, help="first N images of each source (0: all)")
    p.add_argument("--seed", type=int, default=0, help="seed of (c)'s degradation")
    p.add_argument("--device", default="cpu", help="(b)'s network: cpu, auto, cuda ...")
    p.add_argument("--decode-height", type=int, nargs="+", default=[192, 0], help="0: the image's size")
    refine_modes = list(typing.get_args(_EVAL_TYPES["refine_mode"]))
    p.add_argument("--refine", nargs="+", default=refine_modes, choices=refine_modes)
    p.add_argument("--min-parts", type=int, nargs="+", default=[1, 2])
    score_modes = list(typing.get_args(_EVAL_TYPES["peak_score"]))
    p.add_argument("--peak-score", nargs="+", default=score_modes, choices=score_modes)
    p.add_argument("--max-peaks", type=int, nargs="+", default=[100, 0], help="0: no limit")
    p.add_argument("--no-progress", dest="progress", action="store_false")
    add_config_arguments(p)
    return p


@cli_main
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    cfg = config_from_args(args)
    device = select_device(args.device, cpu_hint="--device cpu")
    candidates = candidate_grid(args)
    sources = oracle_sources(args, cfg, torch.device("cpu"))
    if args.ckpt:
        sources.insert(1, model_source(args, device))
    columns = {}
    for source in sources:
        people = decode_source(source, candidates, args.progress)
        columns[source.name] = {c: score(source, people[c]) for c in candidates}
        e = source.cfg.eval
        print(f"{source.name}: {len(source.image_ids)} images, scales {e.scales}, flip {e.flip}, boxsize {e.boxsize}")
    if not args.ckpt:
        print("(b) left out: give --ckpt (the quick start's runs/quickstart/best.pt) and --val-dir")
    print(markdown_table(candidates, columns))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
