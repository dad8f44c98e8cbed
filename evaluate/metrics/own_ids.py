"""The evaluator's own ids: pycocotools never sees the ids an annotation file gives its images and annotations.

Why: pycocotools' matching (``COCOeval.evaluateImg``) records a match as the matched annotation's id and reads 0 as
"unmatched", so a ground-truth annotation whose id is 0 can never be matched: a file numbered from 0 (common in
home-made and some public converters) scores lower, silently (the corpus's real COCO file with one id set to 0: oracle
0.832 instead of 0.990; docs/keypoint_sets.md#evaluation-ids). faster-coco-eval copies that rule; xtcocotools does not.
Files may also lack ids, or repeat them.

So the evaluation's ground truth carries ids of its own (``ground_truth``: annotations 1..M in file order, the file's
id kept as ``file_id``), and everything handed to pycocotools for scoring is renumbered once more
(``renumbered``: images 1..N in the order of their ids, annotations 1..M, results 1..R, the image ids of the
results and of the evaluated images mapped alike), whatever built the ``COCO`` object. What the evaluator writes (the
results JSON) keeps the file's own image ids: the renumbered copy is only ever scored.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Sequence
from typing import Any

from simplepose.data.coco_annotations import CocoKeypoints


def ground_truth(checked: CocoKeypoints):
    """A pycocotools ``COCO`` of a checked annotation file (``data.coco_annotations.load_coco_keypoints``): its images
    (without width/height where the file gives none), the person annotations of its keypoint category (defaults
    filled) numbered 1..M in file order, and that category."""
    from pycocotools.coco import COCO

    images: list[dict] = []
    annotations: list[dict] = []
    for img in checked.images:
        images.append({k: v for k, v in img.items() if v is not None})
        for ann in checked.annotations_by_image.get(img["id"], []):
            annotations.append(
                {**ann, "id": len(annotations) + 1, "file_id": ann.get("id"), "category_id": checked.category}
            )
    category = {"id": checked.category, "name": "person", "keypoints": list(checked.keypoint_names or [])}
    return _indexed(COCO(), {"images": images, "annotations": annotations, "categories": [category]})


def renumbered(coco, results: list[dict], image_ids: Sequence[int]) -> tuple[Any, list[dict], list[int]]:
    """(ground truth, results, image ids) for pycocotools: ``coco``'s images numbered 1..N in the order of their ids
    and its annotations 1..M, ``results`` (COCO keypoint results of those images) numbered 1..R with their image ids
    mapped alike, and ``image_ids`` (the evaluated images) mapped. ValueError for a result of an unknown image."""
    from pycocotools.coco import COCO

    new = {old: i + 1 for i, old in enumerate(sorted(coco.imgs))}
    images = [{**coco.imgs[old], "id": i} for old, i in new.items()]
    kept = [a for a in coco.dataset["annotations"] if a["image_id"] in new]
    annotations = [{**a, "id": j + 1, "image_id": new[a["image_id"]]} for j, a in enumerate(kept)]
    unknown = sorted({r["image_id"] for r in results} - new.keys())
    if unknown:
        raise ValueError(f"results of image ids {unknown[:5]} that the annotations do not list")
    gt = _indexed(COCO(), {**coco.dataset, "images": images, "annotations": annotations})
    mapped = [{**r, "id": k + 1, "image_id": new[r["image_id"]]} for k, r in enumerate(results)]
    return gt, mapped, [new[i] for i in image_ids]


def empty_results(gt):
    """A results ``COCO`` without any detection, on ``gt``'s images and categories (pycocotools' ``loadRes`` refuses
    an empty list): scored, it gives 0 where there is ground truth and -1 where there is none, as for any results."""
    from pycocotools.coco import COCO

    return _indexed(COCO(), {"images": gt.dataset["images"], "categories": gt.dataset["categories"], "annotations": []})


def _indexed(coco, dataset: dict):
    coco.dataset = dataset
    with contextlib.redirect_stdout(io.StringIO()):
        coco.createIndex()
    return coco
