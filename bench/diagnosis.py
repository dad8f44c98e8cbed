"""Speed of the error diagnosis on a COCO-sized results file, and of plain scoring beside it.

    python -m bench.diagnosis [--images 5000] [--repeat 2] [--seed 0]

The ground truth is the shipped COCO sample's annotations (tests/coco_sample: 27 real train2017 images) repeated
until there are ``--images`` images (val2017 has 5,000), each copy with its own ids; the results are those people
with the errors a network makes: every keypoint moved by noise of a few % of the person's size, one in six
keypoints left-right swapped or moved onto a neighbour or far away, 15 % of the people missed, a false person
beside one in five, random scores. Prints, alternated ``--repeat`` times in one run, the seconds of plain scoring
(``score_results``, what ``--results`` runs), of scoring with ``--diagnose`` (scoring + diagnosis +
report), and of the diagnosis alone, with its keypoint error counts.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from simplepose.config.config_file import load_config
from simplepose.evaluate.metrics.diagnosis import diagnose
from simplepose.evaluate.results_scoring import score_results
from simplepose.utils.errors import cli_main
from tests.paths import REPO_ROOT

SHIPPED_SAMPLE = REPO_ROOT / "tests" / "coco_sample" / "annotations" / "person_keypoints_sample.json"


def repeated_ground_truth(sample: dict, num_images: int) -> dict:
    """``sample``'s images and annotations repeated (new ids) until there are ``num_images`` images."""
    images, annotations = [], []
    by_image: dict[int, list[dict]] = {}
    for a in sample["annotations"]:
        by_image.setdefault(a["image_id"], []).append(a)
    while len(images) < num_images:
        for img in sample["images"]:
            if len(images) == num_images:
                break
            new_id = len(images) + 1
            images.append({**img, "id": new_id})
            for a in by_image.get(img["id"], []):
                annotations.append({**copy.deepcopy(a), "id": len(annotations) + 1, "image_id": new_id})
    return {**sample, "images": images, "annotations": annotations}


def network_like_results(data: dict, seed: int) -> list[dict]:
    """Results with a network's kinds of errors (module docstring)."""
    rng = np.random.default_rng(seed)
    flip = [0, 2, 1, 4, 3, 6, 5, 8, 7, 10, 9, 12, 11, 14, 13, 16, 15]  # COCO's left-right pairs
    out = []
    for a in data["annotations"]:
        if a.get("iscrowd") or a.get("num_keypoints", 0) == 0 or rng.random() < 0.15:
            continue
        kp = np.array(a["keypoints"], np.float64).reshape(-1, 3)
        size = max(a["bbox"][2], a["bbox"][3], 1.0)
        moved = kp.copy()
        moved[:, :2] += rng.normal(0, rng.uniform(0.005, 0.04) * size, (17, 2))
        for k in np.flatnonzero(rng.random(17) < 1 / 6):
            kind = rng.integers(3)
            if kind == 0:
                moved[k, :2] = kp[flip[k], :2]  # left-right inverted
            elif kind == 1:
                moved[k, :2] = kp[(k + 1) % 17, :2]  # onto another keypoint
            else:
                moved[k, :2] += size  # far away
        moved[:, 2] = 1.0
        out.append({"image_id": a["image_id"], "category_id": 1, "keypoints": moved.ravel().round(2).tolist(),
                    "score": float(rng.random())})  # fmt: skip
        if rng.random() < 0.2:
            false = moved.copy()
            false[:, :2] += 0.7 * size
            out.append({**out[-1], "keypoints": false.ravel().round(2).tolist(), "score": float(rng.random())})
    return out


@cli_main
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.diagnosis", description=__doc__.split("\n\n")[0])
    p.add_argument("--images", type=int, default=5000)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    data = repeated_ground_truth(json.loads(SHIPPED_SAMPLE.read_text()), args.images)
    results = network_like_results(data, args.seed)
    cfg = load_config(None, [])
    with tempfile.TemporaryDirectory() as tmp:
        gt_file, res_file = Path(tmp) / "gt.json", Path(tmp) / "results.json"
        gt_file.write_text(json.dumps(data))
        res_file.write_text(json.dumps(results))
        print(f"{len(data['images'])} images, {len(data['annotations'])} annotations, {len(results)} results")
        times: dict[str, list[float]] = {"scoring": [], "scoring + --diagnose": [], "diagnosis alone": []}
        found = None
        for i in range(args.repeat):
            t0 = time.perf_counter()
            score_results(res_file, gt_file, cfg)
            t1 = time.perf_counter()
            score_results(res_file, gt_file, cfg, diagnose_dir=Path(tmp) / f"d{i}")
            t2 = time.perf_counter()
            found = diagnose(gt_file, res_file)
            t3 = time.perf_counter()
            for name, seconds in zip(times, (t1 - t0, t2 - t1, t3 - t2)):
                times[name].append(seconds)
    for name, values in times.items():
        print(f"{name:22s} median {statistics.median(values):7.1f} s  (runs: {', '.join(f'{v:.1f}' for v in values)})")
    print(f"keypoint errors: {found.keypoint_errors}; AP as found {found.ap['baseline']:.3f}, "
          f"correcting in turn: " + ", ".join(f"{k} {v:+.3f}" for k, v in found.ap_gains.items()))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
