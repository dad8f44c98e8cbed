"""Short synthetic videos of moving figures with known identities, for tracking (any skeleton); written as files by
``python -m simplepose.data.synthetic_video``.

In Python::

    video = random_video(np.random.default_rng(0), num_frames=90, num_people=4)
    image, people = video.frame(12)  # BGR frame, COCO annotations of the people seen in it (with track_id)

The figures are data.synthetic_images' (the COCO person, or ``data.synthetic_figures.Figure`` for another skeleton), on
one background per video. Each ``Walker`` moves at a constant velocity (px/s) while its pose swings between two
random poses (its gait), exists from ``enter_s`` to ``leave_s`` (appearing and vanishing, as through a door) and
may walk in from outside the picture and out of it. Figures nearer the camera (larger ``depth``) are drawn over the
others: a keypoint under a nearer figure is occluded (v = 1), one outside the picture unlabelled. A figure drawn as
limbs cannot hide a body, so full occlusion follows a rule for solid bodies: a figure whose centre is within
``COVER_RADIUS`` of its height from the centre of a nearer figure at least 0.8 times as tall is hidden (not drawn,
not annotated). A figure with no visible pixel gets no annotation, as in data.synthetic_images' pictures.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from simplepose.config.skeleton import Skeleton
from simplepose.data.synthetic_images import (
    COCO,
    Body,
    body_for,
    categories,
    covered_by_later,
    person_annotation,
    random_background,
)
from simplepose.utils.io import atomic_path
from simplepose.utils.video_writer import open_video_writer

COVER_RADIUS = 0.15  # of the nearer figure's height: a torso's half-width
GAIT_SWING = 0.5  # how far the gait goes from the first pose towards the second


@dataclasses.dataclass(frozen=True)
class Walker:
    """One figure of a video: its identity, look, path and gait. Poses have height 1, their box centred at 0."""

    identity: int
    poses: np.ndarray  # (2, D, 2) the two poses the gait swings between
    height: float  # px
    start: tuple[float, float]  # the pose's box centre at time 0, px
    velocity: tuple[float, float]  # px/s
    gait_hz: float = 1.0
    phase: float = 0.0  # radians
    depth: float = 0.0  # larger: nearer the camera, drawn over the others
    seed: int = 0  # its colours
    enter_s: float = 0.0
    leave_s: float = math.inf

    def alive(self, t: float) -> bool:
        return self.enter_s <= t < self.leave_s

    def centre(self, t: float | np.ndarray) -> np.ndarray:
        """(2,) the pose's box centre at time ``t`` (s), or (T, 2) at T times."""
        t = np.asarray(t, np.float64)[..., None]
        return np.asarray(self.start) + np.asarray(self.velocity) * t

    def keypoints(self, t: float | np.ndarray) -> np.ndarray:
        """(D, 2) image keypoints at time ``t`` (s), or (T, D, 2) at T times (where the walker exists or not)."""
        t = np.asarray(t, np.float64)
        swing = GAIT_SWING * (1 - np.cos(2 * math.pi * self.gait_hz * t + self.phase)) / 2
        pose = self.poses[0] + swing[..., None, None] * (self.poses[1] - self.poses[0])
        return self.centre(t)[..., None, :] + self.height * pose


@dataclasses.dataclass(frozen=True)
class SyntheticVideo:
    """Frames of ``walkers`` on one background: ``frame(i)`` draws frame i (time i / fps)."""

    walkers: tuple[Walker, ...]
    size: tuple[int, int]  # (h, w) px
    fps: float
    num_frames: int
    body: Body
    background_seed: int = 0

    @property
    def skeleton(self) -> Skeleton:
        """The skeleton of the figures (COCO's for the COCO person)."""
        return getattr(self.body, "skeleton", COCO)

    @functools.cached_property
    def background(self) -> np.ndarray:
        return random_background(np.random.default_rng([self.background_seed, 1]), *self.size)

    def hidden(self, walker: Walker, t: float) -> bool:
        """Whether ``walker`` is fully behind a nearer figure at ``t`` (module docstring)."""
        c = walker.centre(t)
        return any(
            other.depth > walker.depth
            and other.alive(t)
            and other.height >= 0.8 * walker.height
            and np.hypot(*(other.centre(t) - c)) < COVER_RADIUS * other.height
            for other in self.walkers
        )

    def frame(self, index: int) -> tuple[np.ndarray, list[dict]]:
        """(BGR frame (h, w, 3) uint8, COCO annotations of the people seen in it, each with ``track_id``; without
        ``id`` and ``image_id``)."""
        h, w = self.size
        t = index / self.fps
        image = self.background.copy()
        drawn = []
        for walker in sorted(self.walkers, key=lambda v: v.depth):
            if walker.alive(t) and not self.hidden(walker, t):
                kp, mask = walker.keypoints(t), np.zeros((h, w), np.uint8)
                self.body.draw(image, mask, kp, walker.height, np.random.default_rng([walker.seed, 2]))
                drawn.append((walker, kp, mask))
        if not drawn:
            return image, []
        cover = covered_by_later([m for _, _, m in drawn])
        annotations = []
        for (walker, kp, mask), covered in zip(drawn, cover):
            ann = person_annotation(kp, (mask > 0) & ~covered, covered, h, w, self.body.num_keypoints)
            if ann is not None:
                annotations.append({**ann, "track_id": walker.identity})
        return image, annotations

    def frames(self) -> Iterator[tuple[np.ndarray, list[dict]]]:
        for i in range(self.num_frames):
            yield self.frame(i)


def walker_poses(rng: np.random.Generator, body: Body) -> np.ndarray:
    """(2, D, 2) two random poses of ``body`` (height 1, box centred at 0) facing the same way."""
    first = _centred(body.pose(rng))
    other = _centred(body.pose(rng))
    mirrored = other * (-1, 1)  # a side view drawn the other way round would swing through itself
    second = min(other, mirrored, key=lambda p: float(((p - first) ** 2).sum()))
    return np.stack([first, second])


def _centred(pose: np.ndarray) -> np.ndarray:
    return pose - (pose.min(0) + pose.max(0)) / 2


def random_video(
    rng: np.random.Generator,
    num_frames: int = 90,
    num_people: int = 4,
    size: tuple[int, int] = (240, 320),
    fps: float = 30.0,
    skeleton: Skeleton | None = None,
) -> SyntheticVideo:
    """A video of ``num_people`` figures: about half start in the picture, the others walk in from a side at a
    random time; each walks left or right (so they cross), at 0.2 to 0.8 of its height per second; one in four
    vanishes at a random time. Heights 35-60 % of the picture, depths random."""
    h, w = size
    duration = num_frames / fps
    body = body_for(skeleton)
    walkers = []
    for identity in range(1, num_people + 1):
        height = rng.uniform(0.35, 0.6) * h
        direction = rng.choice([-1.0, 1.0])
        speed = rng.uniform(0.2, 0.8) * height
        y = rng.uniform(0.5 * height, h - 0.5 * height)
        if rng.random() < 0.5:
            enter, x = 0.0, rng.uniform(0.1 * w, 0.9 * w)
        else:  # walks in from outside the side it comes from
            enter = rng.uniform(0, duration / 2)
            x = (-0.4 * height if direction > 0 else w + 0.4 * height) - direction * speed * enter
        leave = rng.uniform(enter + duration / 4, duration) if rng.random() < 0.25 else math.inf
        walkers.append(
            Walker(
                identity,
                walker_poses(rng, body),
                height,
                (x, y),
                (direction * speed, 0.0),
                gait_hz=rng.uniform(0.8, 1.5),
                phase=rng.uniform(0, 2 * math.pi),
                depth=rng.uniform(),
                seed=int(rng.integers(1 << 31)),
                enter_s=enter,
                leave_s=leave,
            )
        )
    return SyntheticVideo(tuple(walkers), (h, w), fps, num_frames, body, int(rng.integers(1 << 31)))


def crossing_video(
    hidden_frames: int = 5,
    size: tuple[int, int] = (240, 320),
    fps: float = 30.0,
    height: float = 120.0,
    skeleton: Skeleton | None = None,
    seed: int = 0,
    num_frames: int | None = None,
) -> SyntheticVideo:
    """Two figures of one height walking towards each other along one line and crossing at the middle frame; the
    farther one (identity 1, walking right) is fully hidden behind the nearer (identity 2) for ``hidden_frames``
    frames (its centre within COVER_RADIUS x height of the other's: the speed is set for that). ``num_frames``
    (odd): the video's length; by default each figure starts at a side of the picture."""
    if hidden_frames < 1:
        raise ValueError(f"hidden_frames must be >= 1, got {hidden_frames}")
    rng = np.random.default_rng(seed)
    body = body_for(skeleton)
    h, w = size
    # centres meet at frame `middle`; |gap(i)| = v_rel |i - middle| / fps < r holds for |i - middle| < hidden / 2
    speed = COVER_RADIUS * height * fps / hidden_frames  # each figure's: v_rel = 2 speed
    middle = int(round(0.5 * w / speed * fps)) if num_frames is None else num_frames // 2
    num_frames = 2 * middle + 1
    x_meet, y = w / 2, h / 2
    walkers = tuple(
        Walker(
            identity,
            walker_poses(rng, body),
            height,
            (x_meet - d * speed * middle / fps, y),
            (d * speed, 0.0),
            gait_hz=1.2,
            phase=identity * 1.3,
            depth=identity,
            seed=identity,
        )
        for identity, d in ((1, 1.0), (2, -1.0))
    )
    return SyntheticVideo(walkers, (h, w), fps, num_frames, body, seed)


def coco_annotations(video: SyntheticVideo, name: str = "video") -> dict:
    """The video's ground truth as a COCO keypoint file: image id = frame index, ``track_id`` = the identity."""
    images: list[dict] = []
    annotations: list[dict] = []
    h, w = video.size
    for i, (_, people) in enumerate(video.frames()):
        images.append({"id": i, "file_name": f"{name}_{i:06d}.jpg", "width": w, "height": h, "frame_id": i})
        for ann in people:
            annotations.append({**ann, "image_id": i, "id": len(annotations) + 1})
    info = {"description": f"SimplePose synthetic video, {video.num_frames} frames at {video.fps:g} fps"}
    return {
        "info": info,
        "licenses": [],
        "images": images,
        "annotations": annotations,
        "categories": categories(video.skeleton),
    }


def write_video(video: SyntheticVideo, path: str | Path) -> None:
    """The frames as a video file (OpenCV, mp4v), written atomically."""
    path = Path(path)
    with atomic_path(path, suffix=f".tmp{path.suffix}") as tmp:
        writer = open_video_writer(tmp, path, video.fps, video.size)
        try:
            for image, _ in video.frames():
                writer.write(image)
        finally:
            writer.release()
