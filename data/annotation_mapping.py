"""A COCO-format person-keypoints file's keypoints put onto another skeleton, by name
(docs/data.md#mapping-annotations-onto-another-skeleton; the command: ``python -m simplepose.data.map_keypoints``).

    mapped, mapping = map_annotation_file(json.load(f), load_skeleton("coco"), "crowdpose_val.json")
    mapping.coverage()      # what is kept, what the file cannot label, what is dropped

The file's person category names its keypoints (``keypoints``, in the order of every annotation's list), matched
however the dataset spells them (``Right Shoulder``, ``r shoulder``, ``RShoulder``: ``config.keypoint_names``); a
name for another point can be renamed first (``rename``). The names are matched as
``data.keypoint_mapping.KeypointMapping`` matches them: a skeleton keypoint the file lacks is unlabelled (0, 0, 0),
a file keypoint the skeleton lacks is dropped. The result is the same file with that category's ``keypoints`` and
``skeleton`` the target skeleton's, and every annotation's ``keypoints`` (crowds' included) mapped and its
``num_keypoints`` recounted; everything else (images, other fields, other categories, extra top-level keys such as
CrowdPose's per-image ``crowdIndex``) is kept as it is. The input is not changed (entries that are not changed are
shared with it).
"""

from __future__ import annotations

from simplepose.config.schema import NameMatch
from simplepose.config.skeleton import Skeleton
from simplepose.data.keypoint_mapping import KeypointMapping
from simplepose.utils.errors import AnnotationError


def map_annotation_file(
    data: dict, skeleton: Skeleton, source: str, rename: dict[str, str] | None = None, match: NameMatch = "spelling"
) -> tuple[dict, KeypointMapping]:
    """(``data`` with its keypoints in ``skeleton``'s dataset order, the mapping used). ``data``: a parsed COCO-format
    person-keypoints JSON; ``source``: its file, for messages; ``rename``: a keypoint name of the file -> the name to
    match it by, applied first; ``match``: how names are compared (``KeypointMapping.by_name``). AnnotationError
    naming the file (and the annotation) for a file without keypoint names, a rename of a name the file does not
    have, or an annotation whose keypoint list does not hold the file's keypoints."""
    if not isinstance(data, dict) or not isinstance(data.get("annotations"), list):
        raise AnnotationError(
            f"{source} has no 'annotations' list: pass a COCO-format person_keypoints JSON", file=source
        )
    index, category = _keypoint_category(data, source)
    names = _renamed(tuple(category["keypoints"]), rename or {}, source)
    mapping = KeypointMapping.by_name(names, skeleton, source, match)
    out = dict(data)
    categories = list(data["categories"])
    categories[index] = {
        **category,
        "keypoints": list(skeleton.dataset_keypoints),
        "skeleton": [[a + 1, b + 1] for a, b in skeleton.draw_edges],  # COCO's category skeleton is 1-based
    }
    out["categories"] = categories
    out["annotations"] = [
        _mapped(ann, i, mapping, category.get("id"), source) for i, ann in enumerate(data["annotations"])
    ]
    return out, mapping


def _keypoint_category(data: dict, source: str) -> tuple[int, dict]:
    """(its index in 'categories', the category) whose 'keypoints' name the file's keypoints: the only category with
    a 'keypoints' list (COCO's person, id 1, when several have one)."""
    categories = data.get("categories")
    if not isinstance(categories, list):
        categories = []
    listed = [(i, c) for i, c in enumerate(categories) if isinstance(c, dict) and c.get("keypoints") is not None]
    if len(listed) > 1:
        listed = [(i, c) for i, c in listed if c.get("id") == 1] or listed
    if len(listed) > 1:
        raise AnnotationError(
            f"{source} has {len(listed)} categories with keypoint names (ids {[c.get('id') for _, c in listed]}); "
            "keep only the person category in the file",
            file=source,
            key="categories",
        )
    if not listed or not listed[0][1]["keypoints"]:
        raise AnnotationError(
            f"{source}: its person category lists no keypoint names ('keypoints' in 'categories'), and keypoints are "
            "mapped by name: add them to the file's person category, in the order of the annotations' keypoints "
            '(e.g. "keypoints": ["left_shoulder", "right_shoulder", ...])',
            file=source,
            key="categories.keypoints",
        )
    i, category = listed[0]
    names = category["keypoints"]
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise AnnotationError(
            f"{source}: categories[{i}].keypoints must be a list of keypoint names (strings), got "
            f"{str(names)[:60]}; write it as a JSON list of names, in the order of the annotations' keypoints",
            file=source,
            key="categories.keypoints",
        )
    return i, category


def _renamed(names: tuple[str, ...], rename: dict[str, str], source: str) -> tuple[str, ...]:
    unknown = [old for old in rename if old not in names]
    if unknown:
        raise AnnotationError(
            f"{source}: cannot rename {', '.join(repr(n) for n in unknown)}: the file has no keypoint of that name; "
            f"its keypoints are {list(names)}",
            file=source,
            key="categories.keypoints",
        )
    return tuple(rename.get(n, n) for n in names)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _mapped(ann, position: int, mapping: KeypointMapping, category_id, source: str):
    """The annotation with its keypoints in the skeleton's order and its num_keypoints recounted; annotations of
    other categories and annotations without keypoints are returned as they are."""
    if not isinstance(ann, dict) or "keypoints" not in ann:
        return ann
    if category_id is not None and ann.get("category_id", category_id) != category_id:
        return ann
    kp = ann["keypoints"]
    s = len(mapping.source_keypoints)
    where = f"{source}: annotation id {ann.get('id', f'(none; annotations[{position}])')}"
    if not isinstance(kp, list) or len(kp) != 3 * s:
        got = f"{len(kp)} numbers" if isinstance(kp, list) else type(kp).__name__
        raise AnnotationError(
            f"{where}: 'keypoints' must be {3 * s} numbers ({s} x [x, y, v], the file's keypoints "
            f"{list(mapping.source_keypoints)}), got {got}; fix the annotation or remove it",
            file=source,
            key="keypoints",
            annotation_id=ann.get("id"),
        )
    if not all(_is_number(v) for v in kp):
        j = next(j for j, v in enumerate(kp) if not _is_number(v))
        raise AnnotationError(
            f"{where}: 'keypoints'[{j}] is {kp[j]!r}, not a number; fix the annotation or remove it",
            file=source,
            key="keypoints",
            annotation_id=ann.get("id"),
        )
    # The mapping's own rule (KeypointMapping.apply) on the values as the file gives them: apply's float32 would
    # change coordinates that are not integers, and ints stay ints.
    flat = [value for i in mapping.take for value in (kp[3 * i : 3 * i + 3] if i >= 0 else (0, 0, 0))]
    return {**ann, "keypoints": flat, "num_keypoints": sum(1 for v in flat[2::3] if v > 0)}
