"""Two ways of running a checkpoint at test time, person by person: AP (with annotations), the people each finds,
matched one to one by OKS (unmatched counted), and the distances of their shared keypoints.

    python -m bench.test_time_precision --ckpt runs/quickstart/best.pt --images cache/synthetic/images \\
        --annotations cache/synthetic/annotations/person_keypoints_val.json
    python -m bench.test_time_precision --ckpt runs/paper/last.pt --images ../shared/data/coco_sample/images \\
        --max-images 8 eval.boxsize=256 eval.scales=[1.0]

The reference is ``--reference`` (default ``eval.amp=off eval.channels_last=off``: float32 NCHW, the default), the
candidate ``--candidate`` (default ``eval.amp=auto eval.channels_last=auto``: what this machine
chooses; ``eval.amp=bf16`` forces bf16 where it is emulated); trailing ``key=value`` overrides apply to both. People
pair up when their OKS (the reference person's keypoint box as scale) is at least 0.5; the summary says how many of
each side found no partner, how many shared keypoints lie within 1 and 2 pixels of the image (and the largest
distance), and how many keypoints one side found and the other did not. Without ``--annotations`` every .jpg of
``--images`` (sorted) is compared.
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np
import torch

from simplepose.codec.person import Person, keypoint_array
from simplepose.config.skeleton import Skeleton
from simplepose.evaluate.estimator import PoseEstimator
from simplepose.evaluate.inference.checkpoint_model import load_model
from simplepose.evaluate.metrics.annotations import load_ground_truth
from simplepose.evaluate.metrics.coco_results import coco_results
from simplepose.evaluate.metrics.keypoint_stats import keypoint_stats
from simplepose.evaluate.metrics.people_agreement import people_agreement
from simplepose.utils.errors import UserError, cli_main

CPU = torch.device("cpu")


@dataclass
class Side:
    name: str
    skeleton: Skeleton
    people: dict[int, list[Person]] = field(default_factory=dict)
    seconds: float = 0.0


def image_files(
    images: Path, annotations: str | None, limit: int, ckpt: str, overrides: list[str]
) -> tuple[dict[int, Path], object]:
    """(image id -> file, the COCO annotations or None), the first ``limit`` (0: all) by id. The annotations are
    read as an evaluation reads them (``load_ground_truth``: checked against the checkpoint's skeleton)."""
    if annotations:
        model, cfg = load_model(ckpt, None, overrides, CPU)
        truth = load_ground_truth(annotations, model.skeleton, cfg.eval)
        coco = truth.coco
        files = {i: images / truth.images[i]["file_name"] for i in sorted(truth.images)}
    else:
        coco, files = None, {i: f for i, f in enumerate(sorted(images.glob("*.jpg")))}
    if not files:
        raise UserError(f"{images}: no images to compare", file=images)
    return dict(list(files.items())[:limit] if limit else files.items()), coco


def run_side(name: str, ckpt: str, overrides: list[str], files: dict[int, Path]) -> Side:
    model, cfg = load_model(ckpt, None, overrides, CPU)
    estimator = PoseEstimator.from_model(model, cfg.eval, CPU)
    side = Side(name, model.skeleton)
    for image_id, path in files.items():
        image = cv2.imread(str(path), cv2.IMREAD_COLOR | cv2.IMREAD_IGNORE_ORIENTATION)
        if image is None:
            raise UserError(f"{path}: not a readable image", file=path)
        side.people[image_id] = estimator.predict_batch([image])[0]
        side.seconds += estimator.timing.network_s + estimator.timing.decoding_s
    return side


def summary(ref: Side, cand: Side, coco, ids: list[int]) -> list[str]:
    skeleton = ref.skeleton
    lines = []
    for side in (ref, cand):
        people = sum(len(side.people[i]) for i in ids)
        line = f"{side.name}: {people} people on {len(ids)} images, {len(ids) / side.seconds:.2f} images/s"
        if coco is not None:
            stats, _ = keypoint_stats(coco, coco_results(ids, [side.people[i] for i in ids]), ids, skeleton)
            line += f", AP {stats['AP']:.3f} (AP50 {stats['AP50']:.3f}, AR {stats['AR']:.3f})"
        lines.append(line)
    for what, min_score in (("all people", 0.0), ("people of 2+ keypoints (score >= 0.5)", 0.5)):
        distances: list[float] = []
        k = skeleton.num_dataset_keypoints
        kept = {id(side): {i: keypoint_array([p for p in side.people[i] if p.score >= min_score], k) for i in ids}
                for side in (cand, ref)}  # fmt: skip
        parts = [people_agreement(kept[id(cand)][i], kept[id(ref)][i], skeleton.sigmas, distances=distances)
                 for i in ids]  # fmt: skip
        total = {k: sum(p[k] for p in parts) for k in parts[0]}
        lines.append(
            f"{what}, matched by OKS >= 0.5: {total['matched']} pairs; unmatched: {total['want'] - total['matched']} "
            f"of the reference's {total['want']}, {total['got'] - total['matched']} of the candidate's {total['got']}"
        )
        d = np.asarray(distances)
        if len(d):
            lines.append(
                f"{what}: shared keypoints of matched people: {len(d)}; within 1 px {np.mean(d <= 1):.1%}, within 2 px "
                f"{np.mean(d <= 2):.1%}, median {statistics.median(d):.3f} px, 99th percentile "
                f"{np.quantile(d, 0.99):.2f} px, max {d.max():.1f} px; found by one side only: {total['one_side']}"
            )
    return lines


@cli_main
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.test_time_precision", description=__doc__.split("\n\n")[0])
    p.add_argument("--ckpt", required=True)
    p.add_argument("--images", required=True, type=Path)
    p.add_argument("--annotations", help="COCO keypoints JSON: AP of each side, and its images")
    p.add_argument("--max-images", type=int, default=0, help="the first N images (0: all)")
    p.add_argument("--reference", nargs="+", default=["eval.amp=off", "eval.channels_last=off"])
    p.add_argument("--candidate", nargs="+", default=["eval.amp=auto", "eval.channels_last=auto"])
    p.add_argument("overrides", nargs="*", help="key=value config overrides for both sides")
    args = p.parse_args(argv)
    files, coco = image_files(args.images, args.annotations, args.max_images, args.ckpt, args.overrides)
    ref = run_side(f"reference ({' '.join(args.reference)})", args.ckpt, [*args.overrides, *args.reference], files)
    cand = run_side(f"candidate ({' '.join(args.candidate)})", args.ckpt, [*args.overrides, *args.candidate], files)
    print("\n".join(summary(ref, cand, coco, list(files))))
    return 0


if __name__ == "__main__":
    main()
