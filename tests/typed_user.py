# ruff: noqa: F821  (reveal_type: mypy's, the script is read by it, never run)
"""A user's script as the README writes one, read by a type checker (tests/test_typed_api.py), never run: every
object the API hands out has its type, none is Any."""

from pathlib import Path

import numpy as np

from simplepose import OnnxPoseEstimator, PoseEstimator, PoseTracker

estimator = PoseEstimator.from_checkpoint("runs/quickstart/best.pt", device="cpu", scales=[1.0], flip=False)
reveal_type(estimator)
people = estimator("photo.jpg")
reveal_type(people)
reveal_type(people[0].score)
reveal_type(people[0].box)
reveal_type(people[0].track_id)
paths = [Path("a.jpg"), Path("b.jpg")]
reveal_type(estimator(paths))
reveal_type(estimator(np.zeros((480, 640, 3), np.uint8)))
reveal_type(estimator.predict_batch(["a.jpg", "b.png"]))
reveal_type(estimator.keypoint_names)
for frame in estimator.stream("clip.mp4", PoseTracker(estimator.skeleton)):
    reveal_type(frame)
    reveal_type(frame.people)
reveal_type(PoseEstimator.from_onnx("model.onnx"))
runtime = OnnxPoseEstimator.from_onnx("model.onnx", "cpu", scales=[1.0])
reveal_type(runtime)
reveal_type(runtime(["a.jpg"]))
reveal_type(runtime.timing.images_per_s)
