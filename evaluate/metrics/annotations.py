"""The annotations an evaluation scores against: a COCO or CrowdPose person_keypoints JSON read and checked as the
converter reads it, with the evaluator's own ids (``evaluate.metrics.own_ids``), once per run (``GroundTruth``:
in-training validation loads it at its first evaluation and scores every later one against the same object)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from simplepose.config.schema import EvalConfig
from simplepose.config.skeleton import Skeleton
from simplepose.data.coco_annotations import keypoint_category, load_coco_keypoints
from simplepose.evaluate.metrics.own_ids import ground_truth

if TYPE_CHECKING:
    from pycocotools.coco import COCO


@dataclass(frozen=True)
class GroundTruth:
    """Annotations loaded and checked once (``load_ground_truth``): ``coco``, pycocotools' object (read, never written
    to); ``category_id``, the keypoint category; ``path``, the file; ``bad_image_ids``, the images whose annotations
    were bad, left out with ``eval.skip_bad``."""

    coco: COCO
    category_id: int
    path: Path
    bad_image_ids: frozenset[int] = frozenset()

    @property
    def images(self) -> dict[int, dict]:
        """The images scored, by id (pycocotools' image entries): all but those with bad annotations."""
        return {i: img for i, img in self.coco.imgs.items() if i not in self.bad_image_ids}


def load_ground_truth(annotations: str | Path, skeleton: Skeleton, cfg: EvalConfig) -> GroundTruth:
    """The annotations of a person_keypoints JSON, read and checked by the converter's own reader
    (``data.coco_annotations.load_coco_keypoints``: the same errors, the same defaults for missing fields, the keypoint
    names compared as ``cfg.keypoint_names`` says), with the evaluator's own ids (``evaluate.metrics.own_ids``); with
    ``cfg.skip_bad`` images with bad annotations are listed in ``bad_image_ids`` (and left out of the evaluation)
    instead of stopping it."""
    path = Path(annotations)
    checked = load_coco_keypoints(path, skeleton, cfg.skip_bad, cfg.keypoint_names, purpose="this evaluation")
    coco = ground_truth(checked)
    return GroundTruth(coco, keypoint_category(coco.dataset, skeleton, path), path, frozenset(checked.bad_image_ids))
