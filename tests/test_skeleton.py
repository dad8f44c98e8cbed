import numpy as np

from config import skeleton as sk

# The original's hand-written flip tables (docs/design.md#flip-permutations); ours are derived from the names.
ORIGINAL_LIMB_FLIP = [0, 2, 1, 4, 3, 6, 5, 8, 7, 12, 13, 14, 9, 10, 11, 18, 19, 20, 15, 16, 17, 22, 21, 25,
                      26, 23, 24, 28, 27, 29]  # fmt: skip
ORIGINAL_HEAT_FLIP = [0, 1, 5, 6, 7, 2, 3, 4, 11, 12, 13, 8, 9, 10, 15, 14, 17, 16, 18, 19]
ORIGINAL_DT_GT_MAPPING = {0: 0, 2: 6, 3: 8, 4: 10, 5: 5, 6: 7, 7: 9, 8: 12, 9: 14, 10: 16, 11: 11, 12: 13,
                          13: 15, 14: 2, 15: 1, 16: 4, 17: 3}  # fmt: skip


def test_counts_and_layout():
    assert sk.NUM_KEYPOINTS == 18 and sk.NUM_LIMBS == 30 and sk.NUM_CHANNELS == 50
    assert (sk.KEYPOINT_START, sk.PERSON_MASK_CHANNEL, sk.MAX_KEYPOINT_CHANNEL) == (30, 48, 49)
    assert len(sk.channel_names()) == 50 and len(set(sk.channel_names())) == 50


def test_limb_table_matches_the_original():
    assert sk.LIMBS[0] == (1, 0) and sk.LIMBS[24] == (8, 12) and sk.LIMBS[29] == (8, 11)
    assert len(set(map(frozenset, sk.LIMBS))) == 30


def test_flip_permutations_equal_original_and_are_involutions():
    assert list(sk.LIMB_FLIP) == ORIGINAL_LIMB_FLIP
    assert list(sk.CHANNEL_FLIP[30:]) == [30 + i for i in ORIGINAL_HEAT_FLIP]
    perm = np.array(sk.CHANNEL_FLIP)
    assert sorted(perm) == list(range(50))
    assert (perm[perm] == np.arange(50)).all()


def test_coco_mapping():
    for internal, coco in ORIGINAL_DT_GT_MAPPING.items():
        assert sk.INTERNAL_TO_COCO[internal] == coco
        assert sk.COCO_TO_INTERNAL[coco] == internal
    assert sk.INTERNAL_TO_COCO[sk.NECK] == -1


def test_coco_to_internal_neck_and_visibility():
    coco = np.zeros((2, 17, 3), np.float32)
    coco[0, 5] = (100, 50, 2)  # left shoulder, visible
    coco[0, 6] = (60, 54, 1)  # right shoulder, occluded
    coco[1, 5] = (10, 10, 2)  # only one shoulder: no neck
    out = sk.coco_to_internal(coco)
    assert out.shape == (2, 18, 3)
    np.testing.assert_allclose(out[0, sk.NECK], (80, 52, 0))
    assert out[0, sk.KEYPOINTS.index("left_shoulder"), 2] == sk.VIS_VISIBLE
    assert out[0, sk.KEYPOINTS.index("right_shoulder"), 2] == sk.VIS_OCCLUDED
    assert out[0, sk.KEYPOINTS.index("nose"), 2] == sk.VIS_UNLABELLED
    assert out[1, sk.NECK, 2] == sk.VIS_UNLABELLED


def test_flip_keypoints_swaps_pairs():
    kp = np.arange(18 * 3, dtype=np.float32).reshape(18, 3)
    flipped = sk.flip_keypoints_left_right(kp)
    for left, right in sk.LEFT_RIGHT_PAIRS:
        np.testing.assert_array_equal(flipped[left], kp[right])
    np.testing.assert_array_equal(flipped[sk.NECK], kp[sk.NECK])
