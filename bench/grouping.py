"""Grouping speed on ground-truth maps of the real COCO sample, one thread.

    python -m bench.grouping [--images DIR --annotations FILE] [--repeat 3] [key=value ...]
    python -m bench.grouping --versus eval.join_limbs=0 eval.share_peaks=0 [--crowds 5 10 20 40] [--repeat 5]
    python -m bench.grouping --record people.npz [key=value ...]    # then, after a change to the decoder:
    python -m bench.grouping --same-as people.npz [key=value ...]

Prints two figures (recorded with the original's on the same machine in docs/benchmarks.md#decoding):
* decoding: peaks + limb scoring + assembly on the averaged maps;
* post-network: flip fusion + resize onto the decoding grid + decoding, starting from the network-shaped
  (2, 50, h, w) output at scale 1 (boxsize / image height; the maps a perfect network would give, drawn
  from the annotations).

``--versus key=value ...``: the decoding figure of the configured decoder and of the same with those overrides, in
alternate rounds over the same maps (``--repeat`` rounds each; the median round's rate and the range). ``--crowds N
...``: also the decoding time of synthetic crowds of N people (copies of the sample's most complete person, jittered
on a 480 x 640 picture, drawn as targets at scale 1), per image and per person, for each side: how the decoding
scales with the crowd.

``--record FILE`` / ``--same-as FILE``: whether a change to the decoder (one meant to make it faster) leaves its
results alone. Decodes a fixed set of maps with the configured settings (the sample's, synthetic crowds of 2 to 40
people, and a third of them with noise, a random gain and 16-bit rounding, as a network's) and writes every person's
keypoints and score to a new FILE, or compares them with FILE's exactly (exit status 1 where any differs).
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import cv2
import numpy as np
import torch

from simplepose.codec.decoder.decode import decode_people
from simplepose.codec.layout import ChannelLayout
from simplepose.codec.pose_codec import PoseCodec
from simplepose.config.config_file import add_config_arguments, config_from_args, load_config
from simplepose.config.schema import OUTPUT_STRIDE, DecodeSettings
from simplepose.config.skeleton import Skeleton
from simplepose.config.skeleton_file import skeleton_of
from simplepose.data.image_files import read_image
from simplepose.evaluate.inference.map_source import ImageMeta, InputBatch
from simplepose.evaluate.inference.multiscale import fuse_flip, make_batch, prepare_input, resize_to_grid
from simplepose.evaluate.inference.oracle import annotation_oracle
from simplepose.evaluate.inference.plan import decode_grid, scale_factors
from simplepose.evaluate.metrics.annotations import load_ground_truth
from simplepose.utils.errors import UserError, cli_main
from simplepose.utils.io import atomic_write
from tests.paths import inputs_or_sample


def network_outputs(images_dir: Path, annotations: Path, cfg, skeleton: Skeleton, limit: int = 0):
    """Per image: (network-shaped output (2 or 1, C, h, w), resized size, grid size, image size)."""
    truth = load_ground_truth(annotations, skeleton, cfg.eval)  # eval.skip_bad: bad images left out
    coco = truth.coco
    oracle = annotation_oracle(coco, cfg.targets, skeleton)
    items = []
    for image_id in sorted(truth.images)[: limit or None]:
        image = read_image(images_dir / coco.imgs[image_id]["file_name"])
        h, w = image.shape[:2]
        m = scale_factors(h, w, dataclasses.replace(cfg.eval, scales=[1.0]))[0]
        padded, (hr, wr) = prepare_input(image, m, cfg.eval)
        batch = make_batch([padded], cfg.eval.flip, torch.device("cpu"))
        meta = ImageMeta(image_id, (h, w), (hr, wr), tuple(batch.shape[2:]))
        out = oracle(InputBatch(batch, (meta,), cfg.eval.flip))
        items.append((out, (hr, wr), decode_grid(h, w, cfg.eval), (h, w)))
    return items


def grid_maps(out, valid_hw, grid, flip: bool, stride: int, skeleton: Skeleton) -> np.ndarray:
    """Network-shaped output of one image -> (C, rows, cols) maps on the decoding grid."""
    flip_index = torch.tensor(ChannelLayout.of(skeleton).flip) if flip else None
    return resize_to_grid(fuse_flip(out, flip_index), valid_hw, grid, stride)[0].transpose(2, 0, 1)


def post_network(out, valid_hw, grid, image_hw, cfg, stride: int, skeleton: Skeleton, params: DecodeSettings):
    maps = grid_maps(out, valid_hw, grid, cfg.eval.flip, stride, skeleton)
    return decode_people(maps, params, (image_hw[1] / grid[1], image_hw[0] / grid[0]), skeleton=skeleton)


def alternated(sides: dict[str, tuple], maps: list[tuple], rounds: int, skeleton: Skeleton) -> dict[str, list[float]]:
    """{side: images/s of each round} of decoding ``maps`` ((maps, scale) per image) with each side's settings
    (``sides``: name -> DecodeSettings), the sides in turn within each round."""
    out: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(rounds):
        for name, params in sides.items():
            start = time.perf_counter()
            for m, sc in maps:
                decode_people(m, params, sc, skeleton=skeleton)
            out[name].append(len(maps) / (time.perf_counter() - start))
    return out


def crowd_maps(truth_kp: np.ndarray, n: int, skeleton: Skeleton, cfg, seed: int = 0) -> tuple[np.ndarray, float]:
    """(maps, scale) of a synthetic crowd: ``n`` copies of one person's internal keypoints ``truth_kp`` (K, 3), scaled
    to 200 px tall and jittered over a 480 x 640 picture (seeded), drawn as the targets of scale 1."""
    rng = np.random.default_rng(seed + n)
    labelled = truth_kp[:, 2] < 2
    xy = truth_kp[:, :2] - truth_kp[labelled, :2].min(0)
    xy *= 200.0 / max(np.ptp(truth_kp[labelled, 1]), 1.0)
    people = np.repeat(truth_kp[None], n, 0).astype(np.float32)
    people[..., :2] = xy + rng.uniform((0, 0), (560, 260), (n, 1, 2))
    codec = PoseCodec(skeleton, cfg.targets)
    return codec.encode(people, None, (480 // OUTPUT_STRIDE, 640 // OUTPUT_STRIDE))[0], float(OUTPUT_STRIDE)


def rate(fn, items, repeat: int) -> float:
    start = time.perf_counter()
    for _ in range(repeat):
        for it in items:
            fn(*it)
    return repeat * len(items) / (time.perf_counter() - start)


@cli_main
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.grouping", description=__doc__.split("\n\n")[0])
    p.add_argument("--images", type=Path, help="image folder (default: the real COCO sample's)")
    p.add_argument("--annotations", type=Path, help="COCO keypoint annotations (default: the real COCO sample's)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--versus", nargs="+", default=[], metavar="key=value", help="the other side's overrides")
    p.add_argument("--crowds", nargs="+", type=int, default=[], metavar="N", help="people per synthetic crowd")
    p.add_argument("--record", type=Path, help="write the people of a fixed set of maps to this new .npz")
    p.add_argument("--same-as", type=Path, help="compare the people of the same maps with a --record file")
    add_config_arguments(p)
    args = p.parse_args(argv)
    cfg = config_from_args(args)
    if args.record and args.record.exists():
        raise UserError(
            f"{args.record} exists: give a new --record path (a record is never replaced)", file=args.record
        )
    if args.same_as and not args.same_as.is_file():
        raise UserError(f"{args.same_as} not found: make it first with --record (before the change)", file=args.same_as)
    torch.set_num_threads(1)
    cv2.setNumThreads(1)
    sk = skeleton_of(cfg)
    items = network_outputs(*inputs_or_sample(args.images, args.annotations), cfg, sk)
    stride = OUTPUT_STRIDE
    decoded = [(grid_maps(o, v, g, cfg.eval.flip, stride, sk), (hw[1] / g[1], hw[0] / g[0])) for o, v, g, hw in items]
    params = cfg.eval
    if args.record or args.same_as:
        return identity(args, cfg, sk, decoded)
    people = sum(len(decode_people(m, params, s, skeleton=sk)) for m, s in decoded)
    decode_rate = rate(lambda m, s: decode_people(m, params, s, skeleton=sk), decoded, args.repeat)
    post_rate = rate(lambda o, v, g, hw: post_network(o, v, g, hw, cfg, stride, sk, params), items, args.repeat)
    grid = {0: "image size", "auto": "auto"}.get(cfg.eval.decode_height, f"{cfg.eval.decode_height} rows")
    print(f"{len(items)} images, {people} people, flip {cfg.eval.flip}, decoding grid {grid}, 1 thread")
    print(f"decoding (peaks + limbs + assembly): {decode_rate:.1f} images/s")
    print(f"post-network (flip fusion + resize + decoding): {post_rate:.1f} images/s")
    print(f"decoding maps: {np.mean([m.shape[1] * m.shape[2] for m, _ in decoded]):.0f} pixels on average")
    if args.versus:
        compare(args, cfg, sk, decoded)
    return 0


def compare(args: argparse.Namespace, cfg, sk: Skeleton, decoded: list[tuple]) -> None:
    """``--versus`` and ``--crowds`` (module docstring): the configured decoder against it with ``args.versus``."""
    sides = {
        "configured": cfg.eval,
        " ".join(args.versus): load_config(args.config, [*args.overrides, *args.versus]).eval,
    }
    report_sides(alternated(sides, decoded, args.repeat, sk), "decoding, alternated rounds")
    kp = fullest_person(args, cfg, sk)
    for n in args.crowds:
        maps = [crowd_maps(kp, n, sk, cfg, seed) for seed in range(5)]
        for name, r in alternated(sides, maps, args.repeat, sk).items():
            found = np.mean([len(decode_people(m, sides[name], sc, skeleton=sk)) for m, sc in maps])
            ms = 1000.0 / float(np.median(r))
            print(f"crowd of {n}, {name}: {ms:.1f} ms per image, {ms / n:.2f} ms per person, {found:.1f} found")


def fullest_person(args: argparse.Namespace, cfg, sk: Skeleton) -> np.ndarray:
    """(K, 3) internal keypoints of the sample's person with the most keypoints (the synthetic crowds' model)."""
    truth = load_ground_truth(inputs_or_sample(args.images, args.annotations)[1], sk, cfg.eval).coco
    fullest = max(truth.dataset["annotations"], key=lambda a: a.get("num_keypoints", 0))
    return sk.to_internal(np.asarray(fullest["keypoints"], np.float32).reshape(1, -1, 3))[0]


def identity(args: argparse.Namespace, cfg, sk: Skeleton, decoded: list[tuple]) -> int:
    """``--record`` / ``--same-as`` (module docstring)."""
    kp = fullest_person(args, cfg, sk)
    maps = list(decoded) + [crowd_maps(kp, n, sk, cfg, seed) for n in (2, 5, 10, 20, 40) for seed in range(2)]
    rng = np.random.default_rng(1)
    for m, sc in maps[::3]:
        noisy = m * rng.uniform(0.7, 1.3) + rng.normal(0, 0.06, m.shape)
        maps.append((noisy.astype(np.float16).astype(np.float32), sc))
    found = {}
    for i, (m, sc) in enumerate(maps):
        people = decode_people(m, cfg.eval, sc, skeleton=sk)
        found[f"keypoints_{i}"] = np.array([q.keypoints for q in people]).reshape(-1, sk.num_dataset_keypoints, 3)
        found[f"scores_{i}"] = np.array([q.score for q in people], np.float64)
    total = sum(len(v) for k, v in found.items() if k.startswith("scores"))
    if args.record:
        atomic_write(args.record, lambda f: np.savez(f, **found))
        print(f"{len(maps)} maps, {total} people written to {args.record}")
        return 0
    with np.load(args.same_as) as before:
        differ = sorted(
            {int(k.split("_")[1]) for k in set(found) | set(before.files)
             if k not in before.files or k not in found or not np.array_equal(found[k], before[k], equal_nan=True)}
        )  # fmt: skip
    if differ:
        print(f"different people in {len(differ)} of {len(maps)} maps (maps {differ[:10]}): the decoder changed")
        return 1
    print(f"the same people: {len(maps)} maps, {total} people, as in {args.same_as}")
    return 0


def report_sides(rates: dict[str, list[float]], what: str) -> None:
    for name, r in rates.items():
        print(f"{what}: {name}: {np.median(r):.1f} images/s (rounds {min(r):.1f}-{max(r):.1f})")


if __name__ == "__main__":
    raise SystemExit(main())
