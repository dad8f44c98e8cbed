"""Test-time path: multi-scale + flip inference, keypoint grouping, COCO AP, demo and export.

The Python API (evaluate/predictor.py)::

    from evaluate import PoseEstimator
    people = PoseEstimator.from_checkpoint("runs/quickstart/best.pt")(cv2.imread("photo.jpg"))
"""

from evaluate.predictor import Person, PoseEstimator, Timing, coco_results_json

__all__ = ["Person", "PoseEstimator", "Timing", "coco_results_json"]
