"""COCO person-keypoint annotations: loading with clear errors, per-image grouping, masks and main persons.

JSON is parsed as data (``json.load``), never evaluated. Every problem with the file is a ``UserError`` naming
the file, the image or annotation and the field.

What is legal COCO and kept: images without people, keypoints outside their image (negative or past the
border; augmentation can bring them into the crop), zero-area boxes (the person is kept for the masks and as
an "other person", but cannot be a main person: its box gives no scale). Also read: files without ``area`` and
``segmentation`` (CrowdPose publishes neither): the box then stands for the person's region and 0.53 x its area for
the area, the stand-in CrowdPose's evaluation uses (``with_region_stand_ins``); and a keypoint category whose id
is not COCO's 1 (``keypoint_category``). What is corrupt and refused: invalid
JSON, duplicate image or annotation ids, a keypoint list that is not D x [x, y, v] finite numbers with v in
{0, 1, 2} (D: the skeleton's dataset keypoints, COCO's 17), a box with a negative or non-finite size, an
annotation of an image that is not listed. With
``skip_bad`` the images of corrupt annotations are skipped and listed instead (annotations of unlisted images
are dropped and listed); the file-level problems stay errors.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pycocotools import mask as mask_utils

from config.skeleton import Skeleton
from utils.errors import UserError

PERSON_CATEGORY = 1  # COCO's person; files with one keypoint category may give it any id (keypoint_category)
_ANNOTATION_FIELDS = ("image_id", "bbox", "keypoints", "num_keypoints", "iscrowd")
BOX_AREA_FACTOR = 0.53  # a person's area as a fraction of its box's, where the file gives none (CrowdPose's value)


@dataclass
class CocoKeypoints:
    """A validated annotation file: images in file order, and the person annotations of each image."""

    path: Path
    images: list[dict]
    annotations_by_image: dict[int, list[dict]]
    bad: list[dict] = field(default_factory=list)  # with skip_bad: {"annotation_id", "image_id", "reason"}
    stand_ins: int = 0  # annotations without 'area' or 'segmentation', given the box's (with_region_stand_ins)

    @property
    def bad_image_ids(self) -> set[int]:
        return {b["image_id"] for b in self.bad}


def _fix_hint(path: Path) -> str:
    return f"fix or re-download {path} (it must be a COCO person_keypoints_*.json file)"


_SKIP_HINT = "; or pass --skip-bad to skip the images of such annotations (listed in the output file's settings)"


def load_coco_keypoints(path: str | Path, skeleton: Skeleton, skip_bad: bool = False) -> CocoKeypoints:
    """Load and validate a COCO-format person keypoints JSON file whose annotations hold ``skeleton``'s dataset
    keypoints.

    ``skip_bad``: an annotation with bad values does not stop the load; it is listed in ``bad`` and its image
    should be skipped (``bad_image_ids``), since a person missing from an image would teach wrong negatives.
    """
    path = Path(path)
    data = _read_annotation_json(path)
    images = _validated_images(data["images"], path)
    image_ids = {img["id"] for img in images}
    category = keypoint_category(data, skeleton, path)
    by_image, bad = _person_annotations_by_image(data["annotations"], image_ids, path, skip_bad, skeleton, category)
    stand_ins = 0
    for anns in by_image.values():
        stand_ins += sum("area" not in a or "segmentation" not in a for a in anns)
        anns[:] = [with_region_stand_ins(a) for a in anns]
    return CocoKeypoints(path, images, by_image, bad, stand_ins)


def keypoint_category(data: dict, skeleton: Skeleton, path: Path | str) -> int:
    """The id of the category whose annotations hold the keypoints: the file's only category with a 'keypoints'
    list, else the one whose list has the skeleton's length (COCO's 1 when several do), else COCO's 1 when the file
    lists no such category. UserError when several fit equally."""
    listed = [c for c in data.get("categories") or [] if isinstance(c, dict) and isinstance(c.get("keypoints"), list)]
    if not listed:
        return PERSON_CATEGORY
    if len(listed) == 1:
        return listed[0].get("id", PERSON_CATEGORY)
    fitting = [c.get("id") for c in listed if len(c["keypoints"]) == skeleton.num_dataset_keypoints]
    if len(fitting) == 1 or PERSON_CATEGORY in fitting:
        return fitting[0] if len(fitting) == 1 else PERSON_CATEGORY
    raise UserError(
        f"annotation file {path} has {len(listed)} keypoint categories (ids {[c.get('id') for c in listed]}) and "
        f"{len(fitting) or 'none'} of them list {skeleton.num_dataset_keypoints} keypoints as skeleton "
        f"'{skeleton.name}' does; keep only the category to train on in the file"
    )


def with_region_stand_ins(ann: dict) -> dict:
    """The annotation with an 'area' and a 'segmentation' where it has none: 0.53 x the box area (CrowdPose's
    evaluation uses the same), and the box as a polygon (its region in the masks; an RLE for a crowd would need
    the image size, so a crowd gets the polygon too)."""
    if "area" in ann and "segmentation" in ann:
        return ann
    x, y, w, h = ann["bbox"]
    filled = dict(ann)
    filled.setdefault("area", h * w * BOX_AREA_FACTOR)
    filled.setdefault("segmentation", [[x, y, x + w, y, x + w, y + h, x, y + h]])
    return filled


def load_image_info(path: str | Path) -> list[dict]:
    """The validated 'images' (id, file_name, width, height) of a COCO image-info JSON such as
    ``image_info_test-dev2017.json``: images without annotations (an 'annotations' list, if any, is ignored)."""
    path = Path(path)
    return _validated_images(_read_annotation_json(path, need_annotations=False)["images"], path)


def _read_annotation_json(path: Path, need_annotations: bool = True) -> dict:
    """The parsed file, checked to be an object with an 'images' and (when needed) an 'annotations' list."""
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
    if need_annotations and not isinstance(data.get("annotations"), list):
        raise UserError(f"annotation file {path} has no 'annotations' list; {_fix_hint(path)}")
    return data


def _validated_images(entries: list, path: Path) -> list[dict]:
    """The 'images' entries in file order, reduced to id, file_name, width, height; any bad entry is an error."""
    images = []
    seen: set[int] = set()
    for i, img in enumerate(entries):
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
    return images


def _person_annotations_by_image(
    entries: list, image_ids: set[int], path: Path, skip_bad: bool, skeleton: Skeleton, category: int
) -> tuple[dict[int, list[dict]], list[dict]]:
    """The person annotations (of the keypoint category ``category``) grouped by image id, in file order, and (with
    ``skip_bad``) the bad ones.

    Annotations of other categories are ignored. A duplicate annotation id is always an error; an annotation
    with bad values is an error unless ``skip_bad``, then it is listed as {"annotation_id", "image_id", "reason"}.
    """
    by_image: dict[int, list[dict]] = {}
    bad: list[dict] = []
    ann_ids: dict[int, int] = {}
    for i, ann in enumerate(entries):
        if isinstance(ann, dict) and ann.get("category_id", category) != category:
            continue
        where = f"annotation file {path}, annotations[{i}]"
        if not isinstance(ann, dict):
            raise UserError(f"{where} is not an object; {_fix_hint(path)}")
        ann_id = ann.get("id")
        where += f" (id {ann_id if ann_id is not None else '?'})"
        if isinstance(ann_id, int) and ann_id in ann_ids:
            raise UserError(
                f"{where}: annotation id {ann_id} appears twice (also annotations[{ann_ids[ann_id]}]); the file "
                f"was probably merged from overlapping parts: remove the duplicates, or {_fix_hint(path)}"
            )
        if isinstance(ann_id, int):
            ann_ids[ann_id] = i
        problem = _annotation_problem(ann, image_ids, skeleton)
        if problem is None:
            by_image.setdefault(ann["image_id"], []).append(ann)
        elif skip_bad:
            bad.append({"annotation_id": ann_id, "image_id": ann.get("image_id"), "reason": problem})
        else:
            raise UserError(f"{where}: {problem}; {_fix_hint(path)}{_SKIP_HINT}")
    return by_image, bad


def _annotation_problem(ann: dict, image_ids: set[int], skeleton: Skeleton) -> str | None:
    """What is wrong with one person annotation (naming the field), or None."""
    for key in _ANNOTATION_FIELDS:
        if key not in ann:
            return f"has no '{key}' field"
    if ann["image_id"] not in image_ids:
        return f"refers to image_id {ann['image_id']}, which is not in 'images'"
    kp = ann["keypoints"]
    d = skeleton.num_dataset_keypoints
    if not isinstance(kp, list) or len(kp) != 3 * d:
        if isinstance(kp, list) and len(kp) % 3 == 0:
            return (f"'keypoints' holds {len(kp) // 3} keypoints ({len(kp)} numbers) but skeleton "
                    f"'{skeleton.name}' has {d} ({3 * d} numbers, {d} x [x, y, v]); if the dataset has another "
                    "keypoint set, convert it with its skeleton (--skeleton NAME or FILE)")  # fmt: skip
        n = len(kp) if isinstance(kp, list) else type(kp).__name__
        return f"'keypoints' must be {3 * d} numbers ({d} x [x, y, v], skeleton '{skeleton.name}'), got {n}"
    if not all(_is_number(v) for v in kp):
        j = next(j for j, v in enumerate(kp) if not _is_number(v))
        return f"'keypoints'[{j}] (keypoint {j // 3}, {'xyv'[j % 3]}) is {kp[j]!r}, not a finite number"
    if any(v not in (0, 1, 2) for v in kp[2::3]):
        return f"'keypoints' visibility flags must be 0, 1 or 2, got {sorted(set(kp[2::3]) - {0, 1, 2})}"
    bbox = ann["bbox"]
    if not isinstance(bbox, list) or len(bbox) != 4 or not all(_is_number(v) for v in bbox):
        return f"'bbox' must be 4 finite numbers [x, y, w, h], got {bbox!r}"
    if bbox[2] < 0 or bbox[3] < 0:
        return f"'bbox' {bbox} has a negative width or height"
    if not _is_number(ann.get("area", 0)) or not isinstance(ann["num_keypoints"], int) or ann["iscrowd"] not in (0, 1):
        return "'area' must be a number, 'num_keypoints' an integer, 'iscrowd' 0 or 1"
    if "segmentation" not in ann:
        return None
    seg = ann["segmentation"]
    if ann["iscrowd"]:
        ok = isinstance(seg, dict) and "counts" in seg and "size" in seg
    else:
        ok = isinstance(seg, list) and all(isinstance(p, list) and all(_is_number(v) for v in p) for p in seg)
        ok = ok or (isinstance(seg, dict) and "counts" in seg and "size" in seg)
    return None if ok else "'segmentation' must be polygons, or an RLE for a crowd"


def _is_number(v) -> bool:
    """A finite JSON number (math.isfinite, much cheaper than numpy on scalars: train2017 holds 13 M values;
    docs/benchmarks.md#data-pipeline-stages)."""
    if isinstance(v, float):
        return math.isfinite(v)
    return isinstance(v, int) and not isinstance(v, bool) and abs(v) < 1e15


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
    """The two masks of an image (docs/design.md#masks), uint8 {0, 255}, (height, width).

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


def main_person_indices(anns: list[dict], stale_bbox_bug: bool = False) -> list[int]:
    """Indices (into ``anns``) of the main persons, one training sample each (docs/design.md#main-persons-and-samples).

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
        ref_box = last_bbox if stale_bbox_bug else ann["bbox"]
        chosen.append((cx, cy, max(ref_box[2], ref_box[3])))
        out.append(i)
    return out


def has_empty_box(ann: dict) -> bool:
    """The annotation's bbox has zero width or height (legal COCO, but useless for scaling a sample)."""
    return ann["bbox"][2] <= 0 or ann["bbox"][3] <= 0
