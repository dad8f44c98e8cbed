"""The scale bench's data: a train2017-shaped annotation set made of real COCO pictures reused under new ids, and a
results file of many people per image (``bench.scale``). Nothing here writes images: every entry names one of the
sample's files.

train2017's shape: 118,287 images, of which 64,115 have people (``PEOPLE_SHARE``); the images without people are
listed with no annotation, as in person_keypoints_train2017.json. An image with people is a copy of one of the
sample's images with people, its annotations (segmentations, crowds, people without keypoints) copied under new ids.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np

TRAIN2017_IMAGES = 118_287
TRAIN2017_WITH_PEOPLE = 64_115
TRAIN2017_PEOPLE_WITH_KEYPOINTS = 149_813
VAL2017_IMAGES = 5_000
PEOPLE_SHARE = TRAIN2017_WITH_PEOPLE / TRAIN2017_IMAGES


def sample_annotations(sample_json: Path) -> dict:
    """The sample's annotation file, parsed."""
    return json.loads(Path(sample_json).read_text())


def scaled_annotations(sample: dict, images: int, people_share: float = PEOPLE_SHARE) -> dict:
    """An annotation set of ``images`` images, a share ``people_share`` of them copies of the sample's images with
    people (their annotations under new ids), the rest copies without annotations (images without people). Image ids
    count from 1, annotation ids too; every entry's file_name is a sample file's."""
    by_image: dict[int, list[dict]] = {}
    for ann in sample["annotations"]:
        by_image.setdefault(ann["image_id"], []).append(ann)
    with_people = [img for img in sample["images"] if by_image.get(img["id"])]
    without = [img for img in sample["images"] if not by_image.get(img["id"])] or with_people
    out_images, out_anns = [], []
    peopled = 0
    for k in range(images):
        want_people = (k + 1) * people_share >= peopled + 1  # spread evenly: the first k images hold k * share
        source = with_people[peopled % len(with_people)] if want_people else without[k % len(without)]
        image_id = k + 1
        out_images.append({**source, "id": image_id})
        if want_people:
            peopled += 1
            for ann in by_image[source["id"]]:
                out_anns.append({**copy.deepcopy(ann), "id": len(out_anns) + 1, "image_id": image_id})
    return {
        **{k: v for k, v in sample.items() if k not in ("images", "annotations")},
        "images": out_images,
        "annotations": out_anns,
    }


def results_for(truth: dict, people_per_image: int, num_keypoints: int, seed: int = 0) -> list[dict]:
    """A COCO keypoint results list with ``people_per_image`` entries for every image of ``truth``: each labelled
    person found again with a few pixels of noise, then made-up people around the image until the count is reached
    (scores in (0, 1), keypoint scores 0.5)."""
    rng = np.random.default_rng(seed)
    labelled: dict[int, list[np.ndarray]] = {}
    for ann in truth["annotations"]:
        if ann.get("num_keypoints", 0) > 0 and not ann.get("iscrowd"):
            labelled.setdefault(ann["image_id"], []).append(np.asarray(ann["keypoints"], float).reshape(-1, 3))
    out = []
    for img in truth["images"]:
        w, h = img.get("width") or 640, img.get("height") or 480
        people = labelled.get(img["id"], [])[:people_per_image]
        for kp in people:
            xy = kp[:, :2] + rng.normal(0, 3, (num_keypoints, 2))
            out.append(_entry(img["id"], xy, kp[:, 2] > 0, rng.uniform(0.5, 1)))
        for _ in range(people_per_image - len(people)):
            centre = rng.uniform((0, 0), (w, h))
            xy = centre + rng.normal(0, 30, (num_keypoints, 2))
            out.append(_entry(img["id"], xy, np.ones(num_keypoints, bool), rng.uniform(0, 0.5)))
    return out


def _entry(image_id: int, xy: np.ndarray, found: np.ndarray, score: float) -> dict:
    triples = [(round(float(x), 2), round(float(y), 2), 0.5) if f else (0.0, 0.0, 0.0) for (x, y), f in zip(xy, found)]
    return {"image_id": image_id, "category_id": 1, "keypoints": [v for t in triples for v in t], "score": score}
