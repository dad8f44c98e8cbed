"""AP cannot depend on how an annotation file numbers its images and annotations (evaluate/metrics/own_ids.py):
pycocotools reads annotation id 0 as "unmatched", so a file numbered from 0 used to score lower, silently. The same file
numbered from 0, from 1 and shuffled gives identical figures, COCO's and CrowdPose's, and the written results keep the
file's own image ids."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest

from simplepose.config.schema import EvalConfig
from simplepose.config.skeleton_file import load_skeleton
from simplepose.evaluate import coco_eval
from simplepose.evaluate.metrics.annotations import load_ground_truth
from simplepose.evaluate.metrics.keypoint_stats import keypoint_stats
from tests.helpers import imperfect_results, pycocotools_stats

COCO_SKELETON, CROWDPOSE = load_skeleton("coco"), load_skeleton("crowdpose")


def renumbered_file(data: dict, results: list[dict], how: str, seed: int = 1) -> tuple[dict, list[dict]]:
    """(``data`` with its ids renumbered ``how``: "from0" (images and annotations 0..), "from1" (1..) or
    "shuffled" (large random ids, the annotations in random order), ``results`` with their image ids mapped)."""
    rng = np.random.default_rng(seed)
    n_img, n_ann = len(data["images"]), len(data["annotations"])
    if how == "shuffled":
        image_ids = rng.permutation(10**6)[:n_img].tolist()
        ann_ids = rng.permutation(10**6)[:n_ann].tolist()
    else:
        start = 0 if how == "from0" else 1
        image_ids, ann_ids = list(range(start, start + n_img)), list(range(start, start + n_ann))
    new_image = {img["id"]: i for img, i in zip(data["images"], image_ids)}
    images = [{**img, "id": new_image[img["id"]]} for img in data["images"]]
    anns = [{**a, "id": j, "image_id": new_image[a["image_id"]]} for a, j in zip(data["annotations"], ann_ids)]
    if how == "shuffled":
        anns = [anns[k] for k in rng.permutation(n_ann)]
        images = [images[k] for k in rng.permutation(n_img)]
    mapped = [{**r, "image_id": new_image[r["image_id"]]} for r in results]
    return {**data, "images": images, "annotations": anns}, mapped


def our_stats(tmp_path, data: dict, results: list[dict], skeleton, name: str) -> dict[str, float]:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data))
    coco = load_ground_truth(path, skeleton, EvalConfig()).coco
    return keypoint_stats(coco, results, sorted(coco.imgs), skeleton)[0]


def pycocotools_ap(data: dict, results: list[dict], sigmas) -> float:
    """pycocotools on the file as it is, its own ids (the evaluation as it was)."""
    return pycocotools_stats(data, results, sigmas)[0]


@pytest.mark.parametrize("kind", ["coco", "crowdpose"])
def test_ap_does_not_depend_on_the_files_ids(kind, synthetic_coco, synthetic_crowdpose, tmp_path):
    root, skeleton = (synthetic_coco, COCO_SKELETON) if kind == "coco" else (synthetic_crowdpose, CROWDPOSE)
    data = json.loads((root / "annotations" / "person_keypoints_train.json").read_text())
    # the first annotation is a labelled person, so that numbering from 0 gives a real person the id 0
    data["annotations"].sort(key=lambda a: a["iscrowd"] or a["num_keypoints"] == 0)
    results = imperfect_results(data)
    stats = {how: our_stats(tmp_path, *renumbered_file(data, results, how), skeleton, how)
             for how in ("from1", "from0", "shuffled")}  # fmt: skip
    print(kind, {how: round(s["AP"], 4) for how, s in stats.items()})
    assert 0.2 < stats["from1"]["AP"] < 0.95
    assert stats["from0"] == stats["from1"] == stats["shuffled"]
    if kind == "coco":  # pycocotools itself: the same on a file from 1, lower from 0 (the bug that was)
        from0, from1 = renumbered_file(data, results, "from0"), renumbered_file(data, results, "from1")
        assert pycocotools_ap(*from1, skeleton.sigmas) == pytest.approx(stats["from1"]["AP"], abs=1e-12)
        assert pycocotools_ap(*from0, skeleton.sigmas) < stats["from0"]["AP"]


def test_equal_to_xtcocotools(synthetic_coco, tmp_path):
    """xtcocotools (mmpose's evaluation) does not read id 0 as unmatched: its AP of a file from 0 is ours."""
    try:
        from xtcocotools.coco import COCO as XtCOCO
        from xtcocotools.cocoeval import COCOeval
    except (ImportError, ValueError) as e:  # not installed, or built against another numpy (ValueError)
        pytest.skip(f"xtcocotools cannot be imported: {e}")

    data = json.loads((synthetic_coco / "annotations" / "person_keypoints_train.json").read_text())
    from0, results = renumbered_file(data, imperfect_results(data), "from0")
    with contextlib.redirect_stdout(io.StringIO()):
        gt = XtCOCO()
        gt.dataset = from0
        gt.createIndex()
        ev = COCOeval(gt, gt.loadRes(results), "keypoints", np.array(COCO_SKELETON.sigmas))
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    assert our_stats(tmp_path, from0, results, COCO_SKELETON, "from0")["AP"] == pytest.approx(ev.stats[0], abs=1e-9)


def test_the_oracle_of_a_file_numbered_from_0_writes_the_files_ids(synthetic_coco, tmp_path):
    data = json.loads((synthetic_coco / "annotations" / "person_keypoints_val.json").read_text())
    figures = {}
    for how in ("from1", "from0"):
        renumbered, _ = renumbered_file(data, [], how)
        path = tmp_path / f"{how}.json"
        path.write_text(json.dumps(renumbered))
        out = tmp_path / f"results_{how}.json"
        assert coco_eval.main(["--from-ground-truth", "--images", str(synthetic_coco / "images"), "--annotations",
                               str(path), "--out", str(out), "eval.scales=[1.0]", "eval.flip=false"]) == 0  # fmt: skip
        written = json.loads(out.read_text())
        assert written and {r["image_id"] for r in written} <= {img["id"] for img in renumbered["images"]}
        figures[how] = keypoint_stats(
            load_ground_truth(path, COCO_SKELETON, EvalConfig()).coco,
            written,
            [img["id"] for img in renumbered["images"]],
            COCO_SKELETON,
        )[0]
    assert 0 in {r["image_id"] for r in json.loads((tmp_path / "results_from0.json").read_text())}
    assert figures["from0"] == figures["from1"] and figures["from0"]["AP"] > 0.8
