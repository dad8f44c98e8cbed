"""Test-time path: multi-scale + flip inference, keypoint grouping, COCO AP, demo and export.

The Python API (evaluate/estimator.py)::

    from simplepose.evaluate import PoseEstimator
    people = PoseEstimator.from_checkpoint("runs/quickstart/best.pt")(cv2.imread("photo.jpg"))

and across a video's frames, a folder of pictures or a camera (evaluate/track.py)::

    for frame in estimator.stream("clip.mp4", PoseTracker(estimator.skeleton, TrackConfig(smooth=True))):
        frame.people  # each with .track_id

An exported network without PyTorch (evaluate/onnx_estimator.py: ONNX Runtime, NumPy and OpenCV; the runtime
install, runtime/pyproject.toml)::

    people = OnnxPoseEstimator.from_onnx("model.onnx")("photo.jpg")

The names below are imported when first used, so that importing a part of ``evaluate`` that needs no network
(``evaluate.metrics``, ``evaluate.track``, ``OnnxPoseEstimator``) does not load torch.
"""

from __future__ import annotations

if "." not in __name__:  # imported by its folder name from a checkout: the package must be that checkout's
    import installed_tree

    installed_tree.require()

import importlib
import importlib.util
from typing import TYPE_CHECKING

_TOP = __name__.rpartition(".")[0]  # the package's import name: simplepose (simplepose_runtime in the runtime)
# each name's module, relative to the package
_HOME = {
    "FAST": ".evaluate.fast_setting",
    "Frame": ".evaluate.estimator_base",
    "OnnxPoseEstimator": ".evaluate.onnx_estimator",
    "Person": ".codec.person",
    "PoseEstimator": ".evaluate.estimator",
    "PoseTracker": ".evaluate.track",
    "Timing": ".evaluate.estimator_base",
    "TrackConfig": ".config.schema",
    "coco_results_json": ".evaluate.estimator_base",
}

__all__ = [
    "FAST",
    "Frame",
    "OnnxPoseEstimator",
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
    from simplepose.evaluate.estimator import PoseEstimator
    from simplepose.evaluate.estimator_base import Frame, Timing, coco_results_json
    from simplepose.evaluate.fast_setting import FAST
    from simplepose.evaluate.onnx_estimator import OnnxPoseEstimator
    from simplepose.evaluate.track import PoseTracker


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        module = importlib.import_module(_TOP + _HOME[name])
    except ModuleNotFoundError:
        if importlib.util.find_spec("torch") is not None:
            raise
        raise ModuleNotFoundError(  # the runtime install has neither torch nor the modules on it
            f"{name} needs PyTorch, which is not installed (the runtime install without it runs exported models: "
            f"from {_TOP} import OnnxPoseEstimator)",
            name="torch",
        ) from None
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOME))
