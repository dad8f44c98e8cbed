"""Keypoint names compared in the one skeleton-compatibility check (config/skeleton_check.py): a file whose category
names other keypoints is refused by the converter and the evaluator alike, naming both lists and the first
difference; ``--keypoint-names spelling`` accepts names that differ only in spelling; a file without names is read in
the skeleton's order, with one log line saying so."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest

from simplepose.config.schema import EvalConfig
from simplepose.config.skeleton_check import SkeletonMismatch
from simplepose.config.skeleton_file import load_skeleton
from simplepose.data.conversion import Source, convert
from simplepose.evaluate.metrics.annotations import load_ground_truth
from tests.paths import REPO_ROOT

COCO = load_skeleton("coco")
# 17 keypoints of another set (PoseTrack's order: head top and bottom where COCO has the eyes)
POSETRACK_NAMES = ["nose", "head_bottom", "head_top", "left_ear", "right_ear", *COCO.dataset_keypoints[5:]]


def with_names(root, tmp_path, names) -> tuple:
    """(the synthetic set's val file with its category's keypoint names replaced (None: the entry removed), images)."""
    data = json.loads((root / "annotations" / "person_keypoints_val.json").read_text())
    if names is None:
        del data["categories"][0]["keypoints"]
    else:
        data["categories"][0]["keypoints"] = names
    path = tmp_path / "named.json"
    path.write_text(json.dumps(data))
    return path, root / "images"


def test_other_names_are_refused_naming_both_lists_and_the_first_difference(synthetic_coco, tmp_path):
    path, images = with_names(synthetic_coco, tmp_path, POSETRACK_NAMES)
    with pytest.raises(SkeletonMismatch) as e:
        convert([Source(images, path)], tmp_path / "out.h5", 64, progress=False, skeleton="coco")
    m = e.value
    assert (m.file, m.key, m.differs) == (str(path), "categories", "keypoints")
    assert m.first_difference == (1, "head_bottom", "left_eye")
    text = str(m)
    assert ", ".join(POSETRACK_NAMES) in text and ", ".join(COCO.dataset_keypoints) in text
    assert "--keypoint-names spelling" in text and not (tmp_path / "out.h5").exists()
    with pytest.raises(SkeletonMismatch) as e:  # the evaluator: the same check
        load_ground_truth(path, COCO, EvalConfig())
    assert e.value.first_difference == (1, "head_bottom", "left_eye") and "eval.keypoint_names" in str(e.value)
    cmd = [sys.executable, "-m", "data.coco_to_hdf5", "--images", str(images), "--annotations", str(path), "--out",
           str(tmp_path / "out.h5"), "--no-progress"]  # fmt: skip
    proc = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "head_bottom" in proc.stderr, proc.stderr
    # position: the user's word that these are the same keypoints in the same order
    convert([Source(images, path)], tmp_path / "out.h5", 64, progress=False, keypoint_names="position")


def test_names_differing_only_in_spelling_need_the_switch(synthetic_coco, tmp_path, caplog):
    spelt = [n.replace("_", "-").title() for n in COCO.dataset_keypoints]  # Left-Eye for left_eye
    path, images = with_names(synthetic_coco, tmp_path, spelt)
    with pytest.raises(SkeletonMismatch) as e:
        convert([Source(images, path)], tmp_path / "out.h5", 64, progress=False)
    assert e.value.first_difference == (0, "Nose", "nose")
    with caplog.at_level(logging.INFO):
        settings = convert([Source(images, path)], tmp_path / "out.h5", 64, progress=False, keypoint_names="spelling")
    assert settings["keypoint_names"] == {"match": "spelling", "files": [spelt]}
    assert "Left-Eye = left_eye" in caplog.text
    load_ground_truth(path, COCO, EvalConfig(keypoint_names="spelling"))  # the evaluator accepts it the same way
    # a misspelt name is not a spelling variant
    path, _ = with_names(synthetic_coco, tmp_path, ["nose", "left_eyes", *spelt[2:]])
    with pytest.raises(SkeletonMismatch) as e:
        convert([Source(images, path)], tmp_path / "out.h5", 64, progress=False, keypoint_names="spelling")
    assert e.value.first_difference == (1, "left_eyes", "left_eye")


def test_a_file_without_names_is_taken_on_trust_with_one_line(synthetic_coco, tmp_path, caplog):
    path, images = with_names(synthetic_coco, tmp_path, None)
    with caplog.at_level(logging.INFO):
        settings = convert([Source(images, path)], tmp_path / "out.h5", 64, progress=False)
    trust = [r for r in caplog.records if "on trust" in r.getMessage()]
    assert len(trust) == 1 and str(path) in trust[0].getMessage() and settings["counts"]["images"] > 0
