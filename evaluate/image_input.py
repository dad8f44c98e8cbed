"""What ``PoseEstimator`` takes as an image, turned into the (H, W, 3) uint8 BGR array the network reads.

* a path (``str`` or ``Path``): read with ``data.image_files.read_image`` (as stored, EXIF orientation ignored,
  16-bit scaled to 8, alpha dropped), ``ImageFileError`` naming the file when it is missing or not an image;
* a uint8 array: BGR (H, W, 3) as ``cv2.imread`` gives it, greyscale (H, W) or (H, W, 1) (repeated over the three
  channels), BGRA (H, W, 4) (alpha dropped, as OpenCV drops it when reading a file);
* a PIL image: RGB turned to BGR; greyscale, palette, alpha (dropped), CMYK and the other 8-bit modes through
  Pillow's ``convert("RGB")``; 16-bit greyscale (``I;16``, and ``I``, the mode older Pillows open 16-bit PNGs in)
  scaled to 8 bits as OpenCV scales a 16-bit file. A PIL image's pixels are taken as they are: ``Image.open``
  does not turn a photo by its EXIF orientation either, so a path and its PIL image give the same pixels.

Anything else (float or 16-bit arrays, other shapes, an empty image, None, bytes, tensors) is refused with a
``UserError`` naming the image's index in the call and what to give instead.
"""

from __future__ import annotations

import glob
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from PIL import Image

from simplepose.data.image_files import read_image
from simplepose.evaluate.video import VIDEO_SUFFIXES
from simplepose.utils.errors import UserError

ImageLike = np.ndarray | Image.Image | str | Path  # what PoseEstimator takes as one image
IMAGE_KINDS = (
    "BGR uint8 arrays (H, W, 3) as cv2.imread returns, greyscale (H, W) or BGRA (H, W, 4) uint8 arrays, "
    "PIL images or image file paths (several images: a list of them)"
)


def as_bgr(image: Any, index: int) -> np.ndarray:
    """The (H, W, 3) uint8 BGR pixels of one image given to the API (the module docstring says which kinds), at
    ``index`` in the call (for the message)."""
    if isinstance(image, (str, Path)):
        refuse_many_pictures(image, index)
        return read_image(image)
    if isinstance(image, Image.Image):
        return _pil_to_bgr(image, index)
    if isinstance(image, np.ndarray):
        return _array_to_bgr(image, index)
    if image is None:
        what = (
            "None, not an image (cv2.imread returns None for a file it cannot read: check the path, or give the "
            "path itself, read by data.image_files.read_image, which names the problem)"
        )
    elif isinstance(image, (bytes, bytearray, memoryview)):
        what = "a bytes object (an encoded file's bytes? decode them with data.image_files.decode_image)"
    else:
        what = f"a {type(image).__name__}"
    raise _refused(index, what)


def refuse_many_pictures(path: str | Path, index: int) -> None:
    """UserError pointing to ``PoseEstimator.stream`` when the path of image ``index`` is a folder, a pattern or a
    video: inputs of many pictures, which ``estimator(...)`` (one image, or a list) does not read."""
    p = Path(path)
    if p.is_dir():
        what = "a folder"
    elif glob.has_magic(str(path)) and not p.exists():
        what = "a pattern"
    elif p.suffix.lower() in VIDEO_SUFFIXES:
        what = "a video"
    else:
        return
    raise UserError(
        f"image {index}: {path} is {what}; estimator(...) reads single images (or a list of them): for the "
        f"{'frames' if what == 'a video' else 'pictures'} of {what}, one at a time, use "
        f"estimator.stream({str(path)!r})",
        file=path,
        key="image",
        sample=index,
    )


def as_bgr_list(images: Any) -> list[np.ndarray]:
    """``as_bgr`` of each image of a list, tuple or other iterable (an (N, H, W, 3) array too); UserError for one
    image where several are expected."""
    single = isinstance(images, (str, Path, Image.Image)) or (isinstance(images, np.ndarray) and images.ndim < 4)
    if single or images is None or not hasattr(images, "__iter__"):
        raise UserError(
            f"images: {'None' if images is None else 'a ' + type(images).__name__}, not a list of "
            "images; give a list (one image: estimator(image))",
            key="image",
        )
    return [as_bgr(image, i) for i, image in enumerate(images)]


def _array_to_bgr(image: np.ndarray, index: int) -> np.ndarray:
    shape = image.shape
    if image.dtype != np.uint8:
        hint = ""
        if np.issubdtype(image.dtype, np.floating):
            hint = " (values in 0..1? give (image * 255).round().clip(0, 255).astype(np.uint8))"
        elif image.dtype.kind == "u" and image.dtype.itemsize == 2:
            hint = " (16 bits? give (image / 256).round().clip(0, 255).astype(np.uint8), as OpenCV reads such a file)"
        raise _refused(index, f"a {image.dtype} array of shape {shape}{hint}")
    channels = 1 if image.ndim == 2 else shape[2] if image.ndim == 3 else 0
    if channels not in (1, 3, 4) or min(shape[:2], default=0) < 1:
        raise _refused(index, f"a uint8 array of shape {shape}")
    if channels == 3:
        return image
    if channels == 4:
        return cv2.cvtColor(np.ascontiguousarray(image), cv2.COLOR_BGRA2BGR)
    return cv2.cvtColor(np.ascontiguousarray(image.reshape(shape[:2])), cv2.COLOR_GRAY2BGR)


def _pil_to_bgr(image: Image.Image, index: int) -> np.ndarray:
    mode = image.mode
    if min(image.size) < 1:
        raise _refused(index, f"an empty PIL image ({image.size[0]}x{image.size[1]})")
    if mode.startswith("I;16") or mode == "I":
        wide = np.asarray(image).astype(np.float64).clip(0, 65535)
        grey = np.rint(wide / 256.0).clip(0, 255).astype(np.uint8)  # as OpenCV turns a 16-bit file into 8 bits
        return cv2.cvtColor(grey, cv2.COLOR_GRAY2BGR)
    if mode == "F":
        raise _refused(index, "a PIL image of mode F (32-bit float); give image.convert('L') or an 8-bit image")
    if mode != "RGB":
        try:
            image = image.convert("RGB")
        except (ValueError, OSError) as e:
            raise _refused(index, f"a PIL image of mode {mode}, which Pillow cannot convert to RGB ({e})") from None
    return np.ascontiguousarray(np.asarray(image)[:, :, ::-1])


def _refused(index: int, what: str) -> UserError:
    return UserError(f"image {index} is {what}; give {IMAGE_KINDS}", key="image", sample=index)
