"""The COCO keypoint results format: the one writer of results JSON (coco_eval, the demo, the Python API).

One entry per person: ``{"image_id", "category_id": 1, "keypoints": [x, y, v] per dataset keypoint, "score"}``
(and ``"track_id"`` for the people of a tracked video), sorted by image id then descending score, floats rounded,
so that a file is reproducible byte for byte.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from simplepose.codec.person import Person
from simplepose.data.coco_annotations import PERSON_CATEGORY
from simplepose.utils.io import atomic_write_text


def coco_results(
    image_ids: Sequence[int], people: Sequence[Sequence[Person]], category_id: int = PERSON_CATEGORY
) -> list[dict]:
    """The COCO keypoint results list of the people of each image (``people[i]`` found in image ``image_ids[i]``): one
    entry per person (of category ``category_id``, the annotations' keypoint category), sorted by image id then
    descending score; a tracked person's ``track_id`` too (pycocotools keeps extra fields; PoseTrack's files name it
    so).

    Keypoint v is the keypoint's score, in (0, 1], where it was found, and 0 otherwise (with x = y = 0), as mmpose
    and openpifpaf write it; COCO's evaluator reads no v of a result, so the AP does not depend on it. Floats are
    rounded so that the file is reproducible byte for byte: coordinates to 0.01 px, keypoint scores to 1e-4, person
    scores to 1e-8 (their mapping into [0, 1) packs the original's scores 2 to 8 times closer, and at 1e-6 two
    people of the quick-start model tied that the original ranked apart).
    """
    if len(image_ids) != len(people):
        raise ValueError(f"{len(image_ids)} image ids for {len(people)} images' people")
    out = []
    for image_id, found_in_image in zip(image_ids, people):
        for person in found_in_image:
            kp = person.keypoints
            found = kp[:, 2] > 0
            xy = np.where(found[:, None], kp[:, :2], 0.0)  # a not-found keypoint's NaN written as 0
            triples = zip(xy[:, 0].tolist(), xy[:, 1].tolist(), np.where(found, kp[:, 2], 0.0).tolist())
            entry = {
                "image_id": int(image_id),
                "category_id": category_id,
                "keypoints": [v for x, y, c in triples for v in (round(x, 2), round(y, 2), round(c, 4))],
                "score": round(float(person.score), 8),
            }
            if person.track_id is not None:
                entry["track_id"] = int(person.track_id)
            out.append(entry)
    return sort_results(out)


def sort_results(results) -> list[dict]:
    """The one result order: image id, then descending score (then keypoints, to break ties)."""
    return sorted(results, key=lambda r: (r["image_id"], -r["score"], r["keypoints"]))


def results_text(results: list[dict]) -> str:
    """The results list as JSON text, one person per line."""
    if not results:
        return "[]\n"
    return "[\n" + ",\n".join(json.dumps(r, separators=(",", ":")) for r in results) + "\n]\n"


def write_results(path: str | Path, results: list[dict]) -> None:
    """``results_text`` of ``results`` written to ``path`` atomically (a reader never sees half a file)."""
    atomic_write_text(path, results_text(results))
