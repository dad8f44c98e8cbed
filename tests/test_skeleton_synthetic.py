"""Synthetic figures of any skeleton (python -m data.synthetic --skeleton FILE), through the whole pipeline for
CrowdPose's 14 keypoints and the 6-keypoint animal of config/skeletons/quadruped6.yaml: annotations in the
skeleton's order, oracle AP from the ground-truth maps, a short training run, evaluation from the checkpoint."""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest

from simplepose.config.config_file import load_config
from simplepose.config.skeleton_file import load_skeleton
from simplepose.data.conversion import Source, convert
from simplepose.data.dataset import SimplePoseDataset
from simplepose.data.quickstart_data import prepare_synthetic_data
from simplepose.data.synthetic import main
from simplepose.data.synthetic_images import generate
from simplepose.engine.run import QUICKSTART_PRESET
from simplepose.evaluate import coco_eval
from tests.helpers import FAINT_MAPS, assert_the_loss_fell, train_a_few_steps

pytestmark = pytest.mark.usefixtures("one_thread")
QUADRUPED = load_skeleton("quadruped6")


@pytest.fixture(scope="module")
def synthetic_quadruped(tmp_path_factory):
    out = tmp_path_factory.mktemp("synthetic_quadruped6")
    assert main(["--out", str(out), "--num-images", "16", "--val-fraction", "0.25", "--skeleton", "quadruped6"]) == 0
    return out


def annotations(root, split="train") -> dict:
    return json.loads((root / "annotations" / f"person_keypoints_{split}.json").read_text())


def test_coco_persons_are_drawn_the_same_with_or_without_the_coco_skeleton(tmp_path):
    generate(tmp_path / "plain", num_images=4, seed=5)
    generate(tmp_path / "named", num_images=4, seed=5, skeleton=load_skeleton("coco"))
    files = sorted(p.relative_to(tmp_path / "plain") for p in (tmp_path / "plain").rglob("*") if p.is_file())
    assert len(files) == 6
    for name in files:
        assert (tmp_path / "plain" / name).read_bytes() == (tmp_path / "named" / name).read_bytes(), name


def test_figures_are_annotated_in_the_skeletons_order(synthetic_quadruped, synthetic_crowdpose):
    for root, skeleton in ((synthetic_quadruped, QUADRUPED), (synthetic_crowdpose, load_skeleton("crowdpose"))):
        data = annotations(root)
        category = data["categories"][0]
        assert category["keypoints"] == list(skeleton.dataset_keypoints) and category["name"] == skeleton.name
        people = [a for a in data["annotations"] if a["num_keypoints"] > 0]
        assert people and any(a["num_keypoints"] == 0 and not a["iscrowd"] for a in data["annotations"])
        for a in data["annotations"]:
            kp = np.array(a["keypoints"]).reshape(skeleton.num_dataset_keypoints, 3)
            assert a["num_keypoints"] == int((kp[:, 2] > 0).sum()) and a["area"] > 0
    assert all("crowdIndex" in img for img in annotations(synthetic_crowdpose)["images"])  # evaluated as CrowdPose
    assert not any("crowdIndex" in img for img in annotations(synthetic_quadruped)["images"])


def test_left_and_right_sit_on_their_sides_of_the_body_axis(synthetic_crowdpose):
    """The left/right cue of a figure: its left shoulder on the viewer's right of the neck-to-hips axis."""
    skeleton = load_skeleton("crowdpose")
    i = {n: skeleton.dataset_keypoints.index(n) for n in ("left_shoulder", "neck", "left_hip", "right_hip")}
    checked = 0
    for a in annotations(synthetic_crowdpose)["annotations"]:
        kp = np.array(a["keypoints"], float).reshape(14, 3)
        if (kp[list(i.values()), 2] > 0).all():
            down = kp[[i["left_hip"], i["right_hip"]], :2].mean(0) - kp[i["neck"], :2]
            out = kp[i["left_shoulder"], :2] - kp[i["neck"], :2]
            assert down[0] * out[1] - down[1] * out[0] < 0  # y points down: the shoulder is on the axis's left turn
            checked += 1
    assert checked >= 5


@pytest.mark.parametrize("name", ["crowdpose", "quadruped6"])
def test_oracle_ap_from_the_ground_truth_maps(name, synthetic_crowdpose, synthetic_quadruped, tmp_path, capsys):
    root = synthetic_crowdpose if name == "crowdpose" else synthetic_quadruped
    skeleton = load_skeleton(name)
    val = root / "annotations" / "person_keypoints_val.json"
    out = tmp_path / "oracle.json"
    args = ["--from-ground-truth", "--images", str(root / "images"), "--annotations", str(val), "--out", str(out)]
    assert coco_eval.main([*args, f"data.skeleton={name}", "eval.scales=[1.0]"]) == 0
    ap = float(capsys.readouterr().out.split("AP ")[-1].split()[0])
    assert ap >= 0.9
    results = json.loads(out.read_text())
    assert results and all(len(r["keypoints"]) == 3 * skeleton.num_dataset_keypoints for r in results)


@pytest.mark.parametrize("name", ["crowdpose", "quadruped6"])
def test_a_short_training_run_learns_and_evaluates_in_the_skeletons_order(
    name, synthetic_crowdpose, synthetic_quadruped, tmp_path, capsys
):
    root = synthetic_crowdpose if name == "crowdpose" else synthetic_quadruped
    skeleton = load_skeleton(name)
    h5 = tmp_path / "train64.h5"
    train = root / "annotations" / "person_keypoints_train.json"
    convert([Source(root / "images", train)], h5, 64, progress=False, skeleton=name)
    assert_the_loss_fell(train_a_few_steps(h5, tmp_path / "run", f"data.skeleton={name}"))
    out = tmp_path / "results.json"
    val = root / "annotations" / "person_keypoints_val.json"
    args = ["--ckpt", str(tmp_path / "run" / "last.pt"), "--images", str(root / "images")]
    assert coco_eval.main([*args, "--annotations", str(val), "--out", str(out), "eval.max_images=2", *FAINT_MAPS]) == 0
    assert "AP " in capsys.readouterr().out
    results = json.loads(out.read_text())
    assert results and all(len(r["keypoints"]) == 3 * skeleton.num_dataset_keypoints for r in results)


def test_the_quick_start_data_follows_data_skeleton(tmp_path):
    """`python train.py data.skeleton=NAME` makes its synthetic set of that skeleton's figures; going back to COCO
    makes COCO persons again (the cache knows which it holds)."""
    root = tmp_path / "synthetic"
    for name in ("quadruped6", "coco"):
        cfg = load_config(QUICKSTART_PRESET, [f"data.synthetic_dir={root}", "data.synthetic_images=12",
                                              "data.input_size=64", f"data.skeleton={name}"])  # fmt: skip
        settings = prepare_synthetic_data(cfg.data)
        with h5py.File(settings["data.train"], "r") as f:
            assert f["people/keypoints"].shape[1] == load_skeleton(name).num_dataset_keypoints
        assert annotations(root, "val")["categories"][0]["keypoints"] == list(load_skeleton(name).dataset_keypoints)
        assert len(SimplePoseDataset(settings["data.train"], cfg, train=True)) > 0
