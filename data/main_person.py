"""Which people of an image are main persons, one training sample each (docs/data.md#main-persons-and-samples)."""

from __future__ import annotations

import numpy as np


def main_person_indices(anns: list[dict], stale_bbox_bug: bool = False) -> list[int]:
    """Indices (into ``anns``) of the main persons, one training sample each (docs/data.md#main-persons-and-samples).

    A person is main iff it has >= 5 keypoints, area >= 32*32, and its bbox centre is at least 0.3 * ref away
    from every main person chosen before it, where ref = max(w, h) of that earlier main person's bbox.
    ``stale_bbox_bug=True`` reproduces the original, which used the image's last annotation's bbox for ref.
    Unlike the original, a person with a zero-width or zero-height box is never main: augmentation scales the
    sample by the box height, which would divide by zero (``has_empty_box``).
    """
    chosen: list[tuple[float, float, float]] = []  # (cx, cy, ref)
    out = []
    last_bbox = anns[-1]["bbox"] if anns else None
    for i, ann in enumerate(anns):
        if ann["iscrowd"] or ann["num_keypoints"] < 5 or ann["area"] < 32 * 32 or has_empty_box(ann):
            continue
        x, y, w, h = ann["bbox"]
        cx, cy = x + w / 2, y + h / 2
        if any(np.hypot(cx - px, cy - py) < 0.3 * ref for px, py, ref in chosen):
            continue
        ref_box = last_bbox if stale_bbox_bug and last_bbox is not None else ann["bbox"]
        chosen.append((cx, cy, max(ref_box[2], ref_box[3])))
        out.append(i)
    return out


def has_empty_box(ann: dict) -> bool:
    """The annotation's bbox has zero width or height (legal COCO, but useless for scaling a sample)."""
    return ann["bbox"][2] <= 0 or ann["bbox"][3] <= 0
