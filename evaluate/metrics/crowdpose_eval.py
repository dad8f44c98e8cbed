"""CrowdPose's keypoint figures, computed by faster-coco-eval's ``keypoints_crowd`` evaluation with
``use_area=False``: the numbers of CrowdPose's own tool (crowdposetools) and of xtcocotools (what mmpose reports).

The library does the evaluation (OKS scale 0.53 x the box area, AP/AR over all images, AP easy / medium / hard from a
separate evaluation of each ``crowdIndex`` group at 0.2 and 0.8, rounded to 4 decimals). This module only fits it
to how the evaluation is called here (docs/keypoint_sets.md#crowdpose-evaluation):

* the groups are made of the images evaluated (``eval.max_images``, a rank's share), from the ground truth in
  memory; the library reads every image of the annotation file from disk;
* detections whose keypoints are all unfound (every v = 0) are dropped first, as xtcocotools does;
* no detections give 0 and files without ``crowdIndex`` leave the groups out, with a note; a group without ground
  truth is -1, as the tools give it (and as pycocotools prints COCO's), shown as '-' in the table.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Sequence

from simplepose.data.coco_annotations import BOX_AREA_FACTOR

STAT_NAMES = ("AP", "AP50", "AP75", "AR", "AR50", "AR75", "AP_easy", "AP_medium", "AP_hard")  # COCOeval.stats order
GROUPS = ("easy", "medium", "hard")


def has_crowd_index(coco, image_ids: Sequence[int]) -> bool:
    return all(isinstance(coco.imgs[i].get("crowdIndex"), (int, float)) for i in image_ids)


def crowd_groups(coco, image_ids: Sequence[int], easy_below: float, hard_from: float) -> dict[str, list[int]] | None:
    """{"easy", "medium", "hard"}: the given images by their ``crowdIndex`` (below ``easy_below``, then below
    ``hard_from``, then the rest); None when some image has none."""
    if not has_crowd_index(coco, image_ids):
        return None
    groups: dict[str, list[int]] = {name: [] for name in GROUPS}
    for i in image_ids:
        index = coco.imgs[i]["crowdIndex"]
        groups["easy" if index < easy_below else "medium" if index < hard_from else "hard"].append(i)
    return groups


def _evaluation(gt, detections, image_ids: Sequence[int], sigmas: Sequence[float], lines: list[str]):
    """faster-coco-eval's CrowdPose evaluation of ``image_ids``, its easy / medium / hard groups made of those images
    (``groups`` is set once the thresholds are known); printed lines go to ``lines``."""
    from faster_coco_eval import COCOeval_faster

    class CrowdPoseEval(COCOeval_faster):
        groups: dict[str, list[int]] | None = None

        def split(self, gt_file, first: float, second: float):  # the library's thresholds, its file not read
            self.groups = crowd_groups(gt, image_ids, first, second)
            return tuple(self.groups[name] for name in GROUPS) if self.groups else ([], [], [])

    ev = CrowdPoseEval(
        gt, detections, "keypoints_crowd", print_function=lines.append, kpt_oks_sigmas=list(sigmas), use_area=False
    )
    ev.params.imgIds = list(image_ids)
    return ev


def crowdpose_keypoint_stats(
    coco, results: list[dict], image_ids: Sequence[int], sigmas: Sequence[float]
) -> tuple[dict[str, float], str]:
    """CrowdPose's figures of ``results`` on the images ``image_ids`` of the ground truth ``coco`` (a pycocotools
    COCO); (stats, printed table). AP easy / medium / hard need every image's ``crowdIndex``; without it they are
    left out of the stats and the table says so. A group without images or ground truth is -1, as the tools give
    it; no detections at all score 0."""
    from faster_coco_eval import COCO

    results = [r for r in results if any(v > 0 for v in r["keypoints"][2::3])]  # the tools drop the others
    if not results:
        names = STAT_NAMES if has_crowd_index(coco, image_ids) else STAT_NAMES[:6]
        return {k: 0.0 for k in names}, "no detections: every AP and AR is 0\n"
    gt = COCO(coco.dataset, use_deepcopy=True)  # the library marks the annotations it reads
    with contextlib.redirect_stdout(io.StringIO()):
        detections = gt.loadRes(results)
    lines: list[str] = []
    ev = _evaluation(gt, detections, image_ids, sigmas, lines)
    ev.evaluate()
    ev.accumulate()
    ev.summarize()
    names = STAT_NAMES if ev.groups is not None else STAT_NAMES[:6]
    stats = {k: float(v) for k, v in zip(names, ev.all_stats)}  # -1: no ground truth in that group
    return stats, _table([line for line in lines if line.startswith(" Average")], ev.groups)


def _table(lines: list[str], groups: dict[str, list[int]] | None) -> str:
    """The library's printed figures, each group's line with its number of images (a group without ground truth
    shows '-' for the library's -1); without groups, a note instead of their lines."""
    if groups is None:
        return "\n".join([*lines[:6], " AP easy / medium / hard: not computed, the images have no 'crowdIndex'"]) + "\n"
    out = lines[:6]
    for name, line in zip(GROUPS, lines[6:]):
        count, empty = len(groups[name]), line.endswith("= -1.000")
        shown = line.replace("= -1.000", "=   -  ") if empty else line
        out.append(f"{shown}  ({count} images{', no ground truth' if empty and count else ''})")
    return "\n".join(out) + "\n"


def with_box_areas(coco):
    """The ground truth (pycocotools COCO), its annotations without ``area`` given 0.53 x their box area (h * w *
    0.53, as CrowdPose's evaluation scales them), for pycocotools' COCO evaluation; ``coco`` itself when every
    annotation has one."""
    from pycocotools.coco import COCO  # as in evaluate.coco_eval: pycocotools only where results are scored

    if all("area" in a for a in coco.dataset["annotations"]):
        return coco
    gt = COCO()
    anns = [
        a if "area" in a else {**a, "area": a["bbox"][3] * a["bbox"][2] * BOX_AREA_FACTOR}
        for a in coco.dataset["annotations"]
    ]
    gt.dataset = {**coco.dataset, "annotations": anns}
    with contextlib.redirect_stdout(io.StringIO()):
        gt.createIndex()
    return gt
