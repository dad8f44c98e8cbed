"""Test-time path: multi-scale + flip inference, keypoint grouping, COCO AP, demo and export.

The Python API (evaluate/estimator.py)::

    from simplepose.evaluate import PoseEstimator
    people = PoseEstimator.from_checkpoint("runs/quickstart/best.pt")(cv2.imread("photo.jpg"))

and across a video's frames, a folder of pictures or a camera (evaluate/track.py)::

    for frame in estimator.stream("clip.mp4", PoseTracker(estimator.skeleton, TrackConfig(smooth=True))):
        frame.people  # each with .track_id

The names below are imported when first used, so that importing a part of ``evaluate`` that needs no network
(``evaluate.metrics``, ``evaluate.track``) does not load torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

_HOME = {
    "FAST": "simplepose.evaluate.fast_setting",
    "Frame": "simplepose.evaluate.estimator",
    "Person": "simplepose.codec.person",
    "PoseEstimator": "simplepose.evaluate.estimator",
    "PoseTracker": "simplepose.evaluate.track",
    "Timing": "simplepose.evaluate.estimator",
    "TrackConfig": "simplepose.config.schema",
    "coco_results_json": "simplepose.evaluate.estimator",
}

__all__ = [
    "FAST",
    "Frame",
    "Person",
    "PoseEstimator",
    "PoseTracker",
    "Timing",
    "TrackConfig",
    "coco_results_json",
]

if TYPE_CHECKING:
    from simplepose.codec.person import Person
    from simplepose.config.schema import TrackConfig
    from simplepose.evaluate.estimator import Frame, PoseEstimator, Timing, coco_results_json
    from simplepose.evaluate.fast_setting import FAST
    from simplepose.evaluate.track import PoseTracker


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOME[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOME))
