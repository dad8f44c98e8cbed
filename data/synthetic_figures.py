"""Articulated figures of any skeleton, for the synthetic dataset
(``python -m simplepose.data.synthetic --skeleton FILE``).

A figure is built from the skeleton's limb graph alone (docs/keypoint_sets.md#synthetic-figures). A tree walk from the
root (the first limb's "from" keypoint: skeleton files list their spanning tree root outwards) gives every other
keypoint a parent; each tree limb is a segment whose direction is its parent limb's turned by a rest angle plus a
random bend, like a joint, and whose length varies by +-20 %. Rest angles make the figure mirror-symmetric: the two
keypoints of a flip pair leave a common parent at mirrored angles, each always on the same side of the body axis
(as for a person facing the camera: the person's left on the viewer's right), and keypoints without a mirror keep to
the middle line. So the left/right cue is the side of the body axis, which survives the horizontal flip of training
(a mirrored figure with its pairs swapped is again such a figure), and each figure is drawn mirrored that way half
the time (for a side view without flip pairs: facing the other way). Limbs are drawn as thick segments, a limb and
its mirror in the same colour, the root as a disc and every keypoint as a dark dot; derived keypoints sit where their
rule puts them.
"""

from __future__ import annotations

import colorsys
import math
from collections.abc import Sequence

import cv2
import numpy as np

from simplepose.config.skeleton import Skeleton

ROOT_CENTRAL = (0, 180, 90, -90, 45, -45, 135, -135)  # degrees clockwise from up: the root's middle-line children
CHILD_CENTRAL = (0, 60, -60, 120, -120)  # turn from the parent limb: further middle-line children
CHILD_SIDED = (0, 35, -35, 70, -70)  # turn (outwards) from the parent limb: a sided keypoint's children
# A figure's box has the area of a standing person's (height 1, width about 0.36) and no side above 1: wide
# figures (an animal) then crowd the picture no more than people do.
BOX_MEAN_SIDE = 0.6
LIMB_WIDTH = 0.05  # of the figure's size (its box's longer side at most)
DOT = 0.012
_DARK = (25, 25, 25)


def _direction(angle_deg: float) -> np.ndarray:
    """Unit vector of an angle measured clockwise from up, in image coordinates (x right, y down)."""
    a = math.radians(angle_deg)
    return np.array([math.sin(a), -math.cos(a)])


class Figure:
    """The figure of one skeleton: ``pose(rng)`` draws a random pose, ``draw(...)`` paints it."""

    def __init__(self, skeleton: Skeleton):
        self.skeleton = skeleton
        self.num_keypoints = skeleton.num_dataset_keypoints
        self.side = _sides(skeleton)
        self.root = skeleton.limbs[0][0]
        self.order, self.parent = _tree_walk(skeleton.limbs, self.root, skeleton.num_keypoints)
        self.rest = _rest_angles(self.order, self.parent, self.side, skeleton.keypoint_flip)
        kinds = {v: _limb_kind(self.parent[v], v, skeleton.keypoint_flip) for v in self.order[1:]}
        palette = dict(zip(sorted(set(kinds.values())), _palette(len(set(kinds.values())))))
        self.colours = {v: palette[kind] for v, kind in kinds.items()}  # a limb and its mirror alike

    def pose(self, rng: np.random.Generator) -> np.ndarray:
        """(D, 2) dataset-order keypoints (x, y) of a random pose, root at the origin, scaled so that its box's
        sides have the geometric mean ``BOX_MEAN_SIDE`` (none above 1)."""
        points = np.zeros((self.skeleton.num_keypoints, 2))
        heading = {self.root: 0.0}
        for v in self.order[1:]:
            u = self.parent[v]
            bend = self.side[v] * rng.uniform(-20, 40) if self.side[v] else rng.uniform(-15, 15)
            heading[v] = (0.0 if u == self.root else heading[u]) + self.rest[v] + bend
            points[v] = points[u] + rng.uniform(0.8, 1.2) * _direction(heading[v])
        if rng.random() < 0.5:  # the mirrored figure, its pairs swapped: for a side view, facing the other way
            points = points[list(self.skeleton.keypoint_flip)] * (-1, 1)
        points = self._with_derived(points)
        width, height = (max(float(np.ptp(points[:, k])), 1e-9) for k in (0, 1))
        points *= min(BOX_MEAN_SIDE / math.sqrt(width * height), 1 / max(width, height))
        return points[list(self.skeleton.dataset_to_internal)]

    def _with_derived(self, points: np.ndarray) -> np.ndarray:
        """Internal points with every derived keypoint moved to its rule's place (the mean of its sources)."""
        for name, _, sources in self.skeleton.derived:
            points[self.skeleton.index(name)] = points[[self.skeleton.index(s) for s in sources]].mean(0)
        return points

    def internal_points(self, keypoints: np.ndarray) -> np.ndarray:
        """(K, 2) internal-order points of (D, 2) dataset-order keypoints, derived keypoints included."""
        points = np.zeros((self.skeleton.num_keypoints, 2))
        points[list(self.skeleton.dataset_to_internal)] = keypoints
        return self._with_derived(points)

    def draw(self, img: np.ndarray, mask: np.ndarray, keypoints: np.ndarray, size: float, rng) -> None:
        """Paint the figure of (D, 2) image keypoints of a pose scaled by ``size`` pixels; mark its pixels in
        ``mask``."""
        shade = rng.uniform(0.7, 1.15)
        points = self.internal_points(keypoints)
        pt = [tuple(int(round(c)) for c in p) for p in points]
        width = max(1, int(round(LIMB_WIDTH * size)))
        for v in self.order[1:]:
            colour = tuple(int(min(255, c * shade)) for c in self.colours[v])
            cv2.line(img, pt[self.parent[v]], pt[v], colour, width, cv2.LINE_AA)
            cv2.line(mask, pt[self.parent[v]], pt[v], 255, width)
        cv2.circle(img, pt[self.root], width, (150, 180, 225), -1, cv2.LINE_AA)
        cv2.circle(mask, pt[self.root], width, 255, -1)
        dot = max(1, int(round(DOT * size)))
        for p in pt:
            cv2.circle(img, p, dot + 1, _DARK, -1, cv2.LINE_AA)


def _limb_kind(a: int, b: int, mirror: Sequence[int]) -> tuple[int, int]:
    """The same key for limb (a, b) and its mirror."""
    ma, mb = mirror[a], mirror[b]
    return min((min(a, b), max(a, b)), (min(ma, mb), max(ma, mb)))


def _sides(skeleton: Skeleton) -> list[int]:
    """Per internal keypoint: +1 the figure's left (the first of a flip pair, unless only its partner is named
    left), -1 its right, 0 on the middle line."""
    side = [0] * skeleton.num_keypoints
    for a, b in skeleton.flip_pairs:
        right_first = "right" in a.lower() and "left" in b.lower()
        side[skeleton.index(a)], side[skeleton.index(b)] = (-1, 1) if right_first else (1, -1)
    return side


def _tree_walk(limbs: Sequence[tuple[int, int]], root: int, count: int) -> tuple[list[int], list[int]]:
    """(keypoints in walk order, parent of each; -1 for the root): each keypoint is reached through the first limb,
    in limb order, that joins it to one already reached (the skeleton's limbs join every keypoint)."""
    parent = [-2] * count
    parent[root] = -1
    order = [root]
    grew = True
    while grew:
        grew = False
        for a, b in limbs:
            for u, v in ((a, b), (b, a)):
                if parent[u] != -2 and parent[v] == -2:
                    parent[v] = u
                    order.append(v)
                    grew = True
    return order, parent


def _rest_angles(order: list[int], parent: list[int], side: list[int], mirror: Sequence[int]) -> list[float]:
    """Rest angle of every keypoint's limb, degrees: from up for the root's children, else a turn from the parent
    limb. Mirrored keypoints get mirrored angles."""
    rest = [0.0] * len(parent)
    root = order[0]
    for u in order:
        kids = [v for v in order if parent[v] == u]
        central = [v for v in kids if side[v] == 0]
        lefts = [v for v in kids if side[v] > 0 and mirror[v] in kids]
        lone = [v for v in kids if side[v] != 0 and mirror[v] not in kids]
        outward = side[u] or 1
        for j, v in enumerate(central):
            rest[v] = ROOT_CENTRAL[j % len(ROOT_CENTRAL)] if u == root else outward * CHILD_CENTRAL[j % 5]
        for k, v in enumerate(lefts):
            angle = 70 + 90 * (k + 0.5) / len(lefts) if u == root else min(35 + 40 * k, 150)
            rest[v], rest[mirror[v]] = angle, -angle
        for j, v in enumerate(lone):
            rest[v] = side[v] * (90 if u == root else CHILD_SIDED[j % 5])
    return rest


def _palette(n: int) -> list[tuple[int, int, int]]:
    """``n`` distinct saturated BGR colours, neighbours in the list far apart on the hue circle."""
    step = 0.381966  # the golden angle as a fraction of the circle
    rgb = [colorsys.hsv_to_rgb((i * step) % 1.0, 0.75, 0.9) for i in range(n)]
    return [(int(255 * b), int(255 * g), int(255 * r)) for r, g, b in rgb]
