"""The annotations an evaluation scores against: a COCO or CrowdPose person_keypoints JSON read and checked as the
converter reads it, with the evaluator's own ids (``evaluate.metrics.own_ids``)."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import TYPE_CHECKING

from simplepose.config.schema import EvalConfig, NameMatch
from simplepose.config.skeleton import Skeleton
from simplepose.data.coco_annotations import keypoint_category, load_coco_keypoints
from simplepose.evaluate.metrics.own_ids import ground_truth
from simplepose.utils.errors import AnnotationError

if TYPE_CHECKING:
    from pycocotools.coco import COCO


def load_coco(
    annotations: str | Path,
    skeleton: Skeleton | None = None,
    skip_bad: bool = False,
    keypoint_names: NameMatch = "exact",
):
    """pycocotools COCO of a person_keypoints JSON. With ``skeleton``: read and checked by the converter's own reader
    (``data.coco_annotations.load_coco_keypoints``: the same errors, the same defaults for missing fields, the keypoint
    names compared as ``keypoint_names`` says), its annotations with the evaluator's own ids
    (``evaluate.metrics.own_ids``);
    ``skip_bad``: images with bad annotations are listed in ``coco.bad_image_ids`` (and left out of the evaluation)
    instead of stopping it. Without ``skeleton``: the file as pycocotools reads it (for loading results against it);
    UserError when missing or malformed."""
    from pycocotools.coco import COCO

    path = Path(annotations)
    if skeleton is not None:
        checked = load_coco_keypoints(path, skeleton, skip_bad, keypoint_names, purpose="this evaluation")
        coco = ground_truth(checked)
        coco.bad_image_ids = checked.bad_image_ids
        return coco
    if not path.is_file():
        raise AnnotationError(f"annotation file {path} not found (expected a COCO person_keypoints_*.json)", file=path)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            coco = COCO(str(path))
    except (ValueError, KeyError, TypeError, AssertionError) as e:
        raise AnnotationError(f"annotation file {path} is not a valid COCO annotation file: {e}", file=path) from None
    coco.bad_image_ids = set()
    return coco


def annotated_images(
    annotations: str | Path, skeleton: Skeleton, cfg: EvalConfig, coco=None
) -> tuple[COCO, dict[int, dict], int]:
    """What an evaluation scores against: (the annotations loaded by ``load_coco``, or ``coco`` when already loaded;
    their images but those with bad annotations, by id; the keypoint category's id)."""
    coco = coco if coco is not None else load_coco(annotations, skeleton, cfg.skip_bad, cfg.keypoint_names)
    image_list = {i: img for i, img in coco.imgs.items() if i not in coco.bad_image_ids}
    return coco, image_list, keypoint_category(coco.dataset, skeleton, annotations)
