"""Grouping speed on ground-truth maps of the real COCO sample, one thread.

    python -m bench.grouping [--images DIR --annotations FILE] [--repeat 3] [key=value ...]

Prints two figures (recorded with the original's on the same machine in docs/benchmarks.md#decoding):
* decoding: peaks + limb scoring + assembly on the averaged maps;
* post-network: flip fusion + resize onto the decoding grid + decoding, starting from the network-shaped
  (2, 50, h, w) output at scale 1 (boxsize / image height; the maps a perfect network would give, drawn
  from the annotations).
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
from simplepose.config.config_file import add_config_arguments, config_from_args
from simplepose.config.schema import OUTPUT_STRIDE, DecodeSettings
from simplepose.config.skeleton import Skeleton
from simplepose.config.skeleton_file import skeleton_of
from simplepose.data.image_files import read_image
from simplepose.evaluate.inference.map_source import ImageMeta, InputBatch
from simplepose.evaluate.inference.multiscale import fuse_flip, make_batch, prepare_input, resize_to_grid
from simplepose.evaluate.inference.oracle import annotation_oracle
from simplepose.evaluate.inference.plan import decode_grid, scale_factors
from simplepose.evaluate.metrics.annotations import load_ground_truth
from simplepose.utils.errors import cli_main
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
    add_config_arguments(p)
    args = p.parse_args(argv)
    cfg = config_from_args(args)
    torch.set_num_threads(1)
    cv2.setNumThreads(1)
    sk = skeleton_of(cfg)
    items = network_outputs(*inputs_or_sample(args.images, args.annotations), cfg, sk)
    stride = OUTPUT_STRIDE
    decoded = [(grid_maps(o, v, g, cfg.eval.flip, stride, sk), (hw[1] / g[1], hw[0] / g[0])) for o, v, g, hw in items]
    params = cfg.eval
    people = sum(len(decode_people(m, params, s, skeleton=sk)) for m, s in decoded)
    decode_rate = rate(lambda m, s: decode_people(m, params, s, skeleton=sk), decoded, args.repeat)
    post_rate = rate(lambda o, v, g, hw: post_network(o, v, g, hw, cfg, stride, sk, params), items, args.repeat)
    grid = {0: "image size", "auto": "auto"}.get(cfg.eval.decode_height, f"{cfg.eval.decode_height} rows")
    print(f"{len(items)} images, {people} people, flip {cfg.eval.flip}, decoding grid {grid}, 1 thread")
    print(f"decoding (peaks + limbs + assembly): {decode_rate:.1f} images/s")
    print(f"post-network (flip fusion + resize + decoding): {post_rate:.1f} images/s")
    print(f"decoding maps: {np.mean([m.shape[1] * m.shape[2] for m, _ in decoded]):.0f} pixels on average")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
