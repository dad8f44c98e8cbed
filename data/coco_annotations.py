"""COCO person-keypoint annotations: loading with clear errors, per-image grouping, masks and main persons.

JSON is parsed as data (``json.load``), never evaluated. Every problem with the file is a ``UserError`` naming
the file, the image or annotation and the field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pycocotools import mask as mask_utils

from utils.errors import UserError

PERSON_CATEGORY = 1
_ANNOTATION_FIELDS = ("image_id", "bbox", "keypoints", "num_keypoints", "iscrowd", "area", "segmentation")


@dataclass
class CocoKeypoints:
    """A validated annotation file: images in file order, and the person annotations of each image."""

    path: Path
    images: list[dict]
    annotations_by_image: dict[int, list[dict]]


def _fix_hint(path: Path) -> str:
    return f"fix or re-download {path} (it must be a COCO person_keypoints_*.json file)"


def load_coco_keypoints(path: str | Path) -> CocoKeypoints:
    """Load and validate a COCO person_keypoints JSON file."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"annotation file {path} not found; pass the COCO person_keypoints_*.json file")
    try:
        with open(path, "rb") as f:
            data = json.load(f)
    except json.JSONDecodeError as e:
        raise UserError(
            f"annotation file {path} is not valid JSON ({e.msg} at line {e.lineno}, column {e.colno}); "
            f"the file looks truncated or corrupt: download it again"
        ) from None
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"cannot read annotation file {path}: {e}; {_fix_hint(path)}") from None
    if not isinstance(data, dict) or not isinstance(data.get("images"), list):
        raise UserError(f"annotation file {path} has no 'images' list; {_fix_hint(path)}")
    if not isinstance(data.get("annotations"), list):
        raise UserError(f"annotation file {path} has no 'annotations' list; {_fix_hint(path)}")

    images = []
    seen: set[int] = set()
    for i, img in enumerate(data["images"]):
        where = f"annotation file {path}, images[{i}]"
        if not isinstance(img, dict):
            raise UserError(f"{where} is not an object; {_fix_hint(path)}")
        for key in ("id", "file_name", "width", "height"):
            if key not in img:
                raise UserError(f"{where} has no '{key}' field; {_fix_hint(path)}")
        if not isinstance(img["id"], int) or not isinstance(img["file_name"], str):
            raise UserError(f"{where}: 'id' must be an integer and 'file_name' a string; {_fix_hint(path)}")
        if not all(isinstance(img[k], int) and img[k] > 0 for k in ("width", "height")):
            raise UserError(f"{where}: 'width' and 'height' must be positive integers; {_fix_hint(path)}")
        if img["id"] in seen:
            raise UserError(f"{where}: image id {img['id']} appears twice; {_fix_hint(path)}")
        seen.add(img["id"])
        images.append({k: img[k] for k in ("id", "file_name", "width", "height")})

    by_image: dict[int, list[dict]] = {}
    for i, ann in enumerate(data["annotations"]):
        if isinstance(ann, dict) and ann.get("category_id", PERSON_CATEGORY) != PERSON_CATEGORY:
            continue
        _check_annotation(ann, i, path, seen)
        by_image.setdefault(ann["image_id"], []).append(ann)
    return CocoKeypoints(path, images, by_image)


def _check_annotation(ann, i: int, path: Path, image_ids: set[int]) -> None:
    where = f"annotation file {path}, annotations[{i}]"
    if not isinstance(ann, dict):
        raise UserError(f"{where} is not an object; {_fix_hint(path)}")
    where += f" (id {ann.get('id', '?')})"
    for key in _ANNOTATION_FIELDS:
        if key not in ann:
            raise UserError(f"{where} has no '{key}' field; {_fix_hint(path)}")
    if ann["image_id"] not in image_ids:
        raise UserError(f"{where} refers to image_id {ann['image_id']}, which is not in 'images'; {_fix_hint(path)}")
    kp = ann["keypoints"]
    if not isinstance(kp, list) or len(kp) != 51 or not all(_is_number(v) for v in kp):
        n = len(kp) if isinstance(kp, list) else type(kp).__name__
        raise UserError(f"{where}: 'keypoints' must be 51 numbers (17 x [x, y, v]), got {n}; {_fix_hint(path)}")
    bbox = ann["bbox"]
    if not isinstance(bbox, list) or len(bbox) != 4 or not all(_is_number(v) for v in bbox):
        raise UserError(f"{where}: 'bbox' must be 4 numbers [x, y, w, h]; {_fix_hint(path)}")
    if not _is_number(ann["area"]) or not isinstance(ann["num_keypoints"], int) or ann["iscrowd"] not in (0, 1):
        raise UserError(
            f"{where}: 'area' must be a number, 'num_keypoints' an integer, 'iscrowd' 0 or 1; {_fix_hint(path)}"
        )
    seg = ann["segmentation"]
    if ann["iscrowd"]:
        ok = isinstance(seg, dict) and "counts" in seg and "size" in seg
    else:
        ok = isinstance(seg, list) and all(isinstance(p, list) and all(_is_number(v) for v in p) for p in seg)
        ok = ok or (isinstance(seg, dict) and "counts" in seg and "size" in seg)
    if not ok:
        raise UserError(f"{where}: 'segmentation' must be polygons, or an RLE for a crowd; {_fix_hint(path)}")


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v)


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
    """The two masks of spec 4.2, uint8 {0, 255}, (height, width).

    ``mask_miss``: 255 = supervise, 0 = ignore. Ignored: people without keypoints, and every crowd region
    (all crowds unioned; fixes the original's one-crowd limit) minus the pixels of people with keypoints.
    The original subtracted only the people listed before the crowd (order dependent, spec bug 4); subtracting
    all labelled people is order independent and equals it when the crowd comes last, as it usually does.
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


def main_person_indices(anns: list[dict], stale_bbox_bug: bool = False) -> list[int]:
    """Indices (into ``anns``) of the main persons, one training sample each (spec 4.4).

    A person is main iff it has >= 5 keypoints, area >= 32*32, and its bbox centre is at least 0.3 * ref away
    from every main person chosen before it, where ref = max(w, h) of that earlier main person's bbox.
    ``stale_bbox_bug=True`` reproduces the original, which used the image's last annotation's bbox for ref.
    """
    chosen: list[tuple[float, float, float]] = []  # (cx, cy, ref)
    out = []
    last_bbox = anns[-1]["bbox"] if anns else None
    for i, ann in enumerate(anns):
        if ann["iscrowd"] or ann["num_keypoints"] < 5 or ann["area"] < 32 * 32:
            continue
        x, y, w, h = ann["bbox"]
        cx, cy = x + w / 2, y + h / 2
        if any(np.hypot(cx - px, cy - py) < 0.3 * ref for px, py, ref in chosen):
            continue
        ref_box = last_bbox if stale_bbox_bug else ann["bbox"]
        chosen.append((cx, cy, max(ref_box[2], ref_box[3])))
        out.append(i)
    return out
