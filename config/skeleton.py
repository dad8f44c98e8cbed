"""The one skeleton definition: keypoints, limbs, the 50 output channels, flips and the COCO mapping.

Everything that needs to know which channel is what (targets, loss, decoding, drawing) reads it from here.
Order and indices follow the original Simple Pose code (docs/design.md#skeleton-and-channels), so released weights
line up.

Channel layout (50 channels, docs/design.md#channel-layout):
    0..29   limb heatmaps, in ``LIMBS`` order (scalar maps; the original calls them "paf")
    30..47  keypoint heatmaps, in ``KEYPOINTS`` order
    48      person mask (eroded segmentation of every person; the original calls it "background")
    49      pixel-wise max over the 18 keypoint maps (the original calls it "reverseKeypoint")
"""

from __future__ import annotations

import colorsys

import numpy as np

# Internal keypoint order: COCO's 17 points plus the neck, in the CMU/OpenPose order.
KEYPOINTS: tuple[str, ...] = (
    "nose", "neck",
    "right_shoulder", "right_elbow", "right_wrist",
    "left_shoulder", "left_elbow", "left_wrist",
    "right_hip", "right_knee", "right_ankle",
    "left_hip", "left_knee", "left_ankle",
    "right_eye", "left_eye", "right_ear", "left_ear",
)  # fmt: skip

# COCO's own keypoint order (person_keypoints_*.json).
COCO_KEYPOINTS: tuple[str, ...] = (
    "nose", "left_eye", "right_eye", "left_ear", "right_ear",
    "left_shoulder", "right_shoulder", "left_elbow", "right_elbow",
    "left_wrist", "right_wrist", "left_hip", "right_hip",
    "left_knee", "right_knee", "left_ankle", "right_ankle",
)  # fmt: skip

NECK = KEYPOINTS.index("neck")
NUM_KEYPOINTS = len(KEYPOINTS)  # 18
NUM_COCO_KEYPOINTS = len(COCO_KEYPOINTS)  # 17


def _k(name: str) -> int:
    return KEYPOINTS.index(name)


# 30 undirected limbs ("body parts"), as (from, to) internal keypoint indices. The order matters for
# grouping: limbs are processed in this order and "from" is the end expected to be attached already.
# 0-4 and 9-20 form a neck-rooted spanning tree; 5-8 are extra head links; 21-29 redundant cross links.
LIMBS: tuple[tuple[int, int], ...] = tuple(
    (_k(a), _k(b))
    for a, b in (
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
    )
)  # fmt: skip
NUM_LIMBS = len(LIMBS)  # 30

# Channel layout.
LIMB_START = 0
KEYPOINT_START = LIMB_START + NUM_LIMBS  # 30
PERSON_MASK_CHANNEL = KEYPOINT_START + NUM_KEYPOINTS  # 48
MAX_KEYPOINT_CHANNEL = PERSON_MASK_CHANNEL + 1  # 49
NUM_CHANNELS = MAX_KEYPOINT_CHANNEL + 1  # 50

LIMB_CHANNELS = slice(LIMB_START, KEYPOINT_START)
KEYPOINT_CHANNELS = slice(KEYPOINT_START, PERSON_MASK_CHANNEL)


def channel_names() -> list[str]:
    """Human-readable name of each of the 50 channels, e.g. ``limb:neck-nose``."""
    names = [f"limb:{KEYPOINTS[a]}-{KEYPOINTS[b]}" for a, b in LIMBS]
    names += [f"keypoint:{n}" for n in KEYPOINTS]
    return names + ["person_mask", "max_keypoint"]


def _mirror_name(name: str) -> str:
    if name.startswith("left_"):
        return "right_" + name[5:]
    if name.startswith("right_"):
        return "left_" + name[6:]
    return name


# Keypoint i of a mirrored person is keypoint KEYPOINT_FLIP[i] of the original.
KEYPOINT_FLIP: tuple[int, ...] = tuple(KEYPOINTS.index(_mirror_name(n)) for n in KEYPOINTS)


def _limb_flip() -> tuple[int, ...]:
    pairs = [frozenset(limb) for limb in LIMBS]
    out = []
    for a, b in LIMBS:
        mirrored = frozenset((KEYPOINT_FLIP[a], KEYPOINT_FLIP[b]))
        out.append(pairs.index(mirrored))
    return tuple(out)


LIMB_FLIP: tuple[int, ...] = _limb_flip()

# Output channel c of a prediction on a mirrored image holds what channel CHANNEL_FLIP[c] holds on the
# original image (a permutation and an involution).
CHANNEL_FLIP: tuple[int, ...] = (
    tuple(LIMB_START + j for j in LIMB_FLIP)
    + tuple(KEYPOINT_START + j for j in KEYPOINT_FLIP)
    + (PERSON_MASK_CHANNEL, MAX_KEYPOINT_CHANNEL)
)

# Left/right pairs (left index, right index) used to swap keypoints of a horizontally flipped sample.
LEFT_RIGHT_PAIRS: tuple[tuple[int, int], ...] = tuple(
    (i, KEYPOINT_FLIP[i]) for i, n in enumerate(KEYPOINTS) if n.startswith("left_")
)

# COCO <-> internal mapping. COCO_TO_INTERNAL[c] is the internal index of COCO keypoint c;
# INTERNAL_TO_COCO[i] is the COCO index of internal keypoint i, or -1 for the neck.
COCO_TO_INTERNAL: tuple[int, ...] = tuple(KEYPOINTS.index(n) for n in COCO_KEYPOINTS)
INTERNAL_TO_COCO: tuple[int, ...] = tuple(COCO_KEYPOINTS.index(n) if n in COCO_KEYPOINTS else -1 for n in KEYPOINTS)

# Limbs drawn by the demo (the original's draw_list): the tree without the neck-to-head links.
DRAW_LIMBS: tuple[int, ...] = (0, *range(5, 21), 29)

# One BGR colour per limb for drawing, cycling through the hue circle in limb order.
LIMB_COLORS_BGR: tuple[tuple[int, int, int], ...] = tuple(
    (int(255 * b), int(255 * g), int(255 * r))
    for r, g, b in (colorsys.hsv_to_rgb(i / NUM_LIMBS, 0.9, 1.0) for i in range(NUM_LIMBS))
)

# COCO's 19-edge skeleton over COCO keypoint indices (0-based), used to draw COCO-format people.
COCO_SKELETON: tuple[tuple[int, int], ...] = (
    (15, 13), (13, 11), (16, 14), (14, 12), (11, 12), (5, 11), (6, 12), (5, 6), (5, 7), (6, 8),
    (7, 9), (8, 10), (1, 2), (0, 1), (0, 2), (1, 3), (2, 4), (3, 5), (4, 6),
)  # fmt: skip

# Visibility codes inside the project (docs/design.md#keypoints): 1 visible (COCO v=2), 0 occluded (COCO v=1),
# 2 not annotated (COCO v=0). A keypoint takes part in the targets iff v < 2.
VIS_OCCLUDED, VIS_VISIBLE, VIS_UNLABELLED = 0, 1, 2


def coco_to_internal(coco_keypoints: np.ndarray) -> np.ndarray:
    """Convert COCO keypoints to the internal 18-point layout.

    Args:
        coco_keypoints: (P, 17, 3) array of (x, y, v) with COCO visibility (0 unlabelled, 1 occluded,
            2 visible), image pixels.
    Returns:
        (P, 18, 3) float32 array of (x, y, v) with internal visibility codes (1 visible, 0 occluded,
        2 unlabelled). The neck is the shoulders' midpoint when both shoulders are labelled, with the
        smaller of their codes; otherwise it is unlabelled at (0, 0).
    """
    kp = np.asarray(coco_keypoints, dtype=np.float32).reshape(-1, NUM_COCO_KEYPOINTS, 3)
    out = np.zeros((kp.shape[0], NUM_KEYPOINTS, 3), np.float32)
    out[:, :, 2] = VIS_UNLABELLED
    vis = np.full(kp.shape[:2], VIS_UNLABELLED, np.float32)
    vis[kp[:, :, 2] == 2] = VIS_VISIBLE
    vis[kp[:, :, 2] == 1] = VIS_OCCLUDED
    out[:, COCO_TO_INTERNAL, :2] = kp[:, :, :2]
    out[:, COCO_TO_INTERNAL, 2] = vis
    rs, ls = _k("right_shoulder"), _k("left_shoulder")
    both = (out[:, rs, 2] < 2) & (out[:, ls, 2] < 2)
    out[both, NECK, :2] = (out[both, rs, :2] + out[both, ls, :2]) / 2
    out[both, NECK, 2] = np.minimum(out[both, rs, 2], out[both, ls, 2])
    return out


def flip_keypoints_left_right(keypoints: np.ndarray) -> np.ndarray:
    """Swap the left and right keypoint rows of (..., 18, C) keypoints (x, y and v move together)."""
    return keypoints[..., KEYPOINT_FLIP, :]
