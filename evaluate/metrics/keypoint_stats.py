"""pycocotools' keypoint figures of a results list (COCO's, or CrowdPose's as the skeleton says), on the
evaluator's own ids."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Sequence

import numpy as np

from simplepose.config.skeleton import Skeleton
from simplepose.evaluate.metrics.crowdpose_eval import crowdpose_keypoint_stats, with_box_areas
from simplepose.evaluate.metrics.own_ids import empty_results, renumbered

STAT_NAMES = ("AP", "AP50", "AP75", "APm", "APl", "AR", "AR50", "AR75", "ARm", "ARl")


def coco_keypoint_stats(
    coco, results: list[dict], image_ids: list[int], sigmas: Sequence[float] | None = None
) -> tuple[dict[str, float], str]:
    """pycocotools keypoint evaluation restricted to ``image_ids``; (stats, printed summary).

    ``sigmas``: the OKS sigma of each dataset keypoint (``Skeleton.sigmas``); None: pycocotools' own, COCO's.
    Scored on a renumbered copy (``evaluate.metrics.own_ids.renumbered``), so the file's ids cannot change the figures.
    A figure whose group has no ground truth (no medium people, say) is -1, as pycocotools gives it; no detections give
    0 where there is ground truth. Annotations without an 'area' are scored with 0.53 x their box area (CrowdPose's
    stand-in; ``load_ground_truth`` has already filled it)."""
    from pycocotools.cocoeval import COCOeval

    gt, results, image_ids = renumbered(with_box_areas(coco), results, image_ids)
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        detections = gt.loadRes(results) if results else empty_results(gt)
        ev = COCOeval(gt, detections, "keypoints")
        ev.params.imgIds = list(image_ids)
        if sigmas is not None:
            ev.params.kpt_oks_sigmas = np.array(sigmas, np.float64)
        ev.evaluate()
        ev.accumulate()
    summary = io.StringIO()
    with contextlib.redirect_stdout(summary):
        ev.summarize()
    stats = {k: float(v) for k, v in zip(STAT_NAMES, ev.stats)}  # -1: no ground truth in that group
    return stats, (
        "no detections: every AP and AR is 0 (-1: no ground truth)\n" if not results else ""
    ) + summary.getvalue()


def keypoint_stats(coco, results: list[dict], image_ids: list[int], skeleton: Skeleton) -> tuple[dict[str, float], str]:
    """(stats, printed table) of ``results`` as ``skeleton.evaluation`` says: COCO's keypoint figures or
    CrowdPose's, OKS with the skeleton's sigmas, on the evaluator's own ids (``evaluate.metrics.own_ids``)."""
    if skeleton.scored_as_crowdpose:
        return crowdpose_keypoint_stats(*renumbered(coco, results, image_ids), skeleton.sigmas)
    return coco_keypoint_stats(coco, results, image_ids, skeleton.sigmas)


def format_stats(stats: dict[str, float]) -> str:
    """``AP 0.512  AP50 0.800 ...``; a figure whose group has no ground truth is -1.000, as pycocotools prints it."""
    return "  ".join(f"{k} {v:.3f}" for k, v in stats.items())
