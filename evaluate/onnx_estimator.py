"""The runtime without PyTorch: an exported network (``python -m simplepose.evaluate.export_onnx``) run by ONNX
Runtime, its multi-scale + flip maps made with NumPy and OpenCV, grouped by the NumPy decoder; the API of
``PoseEstimator``.

    estimator = OnnxPoseEstimator.from_onnx("model.onnx")  # or ("model.onnx", "cuda", scales=[1.0], flip=False)
    people = estimator("photo.jpg")  # list[Person]; a list of images gives a list per image
    for frame in estimator.stream("clip.mp4", PoseTracker(estimator.skeleton)):  # a folder, 'a/*.jpg', 0 (camera)
        frame.people

Everything it runs is shared with the PyTorch path, not copied: the session and the file's config and skeleton
(evaluate/inference/onnx_session.py, which ``PoseEstimator.from_onnx`` opens too), the inputs, flip fusion and resizes
onto the decoding grid (evaluate/inference/host_maps.py, whose functions ``multiscale.py`` calls on the CPU), the
plan and the decoder, and the call, ``predict_batch`` and ``stream`` (evaluate/estimator_base.py). So its people,
boxes, scores and JSON are ``PoseEstimator.from_onnx``'s. The settings that choose PyTorch's ways of preparing and
resizing (``eval.preprocess``, ``eval.resize_backend``, ``eval.amp``, ``eval.channels_last``) do not apply: inputs
are prepared and maps resized with OpenCV on the host (their choice on a CPU), in float32. No module it imports
imports torch (tests/test_runtime.py runs it with torch made unimportable).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from simplepose.config.schema import EvalConfig
from simplepose.evaluate.estimator_base import EstimatorBase, eval_settings
from simplepose.evaluate.inference.host_maps import host_maps_batch
from simplepose.evaluate.inference.onnx_session import OnnxNetwork, Providers, load_onnx_network, providers_for


class OnnxPoseEstimator(EstimatorBase):
    """Multi-person pose estimation with an exported network in ONNX Runtime, without PyTorch: ``network`` (an
    ``OnnxNetwork``, NumPy in and out) under ``cfg``, its maps in ``network.skeleton``'s layout. Called as
    ``PoseEstimator`` is (a path, an array, a PIL image or a list of them; ``predict_batch``; ``stream``)."""

    def __init__(self, network: OnnxNetwork, cfg: EvalConfig):
        if network.skeleton is None:
            raise ValueError("OnnxPoseEstimator needs a network with its skeleton (load_onnx_network gives one)")
        super().__init__(cfg, network.skeleton)
        self.network = network

    @classmethod
    def from_onnx(
        cls, path: str | Path, providers: str | Providers | None = None, **eval_overrides: Any
    ) -> OnnxPoseEstimator:
        """The file's network with the config and skeleton stored in it. ``providers``: None (the CPU), a device
        ("cpu", "cuda", "cuda:N", "auto") or an onnxruntime provider list; ``eval_overrides``: ``EvalConfig``
        fields (``scales=[1.0]``, ``flip=False``, ``batch_size=8``...), checked as a ``key=value`` is."""
        if isinstance(providers, str):
            providers = providers_for(providers)
        network, cfg = load_onnx_network(path, providers)
        return cls(network, eval_settings(cfg, eval_overrides, "OnnxPoseEstimator.from_onnx"))

    def maps_batch(
        self, images: list[np.ndarray], keys: Sequence[Hashable]
    ) -> list[tuple[np.ndarray, tuple[float, float]]]:
        """The network's maps under multi-scale + flip, on the host (``host_maps.host_maps_batch``); ``keys`` are
        not needed by a network."""
        return host_maps_batch(images, self.plan, self.network)
