"""Decoding of stored image bytes for the training pipeline: BGRA pixels, optionally reduced in the DCT domain.

libjpeg-turbo (through simplejpeg) writes BGRA straight from its colour conversion, which is the layout the warp
wants (``data.augment.warp_image``), and decodes a little faster than OpenCV; the pixels are bit-identical to
``cv2.imdecode``'s (checked on the real COCO sample, full and reduced sizes). Anything simplejpeg refuses (PNG, BMP,
WebP and other formats, CMYK, a JPEG with recoverable errors) is decoded by OpenCV instead, as BGR, by the project's
one rule (``data.image_files``: 8-bit BGR, EXIF orientation ignored, as COCO annotations refer to the stored pixels),
and reduced by averaging factor x factor blocks, as the DCT scaling does.
"""

from __future__ import annotations

import math

import cv2
import numpy as np
import simplejpeg

from simplepose.data.image_files import IMREAD_FLAGS, decode_image, is_jpeg

_CV2_FLAGS = {
    f: flag | cv2.IMREAD_IGNORE_ORIENTATION
    for f, flag in (
        (1, IMREAD_FLAGS),
        (2, cv2.IMREAD_REDUCED_COLOR_2),
        (4, cv2.IMREAD_REDUCED_COLOR_4),
        (8, cv2.IMREAD_REDUCED_COLOR_8),
    )
}


def decode_bgra(data: np.ndarray, factor: int = 1) -> np.ndarray | None:
    """Decode image bytes at 1/``factor`` of their size (``factor`` in 1, 2, 4, 8; reduced pixel u covers original
    pixels factor*u .. factor*u + factor - 1, and the size rounds up).

    Args: (N,) uint8 bytes. Returns (H, W, 4) BGRA uint8, or (H, W, 3) BGR when OpenCV had to decode them, or
    None if they are not a decodable image.
    """
    try:
        if factor == 1:
            return simplejpeg.decode_jpeg(data, "BGRA")
        h, w = simplejpeg.decode_jpeg_header(data)[:2]
        return simplejpeg.decode_jpeg(
            data, "BGRA", min_height=math.ceil(h / factor), min_width=math.ceil(w / factor), min_factor=factor
        )
    except ValueError:
        if is_jpeg(data):  # OpenCV's reduced JPEG decode is libjpeg's DCT scaling too
            return cv2.imdecode(data, _CV2_FLAGS[factor])
        return reduced(decode_image(data), factor)


def reduced(image: np.ndarray | None, factor: int) -> np.ndarray | None:
    """The mean of every ``factor`` x ``factor`` block of an (H, W, C) image, the last row and column of blocks
    completed by repeating the edge (what a JPEG decoder's DCT scaling gives): (ceil(H / f), ceil(W / f), C)."""
    if image is None or factor == 1:
        return image
    h, w = image.shape[:2]
    pad_h, pad_w = -h % factor, -w % factor
    if pad_h or pad_w:
        image = cv2.copyMakeBorder(image, 0, pad_h, 0, pad_w, cv2.BORDER_REPLICATE)
    size = ((w + pad_w) // factor, (h + pad_h) // factor)
    return cv2.resize(image, size, interpolation=cv2.INTER_AREA)
