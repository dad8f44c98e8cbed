"""Drawing decoded people on an image (dataset-order keypoints, the skeleton's result edges and colours), with
each person's box and score (``draw_detections``), and tracked people: each id in its own colour, with its number,
score and a short trail of where it was (``draw_tracked``). Lines, dots and text grow with the image (set for
640 px; the text never smaller than OpenCV's 0.4 scale, about 9 px high), so that a label stays readable on a
thumbnail and on a 4K frame."""

from __future__ import annotations

import colorsys
from collections import deque
from collections.abc import Sequence

import cv2
import numpy as np

from simplepose.config.skeleton import Skeleton


def draw_people(
    image: np.ndarray,
    keypoints: np.ndarray,
    skeleton: Skeleton,
    thickness: int = 3,
    radius: int = 4,
    alpha: float = 0.6,
    person_colors: Sequence[tuple[int, int, int]] | None = None,
) -> np.ndarray:
    """A copy of a BGR image with skeletons drawn.

    Args:
        image: (H, W, 3) uint8 BGR.
        keypoints: (P, D, 3) the skeleton's dataset order (x, y, score); score 0 = not found (not drawn).
        skeleton: its ``draw_edges`` are drawn, edge k in colour ``colors_bgr[k % L]``.
        alpha: opacity of the limbs over the photo (the original blended 0.6 new / 0.4 old).
        person_colors: one BGR colour per person for all its limbs (tracked people), instead of the edges'.
    """
    canvas = image.copy()
    limbs = canvas.copy()
    t, r = _sizes(image, thickness, radius)
    people = np.asarray(keypoints).reshape(-1, skeleton.num_dataset_keypoints, 3)
    colors = skeleton.colors_bgr
    for i, person in enumerate(people):
        found = person[:, 2] > 0
        for k, (a, b) in enumerate(skeleton.draw_edges):
            if found[a] and found[b]:
                pa = tuple(int(round(v)) for v in person[a, :2])
                pb = tuple(int(round(v)) for v in person[b, :2])
                color = person_colors[i] if person_colors is not None else colors[k % len(colors)]
                cv2.line(limbs, pa, pb, color, t, cv2.LINE_AA)
    canvas = cv2.addWeighted(limbs, alpha, canvas, 1 - alpha, 0)
    for person in people:
        for x, y, s in person:
            if s > 0:
                cv2.circle(canvas, (int(round(x)), int(round(y))), r, (0, 0, 0), -1, cv2.LINE_AA)
                cv2.circle(canvas, (int(round(x)), int(round(y))), max(1, r - 2), (255, 255, 255), -1, cv2.LINE_AA)
    return canvas


TRAIL_FRAMES = 15  # frames of a tracked person's trail
FONT = cv2.FONT_HERSHEY_SIMPLEX
MIN_FONT_SCALE = 0.4  # OpenCV's font scale: about 9 px high, the smallest that reads well


def draw_detections(image: np.ndarray, people: Sequence, skeleton: Skeleton, thickness: int = 3) -> np.ndarray:
    """A copy of a BGR image with people (``Person``: keypoints, score, box) drawn: skeletons in the edges'
    colours, and each person's box in a colour of its own (``track_color`` of its place in the list, from 1) with
    its score (2 decimals) on a tag at the box's top-left corner."""
    keypoints = np.array([p.keypoints for p in people]).reshape(len(people), skeleton.num_dataset_keypoints, 3)
    canvas = draw_people(image, keypoints, skeleton, thickness=thickness)
    colors = [track_color(i + 1) for i in range(len(people))]
    return draw_boxes(canvas, [p.box for p in people], [f"{p.score:.2f}" for p in people], colors, thickness)


def draw_boxes(
    image: np.ndarray,
    boxes: Sequence[tuple[float, float, float, float]],
    labels: Sequence[str],
    colors: Sequence[tuple[int, int, int]],
    thickness: int = 3,
) -> np.ndarray:
    """A copy of a BGR image with each box (x, y, w, h in pixels, around the keypoints: drawn a few pixels wider so
    that it does not cover the outer ones) outlined in its colour, and its label written on a tag of that colour at
    the top-left corner, above the box where there is room, else inside it; the tag is kept inside the image.
    Boxes that are not finite (a person without keypoints) are skipped."""
    canvas = image.copy()
    h, w = image.shape[:2]
    t, _ = _sizes(image, thickness, 4)
    line = max(1, t // 2)
    font_scale, text_thickness = _text_size(image)
    pad = 2 * line + 1
    for box, label, color in zip(boxes, labels, colors):
        if not np.isfinite(box).all():
            continue
        x0, y0 = int(round(box[0])) - pad, int(round(box[1])) - pad
        x1, y1 = int(round(box[0] + box[2])) + pad, int(round(box[1] + box[3])) + pad
        cv2.rectangle(canvas, (x0, y0), (x1, y1), color, line, cv2.LINE_AA)
        if not label:
            continue
        (tw, th), base = cv2.getTextSize(label, FONT, font_scale, text_thickness)
        margin = max(1, round(th * 0.25))
        tag_w, tag_h = tw + 2 * margin, th + base + 2 * margin
        left = min(max(x0, 0), max(0, w - tag_w))
        top = y0 - tag_h if y0 - tag_h >= 0 else max(0, y0)  # above the box, else inside its top
        top = min(top, max(0, h - tag_h))
        cv2.rectangle(canvas, (left, top), (left + tag_w, top + tag_h), color, -1)
        ink = (0, 0, 0) if sum(c * k for c, k in zip(color, (0.114, 0.587, 0.299))) > 140 else (255, 255, 255)
        cv2.putText(
            canvas, label, (left + margin, top + margin + th), FONT, font_scale, ink, text_thickness, cv2.LINE_AA
        )
    return canvas


def _text_size(image: np.ndarray) -> tuple[float, int]:
    """OpenCV font scale and stroke for labels on this image: 0.5 at 640 px, in proportion above, MIN_FONT_SCALE
    at least."""
    scale = max(MIN_FONT_SCALE, 0.5 * max(image.shape[:2]) / 640)
    return scale, max(1, round(scale * 2))


def _sizes(image: np.ndarray, thickness: int, radius: int) -> tuple[int, int]:
    """Line thickness and dot radius for the image's size (set for 640 px)."""
    scale = max(1.0, max(image.shape[:2]) / 640)
    return max(1, round(thickness * scale)), max(1, round(radius * scale))


def track_color(track_id: int) -> tuple[int, int, int]:
    """A saturated BGR colour of its own per track id: ids one apart lie far apart on the hue circle."""
    hue = (track_id * 0.618033988749895) % 1.0  # the golden ratio: every next id falls in the largest gap
    r, g, b = colorsys.hsv_to_rgb(hue, 0.85, 1.0)
    return int(255 * b), int(255 * g), int(255 * r)


class Trails:
    """Where each tracked person was over the last ``length`` frames: ``update(people)`` once per frame, then
    ``draw_tracked(image, people, skeleton, trails)``."""

    def __init__(self, length: int = TRAIL_FRAMES):
        self.length = length
        self.points: dict[int, deque] = {}  # track id -> (x, y) per frame, None where not seen
        self._frame = 0

    def update(self, people: Sequence) -> None:
        """Add a frame's tracked people (``Person`` with ``track_id``; a trail follows the mean of the found
        keypoints); forget ids not seen for ``length`` frames."""
        seen = {}
        for p in people:
            found = p.keypoints[:, 2] > 0
            if p.track_id is not None and found.any():
                seen[p.track_id] = tuple(p.keypoints[found, :2].mean(0))
        for track_id in set(self.points) | set(seen):
            trail = self.points.setdefault(track_id, deque(maxlen=self.length))
            trail.append(seen.get(track_id))
            if all(point is None for point in trail):
                del self.points[track_id]


def draw_tracked(
    image: np.ndarray, people: Sequence, skeleton: Skeleton, trails: Trails | None = None, thickness: int = 3
) -> np.ndarray:
    """A copy of a BGR image with tracked people (``Person`` with ``track_id``) drawn, each id in its own colour
    (``track_color``): skeleton, box and a tag ``#<id> <score>``, with its trail (``trails``: the last frames, older
    points fainter)."""
    colors = [track_color(p.track_id or 0) for p in people]
    keypoints = np.array([p.keypoints for p in people]).reshape(len(people), skeleton.num_dataset_keypoints, 3)
    canvas = draw_people(image, keypoints, skeleton, thickness=thickness, person_colors=colors)
    t, _ = _sizes(image, thickness, 4)
    for track_id, trail in trails.points.items() if trails else ():
        points = list(trail)
        for k in range(1, len(points)):
            if points[k - 1] is not None and points[k] is not None:
                fade = k / len(points)
                color = tuple(int(c * fade) for c in track_color(track_id))
                a, b = (tuple(int(round(v)) for v in points[j]) for j in (k - 1, k))
                cv2.line(canvas, a, b, color, max(1, round(t * fade)), cv2.LINE_AA)
    labels = [f"#{p.track_id} {p.score:.2f}" if p.track_id is not None else f"{p.score:.2f}" for p in people]
    return draw_boxes(canvas, [p.box for p in people], labels, colors, thickness)
