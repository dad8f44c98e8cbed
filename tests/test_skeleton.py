"""The COCO skeleton read from config/skeletons/coco.yaml is the paper's: the tables the project had as constants, the
original's flip tables and COCO mapping, and the same drawing."""

import colorsys

import numpy as np

from simplepose.codec.layout import ChannelLayout
from simplepose.config import skeleton as sk
from simplepose.config.skeleton_definition import skeleton_from_dict
from simplepose.config.skeleton_file import load_skeleton
from tests.helpers import COCO_LAYOUT, channel_names, internal_to_dataset, left_right_pairs

COCO = load_skeleton("coco")

# The original's hand-written flip tables (docs/skeleton.md#flip-permutations); ours are derived from the flip pairs.
ORIGINAL_LIMB_FLIP = [0, 2, 1, 4, 3, 6, 5, 8, 7, 12, 13, 14, 9, 10, 11, 18, 19, 20, 15, 16, 17, 22, 21, 25,
                      26, 23, 24, 28, 27, 29]  # fmt: skip
ORIGINAL_HEAT_FLIP = [0, 1, 5, 6, 7, 2, 3, 4, 11, 12, 13, 8, 9, 10, 15, 14, 17, 16, 18, 19]
ORIGINAL_DT_GT_MAPPING = {0: 0, 2: 6, 3: 8, 4: 10, 5: 5, 6: 7, 7: 9, 8: 12, 9: 14, 10: 16, 11: 11, 12: 13,
                          13: 15, 14: 2, 15: 1, 16: 4, 17: 3}  # fmt: skip

# The constants config/skeleton.py held before the skeleton became data, copied verbatim.
OLD_KEYPOINTS = (
    "nose", "neck",
    "right_shoulder", "right_elbow", "right_wrist",
    "left_shoulder", "left_elbow", "left_wrist",
    "right_hip", "right_knee", "right_ankle",
    "left_hip", "left_knee", "left_ankle",
    "right_eye", "left_eye", "right_ear", "left_ear",
)  # fmt: skip
OLD_COCO_KEYPOINTS = (
    "nose", "left_eye", "right_eye", "left_ear", "right_ear",
    "left_shoulder", "right_shoulder", "left_elbow", "right_elbow",
    "left_wrist", "right_wrist", "left_hip", "right_hip",
    "left_knee", "right_knee", "left_ankle", "right_ankle",
)  # fmt: skip
OLD_LIMB_NAMES = (
    ("neck", "nose"), ("neck", "right_eye"), ("neck", "left_eye"), ("neck", "right_ear"),
    ("neck", "left_ear"), ("nose", "right_eye"), ("nose", "left_eye"), ("right_eye", "right_ear"),
    ("left_eye", "left_ear"), ("neck", "right_shoulder"), ("right_shoulder", "right_elbow"),
    ("right_elbow", "right_wrist"), ("neck", "left_shoulder"), ("left_shoulder", "left_elbow"),
    ("left_elbow", "left_wrist"), ("neck", "right_hip"), ("right_hip", "right_knee"),
    ("right_knee", "right_ankle"), ("neck", "left_hip"), ("left_hip", "left_knee"),
    ("left_knee", "left_ankle"), ("nose", "right_shoulder"), ("nose", "left_shoulder"),
    ("right_shoulder", "right_hip"), ("right_hip", "left_knee"), ("left_shoulder", "left_hip"),
    ("left_hip", "right_knee"), ("right_ear", "right_shoulder"), ("left_ear", "left_shoulder"),
    ("right_hip", "left_hip"),
)  # fmt: skip
OLD_DRAW_LIMBS = (0, *range(5, 21), 29)
OLD_COCO_SKELETON = (
    (15, 13), (13, 11), (16, 14), (14, 12), (11, 12), (5, 11), (6, 12), (5, 6), (5, 7), (6, 8),
    (7, 9), (8, 10), (1, 2), (0, 1), (0, 2), (1, 3), (2, 4), (3, 5), (4, 6),
)  # fmt: skip
PYCOCOTOOLS_SIGMAS = np.array([.26, .25, .25, .35, .35, .79, .79, .72, .72, .62, .62, 1.07, 1.07, .87, .87, .89,
                               .89]) / 10.0  # fmt: skip


def old_mirror(name: str) -> str:
    if name.startswith("left_"):
        return "right_" + name[5:]
    return "left_" + name[6:] if name.startswith("right_") else name


def test_coco_yaml_equals_the_former_constants():
    assert COCO.name == "coco" and COCO.keypoints == OLD_KEYPOINTS and COCO.dataset_keypoints == OLD_COCO_KEYPOINTS
    assert COCO.limbs == tuple((OLD_KEYPOINTS.index(a), OLD_KEYPOINTS.index(b)) for a, b in OLD_LIMB_NAMES)
    assert COCO.keypoint_flip == tuple(OLD_KEYPOINTS.index(old_mirror(n)) for n in OLD_KEYPOINTS)
    old_pairs = {(i, OLD_KEYPOINTS.index(old_mirror(n))) for i, n in enumerate(OLD_KEYPOINTS) if n.startswith("left_")}
    assert set(left_right_pairs(COCO)) == old_pairs
    assert COCO.draw_limbs == OLD_DRAW_LIMBS and COCO.draw_edges == OLD_COCO_SKELETON
    hues = [colorsys.hsv_to_rgb(i / 30, 0.9, 1.0) for i in range(30)]
    assert COCO.colors_bgr == tuple((int(255 * b), int(255 * g), int(255 * r)) for r, g, b in hues)
    assert COCO.derived == (("neck", "midpoint", ("left_shoulder", "right_shoulder")),)


def test_coco_sigmas_are_pycocotools_defaults():
    # pycocotools divides by 10 (0.26 / 10 is 0.026000000000000002): equal to the last bit or two
    np.testing.assert_allclose(np.array(COCO.sigmas, np.float64), PYCOCOTOOLS_SIGMAS, rtol=1e-15, atol=0)


def test_counts_and_layout():
    assert COCO.num_keypoints == 18 and COCO.num_limbs == 30 and COCO.num_channels == 50
    assert (COCO_LAYOUT.keypoints.start, COCO_LAYOUT.person_mask, COCO_LAYOUT.max_keypoint) == (30, 48, 49)
    assert (COCO_LAYOUT.limbs, COCO_LAYOUT.keypoints) == (slice(0, 30), slice(30, 48))
    assert len(channel_names(COCO)) == 50 and len(set(channel_names(COCO))) == 50


def test_limb_table_matches_the_original():
    assert COCO.limbs[0] == (1, 0) and COCO.limbs[24] == (8, 12) and COCO.limbs[29] == (8, 11)
    assert len(set(map(frozenset, COCO.limbs))) == 30
    limb_from, limb_to = COCO.limb_ends
    assert limb_from.tolist() == [a for a, _ in COCO.limbs] and limb_to.tolist() == [b for _, b in COCO.limbs]


def test_flip_permutations_equal_original_and_are_involutions():
    assert list(COCO.limb_flip) == ORIGINAL_LIMB_FLIP
    assert list(COCO_LAYOUT.flip[30:]) == [30 + i for i in ORIGINAL_HEAT_FLIP]
    perm = np.array(COCO_LAYOUT.flip)
    assert sorted(perm) == list(range(50))
    assert (perm[perm] == np.arange(50)).all()


def test_coco_mapping():
    for internal, coco in ORIGINAL_DT_GT_MAPPING.items():
        assert internal_to_dataset(COCO)[internal] == coco
        assert COCO.dataset_to_internal[coco] == internal
    assert internal_to_dataset(COCO)[COCO.index("neck")] == -1


def test_coco_to_internal_neck_and_visibility():
    coco = np.zeros((2, 17, 3), np.float32)
    coco[0, 5] = (100, 50, 2)  # left shoulder, visible
    coco[0, 6] = (60, 54, 1)  # right shoulder, occluded
    coco[1, 5] = (10, 10, 2)  # only one shoulder: no neck
    out = COCO.to_internal(coco)
    assert out.shape == (2, 18, 3)
    np.testing.assert_allclose(out[0, COCO.index("neck")], (80, 52, 0))
    assert out[0, COCO.keypoints.index("left_shoulder"), 2] == sk.VIS_VISIBLE
    assert out[0, COCO.keypoints.index("right_shoulder"), 2] == sk.VIS_OCCLUDED
    assert out[0, COCO.keypoints.index("nose"), 2] == sk.VIS_UNLABELLED
    assert out[1, COCO.index("neck"), 2] == sk.VIS_UNLABELLED


def test_flip_keypoints_swaps_pairs():
    kp = np.arange(18 * 3, dtype=np.float32).reshape(18, 3)
    flipped = COCO.flip_keypoints(kp)
    for left, right in left_right_pairs(COCO):
        np.testing.assert_array_equal(flipped[left], kp[right])
    np.testing.assert_array_equal(flipped[COCO.index("neck")], kp[COCO.index("neck")])


def test_the_plain_dict_form_round_trips():
    again = skeleton_from_dict(COCO.to_dict(), "a copy")
    assert again == COCO and again.same_layout(COCO) and ChannelLayout.of(again) == COCO_LAYOUT
    assert load_skeleton(COCO.source) is COCO  # a name and its path read the same file once
