"""Optional fields are optional everywhere: a file without iscrowd, num_keypoints, area, segmentation or image sizes
is filled in one place (data.coco_annotations.with_defaults, the image files for the sizes) for the converter and the
evaluator alike, with no traceback, and scores as the complete file does where nothing is lost."""

from __future__ import annotations

import json
import logging

import h5py
import numpy as np

from simplepose.config.config_file import load_config
from simplepose.data.conversion import Source, convert
from simplepose.evaluate.evaluation import evaluate_oracle


def stripped(root, tmp_path, name, *, regions: bool) -> object:
    """The val file of ``root`` without iscrowd (where 0), num_keypoints and the images' width/height, and (``regions``)
    without area and segmentation."""
    data = json.loads((root / "annotations" / "person_keypoints_val.json").read_text())
    for img in data["images"]:
        del img["width"], img["height"]
    for ann in data["annotations"]:
        del ann["num_keypoints"]
        if not ann["iscrowd"]:
            del ann["iscrowd"]
        if regions:
            ann.pop("area"), ann.pop("segmentation")
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data))
    return path


def oracle(images, annotations) -> dict:
    cfg = load_config(None, ["eval.scales=[1.0]", "eval.flip=false"])
    return evaluate_oracle(images, annotations, cfg, progress=False)[0]


def test_missing_optional_fields_are_filled_alike(synthetic_coco, tmp_path, caplog):
    images = synthetic_coco / "images"
    full = synthetic_coco / "annotations" / "person_keypoints_val.json"
    sparse = stripped(synthetic_coco, tmp_path, "sparse", regions=False)
    with caplog.at_level(logging.INFO):
        settings = convert([Source(images, sparse)], tmp_path / "sparse.h5", 64, progress=False)
    reference = convert([Source(images, full)], tmp_path / "full.h5", 64, progress=False)
    people = sum(1 for a in json.loads(full.read_text())["annotations"])
    assert settings["filled"]["num_keypoints"] == people and settings["filled"]["iscrowd"] > 0
    assert settings["counts"]["images_without_size"] == 3 and "without 'iscrowd': taken as 0" in caplog.text
    with h5py.File(tmp_path / "sparse.h5") as a, h5py.File(tmp_path / "full.h5") as b:
        for key in ("images/width", "images/height", "people/num_keypoints", "people/iscrowd", "people/keypoints",
                    "images/mask_values", "samples/person"):  # fmt: skip
            np.testing.assert_array_equal(a[key][:], b[key][:], err_msg=key)
    assert settings["counts"]["samples"] == reference["counts"]["samples"] > 0

    full_figures = oracle(images, full)
    assert oracle(images, sparse) == full_figures
    # no area, no segmentation either: the box stands in (0.53 x its area for the OKS scale), still no traceback
    bare = stripped(synthetic_coco, tmp_path, "bare", regions=True)
    settings = convert([Source(images, bare)], tmp_path / "bare.h5", 64, progress=False)
    assert settings["counts"]["people_with_box_as_region"] == people
    figures = oracle(images, bare)
    print("oracle AP: complete file", full_figures["AP"], "without area and segmentation", figures["AP"])
    assert figures["AP"] > 0.5
