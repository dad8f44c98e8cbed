"""CrowdPose's keypoint figures computed with pycocotools: the numbers of CrowdPose's own tool (crowdposetools) and of
xtcocotools' ``keypoints_crowd`` evaluation with ``use_area=False`` (what mmpose reports), without either package.

What CrowdPose's evaluation does differently from COCO's, all reproduced here (docs/design.md#crowdpose-evaluation):

* the OKS scale of a person (and its area range) is 0.53 x its box area: CrowdPose's annotations have no ``area``;
* the figures are AP, AP50, AP75, AR, AR50, AR75 over all images (at most 20 people per image, as COCO), then
  AP easy / medium / hard: the mean of the whole precision array (its -1 entries included) of a separate
  evaluation of the images whose ``crowdIndex`` is below 0.2, from 0.2 to below 0.8, and 0.8 or more (the
  thresholds both tools' code passes, ``get_type_result(first=0.2, second=0.8)``; the CrowdPose paper's text says
  0.1), rounded to 4 decimals as they do;
* detections whose keypoints are all unfound (every v = 0) are dropped before matching, as xtcocotools does
  (crowdposetools keeps them; this project's results never hold such a person, so both agree on them).

Everything else (matching, ignoring crowds and people with ``num_keypoints == 0``, precision and recall) is
pycocotools' keypoint evaluation, which both tools copy. Checked against xtcocotools' own Python code (run with
pycocotools' compiled mask module in place of its own): every figure equal to the last digit on xtcocotools'
example files (annotations/example_crowdpose_{val,preds}.json) and on 30 synthetic images with noisy, missing,
false and all-unfound detections (docs/design.md#crowdpose-evaluation).
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Sequence

import numpy as np

from data.coco_annotations import BOX_AREA_FACTOR

STAT_NAMES = ("AP", "AP50", "AP75", "AR", "AR50", "AR75", "AP_easy", "AP_medium", "AP_hard")
EASY_BELOW, HARD_FROM = 0.2, 0.8  # crowdIndex thresholds
_FROM_COCO_STATS = {"AP": 0, "AP50": 1, "AP75": 2, "AR": 5, "AR50": 6, "AR75": 7}  # COCOeval.stats of "keypoints"


def crowd_groups(coco, image_ids: Sequence[int]) -> dict[str, list[int]] | None:
    """{"easy", "medium", "hard"}: the given images by their ``crowdIndex``; None when some image has none."""
    groups: dict[str, list[int]] = {"easy": [], "medium": [], "hard": []}
    for i in image_ids:
        index = coco.imgs[i].get("crowdIndex")
        if not isinstance(index, (int, float)):
            return None
        groups["easy" if index < EASY_BELOW else "medium" if index < HARD_FROM else "hard"].append(i)
    return groups


def crowdpose_keypoint_stats(
    coco, results: list[dict], image_ids: Sequence[int], sigmas: Sequence[float]
) -> tuple[dict[str, float], str]:
    """CrowdPose's figures of ``results`` on the images ``image_ids`` of the ground truth ``coco`` (a pycocotools
    COCO); (stats, printed table). AP easy / medium / hard need every image's ``crowdIndex``; without it they are
    left out of the stats and the table says so. A group without images or ground truth scores 0 (the tools give
    -1), as does everything when there are no detections."""
    groups = crowd_groups(coco, image_ids)
    names = STAT_NAMES if groups is not None else STAT_NAMES[:6]
    results = [r for r in results if any(v > 0 for v in r["keypoints"][2::3])]  # the tools drop the others
    if not results:
        return {k: 0.0 for k in names}, "no detections: every AP and AR is 0\n"
    gt = with_box_areas(coco)
    with contextlib.redirect_stdout(io.StringIO()):
        detections = gt.loadRes(results)
        overall = _evaluated(gt, detections, image_ids, sigmas)
        overall.summarize()
    stats = {k: float(overall.stats[i]) for k, i in _FROM_COCO_STATS.items()}
    per_group = {}
    if groups is not None:
        for name, ids in groups.items():
            per_group[name] = _group_ap(gt, detections, ids, sigmas)
            stats[f"AP_{name}"] = per_group[name]
    table = _table(stats, per_group, groups)
    return {k: max(v, 0.0) for k, v in stats.items()}, table


def with_box_areas(coco, every: bool = True):
    """A copy of the ground truth (pycocotools COCO) whose annotations' ``area`` is 0.53 x their box area (h * w *
    0.53, in the tools' order of operations): every annotation's, or (``every=False``) only where there is none;
    ``coco`` itself when nothing changes."""
    from pycocotools.coco import COCO  # as in evaluate.coco_eval: pycocotools only where results are scored

    if not every and all("area" in a for a in coco.dataset["annotations"]):
        return coco
    gt = COCO()
    anns = [a if "area" in a and not every else {**a, "area": a["bbox"][3] * a["bbox"][2] * BOX_AREA_FACTOR}
            for a in coco.dataset["annotations"]]  # fmt: skip
    gt.dataset = {**coco.dataset, "annotations": anns}
    with contextlib.redirect_stdout(io.StringIO()):
        gt.createIndex()
    return gt


def _evaluated(gt, detections, image_ids: Sequence[int], sigmas: Sequence[float]):
    from pycocotools.cocoeval import COCOeval

    ev = COCOeval(gt, detections, "keypoints")
    ev.params.imgIds = list(image_ids)
    ev.params.kpt_oks_sigmas = np.array(sigmas, np.float64)
    ev.evaluate()
    ev.accumulate()
    return ev


def _group_ap(gt, detections, image_ids: list[int], sigmas: Sequence[float]) -> float:
    """The tools' per-group AP: the mean of the whole precision array of an evaluation of these images (all IoU
    thresholds, recall points, area 'all'), rounded to 4 decimals; -1 without images or ground truth."""
    if not image_ids:
        return -1.0
    with contextlib.redirect_stdout(io.StringIO()):
        ev = _evaluated(gt, detections, image_ids, sigmas)
    return round(float(np.mean(ev.eval["precision"][:, :, :, 0, :])), 4)


def _table(stats: dict[str, float], per_group: dict[str, float], groups: dict[str, list[int]] | None) -> str:
    """The table CrowdPose's tools print."""
    rows = [("Average Precision  (AP)", "0.50:0.95", "all", stats["AP"]),
            ("Average Precision  (AP)", "0.50", "all", stats["AP50"]),
            ("Average Precision  (AP)", "0.75", "all", stats["AP75"]),
            ("Average Recall     (AR)", "0.50:0.95", "all", stats["AR"]),
            ("Average Recall     (AR)", "0.50", "all", stats["AR50"]),
            ("Average Recall     (AR)", "0.75", "all", stats["AR75"])]  # fmt: skip
    lines = [f" {title} @[ IoU={iou:<9} | area={area:>6s} | maxDets= 20 ] = {v:0.3f}" for title, iou, area, v in rows]
    if groups is None:
        lines.append(" AP easy / medium / hard: not computed, the images have no 'crowdIndex'")
    for name, value in per_group.items():
        count = len(groups[name]) if groups else 0
        shown = f"{value:0.3f}" if value >= 0 else "  -  "
        note = f"{count} images" + (", no ground truth" if value < 0 and count else "")
        lines.append(f" Average Precision  (AP) @[ IoU=0.50:0.95 | type={name:>6s} | maxDets= 20 ] = {shown}  ({note})")
    return "\n".join(lines) + "\n"
