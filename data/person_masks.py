"""An image's two masks (docs/data.md#masks), drawn from its person annotations' segmentations."""

from __future__ import annotations

import numpy as np
from pycocotools import mask as mask_utils


def segmentation_mask(ann: dict, height: int, width: int) -> np.ndarray:
    """Decode one annotation's segmentation (polygons or RLE) to a (height, width) bool mask."""
    seg = ann["segmentation"]
    if isinstance(seg, list):
        # A few COCO polygons have fewer than 3 points; pycocotools would read a 4-number one as a box.
        polygons = [p for p in seg if len(p) >= 6]
        rles = mask_utils.frPyObjects(polygons, height, width) if polygons else []
        if not rles:
            return np.zeros((height, width), bool)
        rle = mask_utils.merge(rles)
    elif isinstance(seg["counts"], list):
        rle = mask_utils.frPyObjects(seg, height, width)
    else:
        rle = seg
    return mask_utils.decode(rle).astype(bool)


def image_masks(anns: list[dict], height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """The two masks of an image (docs/data.md#masks), uint8 {0, 255}, (height, width).

    ``mask_miss``: 255 = supervise, 0 = ignore. Ignored: people without keypoints, and every crowd region
    (all crowds unioned; fixes the original's one-crowd limit) minus the pixels of people with keypoints.
    The original subtracted only the people listed before the crowd (order dependent;
    docs/differences.md#crowd-regions); subtracting all labelled people is order independent and equals it when the
    crowd comes last, as it usually does.
    ``mask_all``: 255 = any person pixel, crowds included.
    """
    everyone = np.zeros((height, width), bool)
    unlabelled = np.zeros((height, width), bool)
    labelled = np.zeros((height, width), bool)
    crowd = np.zeros((height, width), bool)
    for ann in anns:
        m = segmentation_mask(ann, height, width)
        if ann["iscrowd"]:
            crowd |= m
        elif ann["num_keypoints"] <= 0:
            unlabelled |= m
        else:
            labelled |= m
        everyone |= m
    ignore = unlabelled | (crowd & ~labelled)
    return np.where(ignore, 0, 255).astype(np.uint8), np.where(everyone, 255, 0).astype(np.uint8)
