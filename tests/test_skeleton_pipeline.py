"""A skeleton other than COCO's through every stage: the synthetic sample reduced to 6 keypoints (shoulders, hips,
knees) plus a derived neck, converted, loaded, decoded from its ground truth, trained, saved with its skeleton and
evaluated from the checkpoint alone."""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest
import torch
import yaml

from simplepose.checkpoint.format import Checkpoint
from simplepose.codec.layout import ChannelLayout
from simplepose.config.config_file import load_config
from simplepose.config.schema import EvalConfig
from simplepose.config.skeleton_check import SkeletonMismatch
from simplepose.config.skeleton_definition import skeleton_from_dict
from simplepose.config.skeleton_file import load_skeleton
from simplepose.data.conversion import Source, convert
from simplepose.data.dataset import SimplePoseDataset
from simplepose.engine.trainer import Trainer
from simplepose.evaluate import coco_eval
from simplepose.evaluate.evaluation import evaluate_oracle
from simplepose.evaluate.inference.checkpoint_model import load_model
from simplepose.evaluate.metrics.annotations import load_ground_truth
from simplepose.models import PoseNet
from tests.helpers import tiny_cfg
from tests.paths import TINY_PRESET

pytestmark = pytest.mark.usefixtures("one_thread")
COCO = load_skeleton("coco")
KEPT = ["left_shoulder", "right_shoulder", "left_hip", "right_hip", "left_knee", "right_knee"]
TORSO = {
    "name": "torso",
    "dataset_keypoints": KEPT,
    "derived": {"neck": {"midpoint": ["left_shoulder", "right_shoulder"]}},
    "keypoints": ["neck", *KEPT],
    "limbs": [
        ["neck", "left_shoulder"],
        ["neck", "right_shoulder"],
        ["left_shoulder", "left_hip"],
        ["right_shoulder", "right_hip"],
        ["left_hip", "left_knee"],
        ["right_hip", "right_knee"],
        ["left_hip", "right_hip"],
    ],  # fmt: skip
    "flip_pairs": [["left_shoulder", "right_shoulder"], ["left_hip", "right_hip"], ["left_knee", "right_knee"]],
    "sigmas": {n: COCO.sigmas[COCO.dataset_keypoints.index(n)] for n in KEPT},
}


@pytest.fixture(scope="module")
def torso(tmp_path_factory, synthetic_sample_annotations):
    """(skeleton file, annotation file): the synthetic sample's people with only the 6 kept keypoints."""
    root = tmp_path_factory.mktemp("torso")
    skeleton = root / "torso.yaml"
    skeleton.write_text(yaml.safe_dump(TORSO, sort_keys=False))
    data = json.loads(synthetic_sample_annotations.read_text())
    columns = [COCO.dataset_keypoints.index(n) for n in KEPT]
    for ann in data["annotations"]:
        kp = np.asarray(ann["keypoints"], np.float64).reshape(-1, 3)[columns]
        ann["keypoints"], ann["num_keypoints"] = kp.ravel().tolist(), int((kp[:, 2] > 0).sum())
    for cat in data["categories"]:
        cat["keypoints"], cat["skeleton"] = KEPT, []
    annotations = root / "torso.json"
    annotations.write_text(json.dumps(data))
    return skeleton, annotations


@pytest.fixture(scope="module")
def torso_h5(torso, synthetic_sample_images, tmp_path_factory):
    out = tmp_path_factory.mktemp("torso_h5") / "torso64.h5"
    convert([Source(synthetic_sample_images, torso[1])], out, input_size=64, progress=False, skeleton=str(torso[0]))
    return out


def test_the_file_stores_the_skeleton_and_the_dataset_draws_its_channels(torso, torso_h5):
    skeleton = load_skeleton(torso[0])
    assert (skeleton.num_keypoints, skeleton.num_limbs, skeleton.num_channels) == (7, 7, 16)
    with h5py.File(torso_h5, "r") as f:
        settings = json.loads(f.attrs["settings"])
        assert f["people/keypoints"].shape[1:] == (6, 3)
    assert skeleton_from_dict(settings["skeleton"]) == skeleton and settings["skeleton_file"] == str(torso[0])
    ds = SimplePoseDataset(torso_h5, tiny_cfg(torso_h5, "unused", f"data.skeleton={torso[0]}"), train=True)
    assert len(ds) > 0 and ds.keypoints.shape[1:] == (7, 3)
    neck, ls, rs = (skeleton.index(n) for n in ("neck", "left_shoulder", "right_shoulder"))
    both = (ds.keypoints[:, [ls, rs], 2] < 2).all(1)
    np.testing.assert_array_equal(ds.keypoints[both, neck, :2], ds.keypoints[both][:, [ls, rs], :2].mean(1))
    targets = ds[0]["targets"]
    assert [tuple(t.shape) for t in targets][:2] == [(16, 16, 16), (16, 8, 8)]
    layout = ChannelLayout.of(skeleton)
    assert targets[0][layout.keypoints].amax() > 0.5 and targets[0][layout.limbs].amax() > 0.5


def test_a_file_of_another_skeleton_is_refused(torso, torso_h5, synthetic_h5_64):
    with pytest.raises(SkeletonMismatch) as e:
        SimplePoseDataset(torso_h5, tiny_cfg(torso_h5, "unused"), train=True)
    m = e.value
    assert (m.file, m.differs, m.found.name, m.found.dataset_keypoints, m.expected.name) == (
        str(torso_h5), "keypoints", "torso", tuple(KEPT), "coco")  # fmt: skip
    # what to do: the file's own skeleton, or the converter's command for this run's
    assert f"data.skeleton={torso[0]}" in m.fix and "python -m data.coco_to_hdf5" in m.fix
    with pytest.raises(SkeletonMismatch) as e:
        SimplePoseDataset(synthetic_h5_64, tiny_cfg(synthetic_h5_64, "unused", f"data.skeleton={torso[0]}"), train=True)
    m = e.value
    assert (m.file, m.found.name, len(m.found.dataset_keypoints), m.expected.name) == (str(synthetic_h5_64), "coco", 17,
                                                                                      "torso")  # fmt: skip
    assert f"--skeleton {torso[0].resolve()}" in m.fix or f"--skeleton {torso[0]}" in m.fix


def test_oracle_decodes_the_ground_truth_of_the_other_skeleton(torso, synthetic_sample_images, tmp_path):
    cfg = load_config(None, [f"data.skeleton={torso[0]}", "eval.scales=[1.0]"])
    stats, _ = evaluate_oracle(synthetic_sample_images, torso[1], cfg, tmp_path / "oracle.json", progress=False)
    results = json.loads((tmp_path / "oracle.json").read_text())
    assert results and all(len(r["keypoints"]) == 18 for r in results)  # 6 dataset keypoints, no neck
    assert stats["AP"] >= 0.9, stats


def test_the_checkpoint_carries_the_skeleton_and_evaluation_needs_nothing_else(
    torso, torso_h5, synthetic_sample_images, tmp_path, capsys
):
    own = tmp_path / "own_torso.yaml"  # deleted before evaluating
    own.write_text(torso[0].read_text())
    run = tmp_path / "run"
    Trainer(tiny_cfg(torso_h5, run, f"data.skeleton={own}", "train.max_steps_per_epoch=2")).fit()
    ckpt = Checkpoint.load(run / "last.pt")
    assert ckpt.skeleton == load_skeleton(own) and ckpt.model["heads.0.0.predict.bias"].shape == (16,)
    own.unlink()
    model, cfg = load_model(str(run / "last.pt"), None, [], torch.device("cpu"))
    assert model.skeleton == load_skeleton(torso[0]) and cfg.data.skeleton == str(own)
    out = tmp_path / "results.json"
    args = ["--ckpt", str(run / "last.pt"), "--images", str(synthetic_sample_images), "--annotations", str(torso[1])]
    rc = coco_eval.main([*args, "--scales", "1", "--out", str(out), "eval.max_images=3", "eval.boxsize=64"])
    assert rc == 0, capsys.readouterr().err
    assert "AP " in capsys.readouterr().out
    assert all(len(r["keypoints"]) == 18 for r in json.loads(out.read_text()))  # in the dataset's 6-keypoint order


def test_evaluation_refuses_a_checkpoint_of_another_skeleton_without_it(torso, tmp_path):
    cfg = tiny_cfg("unused", "unused", f"data.skeleton={torso[0]}")
    skeleton = load_skeleton(torso[0])
    model = PoseNet(cfg.model, skeleton)
    bare = tmp_path / "bare.pt"
    torch.save(model.state_dict(), bare)
    with pytest.raises(SkeletonMismatch) as e:
        load_model(str(bare), None, [], torch.device("cpu"))
    m = e.value
    assert (m.file, m.differs, m.found.num_channels, m.expected.name) == (str(bare), "channels", 16, "coco")
    assert "data.skeleton=" in m.fix  # give the skeleton it was trained for
    rebuilt, _ = load_model(str(bare), None, [f"data.skeleton={torso[0]}"], torch.device("cpu"))
    assert rebuilt.skeleton == skeleton
    full = tmp_path / "full.pt"
    Checkpoint(model.state_dict(), cfg, skeleton).save(full)
    with pytest.raises(SkeletonMismatch) as e:
        load_model(str(full), str(TINY_PRESET), [], torch.device("cpu"))
    m = e.value
    assert (m.file, m.differs, m.found.name, m.expected.name, m.expected_by) == (
        str(full), "layout", "torso", "coco", "data.skeleton=coco")  # fmt: skip


def test_resuming_with_another_skeleton_is_refused(torso, torso_h5, synthetic_h5_64, tmp_path):
    torso_run = [f"data.skeleton={torso[0]}", "train.max_steps_per_epoch=1"]
    Trainer(tiny_cfg(torso_h5, tmp_path / "torso", *torso_run)).fit()
    path = tmp_path / "torso" / "last.pt"
    with pytest.raises(SkeletonMismatch) as e:
        Trainer(tiny_cfg(synthetic_h5_64, tmp_path / "coco", f"train.resume={path}"))
    m = e.value
    assert (m.file, m.differs, m.found.name, m.expected.name) == (str(path), "layout", "torso", "coco")
    assert f"train.init_weights={path}" in m.fix  # start a new run from its weights instead
    # a checkpoint saved before checkpoints carried their skeleton was trained for COCO's
    old = Checkpoint.load(path)
    old.skeleton = None
    old.save(tmp_path / "old.pt")
    with pytest.raises(SkeletonMismatch) as e:
        Trainer(tiny_cfg(torso_h5, tmp_path / "torso2", *torso_run, f"train.resume={tmp_path / 'old.pt'}"))
    assert (e.value.found.name, e.value.expected.name) == ("coco", "torso") and e.value.found.assumed


def test_evaluating_annotations_of_another_keypoint_count_names_the_file_and_the_annotation(torso):
    first = json.loads(torso[1].read_text())["annotations"][0]["id"]
    with pytest.raises(SkeletonMismatch) as e:
        load_ground_truth(torso[1], COCO, EvalConfig())
    m = e.value
    assert (m.file, m.key, m.differs, m.found.num_dataset_keypoints, m.expected.name) == (
        str(torso[1]), "keypoints", "keypoint count", 6, "coco")  # fmt: skip
    assert f"annotation id {first}" in m.where and "data.skeleton=" in m.fix
