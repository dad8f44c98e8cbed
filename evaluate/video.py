"""Reading a video file or a camera frame by frame, with each frame's time (for the tracker's One-Euro filter).

    with VideoReader("clip.mp4") as video:  # or VideoReader(0): camera 0
        for index, timestamp, image in video:  # timestamp: seconds from the first frame
            ...

A file's frame i is at i / fps (the container's frame rate; DEFAULT_FPS, with a warning, when it gives none); a
camera's frames are timed by the clock as they are read, since cameras drop and delay frames.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import cv2
import numpy as np

from simplepose.utils.errors import UserError

VIDEO_SUFFIXES = {".mp4", ".avi", ".mov", ".mkv", ".webm"}  # files read as videos (evaluate.inputs)

LOG = logging.getLogger(__name__)

DEFAULT_FPS = 30.0


class VideoReader:
    """An opened video file (a path) or camera (an index); UserError when it cannot be opened."""

    def __init__(self, source: str | Path | int):
        self.camera = source if isinstance(source, int) else None
        self.path = None if isinstance(source, int) else Path(source)
        self._cap = cv2.VideoCapture(self.camera if self.camera is not None else str(self.path))
        if not self._cap.isOpened():
            self._cap.release()
            why = "unsupported codec or corrupt file" if self.camera is None else "no such camera, or it is in use"
            raise UserError(f"{self.describe()} could not be opened ({why})", file=self.path)
        reported = self._cap.get(cv2.CAP_PROP_FPS) or 0.0
        self.fps_reported = reported > 0
        if not self.fps_reported and self.camera is None:
            LOG.warning("video %s gives no frame rate: its frames are timed at %g fps", self.path, DEFAULT_FPS)
        self.fps = reported if self.fps_reported else DEFAULT_FPS
        self.frame_count = int(self._cap.get(cv2.CAP_PROP_FRAME_COUNT) or 0) if self.camera is None else 0

    @property
    def name(self) -> str:
        return f"camera{self.camera}" if self.path is None else self.path.stem

    def describe(self) -> str:
        """For messages: ``video PATH`` or ``camera N``."""
        return f"camera {self.camera}" if self.camera is not None else f"video {self.path}"

    def __iter__(self) -> Iterator[tuple[int, float, np.ndarray]]:
        """(frame index from 0, seconds from the first frame, BGR image) until the stream ends."""
        index, start, timestamp = 0, None, -1.0
        while True:
            ok, image = self._cap.read()
            if not ok:
                return
            if self.camera is None:
                timestamp = index / self.fps
            else:
                now = time.monotonic()
                start = now if start is None else start
                timestamp = max(now - start, timestamp + 1e-6)  # times increase, however fast frames come
            yield index, timestamp, image
            index += 1

    def close(self) -> None:
        self._cap.release()

    def __enter__(self) -> VideoReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
