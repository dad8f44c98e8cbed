"""Drawing decoded people on an image (dataset-order keypoints, the skeleton's result edges and colours)."""

from __future__ import annotations

import cv2
import numpy as np

from config.skeleton import Skeleton


def draw_people(
    image: np.ndarray,
    keypoints: np.ndarray,
    skeleton: Skeleton,
    thickness: int = 3,
    radius: int = 4,
    alpha: float = 0.6,
) -> np.ndarray:
    """A copy of a BGR image with skeletons drawn.

    Args:
        image: (H, W, 3) uint8 BGR.
        keypoints: (P, D, 3) the skeleton's dataset order (x, y, score); score 0 = not found (not drawn).
        skeleton: its ``draw_edges`` are drawn, edge k in colour ``colors_bgr[k % L]``.
        alpha: opacity of the limbs over the photo (the original blended 0.6 new / 0.4 old).
    """
    canvas = image.copy()
    limbs = canvas.copy()
    scale = max(1.0, max(image.shape[:2]) / 640)
    t, r = max(1, round(thickness * scale)), max(1, round(radius * scale))
    people = np.asarray(keypoints).reshape(-1, skeleton.num_dataset_keypoints, 3)
    colors = skeleton.colors_bgr
    for person in people:
        found = person[:, 2] > 0
        for k, (a, b) in enumerate(skeleton.draw_edges):
            if found[a] and found[b]:
                pa = tuple(int(round(v)) for v in person[a, :2])
                pb = tuple(int(round(v)) for v in person[b, :2])
                cv2.line(limbs, pa, pb, colors[k % len(colors)], t, cv2.LINE_AA)
    canvas = cv2.addWeighted(limbs, alpha, canvas, 1 - alpha, 0)
    for person in people:
        for x, y, s in person:
            if s > 0:
                cv2.circle(canvas, (int(round(x)), int(round(y))), r, (0, 0, 0), -1, cv2.LINE_AA)
                cv2.circle(canvas, (int(round(x)), int(round(y))), max(1, r - 2), (255, 255, 255), -1, cv2.LINE_AA)
    return canvas
