"""Target drawing: golden values from running the original (faithful mode, docs/data.md#targets) and the fixed
limb mode."""

import dataclasses

import numpy as np
import pytest
import torch

from simplepose.codec.layout import channel_groups
from simplepose.codec.network_input import pixels_to_input, scale_input_
from simplepose.codec.pose_codec import PoseCodec
from simplepose.codec.targets import downscale_targets, draw_targets, keypoint_heatmaps, limb_heatmaps, mask_scales
from simplepose.config import skeleton as sk
from simplepose.config.schema import TargetConfig
from tests.helpers import COCO, COCO_LAYOUT

GRID = (128, 128)
NECK, NOSE = COCO.keypoints.index("neck"), COCO.keypoints.index("nose")
RSHO, RELB = COCO.keypoints.index("right_shoulder"), COCO.keypoints.index("right_elbow")
LIMB_NECK_NOSE = COCO.limbs.index((NECK, NOSE))
LIMB_RSHO_RELB = COCO.limbs.index((RSHO, RELB))


def people(*points_per_person):
    """(P, 18, 3) keypoints, every keypoint unlabelled except the given {index: (x, y)}."""
    kp = np.zeros((len(points_per_person), COCO.num_keypoints, 3), np.float32)
    kp[..., 2] = sk.VIS_UNLABELLED
    for p, points in enumerate(points_per_person):
        for j, (x, y) in points.items():
            kp[p, j] = (x, y, sk.VIS_VISIBLE)
    return kp


def nonzero_box(m):
    rows, cols = np.nonzero(m)
    return rows.min(), rows.max(), cols.min(), cols.max()


def test_keypoint_golden_values():
    m = keypoint_heatmaps(people({NECK: (250.3, 300)}), GRID, 4, TargetConfig())[NECK]
    assert np.unravel_index(m.argmax(), m.shape) == (75, 62)
    got = [m[75, 62], m[75, 61], m[75, 63], m[74, 62], m[76, 62]]
    np.testing.assert_allclose(got, [0.982319, 0.855464, 0.925799, 0.958361, 0.826398], atol=1e-5)
    assert nonzero_box(m) == (68, 82, 56, 70)
    assert np.count_nonzero(keypoint_heatmaps(people({NECK: (250.3, 300)}), GRID, 4, TargetConfig())) == 15 * 15


def test_unlabelled_keypoints_and_limbs_are_not_drawn():
    kp = people({NECK: (250.3, 300), NOSE: (250.3, 200)})
    kp[0, NOSE, 2] = sk.VIS_UNLABELLED
    t = draw_targets(kp, None, GRID, 4, TargetConfig(), COCO)
    assert t[COCO_LAYOUT.keypoints.start + NOSE].max() == 0 and t[COCO_LAYOUT.limbs].max() == 0
    assert t[COCO_LAYOUT.keypoints.start + NECK].max() > 0.98


def test_vertical_limb_golden_values():
    m = limb_heatmaps(people({NECK: (250.3, 200), NOSE: (250.3, 300)}), GRID, 4, TargetConfig(), COCO)[LIMB_NECK_NOSE]
    assert nonzero_box(m) == (49, 76, 62, 64)
    np.testing.assert_allclose(m[60, 62:65], [0.993491, 0.900784, 0.589206], atol=1e-5)


def test_diagonal_limb_golden_values_and_crossing_mean():
    one = people({RSHO: (100, 100), RELB: (180, 180)})
    m = limb_heatmaps(one, GRID, 4, TargetConfig(), COCO)[LIMB_RSHO_RELB]
    assert nonzero_box(m) == (24, 46, 24, 46)
    assert m[30, 30] == pytest.approx(1.0, abs=1e-5)
    assert m[24, 46] == pytest.approx(0.01, abs=1e-7) and m[46, 24] == pytest.approx(0.01, abs=1e-7)
    crossing = people({RSHO: (100, 100), RELB: (180, 180)}, {RSHO: (100, 180), RELB: (180, 100)})
    m2 = limb_heatmaps(crossing, GRID, 4, TargetConfig(), COCO)[LIMB_RSHO_RELB]
    assert m2[30, 30] == pytest.approx(0.505, abs=1e-5)


def test_fixed_limb_mode_uses_segment_distance_max_and_no_floor():
    cfg = dataclasses.replace(TargetConfig(), limb_mode="fixed")
    crossing = people({RSHO: (100, 100), RELB: (180, 180)}, {RSHO: (100, 180), RELB: (180, 100)})
    m = limb_heatmaps(crossing, GRID, 4, cfg, COCO)[LIMB_RSHO_RELB]
    assert m[30, 30] == pytest.approx(1.0, abs=1e-5)  # max, not mean
    vertical = limb_heatmaps(people({NECK: (250.3, 200), NOSE: (250.3, 300)}), GRID, 4, cfg, COCO)[LIMB_NECK_NOSE]
    # The band is symmetric and wider than the faithful box (columns 62-64 only) ...
    rows, cols = np.nonzero(vertical)
    assert cols.min() < 60 and cols.max() > 66
    # ... and fades beyond the end points (distance to the segment, not the line).
    assert vertical[75, 62] > vertical[77, 62] > vertical[79, 62] > 0 == vertical[81, 62]
    positive = vertical[vertical > 0]
    assert positive.min() >= cfg.limb_gaussian_thre  # no 0.01 floor
    # Along the middle, the fixed value is the same Gaussian of the perpendicular distance.
    faithful = limb_heatmaps(people({NECK: (250.3, 200), NOSE: (250.3, 300)}), GRID, 4, TargetConfig(), COCO)
    np.testing.assert_allclose(vertical[60, 62:65], faithful[LIMB_NECK_NOSE, 60, 62:65], atol=1e-5)


def test_extra_channels_and_range():
    kp = people({NECK: (250.3, 300), NOSE: (250.3, 200)}, {NECK: (60, 60)})
    mask = np.zeros(GRID, np.float32)
    mask[10:20, 10:20] = 1
    mask[:5, :] = 1  # touches the top border: not eroded from outside
    t = draw_targets(kp, mask, GRID, 4, TargetConfig(), COCO)
    assert t.shape == (50, 128, 128) and t.dtype == np.float32
    assert t.min() >= 0 and t.max() <= 1
    np.testing.assert_array_equal(t[49], t[30:48].max(axis=0))
    person = t[COCO_LAYOUT.person_mask]
    assert person[11:19, 11:19].min() == 1 and person[10, 15] == 0 and person[15, 19] == 0
    assert person[0, 50] == 1 and person[3, 50] == 1 and person[4, 50] == 0


def test_downscale_is_block_mean():
    rng = np.random.default_rng(0)
    t = rng.random((50, 128, 128), dtype=np.float32)
    scales = downscale_targets(t, 5)
    assert [s.shape for s in scales] == [(50, 128 >> k, 128 >> k) for k in range(5)]
    for k, s in enumerate(scales):
        f = 2**k
        expected = t.reshape(50, 128 // f, f, 128 // f, f).mean(axis=(2, 4))
        np.testing.assert_allclose(s, expected, atol=1e-6)


def test_the_codec_encodes_as_the_stages_do():
    """``PoseCodec.encode`` / ``encode_masks`` are the drawing, the downscaling and the mask scales, bit for bit; its
    layout is the skeleton's; the network input's /255 is the same in numpy and in torch."""
    rng = np.random.default_rng(0)
    kp = np.concatenate(
        [rng.uniform(0, 256, (3, COCO.num_keypoints, 2)), rng.integers(0, 3, (3, COCO.num_keypoints, 1))], -1
    )
    mask_all, mask_miss = (rng.uniform(0, 1, (64, 64)).astype(np.float32) for _ in range(2))
    cfg = TargetConfig(sigma=7.0)
    codec = PoseCodec(COCO, cfg, stride=4)
    got = codec.encode(kp, mask_all, (64, 64), num_scales=5)
    want = downscale_targets(draw_targets(kp, mask_all, (64, 64), 4, cfg, COCO), 5)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(got, want, strict=True))
    got_masks, want_masks = codec.encode_masks(mask_miss, 5, 0.5), mask_scales(mask_miss, 5, 0.5)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(got_masks, want_masks, strict=True))
    layout = codec.layout
    assert (layout.limbs, layout.keypoints, layout.flip) == (
        COCO_LAYOUT.limbs,
        COCO_LAYOUT.keypoints,
        COCO_LAYOUT.flip,
    )
    assert (layout.person_mask, layout.max_keypoint, layout.num_channels) == (48, 49, 50)
    assert channel_groups(COCO) == {"limb": slice(0, 30), "keypoint": slice(30, 48), "person_mask": slice(48, 49),
                                    "max_keypoint": slice(49, 50)}  # fmt: skip
    pixels = rng.integers(0, 256, (3, 8, 9), dtype=np.uint8)
    on_torch = scale_input_(torch.from_numpy(pixels).float()).numpy()
    assert pixels_to_input(pixels).tobytes() == on_torch.tobytes()
    assert pixels_to_input(pixels).dtype == np.float32
