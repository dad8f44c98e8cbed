"""Skeletons of more than 128 channels on the CPU: COCO-WholeBody's 133 keypoints (291 channels) through the synthetic
set, the converter and the oracle evaluation with the default resize backend (OpenCV on the CPU, which takes at most
128 channels a call: evaluate/inference.py resizes in slices)."""

from __future__ import annotations

import numpy as np
import pytest

from config.skeleton import load_skeleton
from data.synthetic import generate
from evaluate import coco_eval
from evaluate.inference import CV_MAX_RESIZE_CHANNELS, cubic_resize_channels, resize_to_grid

WHOLEBODY = load_skeleton("coco_wholebody")
pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_wholebody_skeleton_has_more_channels_than_opencv_takes():
    assert (WHOLEBODY.num_dataset_keypoints, WHOLEBODY.num_channels) == (133, 291)
    assert WHOLEBODY.num_channels > CV_MAX_RESIZE_CHANNELS


def test_slices_resize_as_one_call_would():
    rng = np.random.default_rng(0)
    maps = rng.random((23, 17, 291), dtype=np.float32)
    whole = cubic_resize_channels(maps, 3.7, 4.1)
    narrow = np.concatenate([cubic_resize_channels(maps[:, :, i : i + 97], 3.7, 4.1) for i in range(0, 291, 97)], 2)
    assert whole.shape == (round(23 * 4.1), round(17 * 3.7), 291)
    np.testing.assert_allclose(whole, narrow, atol=1e-5)
    import torch

    fused = torch.from_numpy(maps.transpose(2, 0, 1)[None].copy())  # the evaluator's path, default backend
    assert resize_to_grid(fused, (90, 66), (90, 66), 4).shape == (1, 90, 66, 291)


def test_oracle_ap_of_a_133_keypoint_skeleton_on_the_cpu(tmp_path, capsys):
    generate(tmp_path, num_images=8, seed=3, val_fraction=0.5, skeleton=WHOLEBODY)
    val = tmp_path / "annotations" / "person_keypoints_val.json"
    assert coco_eval.main(["--from-ground-truth", "--images", str(tmp_path / "images"), "--annotations", str(val),
                           "data.skeleton=coco_wholebody", "eval.scales=[1.0]"]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    ap = float(printed.split("AP ")[-1].split()[0])
    print(f"oracle AP, COCO-WholeBody (133 keypoints, 291 channels), CPU, default backend: {ap:.3f}")
    assert ap > 0.8, printed
