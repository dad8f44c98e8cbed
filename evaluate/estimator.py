"""The Python API: people out of images, from a checkpoint, an ONNX file, the ground truth or any map source.

    estimator = PoseEstimator.from_checkpoint("runs/quickstart/best.pt", scales=[1.0], flip=False)
    people = estimator("photo.jpg")  # list[Person]: keypoints (K, 3), score, box
    people = estimator(frame)  # or a BGR uint8 array (H, W, 3), a PIL image, greyscale (H, W), BGRA (H, W, 4)
    many = estimator.predict_batch([image_a, "b.png"])  # list[list[Person]], one list per image
    for frame in estimator.stream("clip.mp4", PoseTracker(estimator.skeleton)):  # or 0 (camera 0), a folder, 'a/*.jpg'
        frame.index, frame.timestamp, frame.people  # people with .track_id (evaluate/track.py)

The one "image in, people out" path of the repository: ``evaluate.coco_eval``, the demo, the quick start's picture
and the oracle all run through ``PoseEstimator.predict_batch``: a map source (a network, an ONNX file, or the
oracle that draws the ground truth's own maps: evaluate/inference/map_source.py) under multi-scale + flip inference
(evaluate/inference/multiscale.py), then the decoder (codec/decoder/decode.py), with the run's ``eval`` settings.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from simplepose.config.schema import Config, EvalConfig
from simplepose.config.skeleton import Skeleton
from simplepose.evaluate.estimator_base import EstimatorBase, eval_settings
from simplepose.evaluate.inference.checkpoint_model import load_model
from simplepose.evaluate.inference.inference_setup import inference_setup
from simplepose.evaluate.inference.map_source import MapSource, network_source
from simplepose.evaluate.inference.multiscale import multiscale_maps_batch
from simplepose.evaluate.inference.onnx_runner import load_onnx
from simplepose.evaluate.inference.onnx_session import Providers, providers_for
from simplepose.evaluate.inference.oracle import annotation_oracle
from simplepose.models.fold import fold_batchnorm
from simplepose.models.weights import carried_skeleton, unwrap
from simplepose.utils.distributed import select_device


class PoseEstimator(EstimatorBase):
    """Multi-person pose estimation on images (BGR uint8 arrays (H, W, 3) and the other kinds of
    evaluate/image_to_bgr.py: paths, PIL images, greyscale, BGRA), with a network's ``eval`` settings.

    ``source``: a map source (``evaluate.inference.map_source.MapSource``: input batch -> maps in ``skeleton``'s
    layout) run on ``device``; ``plan``, ``timing``, the call, ``predict_batch`` and ``stream``: ``EstimatorBase``'s
    (evaluate/estimator_base.py), shared with the runtime without PyTorch (evaluate/onnx_estimator.py)."""

    def __init__(self, source: MapSource, cfg: EvalConfig, skeleton: Skeleton, device: torch.device):
        super().__init__(cfg, skeleton)
        self.source = source
        self.device = device

    @classmethod
    def from_checkpoint(
        cls, path: str | Path, device: str | torch.device = "auto", **eval_overrides: Any
    ) -> PoseEstimator:
        """The network of a checkpoint (ours, the original's, a bare state dict), rebuilt from the file alone, with
        its run's ``eval`` settings changed by ``eval_overrides`` (``EvalConfig`` fields: ``scales=[1.0]``,
        ``flip=False``, ``batch_size=8``...). ``device``: "auto" (CUDA when present), "cpu", "cuda:1"...; the
        forward's precision follows ``eval.amp``."""
        device = select_device(str(device), cpu_hint='device="cpu"')
        model, cfg = load_model(str(path), None, None, device)
        return cls.from_model(model, eval_settings(cfg, eval_overrides, "PoseEstimator.from_checkpoint"), device)

    @classmethod
    def from_onnx(
        cls, path: str | Path, providers: str | Providers | None = None, **eval_overrides: Any
    ) -> PoseEstimator:
        """An exported network (``python -m simplepose.evaluate.export_onnx``) run by ONNX Runtime, with the config
        and skeleton stored in the file. ``providers``: None (the CPU), a device ("cpu", "cuda", "cuda:N", "auto") or an
        onnxruntime provider list; ``eval_overrides`` as in ``from_checkpoint``."""
        if isinstance(providers, str):
            providers = providers_for(providers)
        source, cfg = load_onnx(path, providers)
        assert source.skeleton is not None  # load_onnx gives the file's (else data.skeleton's)
        cfg_eval = eval_settings(cfg, eval_overrides, "PoseEstimator.from_onnx")
        return cls(source, cfg_eval, source.skeleton, torch.device("cpu"))  # ONNX Runtime takes host tensors

    @classmethod
    def from_ground_truth(
        cls, coco, cfg: Config, skeleton: Skeleton, image_id_of: Callable[[Any], int] | None = None
    ) -> PoseEstimator:
        """The oracle: the target maps of the annotations of a pycocotools ``COCO`` (``evaluate.metrics.annotations
        .load_ground_truth(...).coco``) in place of a network, decoded with ``cfg.eval`` (drawn with
        ``cfg.targets``). The oracle finds an image's people by its key: its image id (``predict_batch(images,
        keys=ids)``; without keys, and for ``estimator(image)``, the keys are the positions 0, 1, ...), or any key
        ``image_id_of`` turns into one (the demo's: a file by its name, a video frame by its index)."""
        oracle = annotation_oracle(coco, cfg.targets, skeleton, image_id_of)
        return cls(oracle, cfg.eval, skeleton, torch.device("cpu"))

    @classmethod
    def from_model(cls, model: torch.nn.Module, cfg: EvalConfig, device: torch.device) -> PoseEstimator:
        """A PyTorch network (in eval mode, on ``device``, carrying ``model.skeleton``) under ``cfg.amp`` and
        ``cfg.channels_last`` (evaluate/inference/inference_setup.py; the choice is logged once); with
        ``eval.fold_batchnorm`` a copy with its BatchNorms folded into the convolutions runs (``model`` is left
        as it is, and later changes to it do not reach this estimator)."""
        network = unwrap(model)
        if cfg.fold_batchnorm:
            network = fold_batchnorm(network)
        setup = inference_setup(cfg, device)
        if setup.channels_last:  # in place: without the fold's copy, ``model``'s weights change memory (not values)
            network = network.to(memory_format=torch.channels_last)
        source = network_source(network, setup.precision, setup.channels_last)
        return cls(source, cfg, carried_skeleton(network), device)

    def maps_batch(
        self, images: list[np.ndarray], keys: Sequence[Hashable]
    ) -> list[tuple[np.ndarray, tuple[float, float]]]:
        """The map source's maps under multi-scale + flip (``multiscale.multiscale_maps_batch`` on ``device``)."""
        return multiscale_maps_batch(images, self.plan, self.source, self.device, keys)
