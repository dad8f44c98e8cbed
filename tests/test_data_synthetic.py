"""The synthetic dataset: deterministic, valid COCO, and it goes through the converter and the loader."""

import json
import re

import numpy as np
import pytest
from pycocotools.coco import COCO

from simplepose.config.config_file import load_config, set_key, validate
from simplepose.data.conversion import Source, convert
from simplepose.data.dataset import SimplePoseDataset
from simplepose.data.quickstart_data import prepare_synthetic_data
from simplepose.data.synthetic_clips import crossing_video, write_video
from simplepose.data.synthetic_images import generate
from simplepose.utils import video_writer
from simplepose.utils.errors import UserError


def test_deterministic_from_the_seed(tmp_path, synthetic_coco):
    generate(tmp_path / "again", num_images=12, seed=0, val_fraction=0.25)
    generate(tmp_path / "other", num_images=12, seed=1, val_fraction=0.25)
    for split in ("train", "val"):
        name = f"annotations/person_keypoints_{split}.json"
        assert (tmp_path / "again" / name).read_bytes() == (synthetic_coco / name).read_bytes()
        assert (tmp_path / "other" / name).read_bytes() != (synthetic_coco / name).read_bytes()
    first = sorted((synthetic_coco / "images").iterdir())[0]
    assert (tmp_path / "again" / "images" / first.name).read_bytes() == first.read_bytes()


def test_valid_coco_with_the_expected_content(synthetic_coco):
    train = COCO(str(synthetic_coco / "annotations" / "person_keypoints_train.json"))
    val = COCO(str(synthetic_coco / "annotations" / "person_keypoints_val.json"))
    assert len(train.getImgIds()) == 9 and len(val.getImgIds()) == 3
    anns = train.loadAnns(train.getAnnIds(iscrowd=None))
    people = [a for a in anns if a["num_keypoints"] > 0]
    assert people and any(a["num_keypoints"] == 0 and not a["iscrowd"] for a in anns)
    for a in anns:
        kp = np.array(a["keypoints"]).reshape(17, 3)
        assert a["num_keypoints"] == int((kp[:, 2] > 0).sum())
        assert a["area"] > 0 and a["bbox"][2] > 0 and a["bbox"][3] > 0
        assert train.annToMask(a).sum() > 0
    for img in train.loadImgs(train.getImgIds()):
        assert 256 <= img["width"] <= 384 and 256 <= img["height"] <= 384
    heights = [a["bbox"][3] / train.imgs[a["image_id"]]["height"] for a in people]
    assert np.median(heights) > 0.3
    # Frontal people: relative to the body axis (shoulders -> hips), the right shoulder is on the viewer's left.
    for a in people:
        kp = np.array(a["keypoints"], float).reshape(17, 3)
        if (kp[5:7, 2] > 0).all() and (kp[11:13, 2] > 0).all():
            down = kp[11:13, :2].mean(0) - kp[5:7, :2].mean(0)
            right_to_left = kp[6, :2] - kp[5, :2]  # COCO 5 left_shoulder, 6 right_shoulder
            assert down[0] * right_to_left[1] - down[1] * right_to_left[0] > 0
    cat = json.loads((synthetic_coco / "annotations" / "person_keypoints_train.json").read_text())["categories"][0]
    assert len(cat["keypoints"]) == 17 and len(cat["skeleton"]) == 19


def test_some_crowd_regions_over_a_larger_set(tmp_path):
    generate(tmp_path, num_images=40, seed=3, val_fraction=0)
    anns = json.loads((tmp_path / "annotations" / "person_keypoints_train.json").read_text())["annotations"]
    crowds = [a for a in anns if a["iscrowd"]]
    assert crowds and all(isinstance(a["segmentation"]["counts"], str) for a in crowds)


def read_set(root):
    path = root / "annotations" / "person_keypoints_train.json"
    return COCO(str(path)), {p.name: p.read_bytes() for p in (root / "images").iterdir()}


def test_crowds_as_coco_writes_them_and_more_or_fewer_of_them(tmp_path):
    """crowd_counts="uncompressed" writes the same regions as run-length lists (COCO's own files); the crowd share
    changes only the crowds: the people of every picture stay where they are (occluded where a crowd covers them)."""
    for name, extra in (("string", {}), ("list", {"crowd_counts": "uncompressed"}), ("none", {"crowd_probability": 0}),
                        ("more", {"crowd_probability": 0.5})):  # fmt: skip
        generate(tmp_path / name, num_images=12, seed=4, val_fraction=0, **extra)
    (string, string_images), (listed, listed_images) = read_set(tmp_path / "string"), read_set(tmp_path / "list")
    assert listed_images == string_images
    crowds = [a for a in listed.dataset["annotations"] if a["iscrowd"]]
    assert crowds and all(isinstance(a["segmentation"]["counts"], list) for a in crowds)
    for a in listed.dataset["annotations"]:
        b = string.anns[a["id"]]
        assert {k: v for k, v in a.items() if k != "segmentation"} == {k: b[k] for k in a if k != "segmentation"}
        assert np.array_equal(listed.annToMask(a), string.annToMask(b))
        if a["iscrowd"]:
            assert sum(a["segmentation"]["counts"]) == a["segmentation"]["size"][0] * a["segmentation"]["size"][1]
            assert listed.annToMask(a).sum() == a["area"]
    people = {}
    for name in ("none", "string", "more"):
        coco, _ = read_set(tmp_path / name)
        anns = coco.dataset["annotations"]
        people[name] = [(a["image_id"], a["keypoints"][0::3], a["keypoints"][1::3]) for a in anns if a["num_keypoints"]]
        people[f"{name} crowds"] = sum(a["iscrowd"] for a in anns)
    assert people["none"] == people["string"] == people["more"]
    assert people["none crowds"] == 0 < people["string crowds"] < people["more crowds"]


def test_the_tests_synthetic_sample_holds_the_cases_of_the_real_one(synthetic_sample_annotations):
    """What the tests check on the synthetic sample in place of the real one: crowd regions written as COCO writes
    them, people without keypoints, occluded keypoints (v = 1) beside visible ones, several people per picture."""
    data = json.loads(synthetic_sample_annotations.read_text())
    anns = data["annotations"]
    assert len(data["images"]) == 27
    crowds = [a for a in anns if a["iscrowd"]]
    assert len(crowds) >= 3 and all(isinstance(a["segmentation"]["counts"], list) for a in crowds)
    assert sum(a["num_keypoints"] == 0 and not a["iscrowd"] for a in anns) >= 20
    visibility = np.concatenate([np.reshape(a["keypoints"], (-1, 3))[:, 2] for a in anns])
    assert (visibility == 1).sum() >= 50 and (visibility == 2).sum() > 10 * (visibility == 1).sum()
    per_image = np.bincount([a["image_id"] for a in anns if a["num_keypoints"] > 0])
    assert (per_image >= 2).sum() >= 10


def test_converts_end_to_end(tmp_path, synthetic_coco):
    out = tmp_path / "synth.h5"
    cfg = load_config("config/quickstart.yaml", [])
    size = cfg.data.input_size
    settings = convert(
        [Source(synthetic_coco / "images", synthetic_coco / "annotations" / "person_keypoints_train.json")],
        out,
        input_size=size,
        progress=False,
    )
    assert settings["counts"]["samples"] >= 9
    item = SimplePoseDataset(out, cfg, train=True)[0]
    assert item["image"].shape == (3, size, size)
    assert item["targets"][0][30:48].max() > 0.9


def test_quick_start_data_is_made_once_and_returned_as_settings(tmp_path):
    """The quick start's files are made once, reused, and handed back as config keys; the config is not touched."""
    root = tmp_path / "synthetic"
    cfg = load_config("config/quickstart.yaml", [f"data.synthetic_dir={root}", "data.synthetic_images=8"])
    before = repr(cfg)
    settings = prepare_synthetic_data(cfg.data)
    assert repr(cfg) == before
    size = cfg.data.input_size
    assert settings == {
        "data.train": str(root / f"train{size}.h5"),
        "data.val": str(root / f"val{size}.h5"),
        "data.val_images": str(root / "images"),
        "data.val_annotations": str(root / "annotations" / "person_keypoints_val.json"),
    }
    mtime = (root / f"train{size}.h5").stat().st_mtime_ns
    assert prepare_synthetic_data(cfg.data) == settings
    assert (root / f"train{size}.h5").stat().st_mtime_ns == mtime  # reused, not rebuilt
    for key, value in settings.items():
        set_key(cfg, key, value, "test")
    validate(cfg)
    assert len(SimplePoseDataset(cfg.data.train, cfg, train=True)) > 0
    assert len(COCO(cfg.data.val_annotations).getImgIds()) > 0


def test_a_video_opencv_cannot_encode_is_refused_naming_it_and_leaves_no_file(tmp_path, monkeypatch):
    """Where OpenCV has no encoder (a build without it), the synthetic video, like the demo's, stops with one line
    naming the file, and neither it nor its temporary file is left."""

    class NoEncoder:
        def __init__(self, *args):
            pass

        def isOpened(self):  # noqa: N802 (OpenCV's name)
            return False

    monkeypatch.setattr(video_writer.cv2, "VideoWriter", NoEncoder)
    target = tmp_path / "clip.mp4"
    with pytest.raises(UserError, match=re.escape(f"cannot write video {target}: OpenCV has no mp4v encoder")):
        write_video(crossing_video(), target)
    assert list(tmp_path.iterdir()) == []
