"""An image's two masks (docs/data.md#masks), drawn from its person annotations' segmentations."""

from __future__ import annotations

import numpy as np
from pycocotools import mask as mask_utils


def segmentation_rles(ann: dict, height: int, width: int) -> list[dict]:
    """One annotation's segmentation (polygons or RLE) as pycocotools RLEs of a (height, width) image; their union
    is its region ([]: none)."""
    seg = ann["segmentation"]
    if isinstance(seg, list):
        # A few COCO polygons have fewer than 3 points; pycocotools would read a 4-number one as a box.
        polygons = [p for p in seg if len(p) >= 6]
        return mask_utils.frPyObjects(polygons, height, width) if polygons else []
    if isinstance(seg["counts"], list):
        return [mask_utils.frPyObjects(seg, height, width)]
    return [seg]


def union_mask(rles: list[dict], height: int, width: int) -> np.ndarray:
    """The (height, width) bool union of RLEs (merged as RLEs, decoded once), in column-major order as pycocotools
    decodes it (``.T`` is a row-major (width, height) view)."""
    if not rles:
        return np.zeros((height, width), bool, order="F")
    return mask_utils.decode(mask_utils.merge(rles) if len(rles) > 1 else rles[0]).view(bool)


def image_masks(anns: list[dict], height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """The two masks of an image (docs/data.md#masks), uint8 {0, 255}, (height, width).

    ``mask_miss``: 255 = supervise, 0 = ignore. Ignored: people without keypoints, and every crowd region
    (all crowds unioned; fixes the original's one-crowd limit) minus the pixels of people with keypoints.
    The original subtracted only the people listed before the crowd (order dependent;
    docs/differences.md#crowd-regions); subtracting all labelled people is order independent and equals it when the
    crowd comes last, as it usually does.
    ``mask_all``: 255 = any person pixel, crowds included.
    Each of the three groups (crowds, people without keypoints, people with) is merged as RLEs and decoded once.
    """
    groups: dict[str, list[dict]] = {"crowd": [], "unlabelled": [], "labelled": []}
    for ann in anns:
        group = "crowd" if ann["iscrowd"] else "unlabelled" if ann["num_keypoints"] <= 0 else "labelled"
        groups[group] += segmentation_rles(ann, height, width)
    # worked on as row-major (width, height) views of pycocotools' column-major masks, transposed once at the end
    crowd, unlabelled, labelled = (union_mask(groups[g], height, width).T for g in ("crowd", "unlabelled", "labelled"))
    ignore = unlabelled | (crowd & ~labelled)
    everyone = crowd | unlabelled | labelled
    off, on = np.uint8(0), np.uint8(255)
    return np.ascontiguousarray(np.where(ignore, off, on).T), np.ascontiguousarray(np.where(everyone, on, off).T)
