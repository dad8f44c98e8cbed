"""Where the demo's drawings go: the names of the pictures, the numbered run folder, the drawing of each frame and the
writers of pictures and videos (every file written atomically).

``<name>_pose.jpg`` per image, below the output folder as below the input's folder (or a pattern's fixed start),
sub-folders kept, ``a.jpg`` and ``a.png`` as ``a_jpg_pose.jpg`` and ``a_png_pose.jpg``; ``<name>_pose.mp4`` per
video (``camera<N>_pose.mp4``).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np

from simplepose.codec.person import Person
from simplepose.config.skeleton import Skeleton
from simplepose.evaluate.draw import Trails, draw_detections, draw_tracked
from simplepose.evaluate.frame_sources import Inputs
from simplepose.evaluate.track import PoseTracker
from simplepose.utils.errors import UserError
from simplepose.utils.io import atomic_path, atomic_write_bytes
from simplepose.utils.text import counted
from simplepose.utils.video_writer import open_video_writer

DEFAULT_OUT = Path("runs/demo")  # without --out and --json: runs/demo/1, runs/demo/2, ... (the next free number)
RESULTS_NAME = "results.json"  # the COCO results file of a default output folder


def picture_names(images: Sequence[Path], root: Path) -> list[Path]:
    """The drawn picture of each image, relative to the output folder: ``<sub-folders below root>/<stem>_pose.jpg``;
    images of one stem in one folder (``a.jpg``, ``a.png``) keep their suffix (``a_png_pose.jpg``), and any name
    still taken gets a number, so that no picture replaces another."""
    relative = [p.relative_to(root) if p.is_relative_to(root) else Path(p.name) for p in images]
    stems = Counter((r.parent, r.stem) for r in relative)
    taken: set[Path] = set()
    names = []
    for r in relative:
        base = r.stem if stems[(r.parent, r.stem)] == 1 else f"{r.stem}_{r.suffix[1:]}"
        name, n = r.parent / f"{base}_pose.jpg", 2
        while name in taken:
            name, n = r.parent / f"{base}_{n}_pose.jpg", n + 1
        taken.add(name)
        names.append(name)
    return names


def video_name(inputs: Inputs) -> str:
    return f"{inputs.name}_pose.mp4"


def planned_outputs(inputs: Inputs, out_dir: Path | None, json_file: Path | None) -> list[Path]:
    """Every file a run would write: the pictures (or the video) in ``out_dir``, the JSON file."""
    files: list[Path] = []
    if out_dir is not None:
        if inputs.is_video:
            files.append(out_dir / video_name(inputs))
        else:
            files += [out_dir / p for p in picture_names(inputs.images, inputs.root)]
    return files + ([json_file] if json_file is not None else [])


def new_run_folder(base: Path | None = None) -> Path:
    """A new numbered folder ``base/<n>`` (``DEFAULT_OUT``, relative to the working directory: one more than the
    highest number there), made here so that two demos started together do not share it."""
    base = DEFAULT_OUT if base is None else base
    base.mkdir(parents=True, exist_ok=True)
    taken = [int(p.name) for p in base.iterdir() if p.name.isdigit()]
    n = max(taken, default=0) + 1
    while True:
        try:
            (base / str(n)).mkdir()
            return base / str(n)
        except FileExistsError:
            n += 1


class Drawing:
    """How each picture is drawn: skeletons with each person's box and score, or tracked people in their ids'
    colours with trails."""

    def __init__(self, skeleton: Skeleton, tracked: bool):
        self.skeleton = skeleton
        self.trails = Trails() if tracked else None

    def __call__(self, image: np.ndarray, people: list[Person]) -> np.ndarray:
        if self.trails is None:
            return draw_detections(image, people, self.skeleton)
        self.trails.update(people)
        return draw_tracked(image, people, self.skeleton, self.trails)


class PictureWriter:
    """Each drawn image to ``out_dir / <its picture name>``."""

    def __init__(self, out_dir: Path, inputs: Inputs):
        self.out_dir = out_dir
        self.names = picture_names(inputs.images, inputs.root)

    def write(self, index: int, drawn: np.ndarray, path: Path) -> None:
        ok, data = cv2.imencode(".jpg", drawn)
        if not ok:
            raise UserError(f"could not encode the drawing of {path}")
        atomic_write_bytes(self.out_dir / self.names[index], data.tobytes())


class VideoWriter:
    """Drawn frames into ``target`` (mp4), opened at the first frame at ``fps``; the file appears, complete, when
    the writer's context ends (``atomic_path``)."""

    def __init__(self, target: Path, fps: float, stack: contextlib.ExitStack):
        self.target, self.fps, self.stack = target, fps, stack
        self.tmp = stack.enter_context(atomic_path(target, suffix=".tmp.mp4"))
        self.writer: cv2.VideoWriter | None = None

    def write(self, index: int, drawn: np.ndarray, path: Path | None = None) -> None:
        if self.writer is None:
            self.writer = open_video_writer(self.tmp, self.target, self.fps, drawn.shape[:2])
            self.stack.callback(self.writer.release)  # released before atomic_path renames the file
        self.writer.write(drawn)


def held_back_notes(tracker: PoseTracker, gate: str) -> list[str]:
    """What the tracker held back of the last frame, for the line of that picture (``gate``: the setting that
    scores are compared with, e.g. ``--min-score``)."""
    held = tracker.held_back
    notes = [f"{held.unconfirmed} held back by tracking (track.min_hits)"] if held.unconfirmed else []
    return notes + ([f"{held.untracked} below {gate}"] if held.untracked else [])


def describe_held_back(tracker: PoseTracker, gate: str) -> str | None:
    """One line on the people tracking held back over the whole input (None when it held back no one)."""
    held, cfg = tracker.held_back_total, tracker.cfg
    if not any(held):
        return None
    parts = []
    if held.unconfirmed:
        parts.append(
            f"{held.unconfirmed} in tracks not yet confirmed (a person is reported from the frame their track has "
            f"been matched in track.min_hits={cfg.min_hits} frames in a row; track.min_hits=1 reports everyone from "
            "their first frame)"
        )
    if held.untracked:
        parts.append(
            f"{held.untracked} scored below {gate}={cfg.min_score:g} (fragments, not tracked; {gate}=0 tracks everyone)"
        )
    return f"tracking held back {counted(sum(held), 'person', 'people')}: {', '.join(parts)}"
