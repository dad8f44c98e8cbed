"""The result type: one person found in an image, the same from the decoder to the API, the tracker, the drawings
and the results file.

A keypoint that was not found is ``nan, nan, 0`` (NaN rather than 0, so that a missing keypoint cannot pass for the
image's corner); a found one has its score in (0, 1]. ``keypoint_array`` stacks the people of an image for array
code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Person:
    """One person found in an image."""

    keypoints: np.ndarray  # (K, 3) float64, the skeleton's dataset order: x, y (image pixels), score in (0, 1];
    # a keypoint that was not found has x = y = NaN and score 0
    score: float  # the person's score in [0, 1) (higher: more evidence): 2+ keypoints in [0.5, 1), lone keypoints below
    box: tuple[float, float, float, float]  # x, y, width, height (image pixels) around the found keypoints
    track_id: int | None = None  # the person's identity across a video's frames (evaluate.PoseTracker), from 1

    @classmethod
    def from_keypoints(cls, keypoints: np.ndarray, score: float, track_id: int | None = None) -> Person:
        """A person of (K, 3) keypoints whose not-found ones (score <= 0) may hold anything: they become NaN, NaN,
        0; the box is computed."""
        kp = np.array(keypoints, np.float64)
        kp[~(kp[:, 2] > 0)] = (np.nan, np.nan, 0.0)
        return cls(kp, float(score), keypoint_box(kp), track_id)


def keypoint_box(keypoints: np.ndarray) -> tuple[float, float, float, float]:
    """(x, y, width, height) around the found keypoints (score > 0) of (K, 3) keypoints; NaN when none is found."""
    found = keypoints[:, 2] > 0
    if not found.any():
        return (np.nan,) * 4
    (x0, y0), (x1, y1) = keypoints[found, :2].min(0), keypoints[found, :2].max(0)
    return (float(x0), float(y0), float(x1 - x0), float(y1 - y0))


def keypoint_array(people: Sequence[Person], num_keypoints: int) -> np.ndarray:
    """(P, K, 3) float64 keypoints of ``people`` (NaN, NaN, 0 where not found); (0, K, 3) for no one."""
    if not people:
        return np.zeros((0, num_keypoints, 3))
    return np.stack([p.keypoints for p in people])
