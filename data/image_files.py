"""Image files as every part of the project reads them: the converter, the dataset, the evaluator, the demo and the
Python API follow one rule (docs/keypoint_sets.md#image-files-formats-and-orientation).

* **Formats**: anything OpenCV decodes (JPEG, progressive or CMYK included, PNG of 8 or 16 bits, BMP, WebP, TIFF,
  ...). Every image becomes 8-bit BGR as OpenCV's ``IMREAD_COLOR`` makes it: greyscale is repeated over the three
  channels, alpha is dropped, 16 bits are scaled to 8.
* **Orientation**: the pixels as stored; an EXIF orientation tag is ignored (``cv2.IMREAD_IGNORE_ORIENTATION``).
  COCO-format annotations give coordinates in the stored pixels, so a reader that turned the picture upright would
  move every person away from its keypoints (``cv2.imread`` does turn it: read images with ``read_image``). OpenCV
  5.0 follows the flag for JPEG, PNG (eXIf) and WebP, never turns AVIF (irot/imir), but turns a TIFF by its
  Orientation tag whatever the flag: that turn is undone here, exactly (flips and transposes), so a TIFF is read as
  stored too (``_imdecode``; whether this OpenCV turns TIFFs is probed once, ``_opencv_turns_tiff``).

    image = read_image("photo.jpg")       # (H, W, 3) uint8 BGR as stored; ImageFileError naming the file otherwise

The checks of an image file against its annotation (``inspect_image``: missing, not an image, truncated, another
size) are the converter's and the evaluator's alike, and so is what they do with a bad one (``BadImages``): stop
with the file named, or, with ``--skip-bad``, skip it with a warning and count it, and stop all the same when more
than ``MAX_SKIPPED_SHARE`` of the images were skipped (a wrong ``--images`` folder, not bad files).
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np
from PIL import Image

from simplepose.utils.errors import AnnotationError, UserError
from simplepose.utils.file_kind import file_kind
from simplepose.utils.safe_paths import safe_image_path

log = logging.getLogger(__name__)

IMREAD_FLAGS = cv2.IMREAD_COLOR | cv2.IMREAD_IGNORE_ORIENTATION  # the rule: 8-bit BGR, as stored
MAX_SKIPPED_SHARE = 0.5  # with --skip-bad: more images than this share skipped stops the command
_JPEG_START, _JPEG_END = b"\xff\xd8", b"\xff\xd9"
_TIFF_STARTS = (b"II*\0", b"MM\0*", b"II+\0", b"MM\0+")  # little / big endian, classic / BigTIFF
_ORIENTATION_TAG = 0x0112  # TIFF and EXIF: 1 as stored; 2-8 flips and turns
# What undoes the turn OpenCV applies for each orientation value (each is its own inverse but 6 and 8).
_UNDO_ORIENTATION: dict[int, Callable[[np.ndarray], np.ndarray]] = {
    2: lambda a: cv2.flip(a, 1),
    3: lambda a: cv2.rotate(a, cv2.ROTATE_180),
    4: lambda a: cv2.flip(a, 0),
    5: cv2.transpose,
    6: lambda a: cv2.rotate(a, cv2.ROTATE_90_COUNTERCLOCKWISE),
    7: lambda a: cv2.rotate(cv2.transpose(a), cv2.ROTATE_180),
    8: lambda a: cv2.rotate(a, cv2.ROTATE_90_CLOCKWISE),
}
SIZE_MISMATCH = "its pixels are"  # how inspect_image's reason for a size other than the annotation's begins


class ImageFileError(UserError):
    """An image file that cannot be used: ``file`` the path, ``reason`` what is wrong with it (``missing``, ``not an
    image``, ...); ``image_id`` the annotation file's image, when known."""

    def __init__(self, message: str, *, file: str | Path, reason: str, image_id: int | None = None) -> None:
        super().__init__(message, file=file, key="file_name")
        self.reason = reason
        self.image_id = image_id


def decode_image(data: bytes | np.ndarray) -> np.ndarray | None:
    """The (H, W, 3) uint8 BGR pixels of an encoded image by the rule above, or None when OpenCV cannot decode it."""
    buffer = np.frombuffer(data, np.uint8) if isinstance(data, bytes) else data
    return _imdecode(buffer, IMREAD_FLAGS) if buffer.size else None


def _imdecode(buffer: np.ndarray, flags: int) -> np.ndarray | None:
    """``cv2.imdecode`` of a full-size read (``flags`` with IMREAD_IGNORE_ORIENTATION) giving the stored pixels, for
    every format: a TIFF that OpenCV turned by its Orientation tag is turned back."""
    with _quiet_opencv():
        pixels = cv2.imdecode(buffer, flags)
    if pixels is None or not is_tiff(buffer) or not _opencv_turns_tiff(flags):
        return pixels
    undo = _UNDO_ORIENTATION.get(tiff_orientation(buffer))
    return pixels if undo is None else np.ascontiguousarray(undo(pixels))


def is_tiff(data: bytes | np.ndarray) -> bool:
    return bytes(data[:4]) in _TIFF_STARTS


def tiff_orientation(data: bytes | np.ndarray) -> int:
    """The Orientation tag of a TIFF's first image (1: as stored, also when it has none), read by Pillow from the
    tags without decoding the pixels."""
    try:
        with Image.open(io.BytesIO(bytes(data))) as im:
            value = im.getexif().get(_ORIENTATION_TAG, 1)
    except (OSError, SyntaxError, ValueError):  # tags Pillow cannot parse: OpenCV's decode decides
        return 1
    return value if isinstance(value, int) else 1


@functools.cache
def _opencv_turns_tiff(flags: int) -> bool:
    """Whether this OpenCV turns a TIFF by its Orientation tag when decoding with ``flags`` (5.0.0 does, though the
    flags ask it not to): probed on a 1 x 2 TIFF tagged 6 ("turn 90 degrees clockwise"), once per flags."""
    exif = Image.Exif()
    exif[_ORIENTATION_TAG] = 6
    probe = io.BytesIO()
    Image.new("RGB", (2, 1)).save(probe, "TIFF", exif=exif)
    with _quiet_opencv():
        pixels = cv2.imdecode(np.frombuffer(probe.getvalue(), np.uint8), flags)
    return pixels is not None and pixels.shape[:2] == (2, 1)


def read_image(path: str | Path) -> np.ndarray:
    """The (H, W, 3) uint8 BGR pixels of an image file, as stored (EXIF orientation ignored: the pixels the
    annotations refer to). ``ImageFileError`` naming the file when it is missing or not a decodable image."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ImageFileError(f"image {path} not found", file=path, reason="missing") from None
    except OSError as e:
        raise ImageFileError(f"image {path} cannot be read ({e.strerror})", file=path, reason="unreadable") from None
    image = decode_image(data)
    if image is None:
        raise ImageFileError(
            f"image {path} could not be decoded (corrupt, or not an image OpenCV reads)",
            file=path,
            reason="not an image",
        )
    return image


def is_jpeg(data: bytes | np.ndarray) -> bool:
    return bytes(data[:2]) == _JPEG_START


def stored_size(data: bytes | np.ndarray) -> tuple[int, int] | None:
    """(width, height) of the stored pixels of encoded image bytes (EXIF orientation ignored), or None when they do not
    decode. A JPEG is decoded at 1/8 of its size (its DCT scaling), anything else in full."""
    buffer = np.frombuffer(data, np.uint8)
    if is_jpeg(data):
        with _quiet_opencv():
            small = cv2.imdecode(buffer, cv2.IMREAD_REDUCED_GRAYSCALE_8 | cv2.IMREAD_IGNORE_ORIENTATION)
        if small is None:
            return None
        # the reduced size rounds up: read the exact size from the header
        with Image.open(io.BytesIO(data if isinstance(data, bytes) else data.tobytes())) as im:
            return im.size
    full = _imdecode(buffer, cv2.IMREAD_GRAYSCALE | cv2.IMREAD_IGNORE_ORIENTATION)
    return None if full is None else (full.shape[1], full.shape[0])


def inspect_image(
    data: bytes, width: int | None, height: int | None, decoded: np.ndarray | None = None
) -> tuple[tuple[int, int] | None, str | None]:
    """((width, height) of the stored pixels, what is wrong) of the bytes of an image file whose annotation says
    ``width`` x ``height`` (None: not given): ((w, h), None) for a complete image of that size. ``decoded``: the
    bytes already decoded (``decode_image``; None where that failed), whose size is then used instead of decoding
    them once more."""
    if len(data) < 8:
        return None, "not an image (the file is empty or a few bytes)"
    if is_jpeg(data) and _JPEG_END not in data[-4096:] and _truncated(data):
        return None, "truncated or corrupt JPEG (it does not decode to its end)"
    size: tuple[int, int] | None
    if decoded is not None:
        size = (decoded.shape[1], decoded.shape[0])
    else:
        try:
            size = stored_size(data)
        except (OSError, SyntaxError, ValueError):  # Pillow on a JPEG whose header is damaged
            size = None
    if size is None:
        return None, "not an image OpenCV decodes (corrupt, truncated, or another kind of file)"
    if (width, height) != (None, None) and size != (width, height):
        return size, f"{SIZE_MISMATCH} {size[0]}x{size[1]}, not the annotation's {width}x{height}"
    return size, None


def _truncated(data: bytes) -> bool:
    """Full decode with Pillow, which (unlike OpenCV) fails on a truncated JPEG; only for files whose tail has no
    end-of-image marker (OpenCV fills the missing part silently)."""
    try:
        with Image.open(io.BytesIO(data)) as im:
            im.load()
    except (OSError, SyntaxError, ValueError):
        return True
    return False


@contextlib.contextmanager
def _quiet_opencv() -> Iterator[None]:
    """OpenCV's decoders print their own error lines for a corrupt file; the caller reports it instead."""
    # cv2.utils.logging in newer OpenCV (5.x; 4.10 lacks it), the same functions at the top level in 4.x (0: silent)
    api = getattr(cv2.utils, "logging", cv2)
    get_level, set_level = api.getLogLevel, api.setLogLevel
    level = get_level()
    set_level(0)
    try:
        yield
    finally:
        set_level(level)


def image_path(images_dir: Path, img: dict, annotations: Path | str) -> Path:
    """``images_dir / img["file_name"]``; AnnotationError when the name leads outside the folder (a ``..`` part, an
    absolute path) or holds a NUL byte: such files are never read. Links in the folder are followed (the user's own;
    ``utils.safe_paths``). ``annotations``: the annotation file (a path), or words that name the list the name
    comes from."""
    name, image_id = img["file_name"], img.get("id")
    if "\x00" in name:
        raise AnnotationError(
            f"{_listed_in(annotations)}: image file_name {name!r} (image id {image_id}) contains a NUL byte; fix the "
            "file_name",
            file=annotations,
            key="file_name",
            image_id=image_id,
        )
    path = safe_image_path(Path(images_dir), name)
    if path is None:
        raise AnnotationError(
            f"{_listed_in(annotations)}: image file_name {name!r} (image id {image_id}) leads outside the image "
            f"folder {images_dir} (through '..' or an absolute path); such names are never read: give the name "
            "relative to the folder, or put the image (or a link to it) into the folder",
            file=annotations,
            key="file_name",
            image_id=image_id,
        )
    return path


def _listed_in(annotations: Path | str) -> str:
    """``annotation file X`` for a path, the words as given for a description (``the image list``)."""
    return f"annotation file {annotations}" if isinstance(annotations, Path) else str(annotations)


def read_checked(path: Path, img: dict) -> tuple[bytes | None, tuple[int, int] | None, str | None]:
    """(the file's bytes, (width, height), None) when it is a complete image of the size ``img`` (an annotation file's
    image entry) gives, if it gives one; else (None, None, what is wrong: ``missing``, ``unreadable (...)`` or
    ``inspect_image``'s reason). For a reader that keeps the bytes (the converter): JPEGs are checked at 1/8 size."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None, None, "missing"
    except OSError as e:
        return None, None, f"unreadable ({e.strerror})"
    size, problem = inspect_image(data, img.get("width"), img.get("height"))
    return (None, None, problem) if problem else (data, size, None)


def read_decoded_checked(path: Path, img: dict) -> tuple[np.ndarray | None, str | None]:
    """(the (H, W, 3) uint8 pixels, None), or (None, what is wrong) as ``read_checked`` says it, for a reader that
    needs the pixels (the evaluator): the file is decoded once, and its checks use that decode."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None, "missing"
    except OSError as e:
        return None, f"unreadable ({e.strerror})"
    image = decode_image(data) if len(data) >= 8 else None
    if image is None:
        return None, inspect_image(data, img.get("width"), img.get("height"))[1] or "not an image OpenCV decodes"
    _, problem = inspect_image(data, img.get("width"), img.get("height"), decoded=image)
    return (None, problem) if problem else (image, None)


@dataclass
class BadImages:
    """What a command does with bad image files (``inspect_image``), the same in the converter and the evaluator:
    without ``skip_bad`` the first stops it (``ImageFileError``); with it each is skipped with a warning and listed
    in ``skipped``, and ``check_share`` stops the command when more than ``MAX_SKIPPED_SHARE`` of the images were
    skipped. ``images_dir``, ``option``: for the messages (the folder given, the option that skips)."""

    images_dir: Path
    skip_bad: bool = False
    option: str = "--skip-bad"
    skipped: list[dict] = field(default_factory=list)  # {"file", "image_id", "reason"}

    def report(self, path: Path, image_id: int | None, reason: str) -> None:
        """One bad image: stop, or skip it with a warning (``skip_bad``)."""
        if not self.skip_bad:
            if reason == "missing":
                hint = f"check that --images ({self.images_dir}) is the folder of the annotation file's images"
            elif reason.startswith(SIZE_MISMATCH):
                hint = (
                    "the file decodes, but not to the size the annotation gives its image: check that the "
                    "annotation file belongs to these images (not to resized copies), or correct its width and "
                    "height"
                )
            else:
                hint = "replace the file (a complete copy of the image)"
            what = f"{path} (image id {image_id}): {reason}"
            if reason == "missing":
                what = f"{path} not found (image id {image_id})"
            raise ImageFileError(
                f"image {what}; {hint}, or pass {self.option} to skip such images",
                file=path,
                reason=reason,
                image_id=image_id,
            )
        self.skipped.append({"file": str(path), "image_id": image_id, "reason": reason})
        log.warning("skipping image %s (image id %s): %s", path, image_id, reason)

    def check_share(self, total: int) -> None:
        """UserError when more than ``MAX_SKIPPED_SHARE`` of ``total`` images were skipped, naming the likely cause."""
        n = len(self.skipped)
        if total and n > MAX_SKIPPED_SHARE * total:
            missing = sum(s["reason"] == "missing" for s in self.skipped)
            cause = (
                f"{missing} of them are missing: --images ({self.images_dir}) is most likely not the folder of "
                "the annotation file's images"
                if missing
                else "check that the files are complete copies and that --annotations belongs to these images"
            )
            raise UserError(
                f"{n} of {total} images were skipped as bad (more than {MAX_SKIPPED_SHARE:.0%}, the most "
                f"{self.option} accepts): {cause}; first: {self.skipped[0]['file']}: {self.skipped[0]['reason']}",
                file=self.images_dir,
                key="images",
            )


def missing_files(paths: list[Path]) -> list[Path]:
    """The paths that are not files (checked before any work, so that a wrong folder fails at once)."""
    return [p for p in paths if not p.is_file()]


def check_image_folder(folder: str | Path, option: str = "--images") -> None:
    """UserError unless ``folder`` is a folder: a file given there (most often the annotations JSON, with
    ``--annotations`` given the folder: the two swapped) is named as what it is."""
    path = Path(folder)
    if path.is_dir():
        return
    if path.is_file():
        kind = file_kind(path)
        annotations = kind.name == "json" or path.suffix.lower() == ".json"
        hint = " (the annotations? --annotations takes the JSON file, --images its image folder)" if annotations else ""
        what = kind.description or "a file"
        raise UserError(f"{option} {path} is {what}, not a folder of images{hint}", file=path)
    raise UserError(f"image folder {path} not found; give the folder holding the image files ({option})", file=path)
