"""A COCO keypoint results file made by any tool, read and checked against the annotations it is to be scored on.

    results = read_results("their_results.json", coco, skeleton, category_id)   # list of result dicts, checked

The file is a JSON list of ``{"image_id", "category_id", "keypoints": [x, y, v] per keypoint, "score"}`` entries
(pycocotools' ``loadRes`` format; mmpose, openpifpaf, HigherHRNet/DEKR and this project write it), or an object whose
``"annotations"`` hold that list. Every entry is checked before pycocotools sees it, so a file made for another
skeleton, another annotation file or another category is refused naming the entry and the field, instead of ending
in pycocotools' bare AssertionError or, worse, in a wrong AP. ``category_id`` may be missing (then the annotations'
keypoint category); ``v`` is not read (COCO's evaluator ignores it).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from simplepose.config.skeleton import Skeleton
from simplepose.utils.errors import UserError
from simplepose.utils.text import counted

RESULT_FIELDS = ("image_id", "keypoints", "score")


class ResultsError(UserError):
    """A results file that cannot be scored as it is; ``key`` names the field, ``sample`` the entry's index."""


def read_results(path: str | Path, coco, skeleton: Skeleton, category_id: int) -> list[dict]:
    """The checked entries of results file ``path`` for the ground truth ``coco`` (pycocotools ``COCO``: the
    ``coco`` of ``evaluate.metrics.annotations.load_ground_truth``) of ``skeleton``'s keypoints in category
    ``category_id``.

    Each entry keeps only the fields scoring reads (``image_id``, ``category_id``, ``keypoints`` as floats,
    ``score``). ResultsError for a missing or unreadable file, an entry without a field, keypoints of another
    length, a value that is not a finite number, another category, or results of images the annotations do not list.
    """
    path = Path(path)
    entries = _load_list(path)
    out = []
    for index, entry in enumerate(entries):
        out.append(_checked_entry(entry, index, path, skeleton, category_id))
    unknown_ids = {r["image_id"] for r in out if r["image_id"] not in coco.imgs}
    quoted = sorted(i for i in unknown_ids if isinstance(i, str) and _as_int(i) in coco.imgs)
    if quoted:
        more = ", ..." if len(quoted) > 3 else ""
        raise ResultsError(
            f"results file {path} gives {counted(len(quoted), 'image id')} as strings "
            f"({', '.join(repr(i) for i in quoted[:3])}{more}) where the annotation file's ids are integers "
            f"({', '.join(str(_as_int(i)) for i in quoted[:3])}{more}): the ids must be the same JSON values; write "
            "\"image_id\" as a number in the tool that made the file (or convert them: int(entry['image_id']))",
            file=path,
            key="image_id",
        )
    unknown = sorted(repr(i) for i in unknown_ids)
    if unknown:
        raise ResultsError(
            f"results file {path} has results of {counted(len(unknown), 'image id')} that the annotation file does "
            f"not list (e.g. {', '.join(unknown[:5])}): give the annotation file the results were made for (the "
            "image ids must be the annotation file's own)",
            file=path,
            key="image_id",
        )
    return out


def _load_list(path: Path) -> list:
    if path.is_dir():
        raise ResultsError(f"results file {path} is a folder; give the COCO keypoint results JSON file", file=path)
    if not path.is_file():
        raise ResultsError(f"results file {path} not found (expected a COCO keypoint results JSON)", file=path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ResultsError(
            f"results file {path} is not JSON text ({e}); expected a list of COCO keypoint results", file=path
        ) from None
    if isinstance(data, dict) and isinstance(data.get("annotations"), list):
        data = data["annotations"]
    if not isinstance(data, list):
        raise ResultsError(
            f"results file {path} holds a JSON {type(data).__name__}, not a list of results "
            '({"image_id", "category_id", "keypoints", "score"} per person)',
            file=path,
        )
    return data


def _checked_entry(entry, index: int, path: Path, skeleton: Skeleton, category_id: int) -> dict:
    where = f"results file {path}, entry {index}"

    def fail(message: str, key: str | None = None) -> ResultsError:
        return ResultsError(f"{where}: {message}", file=path, key=key, sample=index)

    if not isinstance(entry, dict):
        raise fail(f"is a JSON {type(entry).__name__}, not an object with {', '.join(RESULT_FIELDS)}")
    missing = [k for k in RESULT_FIELDS if k not in entry]
    if missing:
        raise fail(
            f"has no {', '.join(repr(k) for k in missing)} (a keypoint result needs {', '.join(RESULT_FIELDS)})",
            missing[0],
        )
    keypoints = entry["keypoints"]
    expected = 3 * skeleton.num_dataset_keypoints
    if not isinstance(keypoints, list) or len(keypoints) != expected:
        got = f"{len(keypoints)} values" if isinstance(keypoints, list) else f"a {type(keypoints).__name__}"
        raise fail(
            f"'keypoints' holds {got}; skeleton '{skeleton.name}' has {skeleton.num_dataset_keypoints} keypoints, "
            f"so {expected} values (x, y, v each); give the skeleton the results were made for (--skeleton)",
            "keypoints",
        )
    if not all(_is_finite_number(v) for v in keypoints):
        bad = next(v for v in keypoints if not _is_finite_number(v))
        raise fail(f"'keypoints' holds {bad!r}: every value must be a finite number", "keypoints")
    if not _is_finite_number(entry["score"]):
        raise fail(f"'score' is {entry['score']!r}, not a finite number", "score")
    category = entry.get("category_id", category_id)
    if category != category_id:
        raise fail(
            f"'category_id' is {category!r}, but the annotations' keypoint category is {category_id}: results of "
            "another category are never matched",
            "category_id",
        )
    image_id = entry["image_id"]
    if isinstance(image_id, bool) or not isinstance(image_id, (int, str)):
        raise fail(f"'image_id' is {image_id!r}: an image id is an integer (or the annotations' string id)", "image_id")
    return {
        "image_id": image_id,
        "category_id": category_id,
        "keypoints": [float(v) for v in keypoints],
        "score": float(entry["score"]),
    }


def _as_int(text: str) -> int | None:
    """The integer a string id spells ("481", " 481"), else None."""
    try:
        return int(text)
    except ValueError:
        return None


def _is_finite_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
