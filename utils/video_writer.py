"""Video files written with OpenCV: one codec, and one refusal where OpenCV cannot encode it, for every writer."""

from __future__ import annotations

from pathlib import Path

import cv2

from simplepose.utils.errors import UserError

VIDEO_CODEC = "mp4v"
VIDEO_FOURCC = cv2.VideoWriter.fourcc(*VIDEO_CODEC)  # the codec's four-character code, as VideoWriter takes it


def open_video_writer(tmp: Path, target: Path, fps: float, size_hw: tuple[int, int]) -> cv2.VideoWriter:
    """An OpenCV writer of frames of ``size_hw`` (rows, cols) at ``fps`` into ``tmp``, the temporary file that becomes
    ``target`` (``utils.io.atomic_path``); UserError naming ``target`` when OpenCV has no encoder for it here."""
    writer = cv2.VideoWriter(str(tmp), VIDEO_FOURCC, fps, (size_hw[1], size_hw[0]))
    if not writer.isOpened():
        raise UserError(f"cannot write video {target}: OpenCV has no {VIDEO_CODEC} encoder for {target.suffix} here")
    return writer
