"""Drawing decoded people on an image (COCO-order keypoints, config.skeleton colours)."""

from __future__ import annotations

import cv2
import numpy as np

from config.skeleton import COCO_SKELETON, LIMB_COLORS_BGR


def draw_people(
    image: np.ndarray, keypoints: np.ndarray, thickness: int = 3, radius: int = 4, alpha: float = 0.6
) -> np.ndarray:
    """A copy of a BGR image with skeletons drawn.

    Args:
        image: (H, W, 3) uint8 BGR.
        keypoints: (P, 17, 3) COCO order (x, y, score); score 0 = not found (not drawn).
        alpha: opacity of the limbs over the photo (the original blended 0.6 new / 0.4 old).
    """
    canvas = image.copy()
    limbs = canvas.copy()
    scale = max(1.0, max(image.shape[:2]) / 640)
    t, r = max(1, round(thickness * scale)), max(1, round(radius * scale))
    for person in np.asarray(keypoints).reshape(-1, 17, 3):
        found = person[:, 2] > 0
        for k, (a, b) in enumerate(COCO_SKELETON):
            if found[a] and found[b]:
                pa = tuple(int(round(v)) for v in person[a, :2])
                pb = tuple(int(round(v)) for v in person[b, :2])
                cv2.line(limbs, pa, pb, LIMB_COLORS_BGR[k % len(LIMB_COLORS_BGR)], t, cv2.LINE_AA)
    canvas = cv2.addWeighted(limbs, alpha, canvas, 1 - alpha, 0)
    for person in np.asarray(keypoints).reshape(-1, 17, 3):
        for x, y, s in person:
            if s > 0:
                cv2.circle(canvas, (int(round(x)), int(round(y))), r, (0, 0, 0), -1, cv2.LINE_AA)
                cv2.circle(canvas, (int(round(x)), int(round(y))), max(1, r - 2), (255, 255, 255), -1, cv2.LINE_AA)
    return canvas
