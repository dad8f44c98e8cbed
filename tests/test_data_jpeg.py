"""data.jpeg: the training pipeline's decoder gives OpenCV's pixels (as BGRA), at full and reduced sizes, ignores
EXIF orientation, and falls back to OpenCV for what libjpeg-turbo refuses."""

from __future__ import annotations

import struct

import cv2
import numpy as np
import pytest

from simplepose.data.jpeg import decode_bgra

REDUCED = {1: cv2.IMREAD_COLOR, 2: cv2.IMREAD_REDUCED_COLOR_2, 4: cv2.IMREAD_REDUCED_COLOR_4}


def with_exif_orientation(jpeg: bytes, orientation: int) -> bytes:
    """The same JPEG with an APP1 Exif segment holding only an Orientation tag (no re-encoding)."""
    ifd = struct.pack(">H", 1) + struct.pack(">HHIHH", 0x0112, 3, 1, orientation, 0) + struct.pack(">I", 0)
    payload = b"Exif\0\0" + b"MM\0\x2a" + struct.pack(">I", 8) + ifd
    return jpeg[:2] + b"\xff\xe1" + struct.pack(">H", len(payload) + 2) + payload + jpeg[2:]


@pytest.fixture(scope="module")
def sample_jpegs(sample_images):
    """Eight JPEG files of the synthetic sample (OpenCV's encoder), then of the real one (cameras' and editors')."""
    return [p.read_bytes() for p in sorted(sample_images.glob("*.jpg"))[:8]]


@pytest.mark.parametrize("factor", [1, 2, 4])
def test_pixels_equal_opencv(sample_jpegs, factor):
    for jpeg in sample_jpegs:
        data = np.frombuffer(jpeg, np.uint8)
        ref = cv2.imdecode(data, REDUCED[factor] | cv2.IMREAD_IGNORE_ORIENTATION)
        got = decode_bgra(data, factor)
        assert got.shape == (*ref.shape[:2], 4)
        np.testing.assert_array_equal(got[..., :3], ref)
        assert (got[..., 3] == 255).all()


def test_exif_orientation_is_ignored(sample_jpegs):
    jpeg = sample_jpegs[0]
    rotated_tag = np.frombuffer(with_exif_orientation(jpeg, 6), np.uint8)
    assert cv2.imdecode(rotated_tag, cv2.IMREAD_COLOR).shape[:2][::-1] == decode_bgra(rotated_tag).shape[:2]
    np.testing.assert_array_equal(decode_bgra(rotated_tag), decode_bgra(np.frombuffer(jpeg, np.uint8)))


def test_exif_orientation_is_ignored_in_evaluation(sample_jpegs, tmp_path):
    from simplepose.data.image_files import read_image

    path = tmp_path / "tagged.jpg"
    path.write_bytes(with_exif_orientation(sample_jpegs[0], 6))
    np.testing.assert_array_equal(read_image(path), decode_bgra(np.frombuffer(sample_jpegs[0], np.uint8))[..., :3])


def test_other_formats_fall_back_to_opencv():
    picture = np.random.default_rng(0).integers(0, 256, (20, 30, 3), dtype=np.uint8)
    png = cv2.imencode(".png", picture)[1].ravel()
    np.testing.assert_array_equal(decode_bgra(png), picture)  # BGR, as OpenCV decodes it
    assert decode_bgra(np.frombuffer(b"not an image at all", np.uint8)) is None
