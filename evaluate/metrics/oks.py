"""Object keypoint similarity (COCO's OKS) between two sets of poses, and the scale a person is judged at.

    area = person_area(xy, found, BodyTemplate.of(skeleton))           # (n,) px^2
    similarity, shared = oks_matrix(a_xy, a_found, b_xy, b_found, skeleton.sigmas, np.maximum.outer(area, area))

OKS of poses a and b: the mean over the counted keypoints of exp(-d^2 / (2 s^2 (2 sigma)^2)), d the distance of the
keypoint in a and in b (px), sigma the keypoint's (``Skeleton.sigmas``), s^2 an area (px^2). COCO's evaluation
counts the ground truth's visible keypoints (a keypoint the other pose lacks adds 0) and takes the annotation's
area; the tracker counts the keypoints found in both and takes ``person_area``.

A person seen by a few keypoints has a small keypoint box (a face: about 20 x 4 px for someone 200 px tall), and an
OKS at that scale falls to ~0 for 1 px of noise. ``person_area`` is the box area of the keypoints found or, where
larger, the box area of a whole body of the size the keypoints found show: their spread (root mean square distance
from their centroid) against the spread of the same keypoints in ``BodyTemplate``'s upright frontal body of height 1
(a person's proportions, by keypoint name), squared and times that body's box area. Skeletons with fewer than
``MIN_TEMPLATE_KEYPOINTS`` keypoints of a human body by name (an animal's) keep the keypoint box.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from simplepose.config.skeleton import Skeleton

# An upright frontal person of height 1 (head top 0, soles 1), y down, the person's left at +x: body proportions of
# an adult (shoulders 0.25 apart, hip joints 0.18, the upper arm 0.19 long, the forearm 0.15, thigh and shank 0.24),
# by the keypoint names of the skeletons in config/skeletons/ ("head": CrowdPose's and Halpe's head top).
_BODY = {
    "head_top": (0.0, 0.0),
    "head": (0.0, 0.0),
    "nose": (0.0, 0.09),
    "upper_neck": (0.0, 0.13),
    "neck": (0.0, 0.17),
    "thorax": (0.0, 0.19),
    "pelvis": (0.0, 0.48),
    "hip": (0.0, 0.48),
}
_SIDE = {
    "eye": (0.018, 0.068),
    "ear": (0.045, 0.075),
    "shoulder": (0.125, 0.185),
    "elbow": (0.15, 0.37),
    "wrist": (0.16, 0.515),
    "hip": (0.09, 0.48),
    "knee": (0.09, 0.715),
    "ankle": (0.085, 0.955),
    "heel": (0.08, 0.985),
    "big_toe": (0.1, 1.0),
    "small_toe": (0.13, 0.995),
}
for _part, (_x, _y) in _SIDE.items():
    _BODY[f"left_{_part}"], _BODY[f"right_{_part}"] = (_x, _y), (-_x, _y)
MIN_TEMPLATE_KEYPOINTS = 6  # of a skeleton's keypoints with a place in the body: a human skeleton
MIN_SPREAD = 0.01  # of the height: keypoints found closer together than this in the body say nothing of its size


@dataclasses.dataclass(frozen=True)
class BodyTemplate:
    """Where a skeleton's dataset keypoints lie on an upright frontal body of height 1: ``points`` (K, 2), NaN for
    keypoints with no place in it (a hand's, a face's contour); ``whole_area``: the box area of all its placed
    keypoints (height^2)."""

    points: np.ndarray
    whole_area: float
    placed: np.ndarray = dataclasses.field(init=False, repr=False)
    zeroed: np.ndarray = dataclasses.field(init=False, repr=False)
    square: np.ndarray = dataclasses.field(init=False, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "placed", ~np.isnan(self.points[:, 0]))  # (K,)
        object.__setattr__(self, "zeroed", np.nan_to_num(self.points))  # (K, 2), 0 where not placed
        object.__setattr__(self, "square", (self.zeroed**2).sum(1))  # (K,)

    @classmethod
    def of(cls, skeleton: Skeleton) -> BodyTemplate | None:
        """The template of ``skeleton``, or None when fewer than MIN_TEMPLATE_KEYPOINTS of its keypoints are a human
        body's by name."""
        points = np.array([_BODY.get(name, (np.nan, np.nan)) for name in skeleton.dataset_keypoints], np.float64)
        placed = points[~np.isnan(points[:, 0])]
        if len(placed) < MIN_TEMPLATE_KEYPOINTS:
            return None
        return cls(points, float(np.prod(placed.max(0) - placed.min(0))))


def person_area(xy: np.ndarray, found: np.ndarray, template: BodyTemplate | None) -> np.ndarray:
    """(n,) the area (px^2) poses (n, K, 2) found where ``found`` (n, K) are judged at (module docstring): their
    keypoint box's, or where larger, the box's of a whole body of their size (``template``; None: the box's)."""
    inside = np.where(found[..., None], xy, np.nan)
    side = np.fmax.reduce(inside, axis=1) - np.fmin.reduce(inside, axis=1)  # NaN for a pose with none found
    area = np.nan_to_num(side[:, 0] * side[:, 1])
    if template is None:
        return area
    use = found & template.placed
    n = use.sum(1)
    w = use / np.maximum(n, 1)[:, None]  # (n, K): the mean over the keypoints used
    seen = np.where(use[..., None], xy, 0.0)
    seen_spread2 = (w * (seen[..., 0] ** 2 + seen[..., 1] ** 2)).sum(1) - ((w[..., None] * seen).sum(1) ** 2).sum(1)
    body_spread2 = w @ template.square - ((w @ template.zeroed) ** 2).sum(1)
    usable = (n >= 2) & (body_spread2 >= MIN_SPREAD**2)
    height2 = np.where(usable, np.maximum(seen_spread2, 0.0) / np.where(usable, body_spread2, 1.0), 0.0)
    return np.maximum(area, template.whole_area * height2)


def oks_matrix(
    a_xy: np.ndarray,
    a_found: np.ndarray,
    b_xy: np.ndarray,
    b_found: np.ndarray,
    sigmas,
    area: np.ndarray,
    over: str = "both",
) -> tuple[np.ndarray, np.ndarray]:
    """((P, T) OKS, (P, T) keypoints found in both) of P poses a and T poses b ((n, K, 2) px, any value where not
    found; (n, K) found). ``sigmas``: (K,); ``area``: the scale s^2 (px^2), (P, T) or broadcast to it (floored at
    1). ``over``: "both", the mean over the keypoints found in both (the tracker's); "a", over a's (COCO's: a is the
    ground truth, a keypoint that b lacks counts 0)."""
    if over not in ("both", "a"):
        raise ValueError(f"oks_matrix: over must be 'both' or 'a', got {over!r}")
    shared = a_found[:, None, :] & b_found[None, :, :]  # (P, T, K)
    count = shared.sum(-1)
    diff = a_xy[:, None] - b_xy[None]
    d2 = diff[..., 0] ** 2 + diff[..., 1] ** 2  # (a sum over a last axis of 2 is several times slower)
    k2 = (2 * np.asarray(sigmas, np.float64)) ** 2
    scale2 = np.maximum(np.broadcast_to(area, count.shape), 1.0)
    e = np.exp(np.where(shared, d2, 0.0) / (-2 * scale2[..., None] * k2))
    counted = count if over == "both" else np.broadcast_to(a_found.sum(-1)[:, None], count.shape)
    return np.where(shared, e, 0.0).sum(-1) / np.maximum(counted, 1), count
