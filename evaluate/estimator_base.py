"""What every estimator of people shares, with or without PyTorch: the API's shape (call on a path, an array or a
list; ``predict_batch``; ``stream`` for folders, patterns, videos and cameras, with a tracker), its ``Frame`` and
``Timing``, and the COCO results JSON.

    class MyEstimator(EstimatorBase):
        def maps_batch(self, images, keys):  # n BGR uint8 images of one size -> [(maps (C, rows, cols), (sx, sy))]
            ...

``EstimatorBase`` groups the images by size into batches of ``eval.batch_size``, asks ``maps_batch`` for their
averaged multi-scale + flip maps, decodes them (``plan.codec``) and times the two apart. Its subclasses:
``evaluate.estimator.PoseEstimator`` (map sources under PyTorch: a network, an ONNX file, the oracle) and
``evaluate.onnx_estimator.OnnxPoseEstimator`` (ONNX Runtime, NumPy and OpenCV alone). No torch is imported here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, overload

import numpy as np

from simplepose.codec.person import Person
from simplepose.config.config_file import with_overrides
from simplepose.config.schema import Config, EvalConfig
from simplepose.config.skeleton import Skeleton
from simplepose.data.image_files import ImageFileError
from simplepose.evaluate.frame_sources import InputFrame, open_inputs
from simplepose.evaluate.image_to_bgr import ImageLike, as_bgr_list
from simplepose.evaluate.inference.plan import InferencePlan
from simplepose.evaluate.metrics.coco_results import coco_results, results_text
from simplepose.evaluate.video import VideoReader
from simplepose.utils.text import counted

if TYPE_CHECKING:
    from PIL import Image

# several images for one call: a list of any one kind (list is invariant: list[Path] is no list[ImageLike]), a list
# of mixed kinds, or a tuple
ImageList = list[ImageLike] | list[np.ndarray] | list["Image.Image"] | list[str] | list[Path] | tuple[ImageLike, ...]

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


class EstimatorBase:
    """People out of images (BGR uint8 arrays (H, W, 3) and the other kinds of evaluate/image_to_bgr.py: paths, PIL
    images, greyscale, BGRA) under ``plan`` (``InferencePlan``: the ``eval`` settings, the codec with the skeleton and
    its channel layout, the flip index, the channel check), built here once. A subclass gives ``maps_batch``.
    ``timing`` holds the last call's seconds, ``total_timing`` those of every call."""

    def __init__(self, cfg: EvalConfig, skeleton: Skeleton):
        self.plan = InferencePlan.of(skeleton, cfg)
        self.timing = Timing()
        self.total_timing = Timing()

    def maps_batch(
        self, images: list[np.ndarray], keys: Sequence[Hashable]
    ) -> list[tuple[np.ndarray, tuple[float, float]]]:
        """n BGR uint8 images of one size (named by ``keys`` for the map source) -> per image the maps (C, rows,
        cols) float32 on the decoding grid, averaged over the test scales and fused with the mirrors, and (sx, sy),
        image pixels per grid pixel."""
        raise NotImplementedError

    @property
    def cfg(self) -> EvalConfig:
        return self.plan.cfg

    @property
    def skeleton(self) -> Skeleton:
        return self.plan.skeleton

    @property
    def keypoint_names(self) -> tuple[str, ...]:
        """The names of the K keypoints of every ``Person.keypoints``, in order."""
        return self.skeleton.dataset_keypoints

    @overload
    def __call__(self, images: ImageLike) -> list[Person]: ...
    @overload
    def __call__(self, images: ImageList) -> list[list[Person]]: ...

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
                maps = self.maps_batch([images[i] for i in chunk], [keys[i] for i in chunk])
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
