"""What ``PoseEstimator.stream`` and the demo take as input, turned into frames: image files, a folder, a pattern, a
video file, a camera, or images already in memory (arrays, PIL images).

    inputs = open_inputs("shots/*.jpg")   # also: "photo.jpg", "images/", "'dir/**/*.png'", "clip.mp4", "0", 0
    for frame in estimator.stream(inputs): ...

A folder gives its images (not recursive), a pattern the image files it matches (``**``: any depth) in name order,
a string of digits that names no file a camera index. Images are read in their stored pixel layout (EXIF orientation
ignored), as evaluation reads them; a file that cannot be read becomes a frame with its ``error`` and no image, so that
a caller can say so and go on.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from simplepose.data.image_files import ImageFileError, read_image
from simplepose.evaluate.image_to_bgr import as_bgr
from simplepose.evaluate.unannotated_images import IMAGE_SUFFIXES, image_files
from simplepose.evaluate.video import VIDEO_SUFFIXES, VideoReader
from simplepose.utils.errors import UserError


@dataclass(frozen=True)
class InputFrame:
    """One image of an input: its position, its time (seconds; ``index / fps`` for pictures), its pixels ((H, W, 3)
    uint8 BGR; None when the file could not be read, with ``error`` saying why) and the file it came from."""

    index: int
    timestamp: float
    image: np.ndarray | None
    path: Path | None = None
    error: ImageFileError | None = None

    @property
    def key(self) -> Path | int:
        """What names the image for a map source: its file, else its index (a video's frame: the oracle's image id)."""
        return self.path if self.path is not None else self.index


@dataclass(frozen=True)
class Inputs:
    """Image files (in order, ``root`` the folder or a pattern's fixed start below which their sub-folders count), a
    video file, a camera index, or in-memory images: one of them."""

    images: tuple[Path, ...] = ()
    video: Path | None = None
    camera: int | None = None
    arrays: tuple[Any, ...] | None = None  # images as ``evaluate.image_to_bgr`` takes them
    root: Path = Path(".")

    @property
    def name(self) -> str:
        """``camera<N>``, the video's stem, or ``images``."""
        return f"camera{self.camera}" if self.camera is not None else self.video.stem if self.video else "images"

    @property
    def is_video(self) -> bool:
        """A video file or a camera: frames read one after the other, timed by the stream."""
        return self.video is not None or self.camera is not None

    def open_video(self) -> VideoReader:
        """The reader of a video file or a camera (``is_video``)."""
        source = self.camera if self.camera is not None else self.video
        if source is None:
            raise ValueError("Inputs.open_video: neither a video file nor a camera")
        return VideoReader(source)

    def frames(self, fps: float = 30.0) -> Iterator[InputFrame]:
        """Each image in order (pictures ``1 / fps`` seconds apart; a video's at its own rate), read as it comes."""
        if self.is_video:
            with self.open_video() as reader:
                for index, timestamp, image in reader:
                    yield InputFrame(index, timestamp, image)
            return
        if self.arrays is not None:
            for index, image in enumerate(self.arrays):
                yield InputFrame(index, index / fps, as_bgr(image, index))
            return
        for index, path in enumerate(self.images):
            try:
                pixels: np.ndarray | None = read_image(path)
                error: ImageFileError | None = None
            except ImageFileError as e:
                pixels, error = None, e
            yield InputFrame(index, index / fps, pixels, path, error)


def open_inputs(given: Any) -> Inputs:
    """``given`` as ``Inputs``: a path or a string (an image, a folder of images, a video, a pattern the project
    expands itself, quoted so that the shell leaves it: ``'dir/*.jpg'``, ``'dir/**/*.png'``; a camera index as
    digits), an int (a camera), an array or PIL image (one image), or a list or tuple of images (arrays, PIL images or
    paths). UserError when a path does not exist or a pattern matches no image (a camera is checked when opened)."""
    if isinstance(given, Inputs):
        return given
    if isinstance(given, int) and not isinstance(given, bool):
        return Inputs(camera=given)
    if isinstance(given, (np.ndarray, Image.Image)):
        return Inputs(arrays=(given,))
    if isinstance(given, (list, tuple)):
        if all(isinstance(g, (str, Path)) for g in given) and given:
            paths = tuple(Path(g) for g in given)
            return Inputs(images=paths, root=common_root(paths))
        return Inputs(arrays=tuple(given))
    if not isinstance(given, (str, Path)):
        raise UserError(
            f"input: a {type(given).__name__}; give a path, a folder, a pattern, a video, a camera index, an image "
            "array or PIL image, or a list of images",
            key="input",
        )
    text = str(given)
    path = Path(os.path.expanduser(text))
    if not path.exists():
        if text.isdigit():
            return Inputs(camera=int(text))
        if glob.has_magic(text):
            return pattern_inputs(str(path))
        raise UserError(
            f"input {path} not found (give an image, a folder of images, a quoted pattern such as "
            "'dir/*.jpg', a video, or a camera index)"
        )
    if path.is_dir():
        return Inputs(images=tuple(image_files(path)), root=path)
    if path.suffix.lower() in VIDEO_SUFFIXES:
        return Inputs(video=path)
    return Inputs(images=(path,), root=path.parent)


def pattern_inputs(pattern: str) -> Inputs:
    """The image files a glob pattern matches (``**``: any depth), sorted; their root is the pattern's fixed start."""
    matched = sorted(Path(p) for p in glob.glob(pattern, recursive=True) if Path(p).is_file())
    images = [p for p in matched if p.suffix.lower() in IMAGE_SUFFIXES]
    if not images:
        others = f" ({len(matched)} other files: a pattern selects images, give a video on its own)" if matched else ""
        raise UserError(
            f"input pattern {pattern!r} matches no image files ({', '.join(sorted(IMAGE_SUFFIXES))}){others}"
        )
    fixed = []
    for part in Path(pattern).parts[:-1]:
        if glob.has_magic(part):
            break
        fixed.append(part)
    return Inputs(images=tuple(images), root=Path(*fixed) if fixed else Path("."))


def common_root(paths: Sequence[Path]) -> Path:
    """The deepest folder holding every one of ``paths`` (the current one when they mix absolute and relative)."""
    try:
        return Path(os.path.commonpath([p.parent for p in paths]))
    except ValueError:
        return Path(".")


def check_frames(images: Sequence[Path], given: str) -> None:
    """UserError unless ``images`` can be the frames of one video (tracking pictures): more than one, all of one size
    (read from the file headers; a file that cannot be read is left to the run, which skips it)."""
    if len(images) == 1:
        raise UserError(
            f"--track follows people across the frames of a video, and --input {given} is one picture: drop --track "
            "(or give a video, or a folder of its frames)",
            key="input",
        )
    sizes: dict[tuple[int, int], Path] = {}
    for path in images:
        try:
            with Image.open(path) as im:
                sizes.setdefault(im.size, path)
        except (OSError, ValueError, Image.DecompressionBombError):
            continue
    if len(sizes) > 1:
        shown = ", ".join(f"{p.name} {w}x{h}" for (w, h), p in list(sizes.items())[:3])
        raise UserError(
            f"--track follows people across the frames of one video, but the {len(images)} pictures of --input "
            f"{given} have {len(sizes)} sizes ({shown}{', ...' if len(sizes) > 3 else ''}): they are not frames of "
            "one sequence. Drop --track to find the people in each picture, or give the frames of one video (in "
            "name order, --fps apart)",
            key="input",
        )
