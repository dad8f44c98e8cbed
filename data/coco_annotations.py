"""COCO person-keypoint annotations: loading with clear errors and per-image grouping (the masks drawn from them:
``data.person_masks``; the main persons chosen among them: ``data.main_person``).

One reader for the converter and the evaluator (``load_coco_keypoints``), so that both accept, fill and refuse the
same files. JSON is parsed as data (``json.load``), never evaluated. Every problem with the file is a
``UserError`` naming the file, the image or annotation and the field.

What is legal COCO and kept: images without people, keypoints outside their image (negative or past the
border; augmentation can bring them into the crop), zero-area boxes (the person is kept for the masks and as
an "other person", but cannot be a main person: its box gives no scale), a keypoint category whose id is not COCO's
1 (``keypoint_category``). Optional, and filled the same way wherever a file is read (``with_defaults``;
docs/keypoint_sets.md#optional-fields): ``iscrowd`` (0), ``num_keypoints`` (the keypoints with v > 0), ``keypoints``
(none labelled), ``area`` (0.53 x the box area, CrowdPose's stand-in) and ``segmentation`` (the box as a polygon), and
an image's ``width`` / ``height`` (None here; the image file gives them when it is read). The category's keypoint names,
where it lists them, must be the skeleton's (``config.skeleton_check.file_keypoint_names``). What is corrupt and
refused: invalid JSON, duplicate image or annotation ids, an annotation without ``image_id`` or ``bbox``, a keypoint
list that is not D x [x, y, v] finite numbers with v in {0, 1, 2} (D: the skeleton's dataset keypoints, COCO's 17),
a box with a negative or non-finite size, an annotation of an image that is not listed. With ``skip_bad`` the images
of corrupt annotations are skipped and listed instead (annotations of unlisted images are dropped and listed); the
file-level problems stay errors: an image id that is not an integer, an annotation id that is neither an integer nor
a string (ids of any size are kept as given: ``is_file_id``), a category whose ``keypoints`` is not a list of names,
and a file without any labelled person (no annotation with num_keypoints > 0: nothing to train on or to score).
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from simplepose.config.skeleton import Skeleton
from simplepose.config.skeleton_check import NameMatch, SkeletonMismatch, annotation_keypoints, file_keypoint_names
from simplepose.utils.commands import command
from simplepose.utils.errors import AnnotationError
from simplepose.utils.file_kind import file_kind

log = logging.getLogger(__name__)

PERSON_CATEGORY = 1  # COCO's person; files with one keypoint category may give it any id (keypoint_category)
REQUIRED_FIELDS = ("image_id", "bbox")  # of a person annotation; everything else has a default (with_defaults)
BOX_AREA_FACTOR = 0.53  # a person's area as a fraction of its box's, where the file gives none (CrowdPose's value)
_IMAGE_FIELDS = ("id", "file_name", "width", "height", "crowdIndex")  # kept of each image entry
# What with_defaults puts where an annotation has no such field, for the messages.
FILLED_WITH = {
    "iscrowd": "0 (not a crowd)",
    "num_keypoints": "the number of keypoints with v > 0",
    "keypoints": "none labelled",
    "area": f"{BOX_AREA_FACTOR} x the box area",
    "segmentation": "the box as a polygon",
}


# COCO-WholeBody's layout: COCO's 17 body keypoints in "keypoints", the other 116 in these fields, in this order
# (the order of its 133-keypoint evaluation and of config/skeletons/coco_wholebody.yaml)
WHOLEBODY_PARTS = ("foot_kpts", "face_kpts", "lefthand_kpts", "righthand_kpts")


def with_parts_joined(ann: dict, num_keypoints: int) -> tuple[dict, bool]:
    """(the annotation, whether it was changed): an annotation of COCO-WholeBody's layout whose "keypoints" and
    parts (``WHOLEBODY_PARTS``) together hold ``num_keypoints`` keypoints gets them as one "keypoints" list, and
    ``num_keypoints`` counted over all of them (the file's counts the body's only); anything else is left as it is."""
    kp = ann.get("keypoints")
    if (
        not isinstance(kp, list)
        or len(kp) == 3 * num_keypoints
        or not all(isinstance(ann.get(part), list) for part in WHOLEBODY_PARTS)
    ):
        return ann, False
    joined = kp + [v for part in WHOLEBODY_PARTS for v in ann[part]]
    if len(joined) != 3 * num_keypoints:
        return ann, False
    count = sum(1 for v in joined[2::3] if isinstance(v, (int, float)) and v > 0)
    return {**ann, "keypoints": joined, "num_keypoints": count}, True


@dataclass
class CocoKeypoints:
    """A validated annotation file: images in file order, and the person annotations of each image (defaults
    filled). ``filled``: how many annotations lacked each optional field (``FILLED_WITH``), ``images_without_size``
    how many images lacked width or height; ``category``: the keypoint category's id."""

    path: Path
    images: list[dict]
    annotations_by_image: dict[int, list[dict]]
    bad: list[dict] = field(default_factory=list)  # with skip_bad: {"annotation_id", "image_id", "reason"}
    stand_ins: int = 0  # annotations without 'area' or 'segmentation', given the box's (with_defaults)
    filled: dict[str, int] = field(default_factory=dict)
    images_without_size: int = 0
    category: int = PERSON_CATEGORY
    keypoint_names: tuple[str, ...] | None = None  # as the file's category lists them, when it does
    # per image id, parallel to annotations_by_image: the annotation had no 'segmentation', its box stands in
    box_regions: dict[int, list[bool]] = field(default_factory=dict)

    @property
    def bad_image_ids(self) -> set[int]:
        return {b["image_id"] for b in self.bad}


def not_json(path: Path, fix: str) -> AnnotationError:
    """The error for an annotation file that is not text (its bytes do not decode): what it is, by its signature
    (``utils.file_kind``), and ``fix``; an HDF5 file is named as the converter's output."""
    kind = file_kind(path)
    if kind.name == "hdf5":
        what = f"an HDF5 file (a converted training file, written by {command('data.coco_to_hdf5')}?)"
    else:
        what = kind.description or "not a text file"
    return AnnotationError(f"annotation file {path} is {what}, not COCO-format JSON: {fix}", file=path)


def _fix_hint(path: Path) -> str:
    return f"fix or re-download {path} (it must be a COCO person_keypoints_*.json file)"


_SKIP_HINT = "; or pass --skip-bad to skip the images of such annotations (listed in the output file's settings)"
_EVAL_SKIP_HINT = "; or pass --skip-bad (eval.skip_bad=true) to leave the images of such annotations out, counted"


def _skip_hint(purpose: str) -> str:
    return _SKIP_HINT if "--skeleton" in purpose else _EVAL_SKIP_HINT


def load_coco_keypoints(
    path: str | Path,
    skeleton: Skeleton,
    skip_bad: bool = False,
    names: NameMatch = "exact",
    purpose: str = "this conversion (--skeleton)",
    compact: bool = False,
) -> CocoKeypoints:
    """Load and validate a COCO-format person keypoints JSON file whose annotations hold ``skeleton``'s dataset
    keypoints, with every optional field filled (``with_defaults``).

    ``skip_bad``: an annotation with bad values does not stop the load; it is listed in ``bad`` (with a warning) and
    its image should be skipped (``bad_image_ids``), since a person missing from an image would teach wrong
    negatives. ``names``: how the category's keypoint names are compared with the skeleton's
    (``config.skeleton_check.NameMatch``). ``purpose``: who reads the file, for the messages. ``compact``: polygons
    as float64 arrays (``_compact_polygons``), for a reader that only draws them (the converter; pycocotools' ``COCO``
    and a JSON writer want lists).
    """
    path = Path(path)
    data = _read_annotation_json(path, compact=compact)
    images = _validated_images(data["images"], path)
    image_ids = {img["id"] for img in images}
    _check_categories(data, path)
    category = keypoint_category(data, skeleton, path)
    listed = next(
        (c.get("keypoints") for c in data.get("categories") or [] if isinstance(c, dict) and c.get("id") == category),
        None,
    )
    by_image, bad, filled, box_regions = _person_annotations_by_image(
        data["annotations"], image_ids, path, skip_bad, skeleton, category, purpose
    )
    joined = filled.pop("parts_joined")
    if joined:
        log.info(
            "annotation file %s: %d annotations in COCO-WholeBody's layout, their %s joined after 'keypoints'",
            path,
            joined,
            ", ".join(WHOLEBODY_PARTS),
        )
        if isinstance(listed, list) and tuple(listed) == skeleton.dataset_keypoints[: len(listed)]:
            listed = list(skeleton.dataset_keypoints)  # the category names the body's keypoints only
    # after the annotations: a file of another keypoint count is told as such, naming an annotation
    mismatch = file_keypoint_names(
        skeleton,
        listed,
        where=f"annotation file {path}",
        match=names,
        expected_by=purpose,
        fix=_names_fix(purpose, path, skeleton),
        file=path,
    )
    if mismatch is not None:
        raise mismatch
    for b in bad:
        log.warning("skipping image id %s: annotation id %s %s", b["image_id"], b["annotation_id"], b["reason"])
    _check_labelled(data["annotations"], by_image, len(bad), path, category, purpose)
    for key, n in filled.items():
        if n and key != "stand_ins":
            log.info("annotation file %s: %d annotations without '%s': taken as %s", path, n, key, FILLED_WITH[key])
    unsized = sum(img["width"] is None for img in images)
    if unsized:
        log.info("annotation file %s: %d images without 'width' or 'height': read from the image files", path, unsized)
    return CocoKeypoints(
        path,
        images,
        by_image,
        bad,
        filled.pop("stand_ins"),
        filled,
        unsized,
        category,
        tuple(listed) if isinstance(listed, list) and listed else None,
        box_regions,
    )


def _remap(path: Path, skeleton: Skeleton) -> str:
    """The fix for annotations whose keypoints are not those of the model they are scored against: the command that
    writes them in ``skeleton``'s keypoints (matched by name), and the file to give then."""
    mapped = path.with_name(f"{path.stem}_{skeleton.name}.json")
    remap = command("data.map_keypoints", f"--annotations {path} --skeleton {skeleton.reference()} --out {mapped}")
    return f"write the annotations in this skeleton's keypoints (`{remap}`) and give {mapped}"


def _names_fix(purpose: str, path: Path, skeleton: Skeleton) -> str:
    """What to do when a file's keypoints are not ``skeleton``'s: a conversion takes the dataset's own skeleton; an
    evaluation or a run's validation, whose skeleton is the model's, takes the annotations mapped onto it."""
    converting = "--skeleton" in purpose

    def option(value: str) -> str:
        return f"--keypoint-names {value}" + ("" if converting else f" (eval.keypoint_names={value})")

    if converting:
        first = "give the skeleton of this dataset's keypoints (a file in config/skeletons/ or your own)"
    else:
        first = _remap(path, skeleton)
    return (
        f"{first}; if the names differ only in spelling (Right-ankle for right_ankle) pass {option('spelling')}, if "
        f"they are other names for the same keypoints in the same order, {option('position')}"
    )


def _check_categories(data: dict, path: Path) -> None:
    """AnnotationError naming the entry when 'categories' is not a list of objects, or a category's 'keypoints' (the
    names of its keypoints, when given) is not a list of strings: a comma-separated string is not taken on trust."""
    categories = data.get("categories")
    if categories is None:
        return
    if not isinstance(categories, list):
        raise AnnotationError(
            f"annotation file {path}: 'categories' must be a list of objects, got "
            f"{type(categories).__name__}; {_fix_hint(path)}",
            file=path,
            key="categories",
        )
    for i, c in enumerate(categories):
        if not isinstance(c, dict):
            raise AnnotationError(
                f"annotation file {path}: categories[{i}] is not an object; {_fix_hint(path)}",
                file=path,
                key="categories",
            )
        names = c.get("keypoints")
        if names is None or (isinstance(names, list) and all(isinstance(n, str) for n in names)):
            continue
        got = f"a string {names[:60]!r}" if isinstance(names, str) else f"{type(names).__name__} {str(names)[:60]}"
        fix = (
            'write it as a JSON list of names, e.g. ["nose", "left_eye", ...]'
            if isinstance(names, str)
            else "give a list of keypoint names (strings), in the order of each annotation's keypoints"
        )
        raise AnnotationError(
            f"annotation file {path}: categories[{i}].keypoints (category id {c.get('id')!r}) must be a list of "
            f"keypoint names (strings), got {got}; {fix}, or remove it (the skeleton's order is then assumed)",
            file=path,
            key="categories.keypoints",
        )


def _check_labelled(
    entries: list, by_image: dict[int, list[dict]], skipped: int, path: Path, category: int, purpose: str
) -> None:
    """AnnotationError naming the file when none of its person annotations has a labelled keypoint: nothing to train
    on, and nothing to score (pycocotools ignores people without keypoints: every figure would be -1)."""
    people = [a for anns in by_image.values() for a in anns]
    if any(a["num_keypoints"] > 0 and not a["iscrowd"] for a in people):
        return
    others = sum(isinstance(a, dict) and a.get("category_id", category) != category for a in entries)
    found = f"0 of {len(people)} person annotations (category id {category}) have labelled keypoints (num_keypoints > 0"
    found += ", not a crowd)" + (f", {skipped} more skipped as bad" if skipped else "")
    found += f"; {others} annotations of other categories are not read" if others else ""
    if "--skeleton" in purpose:
        hint = (
            "a training file is made of people with keypoints (an instances_*.json file has boxes only): pass "
            "the COCO person_keypoints_*.json file"
        )
    else:
        hint = (
            "keypoint AP needs ground-truth people with keypoints (pycocotools ignores the others: every figure "
            "would be -1, not a score): pass the person_keypoints_*.json file, or --image-info FILE instead of "
            "--annotations to write the results without scoring them"
        )
    raise AnnotationError(f"annotation file {path} has no labelled person: {found}; {hint}", file=path, key="keypoints")


def keypoint_category(data: dict, skeleton: Skeleton, path: Path | str) -> int:
    """The id of the category whose annotations hold the keypoints: the file's only category with a 'keypoints'
    list, else the one whose list has the skeleton's length (COCO's 1 when several do), else COCO's 1 when the file
    lists no such category. UserError when several fit equally."""
    listed = [c for c in data.get("categories") or [] if isinstance(c, dict) and isinstance(c.get("keypoints"), list)]
    if not listed:
        return PERSON_CATEGORY
    if len(listed) == 1:
        return listed[0].get("id", PERSON_CATEGORY)
    fitting = [c.get("id", PERSON_CATEGORY) for c in listed if len(c["keypoints"]) == skeleton.num_dataset_keypoints]
    if len(fitting) == 1 or PERSON_CATEGORY in fitting:
        return fitting[0] if len(fitting) == 1 else PERSON_CATEGORY
    raise AnnotationError(
        f"annotation file {path} has {len(listed)} keypoint categories (ids {[c.get('id') for c in listed]}) and "
        f"{len(fitting) or 'none'} of them list {skeleton.num_dataset_keypoints} keypoints as skeleton "
        f"'{skeleton.name}' does; keep only the category to train on in the file",
        file=path,
        key="categories",
    )


def with_defaults(ann: dict, num_keypoints: int) -> tuple[dict, list[str]]:
    """(the annotation with every optional field it lacks filled, the fields filled): ``iscrowd`` 0,
    ``keypoints`` none labelled (``num_keypoints`` x [0, 0, 0]), ``num_keypoints`` the keypoints with v > 0,
    ``area`` 0.53 x the box area (CrowdPose's evaluation uses the same stand-in for the OKS scale) and
    ``segmentation`` the box as a polygon (its region in the masks; an RLE for a crowd would need the image size, so
    a crowd gets the polygon too). ``ann`` must have a valid 'bbox'; it is not changed."""
    missing = [k for k in FILLED_WITH if k not in ann]
    if not missing:
        return ann, missing
    x, y, w, h = ann["bbox"]
    filled = dict(ann)
    filled.setdefault("iscrowd", 0)
    filled.setdefault("keypoints", [0] * (3 * num_keypoints))
    if "num_keypoints" not in filled:
        kp = filled["keypoints"]
        filled["num_keypoints"] = sum(1 for v in kp[2::3] if v > 0) if isinstance(kp, list) else 0
    filled.setdefault("area", h * w * BOX_AREA_FACTOR)
    filled.setdefault("segmentation", [[x, y, x + w, y, x + w, y + h, x, y + h]])
    return filled, missing


def load_image_info(path: str | Path) -> list[dict]:
    """The validated 'images' (id, file_name, width, height) of a COCO image-info JSON such as
    ``image_info_test-dev2017.json``: images without annotations (an 'annotations' list, if any, is ignored)."""
    path = Path(path)
    return _validated_images(_read_annotation_json(path, need_annotations=False)["images"], path)


def _compact_polygons(obj: dict) -> dict:
    """A parsed JSON object whose 'segmentation' is polygons of finite numbers gets each polygon as a float64 array
    (the same values in a third of the memory of a list of Python floats); anything else is left for the checks."""
    seg = obj.get("segmentation")
    if isinstance(seg, list) and all(isinstance(p, list) and all(type(v) in (int, float) for v in p) for p in seg):
        arrays = [np.array(p, np.float64) for p in seg]
        if all(np.isfinite(a).all() for a in arrays):
            obj["segmentation"] = arrays
    return obj


def read_annotation_file(path: Path, want: str = "pass the COCO person_keypoints_*.json file", compact: bool = False):
    """The parsed JSON of an annotation file, unchecked (the one place such a file is opened and parsed); an
    AnnotationError naming it when it is a folder, missing, unreadable or not JSON (``want``: what to give
    instead). ``compact``: polygons parsed into arrays as they are read (``_compact_polygons``)."""
    if path.is_dir():
        raise AnnotationError(
            f"--annotations {path} is a folder (the images? --images takes the image folder, --annotations the COCO "
            "person_keypoints_*.json file)",
            file=path,
        )
    if not path.is_file():
        raise AnnotationError(f"annotation file {path} not found; {want}", file=path)
    try:
        with open(path, "rb") as f:
            data = json.load(f, object_hook=_compact_polygons if compact else None)
    except json.JSONDecodeError as e:
        raise AnnotationError(
            f"annotation file {path} is not valid JSON ({e.msg} at line {e.lineno}, column {e.colno}); "
            f"the file looks truncated or corrupt: download it again",
            file=path,
        ) from None
    except UnicodeDecodeError:
        raise not_json(path, want) from None
    except OSError as e:
        raise AnnotationError(f"cannot read annotation file {path}: {e}; {_fix_hint(path)}", file=path) from None
    return data


def _read_annotation_json(path: Path, need_annotations: bool = True, compact: bool = False) -> dict:
    """The parsed file, checked to be an object with an 'images' and (when needed) an 'annotations' list.
    ``compact``: polygons parsed into arrays as they are read, for a reader that only draws them (the converter): a
    large file's peak memory is then about a quarter lower."""
    data = read_annotation_file(path, compact=compact)
    if isinstance(data, list):  # a results file's form
        raise AnnotationError(
            f"annotation file {path} is a JSON list, as a results file is, not a COCO annotation file (an object "
            "with 'images' and 'annotations'): were the results file and the annotation file given the other way "
            "round?",
            file=path,
            key="images",
        )
    if not isinstance(data, dict) or not isinstance(data.get("images"), list):
        raise AnnotationError(
            f"annotation file {path} has no 'images' list; {_fix_hint(path)}", file=path, key="images"
        )
    if need_annotations and not isinstance(data.get("annotations"), list):
        raise AnnotationError(
            f"annotation file {path} has no 'annotations' list; {_fix_hint(path)}", file=path, key="annotations"
        )
    return data


def _validated_images(entries: list, path: Path) -> list[dict]:
    """The 'images' entries in file order, reduced to id, file_name, width, height (None when not given) and
    crowdIndex (when given); any bad entry is an error."""
    images = []
    seen: set[int] = set()
    for i, img in enumerate(entries):
        where = f"annotation file {path}, images[{i}]"
        if not isinstance(img, dict):
            raise AnnotationError(f"{where} is not an object; {_fix_hint(path)}", file=path, key="images")
        for key in ("id", "file_name"):
            if key not in img:
                raise AnnotationError(
                    f"{where} has no '{key}' field, which every image needs; add it to the file", file=path, key=key
                )
        if not isinstance(img["id"], int) or isinstance(img["id"], bool):
            raise AnnotationError(
                f"{where}: image 'id' must be an integer (of any size), got {img['id']!r}: COCO's results name images "
                f"by integer ids; renumber the images (and their annotations' image_id), or {_fix_hint(path)}",
                file=path,
                key="id",
            )
        if not isinstance(img["file_name"], str):
            raise AnnotationError(
                f"{where} (image id {img['id']}): 'file_name' must be a string, got "
                f"{img['file_name']!r}; {_fix_hint(path)}",
                file=path,
                key="file_name",
                image_id=img["id"],
            )
        sized = "width" in img and "height" in img
        if sized and not all(
            isinstance(img[k], int) and not isinstance(img[k], bool) and img[k] > 0 for k in ("width", "height")
        ):
            raise AnnotationError(
                f"{where}: 'width' and 'height' must be positive integers; {_fix_hint(path)}",
                file=path,
                key="width",
                image_id=img["id"],
            )
        if img["id"] in seen:
            raise AnnotationError(
                f"{where}: image id {img['id']} appears twice; {_fix_hint(path)}",
                file=path,
                key="id",
                image_id=img["id"],
            )
        seen.add(img["id"])
        kept = {k: img[k] for k in _IMAGE_FIELDS if k in img}
        if not sized:
            kept["width"] = kept["height"] = None
        images.append(kept)
    return images


def _person_annotations_by_image(
    entries: list, image_ids: set[int], path: Path, skip_bad: bool, skeleton: Skeleton, category: int, purpose: str
) -> tuple[dict[int, list[dict]], list[dict], dict[str, int], dict[int, list[bool]]]:
    """The person annotations (of the keypoint category ``category``, defaults filled) grouped by image id, in file
    order, (with ``skip_bad``) the bad ones, how many lacked each optional field ("stand_ins": area or
    segmentation), and per image which of its annotations lacked a segmentation (the box is their region).

    Annotations of other categories are ignored. A duplicate annotation id is always an error; an annotation
    with bad values is an error unless ``skip_bad``, then it is listed as {"annotation_id", "image_id", "reason"}.
    """
    by_image: dict[int, list[dict]] = {}
    box_regions: dict[int, list[bool]] = {}  # parallel to by_image: no segmentation, the box stands in
    bad: list[dict] = []
    ann_ids: dict[int, int] = {}
    filled = dict.fromkeys((*FILLED_WITH, "stand_ins", "parts_joined"), 0)
    for i, ann in enumerate(entries):
        if isinstance(ann, dict) and ann.get("category_id", category) != category:
            continue
        where = f"annotation file {path}, annotations[{i}]"
        if not isinstance(ann, dict):
            raise AnnotationError(f"{where} is not an object; {_fix_hint(path)}", file=path, key="annotations")
        ann_id = ann.get("id")
        where += f" (annotation id {ann_id!r})" if ann_id is not None else " (no annotation id)"
        if ann_id is not None and not is_file_id(ann_id):
            raise AnnotationError(
                f"{where}: annotation 'id' must be an integer or a string, got {type(ann_id).__name__} {ann_id!r} "
                f"(1, 1.0 and true would be one id); {_fix_hint(path)}",
                file=path,
                key="id",
                annotation_id=None,
                image_id=ann.get("image_id"),
            )
        if ann_id is not None and ann_id in ann_ids:
            raise AnnotationError(
                f"{where}: annotation id {ann_id!r} appears twice (also annotations[{ann_ids[ann_id]}]); the file "
                f"was probably merged from overlapping parts: remove the duplicates, or {_fix_hint(path)}",
                file=path,
                key="id",
                annotation_id=ann_id,
            )
        if ann_id is not None:
            ann_ids[ann_id] = i
        ann, was_joined = with_parts_joined(ann, skeleton.num_dataset_keypoints)
        filled["parts_joined"] += was_joined
        problem = _annotation_problem(ann, image_ids, skeleton, where, path, purpose)
        if problem is None:
            ann, missing = with_defaults(ann, skeleton.num_dataset_keypoints)
            for key in missing:
                filled[key] += 1
            filled["stand_ins"] += "area" in missing or "segmentation" in missing
            by_image.setdefault(ann["image_id"], []).append(ann)
            box_regions.setdefault(ann["image_id"], []).append("segmentation" in missing)
        elif skip_bad:
            reason = str(problem) if isinstance(problem, SkeletonMismatch) else problem[1]
            bad.append({"annotation_id": ann_id, "image_id": ann.get("image_id"), "reason": reason})
        elif isinstance(problem, SkeletonMismatch):
            raise problem
        else:
            hint = (
                _fix_hint(path)
                if problem[0] not in REQUIRED_FIELDS or "has no" not in problem[1]
                else (
                    f"every person annotation needs {' and '.join(REQUIRED_FIELDS)} (the other fields may be missing: "
                    "docs/keypoint_sets.md#optional-fields); add it to the file"
                )
            )
            raise AnnotationError(
                f"{where}: {problem[1]}; {hint}{_skip_hint(purpose)}",
                file=path,
                key=problem[0],
                annotation_id=ann_id,
                image_id=ann.get("image_id"),
            )
    return by_image, bad, filled, box_regions


def _annotation_problem(
    ann: dict, image_ids: set[int], skeleton: Skeleton, where: str, path: Path, purpose: str
) -> tuple[str, str] | SkeletonMismatch | None:
    """What is wrong with one person annotation: (the field, what), a ``SkeletonMismatch`` when its keypoints are
    another skeleton's (``where`` names it in ``path``), or None. Missing optional fields are not wrong."""
    for key in REQUIRED_FIELDS:
        if key not in ann:
            return key, f"has no '{key}' field"
    if ann["image_id"] not in image_ids:
        return "image_id", f"refers to image_id {ann['image_id']}, which is not in 'images'"
    bbox = ann["bbox"]
    if not isinstance(bbox, list) or len(bbox) != 4 or not all(_is_number(v) for v in bbox):
        return "bbox", f"'bbox' must be 4 finite numbers [x, y, w, h], got {bbox!r}"
    if bbox[2] < 0 or bbox[3] < 0:
        return "bbox", f"'bbox' {bbox} has a negative width or height"
    if "keypoints" in ann:
        problem = _keypoints_problem(ann["keypoints"], skeleton, where, path, purpose)
        if problem is not None:
            return problem
    if "area" in ann and not _is_number(ann["area"]):
        return "area", f"'area' must be a number, got {ann['area']!r}"
    if "num_keypoints" in ann and (not isinstance(ann["num_keypoints"], int) or isinstance(ann["num_keypoints"], bool)):
        return "num_keypoints", f"'num_keypoints' must be an integer, got {ann['num_keypoints']!r}"
    if ann.get("iscrowd", 0) not in (0, 1):
        return "iscrowd", f"'iscrowd' must be 0 or 1, got {ann['iscrowd']!r}"
    if "segmentation" not in ann:
        return None
    seg = ann["segmentation"]
    if ann.get("iscrowd", 0):
        ok = isinstance(seg, dict) and "counts" in seg and "size" in seg
    else:
        ok = isinstance(seg, list) and all(
            isinstance(p, np.ndarray) or (isinstance(p, list) and all(_is_number(v) for v in p)) for p in seg
        )
        ok = ok or (isinstance(seg, dict) and "counts" in seg and "size" in seg)
    return None if ok else ("segmentation", "'segmentation' must be polygons, or an RLE for a crowd")


def _keypoints_problem(
    kp, skeleton: Skeleton, where: str, path: Path, purpose: str
) -> tuple[str, str] | SkeletonMismatch | None:
    """What is wrong with an annotation's 'keypoints' (as ``_annotation_problem``), or None."""
    if isinstance(kp, list):
        fix = (
            "if the dataset has another keypoint set, convert it with its skeleton (--skeleton NAME or FILE)"
            if "--skeleton" in purpose
            else "evaluate with the skeleton of this dataset (data.skeleton=NAME or FILE; a checkpoint carries its "
            f"own), or {_remap(path, skeleton)}"
        ) + _skip_hint(purpose)
        other = annotation_keypoints(kp, skeleton, where=where, expected_by=purpose, fix=fix, file=path)
        if other is not None:
            return other
    d = skeleton.num_dataset_keypoints
    if not isinstance(kp, list) or len(kp) != 3 * d:
        n = len(kp) if isinstance(kp, list) else type(kp).__name__
        what = f"{3 * d} numbers ({d} x [x, y, v], skeleton '{skeleton.name}')"
        return "keypoints", f"'keypoints' must be {what}, got {n}"
    if not all(_is_number(v) for v in kp):
        j = next(j for j, v in enumerate(kp) if not _is_number(v))
        return "keypoints", f"'keypoints'[{j}] (keypoint {j // 3}, {'xyv'[j % 3]}) is {kp[j]!r}, not a finite number"
    if any(v not in (0, 1, 2) for v in kp[2::3]):
        return "keypoints", f"'keypoints' visibility flags must be 0, 1 or 2, got {sorted(set(kp[2::3]) - {0, 1, 2})}"
    return None


def is_file_id(value) -> bool:
    """An annotation id this project keeps as the file gives it: an integer of any size or a string (not a float or a
    boolean, which Python would take for an integer: 1.0 == 1 == True)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _is_number(v) -> bool:
    """A finite JSON number (math.isfinite, much cheaper than numpy on scalars: train2017 holds 13 M values;
    docs/benchmarks.md#data-pipeline-stages)."""
    if isinstance(v, float):
        return math.isfinite(v)
    return isinstance(v, int) and not isinstance(v, bool) and abs(v) < 1e15
