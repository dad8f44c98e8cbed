"""Keypoint names as real datasets spell them in their own files (config/keypoint_names.py): mapped onto COCO's
skeleton with no ``--rename``, by ``python -m data.map_keypoints`` and for training sources
(``data.keypoint_mapping``); each coordinate lands on the keypoint it was, left stays left; the table in
docs/keypoint_sets.md says what each maps. Small synthetic files, each dataset's names as its files or docs spell
them (written here by hand, with the point each one is)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from simplepose.config.keypoint_names import point_key, words
from simplepose.config.skeleton_file import load_skeleton
from simplepose.data import map_keypoints
from simplepose.data.keypoint_mapping import KeypointMapping
from simplepose.utils.errors import DataFileError
from tests.paths import REPO_ROOT

COCO = load_skeleton("coco")


def pairs(spelt: list[str], meaning: list[str | None]) -> list[tuple[str, str | None]]:
    assert len(spelt) == len(meaning)
    return list(zip(spelt, meaning))


def on_coco(skeleton: str) -> list[str | None]:
    """The COCO keypoint each of a shipped skeleton's dataset keypoints is (its names are COCO's spelling), or None."""
    return [n if n in COCO.dataset_keypoints else None for n in load_skeleton(skeleton).dataset_keypoints]


MPII_SPELT = ["r ankle", "r knee", "r hip", "l hip", "l knee", "l ankle", "pelvis", "thorax", "upper neck", "head top",
              "r wrist", "r elbow", "r shoulder", "l shoulder", "l elbow", "l wrist"]  # fmt: skip
MHP_SPELT = ["Right-ankle", "Right-knee", "Right-hip", "Left-hip", "Left-knee", "Left-ankle", "Pelvis", "Thorax",
             "Upper-neck", "Head-top", "Right-wrist", "Right-elbow", "Right-shoulder", "Left-shoulder", "Left-elbow",
             "Left-wrist"]  # fmt: skip
AIC_SPELT = ["Right Shoulder", "Right Elbow", "Right Wrist", "Left Shoulder", "Left Elbow", "Left Wrist", "Right Hip",
             "Right Knee", "Right Ankle", "Left Hip", "Left Knee", "Left Ankle", "Head top", "Neck"]  # fmt: skip
OCHUMAN = ["right_shoulder", "right_elbow", "right_wrist", "left_shoulder", "left_elbow", "left_wrist", "right_hip",
           "right_knee", "right_ankle", "left_hip", "left_knee", "left_ankle", "head", "neck", "right_ear", "left_ear",
           "nose", "right_eye", "left_eye"]  # fmt: skip
OPENPOSE_SPELT = ["Nose", "Neck", "RShoulder", "RElbow", "RWrist", "LShoulder", "LElbow", "LWrist", "MidHip", "RHip",
                  "RKnee", "RAnkle", "LHip", "LKnee", "LAnkle", "REye", "LEye", "REar", "LEar", "LBigToe", "LSmallToe",
                  "LHeel", "RBigToe", "RSmallToe", "RHeel"]  # fmt: skip
OPENPOSE_MEANS = ["nose", None, "right_shoulder", "right_elbow", "right_wrist", "left_shoulder", "left_elbow",
                  "left_wrist", None, "right_hip", "right_knee", "right_ankle", "left_hip", "left_knee", "left_ankle",
                  "right_eye", "left_eye", "right_ear", "left_ear", *[None] * 6]  # fmt: skip
POSETRACK = ["nose", "head_bottom", "head_top", "left_ear", "right_ear", *COCO.dataset_keypoints[5:]]
HALPE_BODY = load_skeleton("halpe").dataset_keypoints[:26]

# dataset -> [(the name as its file spells it, the COCO keypoint it is, or None: no COCO keypoint)]
DATASETS: dict[str, list[tuple[str, str | None]]] = {
    "COCO": pairs(list(COCO.dataset_keypoints), list(COCO.dataset_keypoints)),
    "CrowdPose": pairs(list(load_skeleton("crowdpose").dataset_keypoints), on_coco("crowdpose")),
    "AI Challenger": pairs(AIC_SPELT, on_coco("aic")),
    "MPII": pairs(MPII_SPELT, on_coco("mpii")),
    "MHP": pairs(MHP_SPELT, on_coco("mpii")),
    "OCHuman": pairs(OCHUMAN, [n if n in COCO.dataset_keypoints else None for n in OCHUMAN]),
    "PoseTrack18": pairs(POSETRACK, [n if n in COCO.dataset_keypoints else None for n in POSETRACK]),
    "Halpe (body)": pairs(list(HALPE_BODY), [n if n in COCO.dataset_keypoints else None for n in HALPE_BODY]),
    "COCO-WholeBody (body)": pairs(list(COCO.dataset_keypoints), list(COCO.dataset_keypoints)),
    "OpenPose BODY_25": pairs(OPENPOSE_SPELT, OPENPOSE_MEANS),
}


def annotation(ann_id: int, n: int, seed: int) -> dict:
    """Keypoint k at (1000 * seed + 10 k + 0.25, 500 + k), visible (2) or occluded (1) by turn."""
    kp = [v for k in range(n) for v in (1000 * seed + 10 * k + 0.25, 500 + k, 2 - k % 2)]
    return {"id": ann_id, "image_id": 1, "category_id": 1, "iscrowd": 0, "bbox": [0, 0, 9, 9], "keypoints": kp}


def dataset_file(path, names: list[str]) -> str:
    data = {
        "images": [{"id": 1, "file_name": "a.jpg", "width": 4000, "height": 4000}],
        "annotations": [annotation(1, len(names), 1), annotation(2, len(names), 2)],
        "categories": [{"id": 1, "name": "person", "keypoints": names}],
    }
    path.write_text(json.dumps(data))
    return str(path)


def expected_take(spelt: list[tuple[str, str | None]]) -> list[int]:
    """The source index of each COCO keypoint, from the hand-written meanings (-1: not in the dataset)."""
    meaning = [m for _, m in spelt]
    return [meaning.index(n) if n in meaning else -1 for n in COCO.dataset_keypoints]


@pytest.mark.parametrize("name", DATASETS)
def test_each_datasets_file_maps_onto_coco_without_renames(name, tmp_path, capsys):
    spelt = DATASETS[name]
    src = dataset_file(tmp_path / "in.json", [s for s, _ in spelt])
    out = tmp_path / "out.json"
    assert map_keypoints.main(["--annotations", src, "--skeleton", "coco", "--out", str(out)]) == 0, capsys.readouterr()
    given = json.loads((tmp_path / "in.json").read_text())["annotations"]
    mapped = json.loads(out.read_text())
    assert mapped["categories"][0]["keypoints"] == list(COCO.dataset_keypoints)
    take = expected_take(spelt)
    for before, after in zip(given, mapped["annotations"]):
        src_kp = np.asarray(before["keypoints"]).reshape(-1, 3)
        out_kp = np.asarray(after["keypoints"]).reshape(-1, 3)
        for j, i in enumerate(take):  # each coordinate on the keypoint it was (left on left), or unlabelled
            assert out_kp[j].tolist() == (src_kp[i].tolist() if i >= 0 else [0, 0, 0]), (name, j)
        assert after["num_keypoints"] == sum(i >= 0 for i in take)


@pytest.mark.parametrize("name", DATASETS)
def test_a_training_source_in_each_spelling_teaches_the_same_keypoints(name):
    spelt = DATASETS[name]
    mapping = KeypointMapping.by_name(tuple(s for s, _ in spelt), COCO, f"{name}.h5")
    assert list(mapping.take) == expected_take(spelt)
    kp = np.random.default_rng(0).uniform(0, 100, (3, len(spelt), 3)).astype(np.float32)
    out = mapping.apply(kp)
    for j, i in enumerate(mapping.take):
        assert (out[:, j] == (kp[:, i] if i >= 0 else 0)).all()
    assert mapping.labelled.sum() > 0


def test_left_and_right_never_trade_places():
    for left in ("l_ankle", "LAnkle", "Left Ankle", "left-ankle", "ankle_l", "l ankle", "L.Ankle"):
        assert point_key(left) == point_key("left_ankle") != point_key("right_ankle")
    for right in ("r_ankle", "RAnkle", "Right Ankle", "right-ankle", "ankle_r", "r ankle"):
        assert point_key(right) == point_key("right_ankle")
    assert words("LBigToe") == ["left", "big", "toe"] and words("MidHip") == ["mid", "hip"]
    # near points stay apart: MPII's upper neck and thorax are not a neck, PoseTrack's head bottom not a head top
    assert len({point_key(n) for n in ("neck", "upper neck", "thorax", "head_bottom", "head_top", "pelvis")}) == 6


def test_exact_matching_is_kept_on_request_and_two_spellings_of_one_point_are_refused():
    aic = tuple(s for s, _ in DATASETS["AI Challenger"])
    with pytest.raises(DataFileError, match="however spelt"):
        KeypointMapping.by_name(aic, COCO, "aic.json", match="exact")
    with pytest.raises(DataFileError, match=r"\['left_knee', 'LKnee'\] name one point"):
        KeypointMapping.by_name(("left_knee", "LKnee", "nose"), COCO, "two.json")


def test_the_command_takes_keypoint_names_position_and_exact(tmp_path, capsys):
    names = [f"point{k}" for k in range(17)]
    src = dataset_file(tmp_path / "in.json", names)
    out = tmp_path / "out.json"
    argv = ["--annotations", src, "--skeleton", "coco", "--out", str(out)]
    assert map_keypoints.main([*argv, "--keypoint-names", "exact"]) == 2
    assert "however spelt" in capsys.readouterr().err and not out.exists()
    assert map_keypoints.main([*argv, "--keypoint-names", "position"]) == 0
    mapped = json.loads(out.read_text())["annotations"][0]["keypoints"]
    assert mapped == annotation(1, 17, 1)["keypoints"]


def docs_table() -> dict[str, tuple[int, set[str], set[str]]]:
    """docs/keypoint_sets.md's table: dataset -> (COCO keypoints mapped, unlabelled ones, the dataset's dropped)."""
    text = (REPO_ROOT / "docs" / "keypoint_sets.md").read_text()
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0] in DATASETS:
            listed = [set(re.findall(r'"([^"]+)"', c)) for c in cells[2:]]
            rows[cells[0]] = (int(cells[1]), *listed)
    return rows


def test_the_docs_table_says_what_each_dataset_maps():
    rows = docs_table()
    assert set(rows) == set(DATASETS)
    for name, spelt in DATASETS.items():
        mapping = KeypointMapping.by_name(tuple(s for s, _ in spelt), COCO, name)
        assert rows[name] == (17 - len(mapping.missing), set(mapping.missing), set(mapping.dropped)), name
