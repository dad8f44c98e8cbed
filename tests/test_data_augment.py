"""Augmentation: golden matrices (the original's values, docs/data.md#the-affine-matrix), parameter draws, and
that image, masks and keypoints move together."""

import cv2
import numpy as np
import pytest

from simplepose.config.schema import AugmentConfig
from simplepose.data import augment
from tests.helpers import COCO, left_right_pairs


def test_golden_matrices():
    params = augment.AugmentParams(flip=True, degree=30, scale=1.1, dx=10, dy=-5)
    # The original stored scale_provided = bbox height / 512 = 0.5, i.e. a bbox height of 256 px.
    m = augment.affine_matrix((320, 240), 256, params, (512, 512), 0.6)
    np.testing.assert_allclose(m, [[-1.140921, -0.658711, 788.685285], [-0.658711, 1.140921, 187.466505]], atol=1e-6)
    m = augment.affine_matrix((320, 240), 256, augment.IDENTITY, (512, 512), 0.6)
    np.testing.assert_allclose(m, [[1.197656, 0, -127.75], [0, 1.197656, -31.9375]], atol=1e-6)


def test_non_square_input_centres_the_person():
    m = augment.affine_matrix((100, 50), 80, augment.IDENTITY, (256, 384), 0.6)
    np.testing.assert_allclose(m @ [100, 50, 1], [191.5, 127.5])


def test_random_params_are_reproducible_and_in_range():
    cfg = AugmentConfig()
    draws = [augment.random_params(np.random.default_rng(i), cfg) for i in range(300)]
    assert draws[7] == augment.random_params(np.random.default_rng(7), cfg)
    assert all(abs(p.degree) <= 40 and 0.7 <= p.scale <= 1.3 and abs(p.dx) <= 50 and abs(p.dy) <= 50 for p in draws)
    assert all(-10 <= p.hsv[0] <= 10 and -20 <= p.hsv[1] <= 60 and -20 <= p.hsv[2] <= 40 for p in draws)
    assert 0.35 < np.mean([p.flip for p in draws]) < 0.65 and 0.1 < np.mean([p.tint for p in draws]) < 0.3
    assert 0.1 < np.mean([p.scale == 1.0 for p in draws]) < 0.3  # scale_prob 0.8


def test_tint_clips_or_wraps_the_hue():
    red = np.zeros((4, 4, 3), np.uint8)
    red[..., 2] = 200  # hue 0 in OpenCV's HSV
    clipped = augment.tint(red, (-5, 0, 0), hue_wrap=False)
    wrapped = augment.tint(red, (-5, 0, 0), hue_wrap=True)[..., :3]
    assert clipped.shape == (4, 4, 4) and (clipped[..., 3] == 255).all()  # BGRA, for warp_image
    assert (clipped[..., :3] == red).all()  # hue clipped at 0: unchanged
    assert not (wrapped == red).all() and wrapped[0, 0, 0] > 0  # hue 175: a magenta-ish red


@pytest.mark.parametrize("supersample", [4, 2, 1])
def test_masks_move_with_the_affine(supersample):
    mask = np.zeros((300, 400), np.uint8)
    mask[160:181, 230:251] = 255  # blob centred at (240, 170)
    params = augment.AugmentParams(flip=True, degree=25, scale=1.2, dx=7, dy=-3)
    m = augment.affine_matrix((200, 150), 200, params, (256, 256), 0.6)
    grid = augment.warp_mask_to_grid(mask, m, (256, 256), 4, 0, supersample)
    assert grid.shape == (64, 64)
    x, y = m @ [240, 170, 1]
    expected = ((x - 1.5) / 4, (y - 1.5) / 4)  # input pixel -> grid cell
    ys, xs = np.nonzero(grid)
    w = grid[ys, xs]
    centroid = (np.sum(xs * w) / w.sum(), np.sum(ys * w) / w.sum())
    np.testing.assert_allclose(centroid, expected, atol=0.3)
    # The border value fills what comes from outside the picture (here: left of and above it).
    corner = augment.affine_matrix((0, 0), 200, augment.IDENTITY, (256, 256), 0.6)
    outside = augment.warp_mask_to_grid(mask, corner, (256, 256), 4, 255, supersample)
    assert outside[:30, :30].min() == 1.0 and outside[40:, 40:].max() == 0.0


def test_keypoints_follow_the_affine_and_flip_swaps_sides():
    kp = np.zeros((1, 18, 3), np.float32)
    kp[0, :, 2] = 1
    kp[0, :, 0] = np.arange(18) * 10
    kp[0, :, 1] = 100
    kp[0, 3, 2] = 2  # v is carried along unchanged
    m = augment.affine_matrix((90, 100), 150, augment.AugmentParams(degree=10), (256, 256), 0.6)
    out = augment.transform_keypoints(kp, m, False, COCO)
    np.testing.assert_allclose(out[0, :, :2], kp[0, :, :2] @ m[:, :2].T + m[:, 2], rtol=1e-5)
    assert out[0, 3, 2] == 2
    mf = augment.affine_matrix((90, 100), 150, augment.AugmentParams(degree=10, flip=True), (256, 256), 0.6)
    flipped = augment.transform_keypoints(kp, mf, True, COCO)
    for left, right in left_right_pairs(COCO):
        # The row now labelled "left" is the original right keypoint, mirrored.
        np.testing.assert_allclose(flipped[0, left, :2], mf @ [*kp[0, right, :2], 1], rtol=1e-5)
        assert flipped[0, left, 2] == kp[0, right, 2]


def test_cheaper_mask_warps_stay_close_to_the_original():
    rng = np.random.default_rng(1)
    mask = np.zeros((300, 400), np.uint8)
    for _ in range(6):
        x, y, r = rng.integers(40, 360), rng.integers(40, 260), rng.integers(8, 40)
        mask[max(0, y - r) : y + r, max(0, x - r) : x + r] = 255
    m = augment.affine_matrix((200, 150), 180, augment.AugmentParams(degree=20, scale=1.2), (256, 256), 0.6)
    full = augment.warp_mask_to_grid(mask, m, (256, 256), 4, 0)
    half = augment.warp_mask_to_grid(mask, m, (256, 256), 4, 0, supersample=2)
    point = augment.warp_mask_to_grid(mask, m, (256, 256), 4, 0, supersample=1)
    assert 0 < np.abs(half - full).mean() < np.abs(point - full).mean() < 0.02
    assert np.abs(half - full).max() < 0.3


@pytest.mark.parametrize("degree, scale, bbox", [(0, 1.0, 100), (33, 1.3, 60), (-20, 0.7, 400)])
def test_warping_the_used_crop_gives_the_same_picture(degree, scale, bbox):
    image = np.random.default_rng(0).integers(0, 256, (300, 420, 3), dtype=np.uint8)
    m = augment.affine_matrix((250, 140), bbox, augment.AugmentParams(degree=degree, scale=scale), (128, 128), 0.6)
    crop, mc = augment.crop_to_output(image, m, (128, 128))
    if bbox < 200:
        assert crop.size < image.size  # zooming in: only part of the picture is used
    full = augment.warp_image(image, m, (128, 128), (124, 127, 127)).astype(int)
    diff = np.abs(augment.warp_image(crop, mc, (128, 128), (124, 127, 127)) - full)
    # Equal up to OpenCV's 1/32-pixel quantisation of the sampling positions (which moves with the offset).
    assert diff.max() <= 1 and (diff > 0).mean() < 0.005


@pytest.mark.parametrize("degree, scale, bbox", [(0, 1.0, 100), (33, 1.3, 60), (-20, 0.7, 400), (10, 1.0, 2000)])
def test_warp_image_is_opencvs_bgr_warp_and_reads_only_the_sampled_region(degree, scale, bbox):
    image = np.random.default_rng(1).integers(0, 256, (300, 420, 3), dtype=np.uint8)
    m = augment.affine_matrix((250, 140), bbox, augment.AugmentParams(degree=degree, scale=scale), (128, 128), 0.6)
    border = (124, 127, 127)
    plain = cv2.warpAffine(image, m, (128, 128), flags=cv2.INTER_LINEAR, borderValue=border)
    ours = augment.warp_image(image, m, (128, 128), border)
    assert ours.shape == (128, 128, 3) and np.array_equal(ours, plain)
    # A BGRA input whose pixels outside the sampled region are garbage warps to the same picture.
    x0, y0, x1, y1 = augment.sampled_region(image.shape[:2], m, (128, 128))
    garbage = np.random.default_rng(2).integers(0, 256, (300, 420, 4), dtype=np.uint8)
    garbage[y0:y1, x0:x1] = cv2.cvtColor(image, cv2.COLOR_BGR2BGRA)[y0:y1, x0:x1]
    assert np.array_equal(augment.warp_image(garbage, m, (128, 128), border), plain)
