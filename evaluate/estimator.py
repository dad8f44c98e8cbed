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

import logging
import time
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, overload

import numpy as np
import torch

from simplepose.codec.person import Person
from simplepose.config.config_file import with_overrides
from simplepose.config.schema import Config, EvalConfig
from simplepose.config.skeleton import Skeleton
from simplepose.data.image_files import ImageFileError
from simplepose.evaluate.frame_sources import InputFrame, open_inputs
from simplepose.evaluate.image_to_bgr import ImageLike, as_bgr_list
from simplepose.evaluate.inference.checkpoint_model import load_model
from simplepose.evaluate.inference.inference_setup import inference_setup
from simplepose.evaluate.inference.map_source import MapSource, network_source
from simplepose.evaluate.inference.multiscale import multiscale_maps_batch
from simplepose.evaluate.inference.onnx_runner import Providers, load_onnx, providers_for
from simplepose.evaluate.inference.oracle import annotation_oracle
from simplepose.evaluate.inference.plan import InferencePlan
from simplepose.evaluate.metrics.coco_results import coco_results, results_text
from simplepose.evaluate.video import VideoReader
from simplepose.models.fold import fold_batchnorm
from simplepose.models.weights import carried_skeleton, unwrap
from simplepose.utils.distributed import select_device
from simplepose.utils.text import counted

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Frame:
    """One image of ``PoseEstimator.stream`` (a picture, a video's frame) and its people."""

    index: int  # from 0
    timestamp: float  # seconds from the first frame (evaluate/video.py; pictures: index / fps)
    image: np.ndarray | None  # (H, W, 3) uint8 BGR; None when the file could not be read (``error``)
    people: list[Person]  # with ``track_id`` when tracked
    path: Path | None = None  # the picture's file
    error: ImageFileError | None = None  # why the picture could not be read (no people then)


class Tracker(Protocol):
    """What ``PoseEstimator.stream`` tracks with: ``evaluate.track.PoseTracker``."""

    def reset(self) -> None: ...
    def update(self, people: Sequence[Person], timestamp: float) -> list[Person]: ...


@dataclass
class Timing:
    """Seconds spent on images: ``network`` (resize, forward, flip fusion, scale averaging, maps back in host memory)
    and ``decoding`` (peaks, limbs, assembly)."""

    images: int = 0
    network_s: float = 0.0
    decoding_s: float = 0.0

    @property
    def images_per_s(self) -> float:
        total = self.network_s + self.decoding_s
        return self.images / total if total > 0 else 0.0

    def add(self, other: Timing) -> None:
        self.images += other.images
        self.network_s += other.network_s
        self.decoding_s += other.decoding_s

    def describe(self, unit: str = "image") -> str:
        """``N images, R images/s (network A ms + decoding B ms per image)`` (``unit``: e.g. "frame")."""
        n = max(self.images, 1)
        return (
            f"{counted(self.images, unit)}, {self.images_per_s:.2f} {unit}s/s (network "
            f"{self.network_s / n * 1000:.1f} ms + decoding {self.decoding_s / n * 1000:.1f} ms per {unit})"
        )


class PoseEstimator:
    """Multi-person pose estimation on images (BGR uint8 arrays (H, W, 3) and the other kinds of
    evaluate/image_to_bgr.py: paths, PIL images, greyscale, BGRA), with a network's ``eval`` settings.

    ``source``: a map source (``evaluate.inference.map_source.MapSource``: input batch -> maps in ``skeleton``'s
    layout) run on ``device``; ``plan``: what every image is run with, built here once (``InferencePlan``: the
    settings, the codec with the skeleton and its channel layout, the flip index, the channel check). ``timing``
    holds the last call's seconds, ``total_timing`` those of every call."""

    def __init__(self, source: MapSource, cfg: EvalConfig, skeleton: Skeleton, device: torch.device):
        self.source = source
        self.plan = InferencePlan.of(skeleton, cfg)
        self.device = device
        self.timing = Timing()
        self.total_timing = Timing()

    @property
    def cfg(self) -> EvalConfig:
        return self.plan.cfg

    @property
    def skeleton(self) -> Skeleton:
        return self.plan.skeleton

    @classmethod
    def from_checkpoint(cls, path: str | Path, device: str | torch.device = "auto", **eval_overrides: Any):
        """The network of a checkpoint (ours, the original's, a bare state dict), rebuilt from the file alone, with
        its run's ``eval`` settings changed by ``eval_overrides`` (``EvalConfig`` fields: ``scales=[1.0]``,
        ``flip=False``, ``batch_size=8``...). ``device``: "auto" (CUDA when present), "cpu", "cuda:1"...; the
        forward's precision follows ``eval.amp``."""
        device = select_device(str(device), cpu_hint='device="cpu"')
        model, cfg = load_model(str(path), None, None, device)
        return cls.from_model(model, eval_settings(cfg, eval_overrides, "PoseEstimator.from_checkpoint"), device)

    @classmethod
    def from_onnx(cls, path: str | Path, providers: str | Providers | None = None, **eval_overrides: Any):
        """An exported network (``python -m evaluate.export_onnx``) run by ONNX Runtime, with the config and skeleton
        stored in the file. ``providers``: None (the CPU), a device ("cpu", "cuda", "cuda:N", "auto") or an
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

    @property
    def keypoint_names(self) -> tuple[str, ...]:
        """The names of the K keypoints of every ``Person.keypoints``, in order."""
        return self.skeleton.dataset_keypoints

    @overload
    def __call__(self, images: ImageLike) -> list[Person]: ...
    @overload
    def __call__(self, images: list[ImageLike] | tuple[ImageLike, ...]) -> list[list[Person]]: ...

    def __call__(self, images):
        """The people of one image, or of each image of a list or tuple (``predict_batch``). An image: a BGR uint8
        array (H, W, 3), a greyscale (H, W) or BGRA (H, W, 4) uint8 array, a PIL image, or a file path
        (evaluate/image_to_bgr.py)."""
        if isinstance(images, (list, tuple)):
            return self.predict_batch(images)
        return self.predict_batch([images])[0]

    def stream(self, inputs: Any, tracker: Tracker | None = None, fps: float = 30.0) -> Iterator[Frame]:
        """The people of each image of ``inputs``, one image at a time as it is read: a path, folder, quoted pattern,
        video file or camera index (``evaluate.frame_sources.open_inputs``), an opened ``VideoReader``, an image array
        or PIL image, or a list of images. ``tracker`` (a ``PoseTracker``, reset first): the people of confirmed tracks,
        with their ``track_id`` (pictures count as frames ``1 / fps`` seconds apart). A picture that cannot be read
        comes as a frame with its ``error`` and no people, and is logged (a warning naming the file and why); a video
        is closed when the loop ends or stops. Each image is named for the map source by its file, else by its index
        (the oracle's image id of a video's frame)."""
        frames = reader_frames(inputs) if isinstance(inputs, VideoReader) else open_inputs(inputs).frames(fps)
        if tracker is not None:
            tracker.reset()
        for item in frames:
            if item.image is None:
                log.warning("%s: skipped, %s (%s)", item.path, getattr(item.error, "reason", "unreadable"), item.error)
                yield Frame(item.index, item.timestamp, None, [], item.path, item.error)
                continue
            people = self.predict_batch([item.image], [item.key])[0]
            if tracker is not None:
                people = tracker.update(people, item.timestamp)
            yield Frame(item.index, item.timestamp, item.image, people, item.path)

    def predict_batch(self, images: Sequence[ImageLike], keys: Sequence[Hashable] | None = None) -> list[list[Person]]:
        """The people of each image (any sizes, any kinds ``__call__`` takes), in the order given; up to
        ``eval.batch_size`` images of one size share each forward pass. ``keys``: what names each image for the map
        source (``ImageMeta.key``: the oracle finds its annotations by it; a network ignores it); default: the
        image's position in ``images``. Every image is checked (and read, for paths) before any runs."""
        images = as_bgr_list(images)
        keys = list(range(len(images))) if keys is None else list(keys)
        if len(keys) != len(images):
            raise ValueError(f"{len(keys)} keys for {len(images)} images")
        by_size: dict[tuple[int, int], list[int]] = {}
        for i, image in enumerate(images):
            by_size.setdefault(image.shape[:2], []).append(i)
        out: dict[int, list[Person]] = {}
        self.timing = Timing(images=len(images))
        step = max(1, self.cfg.batch_size)
        for indices in by_size.values():
            for start in range(0, len(indices), step):
                chunk = indices[start : start + step]
                t0 = time.perf_counter()
                maps = multiscale_maps_batch(
                    [images[i] for i in chunk], self.plan, self.source, self.device, [keys[i] for i in chunk]
                )
                t1 = time.perf_counter()  # the maps are in host memory: the device's queued work is done
                for i, (one, scale) in zip(chunk, maps):
                    out[i] = self.plan.codec.decode(one, scale)
                self.timing.network_s += t1 - t0
                self.timing.decoding_s += time.perf_counter() - t1
        self.total_timing.add(self.timing)
        return [out[i] for i in range(len(images))]


def reader_frames(reader: VideoReader) -> Iterator[InputFrame]:
    """The frames of an opened video, closed when the loop ends or stops."""
    with reader:
        for index, timestamp, image in reader:
            yield InputFrame(index, timestamp, image)


def eval_settings(cfg: Config, overrides: dict[str, Any], where: str) -> EvalConfig:
    """``cfg.eval`` with ``overrides`` (EvalConfig field -> value) set, checked as the config checks a ``key=value``."""
    values = {f"eval.{key}": value for key, value in overrides.items()}
    return with_overrides(cfg, values, f"keyword argument of {where}").eval


def coco_results_json(image_ids: Sequence[int], results: Sequence[Sequence[Person]]) -> str:
    """COCO keypoint results JSON (for pycocotools' ``loadRes`` or an evaluation server) of the people of each image
    (``results[i]`` belongs to ``image_ids[i]``); the same file ``evaluate.coco_eval --out`` writes. Tracked people
    (``PoseTracker``) also get their ``track_id``."""
    return results_text(coco_results(image_ids, results))
