"""Skeletons of more than 128 channels on the CPU: COCO-WholeBody's 133 keypoints (291 channels) and Halpe-FullBody's
136 (298 channels) through the synthetic set, the converter and the oracle evaluation with the default resize backend
(OpenCV on the CPU, which takes at most 128 channels a call: evaluate/inference/multiscale.py resizes in slices)."""

from __future__ import annotations

import numpy as np
import pytest

from simplepose.config.skeleton_file import load_skeleton
from simplepose.data.synthetic_images import generate
from simplepose.evaluate import coco_eval
from simplepose.evaluate.inference.host_maps import CV_MAX_RESIZE_CHANNELS, cubic_resize_channels
from simplepose.evaluate.inference.multiscale import resize_to_grid

WHOLEBODY = load_skeleton("coco_wholebody")
HALPE = load_skeleton("halpe")
# Halpe-FullBody's left-right pairs as its authors' training code lists them (0-based): body, feet, face, hands
HALPE_FLIP_PAIRS = [
    (1, 2), (3, 4), (5, 6), (7, 8), (9, 10), (11, 12), (13, 14), (15, 16), (20, 21), (22, 23), (24, 25),
    (26, 42), (27, 41), (28, 40), (29, 39), (30, 38), (31, 37), (32, 36), (33, 35), (43, 52), (44, 51), (45, 50),
    (46, 49), (47, 48), (62, 71), (63, 70), (64, 69), (65, 68), (66, 73), (67, 72), (57, 61), (58, 60), (74, 80),
    (75, 79), (76, 78), (87, 89), (93, 91), (86, 90), (85, 81), (84, 82), *((94 + i, 115 + i) for i in range(21)),
]  # fmt: skip
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


def test_the_halpe_skeleton_flips_and_scores_as_its_dataset():
    assert (HALPE.num_dataset_keypoints, HALPE.num_channels, HALPE.derived) == (136, 298, ())
    names = HALPE.dataset_keypoints
    assert names[17:20] == ("head", "neck", "hip") and names[26] == "face-0" and names[94] == "left_hand_root"
    pairs = {frozenset((names.index(a), names.index(b))) for a, b in HALPE.flip_pairs}
    assert pairs == {frozenset(p) for p in HALPE_FLIP_PAIRS}
    sigmas = np.asarray(HALPE.sigmas)
    assert sigmas[:17].tolist() == list(load_skeleton("coco").sigmas)  # COCO's body
    assert sigmas[17:20].tolist() == [0.08] * 3 and sigmas[20:26].tolist() == [0.089] * 6
    assert (sigmas[26:] == 0.015).all()


@pytest.mark.parametrize("skeleton", [WHOLEBODY, HALPE], ids=lambda s: s.name)
def test_oracle_ap_of_a_whole_body_skeleton_on_the_cpu(skeleton, tmp_path, capsys):
    generate(tmp_path, num_images=8, seed=3, val_fraction=0.5, skeleton=skeleton)
    val = tmp_path / "annotations" / "person_keypoints_val.json"
    assert coco_eval.main(["--from-ground-truth", "--images", str(tmp_path / "images"), "--annotations", str(val),
                           f"data.skeleton={skeleton.name}", "eval.scales=[1.0]"]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    ap = float(printed.split("AP ")[-1].split()[0])
    print(f"oracle AP, {skeleton.name} ({skeleton.num_dataset_keypoints} keypoints, {skeleton.num_channels} channels), "
          f"CPU, default backend: {ap:.3f}")  # fmt: skip
    assert ap > 0.8, printed
