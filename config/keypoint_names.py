"""One keypoint, however a dataset spells it: the key two names share when they name the same point.

    point_key("Right Shoulder") == point_key("RShoulder") == point_key("r shoulder") == point_key("right_shoulder")
    point_key("head") == point_key("Head top")      # the synonym table: both are the top of the head

The rule (docs/keypoint_sets.md#keypoint-names), in order:

1. words: camel case split (``RShoulder`` -> ``R Shoulder``, ``LBigToe`` -> ``L Big Toe``), lower case, split on
   spaces, hyphens, underscores and dots;
2. sides: a word ``r`` / ``l`` is ``right`` / ``left``, and a side written last (``shoulder_l``) moves first; a side
   is never changed into the other, so left stays left;
3. the words joined without separators (``rightankle``) and looked up in ``SYNONYMS``, a short table of the names
   datasets give one point (``head`` for CrowdPose's and Halpe's top of the head, ``head_top`` for AI Challenger's,
   MPII's and PoseTrack's; ``MidHip`` for OpenPose's hip centre, ``hip`` for Halpe's).

Points that are near but not the same stay apart: MPII's ``upper_neck`` and ``thorax`` are not a neck, its
``pelvis`` not Halpe's hip centre, PoseTrack's ``head_bottom`` not COCO's eyes.
"""

from __future__ import annotations

import re

_SIDES = {"r": "right", "l": "left", "right": "right", "left": "left"}

# joined words -> the point's key (the same joined form of one of its names)
SYNONYMS: dict[str, str] = {
    "head": "headtop",  # CrowdPose, Halpe, OCHuman: the top of the head
    "topofhead": "headtop",
    "tophead": "headtop",
    "midhip": "hip",  # OpenPose BODY_25's hip centre; Halpe's 'hip'
}


def words(name: str) -> list[str]:
    """``"LBigToe"`` -> ``["left", "big", "toe"]``; ``"Right-ankle"`` -> ``["right", "ankle"]`` (steps 1 and 2)."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", name)
    parts = [w for w in re.split(r"[\s_.\-]+", spaced.lower()) if w]
    if len(parts) > 1 and parts[-1] in _SIDES and parts[0] not in _SIDES:
        parts = [parts[-1], *parts[:-1]]
    if len(parts) > 1 and parts[0] in _SIDES:
        parts[0] = _SIDES[parts[0]]
    return parts


def point_key(name: str) -> str:
    """The key of the point ``name`` names: equal for two spellings of one point (module docstring)."""
    joined = "".join(words(name))
    for side in ("right", "left"):
        if joined.startswith(side) and joined != side:
            rest = joined[len(side) :]
            return side + SYNONYMS.get(rest, rest)
    return SYNONYMS.get(joined, joined)
