"""CrowdPose: its skeleton and preset, its figures worked out by hand, and its files as published (no area, no
segmentation, images with a crowdIndex, any category id) converted and evaluated."""

from __future__ import annotations

import json
import math

import h5py
import numpy as np
import pytest
from pycocotools.coco import COCO

from simplepose.config.config_file import load_config, to_dict
from simplepose.config.skeleton_file import load_skeleton
from simplepose.data.conversion import Source, convert
from simplepose.evaluate import coco_eval
from simplepose.evaluate.metrics.crowdpose_eval import crowdpose_keypoint_stats
from simplepose.evaluate.metrics.keypoint_stats import coco_keypoint_stats
from tests.paths import PAPER_PRESET, REPO_ROOT

CROWDPOSE = load_skeleton("crowdpose")
THRESHOLDS = np.linspace(0.5, 0.95, 10)
RECALL_POINTS = 101


def test_the_skeleton_has_crowdposes_keypoints_sigmas_and_a_neck_rooted_tree_first():
    assert CROWDPOSE.dataset_keypoints == (
        "left_shoulder", "right_shoulder", "left_elbow", "right_elbow", "left_wrist", "right_wrist", "left_hip",
        "right_hip", "left_knee", "right_knee", "left_ankle", "right_ankle", "head", "neck")  # fmt: skip
    assert CROWDPOSE.keypoints == CROWDPOSE.dataset_keypoints and not CROWDPOSE.derived
    assert CROWDPOSE.sigmas == pytest.approx(np.array([.79, .79, .72, .72, .62, .62, 1.07, 1.07, .87, .87, .89, .89,
                                                       .79, .79]) / 10)  # fmt: skip
    assert (CROWDPOSE.num_limbs, CROWDPOSE.num_channels, CROWDPOSE.evaluation) == (20, 36, "crowdpose")
    reached = {CROWDPOSE.index("neck")}
    for a, b in CROWDPOSE.limbs[:13]:  # the tree: every limb's "from" end is attached already, its "to" end is new
        assert a in reached and b not in reached
        reached.add(b)
    assert len(reached) == 14


def test_the_preset_is_the_paper_preset_with_the_crowdpose_skeleton():
    paper, crowdpose = (to_dict(load_config(p)) for p in (PAPER_PRESET, REPO_ROOT / "config/simplepose_crowdpose.yaml"))
    assert crowdpose["data"].pop("skeleton") == "crowdpose" and paper["data"].pop("skeleton") == "coco"
    assert crowdpose["train"].pop("out_dir") != paper["train"].pop("out_dir")
    assert crowdpose == paper


def _person_at(oks: float, box=(10.0, 20.0, 100.0, 200.0)) -> tuple[list[float], list[float]]:
    """(ground-truth keypoints, detected keypoints) of one person whose detection is at the given OKS under
    CrowdPose's scale: every keypoint moved right so that exp(-d^2 / (2 s^2 (2 sigma)^2)) = oks, s^2 = 0.53 wh."""
    x, y, w, h = box
    gt = np.stack([x + np.linspace(5, 95, 14), y + np.linspace(5, 195, 14), np.full(14, 2.0)], 1)
    shift = np.sqrt(-math.log(oks) * 2 * (h * w * 0.53) * (2 * np.array(CROWDPOSE.sigmas)) ** 2)
    dt = gt.copy()
    dt[:, 0] += shift
    dt[:, 2] = 1
    return gt.ravel().tolist(), dt.ravel().tolist()


def _hand_made_case(area_in_file: float | None = None):
    """Four images, one person each, with a detection at a chosen OKS; their crowd index at the group limits."""
    cases = [(0.19, 0.97, 0.9), (0.2, 0.72, 0.8), (0.8, 0.52, 0.7), (0.79, 0.97, 0.95)]  # crowdIndex, OKS, score
    images, anns, results = [], [], []
    for i, (crowd, oks, score) in enumerate(cases, start=1):
        gt, dt = _person_at(oks)
        images.append({"id": i, "file_name": f"{i}.jpg", "width": 200, "height": 300, "crowdIndex": crowd})
        ann = {"id": 10 + i, "image_id": i, "category_id": 1, "keypoints": gt, "num_keypoints": 14, "iscrowd": 0,
               "bbox": [10.0, 20.0, 100.0, 200.0]}  # fmt: skip
        if area_in_file is not None:
            ann["area"] = area_in_file
        anns.append(ann)
        results.append({"image_id": i, "category_id": 1, "keypoints": dt, "score": score})
    coco = COCO()
    coco.dataset = {"images": images, "annotations": anns, "categories": [{"id": 1, "name": "person"}]}
    coco.createIndex()
    return coco, results


def test_crowdposes_figures_by_hand():
    """Each detection matches its person at the thresholds up to its OKS: 10, 5, 1 and 10 of the 10."""
    coco, results = _hand_made_case()
    stats, table = crowdpose_keypoint_stats(coco, results, [1, 2, 3, 4], CROWDPOSE.sigmas)
    matched = np.array([[t <= oks for t in THRESHOLDS] for oks in (0.97, 0.72, 0.52, 0.97)])
    assert stats["AR"] == pytest.approx(matched.mean())  # recall per threshold, averaged
    assert stats["AR50"] == stats["AP50"] == 1.0
    # at 0.75 only the two 0.97 people match, and they have the two best scores: precision 1 up to recall 1/2
    assert stats["AP75"] == pytest.approx(51 / RECALL_POINTS)
    # groups by crowdIndex: < 0.2 easy, 0.2 to < 0.8 medium, >= 0.8 hard; their AP rounded to 4 decimals
    assert stats["AP_easy"] == 1.0 and stats["AP_hard"] == pytest.approx(0.1)
    medium = np.mean([1.0 if t <= 0.72 else 51 / RECALL_POINTS for t in THRESHOLDS])  # images 2 and 4
    assert stats["AP_medium"] == round(medium, 4)
    for line in ("type=  easy", "type=medium", "type=  hard", "(2 images)"):
        assert line in table
    # the file's own area is not used: CrowdPose's scale is 0.53 x the box area
    with_area, _ = crowdpose_keypoint_stats(_hand_made_case(area_in_file=50.0)[0], results, [1, 2, 3, 4],
                                            CROWDPOSE.sigmas)  # fmt: skip
    assert with_area == stats
    coco_stats, _ = coco_keypoint_stats(_hand_made_case(area_in_file=50.0)[0], results, [1, 2, 3, 4],
                                                  CROWDPOSE.sigmas)  # fmt: skip
    assert coco_stats["AP"] < stats["AP"]  # COCO's evaluation does use it


def test_a_detection_without_any_found_keypoint_is_dropped_as_the_tools_do():
    """xtcocotools' keypoints_crowd drops detections whose keypoints all have v = 0 before matching; pycocotools
    alone would match this one (it lies exactly on person 3) and raise the AP."""
    coco, results = _hand_made_case()
    stats, _ = crowdpose_keypoint_stats(coco, results, [1, 2, 3, 4], CROWDPOSE.sigmas)
    exact = np.array(coco.loadAnns([13])[0]["keypoints"], float).reshape(14, 3)
    exact[:, 2] = 0
    unlabelled = {"image_id": 3, "category_id": 1, "keypoints": exact.ravel().tolist(), "score": 0.99}
    with_it, _ = crowdpose_keypoint_stats(coco, [*results, unlabelled], [1, 2, 3, 4], CROWDPOSE.sigmas)
    assert with_it == stats
    only_it, table = crowdpose_keypoint_stats(coco, [unlabelled], [1, 2, 3, 4], CROWDPOSE.sigmas)
    assert set(only_it.values()) == {0.0} and "no detections" in table


def test_the_groups_are_made_of_the_images_evaluated():
    """Evaluating images 1 and 2 only (eval.max_images, a rank's share): easy is image 1, medium image 2 alone (its
    detection matches at the 5 thresholds up to its OKS 0.72: half the precision array), hard has no image (-1, as
    the tools give it)."""
    coco, results = _hand_made_case()
    stats, table = crowdpose_keypoint_stats(coco, results, [1, 2], CROWDPOSE.sigmas)
    assert (stats["AP_easy"], stats["AP_medium"], stats["AP_hard"]) == (1.0, 0.5, -1.0)
    assert "type=medium | maxDets= 20 ] = 0.500  (1 images)" in table and "(0 images)" in table


def test_without_crowd_index_the_groups_are_left_out():
    coco, results = _hand_made_case()
    for img in coco.dataset["images"]:
        del img["crowdIndex"]
    coco.createIndex()
    stats, table = crowdpose_keypoint_stats(coco, results, [1, 2, 3, 4], CROWDPOSE.sigmas)
    assert set(stats) == {"AP", "AP50", "AP75", "AR", "AR50", "AR75"} and "no 'crowdIndex'" in table


def crowdpose_format(path, out, category_id: int = 1):
    """A COCO-format file of the synthetic set rewritten as CrowdPose publishes its files: no area, no segmentation,
    no info or licenses, images with a crowdIndex; the keypoint category given ``category_id``."""
    data = json.loads(path.read_text())
    for ann in data["annotations"]:
        del ann["area"], ann["segmentation"]
        ann["category_id"] = category_id
    data["categories"][0]["id"] = category_id
    assert all("crowdIndex" in img for img in data["images"])
    out.write_text(json.dumps({k: data[k] for k in ("images", "annotations", "categories")}))
    return out


@pytest.mark.parametrize("category_id", [1, 3])
def test_a_crowdpose_format_file_converts_and_evaluates(synthetic_crowdpose, tmp_path, capsys, category_id):
    annotations = synthetic_crowdpose / "annotations"
    train = crowdpose_format(annotations / "person_keypoints_train.json", tmp_path / "train.json", category_id)
    h5 = tmp_path / "train64.h5"
    settings = convert([Source(synthetic_crowdpose / "images", train)], h5, 64, progress=False, skeleton="crowdpose")
    reference = convert([Source(synthetic_crowdpose / "images", annotations / "person_keypoints_train.json")],
                        tmp_path / "reference64.h5", 64, progress=False, skeleton="crowdpose")  # fmt: skip
    assert settings["counts"]["people_with_box_as_region"] == settings["counts"]["people"] > 0
    assert settings["counts"]["samples"] > 0 and reference["counts"]["people_with_box_as_region"] == 0
    with h5py.File(h5, "r") as f:
        assert f["people/keypoints"].shape[1:] == (14, 3)
    val = crowdpose_format(annotations / "person_keypoints_val.json", tmp_path / "val.json", category_id)
    out = tmp_path / "oracle.json"
    args = ["--from-ground-truth", "--images", str(synthetic_crowdpose / "images"), "--annotations", str(val)]
    assert coco_eval.main([*args, "--out", str(out), "data.skeleton=crowdpose", "eval.scales=[1.0]"]) == 0
    printed = capsys.readouterr().out
    for line in ("type=  easy", "type=medium", "type=  hard", "AP_easy", "AP_hard"):
        assert line in printed, printed
    results = json.loads(out.read_text())
    assert results and all(len(r["keypoints"]) == 42 and r["category_id"] == category_id for r in results)
    assert float(printed.split("AP ")[-1].split()[0]) >= 0.9
