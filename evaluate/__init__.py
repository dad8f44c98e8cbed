"""Test-time path: multi-scale + flip inference, keypoint grouping, COCO AP, demo and export.

The Python API (evaluate/estimator.py)::

    from evaluate import PoseEstimator
    people = PoseEstimator.from_checkpoint("runs/quickstart/best.pt")(cv2.imread("photo.jpg"))

and across a video's frames (evaluate/track.py)::

    for frame in estimator.video("clip.mp4", PoseTracker(estimator.skeleton, TrackConfig(smooth=True))):
        frame.people  # each with .track_id
"""

from config.schema import TrackConfig
from evaluate.estimator import Person, PoseEstimator, Timing, VideoFrame, coco_results_json
from evaluate.fast_setting import FAST
from evaluate.track import PoseTracker

__all__ = ["FAST", "Person", "PoseEstimator", "PoseTracker", "Timing", "TrackConfig", "VideoFrame", "coco_results_json"]
