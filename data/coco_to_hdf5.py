"""Convert COCO person keypoints (JSON + JPEG folder) into one HDF5 training file, streaming.

    python -m data.coco_to_hdf5 --images coco/train2017 \\
        --annotations coco/annotations/person_keypoints_train2017.json --out coco_train512.h5 [--input-size 512]

Options: ``--split train2017+val2017 --val-images coco/val2017 --val-annotations .../person_keypoints_val2017.json``
adds val2017 from its 101st image on (the paper's training set, spec 4.6; evaluating on val2017 is then
contaminated); ``--skip-bad`` skips, with a warning, missing or corrupt images and the images of corrupt
annotations (listed in the settings' ``skipped``); ``--main-person-bbox-bug`` reproduces the original's
main-person spacing (spec 4.4, bug 1).

Only images with at least one main person (spec 4.4) are stored; each main person is one sample (spec 4.5).
Left out and counted (``counts``, and the summary line): images without a main person (legal, e.g. no
people), people with a zero-area box as main persons (they stay as other persons). Always refused, even with
``--skip-bad``: invalid JSON, duplicate image or annotation ids, an image ``file_name`` that leads outside
``--images`` (``..``, an absolute path, a symlink to elsewhere). All image paths are checked, and all missing
files listed, before anything is converted.
Images are kept as their ORIGINAL JPEG bytes (no re-encoding), checked to decode at the size the JSON states.
Bounding boxes are stored raw, so nothing depends on the input size (spec bug 2); the size given with
``--input-size`` is recorded, and the dataset refuses the file for another size so that a preset and its data
file cannot be mixed up silently.

HDF5 layout (format version 1). ``N`` images, ``P`` person annotations (crowds included), ``S`` samples:

    attrs["settings"]          JSON: format_version, input_size, split, annotations, images, counts,
                               skipped (list of {file, reason}), main_person_bbox_bug
    images/id                  (N,)   int64    COCO image id
    images/height, width       (N,)   int32    pixels
    images/jpeg                (sum,) uint8    concatenated original JPEG files
    images/jpeg_offsets        (N+1,) int64    image i is jpeg[jpeg_offsets[i]:jpeg_offsets[i+1]]
    images/mask_values         (R,)   uint8    run-length encoded mask code, row-major, all images concatenated:
    images/mask_lengths        (R,)   uint32   run values and lengths (decode: np.repeat(values, lengths));
                                               code bit 0 = ignore (NOT mask_miss), bit 1 = person (mask_all)
    images/mask_offsets        (N+1,) int64    runs of image i are [mask_offsets[i], mask_offsets[i+1])
    images/has_ignore          (N,)   bool     any ignored pixel (else mask_miss is all "supervise")
    images/has_person          (N,)   bool     any person pixel
    images/person_offsets      (N+1,) int64    persons of image i are people[person_offsets[i]:...[i+1]]
    people/keypoints           (P, 17, 3) float32  COCO order, (x, y, v) with COCO v (0 unlabelled, 1, 2)
    people/bbox                (P, 4) float32  [x, y, w, h], original pixels (raw heights: no input size baked in)
    people/area                (P,)   float32
    people/num_keypoints       (P,)   int32
    people/iscrowd             (P,)   bool
    people/annotation_id       (P,)   int64
    samples/image              (S,)   int32    index into images/
    samples/person             (S,)   int64    index into people/ of the main person

Masks (spec 4.2, see ``data.coco_annotations.image_masks``): ``mask_miss`` 255 = supervise / 0 = ignore, covering
people without keypoints and all crowd regions; ``mask_all`` = every person pixel, crowds included.
The other people of a sample are the image's non-crowd persons with keypoints, in annotation order.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import h5py
import numpy as np
from PIL import Image
from tqdm import tqdm

from data.coco_annotations import (
    CocoKeypoints,
    has_empty_box,
    image_masks,
    load_coco_keypoints,
    main_person_indices,
)
from utils.errors import UserError, cli_main
from utils.io import atomic_path

FORMAT_VERSION = 1
VAL_HOLDOUT = 100  # paper split: the first 100 val2017 images stay out of training (spec 4.6)
MASK_IGNORE_BIT, MASK_PERSON_BIT = 1, 2
_FLUSH_EVERY = 64  # images buffered before appending to the file


def mask_code(mask_miss: np.ndarray, mask_all: np.ndarray) -> np.ndarray:
    """Pack the two {0,255} masks into one uint8 image of bits (see the module docstring)."""
    return ((mask_miss == 0) * MASK_IGNORE_BIT + (mask_all > 0) * MASK_PERSON_BIT).astype(np.uint8)


def encode_mask_runs(code: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row-major run-length encoding of a uint8 image: (values uint8, lengths uint32) of its runs.

    Decoding is one ``np.repeat`` (about 6x faster than a PNG decode; see ``decode_mask_runs``)."""
    flat = code.ravel()
    starts = np.r_[0, np.flatnonzero(flat[1:] != flat[:-1]) + 1]
    return flat[starts], np.diff(np.r_[starts, flat.size]).astype(np.uint32)


def decode_mask_runs(
    values: np.ndarray, lengths: np.ndarray, height: int, width: int, rows: tuple[int, int] | None = None
) -> np.ndarray:
    """Inverse of ``encode_mask_runs``: the (height, width) mask code. ``values`` may carry trailing axes
    (e.g. (R, 2) for two masks per run), which the result keeps: (height, width, 2).

    ``rows=(y0, y1)`` decodes only rows y0 .. y1 - 1 (0 <= y0 < y1 <= height): (y1 - y0, width, ...).
    """
    if rows is None or rows == (0, height):
        return np.repeat(values, lengths, axis=0).reshape(height, width, *values.shape[1:])
    first, stop = rows[0] * width, rows[1] * width  # pixel range, row-major
    ends = np.cumsum(lengths, dtype=np.int64)
    a = int(np.searchsorted(ends, first, side="right"))  # the first run that ends after ``first``
    b = int(np.searchsorted(ends - lengths, stop, side="left"))  # the first run that starts at or after ``stop``
    part = np.minimum(ends[a:b], stop) - np.maximum(ends[a:b] - lengths[a:b], first)
    return np.repeat(values[a:b], part, axis=0).reshape(rows[1] - rows[0], width, *values.shape[1:])


def _truncated(data: bytes) -> bool:
    """Full decode with Pillow, which (unlike OpenCV) fails on a truncated JPEG; only for files whose tail has
    no end-of-image marker (OpenCV fills the missing part silently)."""
    try:
        with Image.open(io.BytesIO(data)) as im:
            im.load()
    except (OSError, SyntaxError):
        return True
    return False


def check_jpeg(data: bytes, width: int, height: int, path: Path) -> str | None:
    """Return None if ``data`` is a complete JPEG that decodes at width x height, else the reason."""
    if len(data) < 4 or data[:2] != b"\xff\xd8":
        return "not a JPEG file"
    if b"\xff\xd9" not in data[-4096:] and _truncated(data):
        return "truncated or corrupt JPEG (it does not decode to its end)"
    img = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_REDUCED_GRAYSCALE_8 | cv2.IMREAD_IGNORE_ORIENTATION)
    if img is None:
        return "the JPEG does not decode"
    expected = (-(-height // 8), -(-width // 8))
    if img.shape[:2] != expected:
        return f"decoded size does not match the annotation's {width}x{height}"
    return None


def safe_image_path(images_dir: Path, file_name: str) -> Path | None:
    """``images_dir / file_name`` if it stays inside ``images_dir`` once ``..`` and symlinks are resolved (an
    absolute ``file_name`` does not), else None."""
    root = images_dir.resolve()
    try:
        p = (root / file_name).resolve()
    except (ValueError, OSError):  # a NUL byte, a symlink loop
        return None
    return p if p.is_relative_to(root) and p != root else None


def _image_path(images_dir: Path, img: dict, annotations: Path) -> Path:
    if "\x00" in img["file_name"]:
        raise UserError(
            f"annotation file {annotations}: image file_name {img['file_name']!r} (image id {img['id']}) contains "
            "a NUL byte; fix the file_name"
        )
    path = safe_image_path(images_dir, img["file_name"])
    if path is None:
        raise UserError(
            f"annotation file {annotations}: image file_name {img['file_name']!r} (image id {img['id']}) leads "
            f"outside the image folder {images_dir} (through '..', an absolute path or a symlink); such files are "
            "never read: fix the file_name, or copy the image into the folder"
        )
    return path


@dataclass
class _Columns:
    """Per-image and per-person rows buffered between flushes."""

    image: dict = field(default_factory=lambda: {k: [] for k in ("id", "height", "width", "has_ignore", "has_person")})
    jpeg: list = field(default_factory=list)
    mask: list = field(default_factory=list)
    person_counts: list = field(default_factory=list)
    people: dict = field(
        default_factory=lambda: {
            k: [] for k in ("keypoints", "bbox", "area", "num_keypoints", "iscrowd", "annotation_id")
        }
    )
    samples: dict = field(default_factory=lambda: {"image": [], "person": []})


class _Writer:
    """Appends rows to resizable HDF5 datasets."""

    _SPECS = {
        "images/id": ((), np.int64),
        "images/height": ((), np.int32),
        "images/width": ((), np.int32),
        "images/has_ignore": ((), bool),
        "images/has_person": ((), bool),
        "images/jpeg": ((), np.uint8),
        "images/mask_values": ((), np.uint8),
        "images/mask_lengths": ((), np.uint32),
        "people/keypoints": ((17, 3), np.float32),
        "people/bbox": ((4,), np.float32),
        "people/area": ((), np.float32),
        "people/num_keypoints": ((), np.int32),
        "people/iscrowd": ((), bool),
        "people/annotation_id": ((), np.int64),
        "samples/image": ((), np.int32),
        "samples/person": ((), np.int64),
    }

    def __init__(self, f: h5py.File):
        self.f = f
        for name, (shape, dtype) in self._SPECS.items():
            row_bytes = np.dtype(dtype).itemsize * int(np.prod(shape))
            chunk_bytes = 1 << 18 if name.startswith(("images/jpeg", "images/mask")) else 1 << 14
            chunk = (max(1, chunk_bytes // row_bytes), *shape)
            f.create_dataset(name, (0, *shape), dtype=dtype, maxshape=(None, *shape), chunks=chunk)
        self.offsets = {"jpeg": [0], "mask": [0], "person": [0]}
        self.n_images = self.n_people = 0

    def _append(self, name: str, rows) -> None:
        rows = np.asarray(rows, dtype=self._SPECS[name][1])
        if not len(rows):
            return
        d = self.f[name]
        n = d.shape[0]
        d.resize(n + len(rows), axis=0)
        d[n:] = rows

    def flush(self, c: _Columns) -> None:
        for k, v in c.image.items():
            self._append(f"images/{k}", v)
        self._append("images/jpeg", np.frombuffer(b"".join(c.jpeg), np.uint8))
        for b in c.jpeg:
            self.offsets["jpeg"].append(self.offsets["jpeg"][-1] + len(b))
        if c.mask:
            self._append("images/mask_values", np.concatenate([v for v, _ in c.mask]))
            self._append("images/mask_lengths", np.concatenate([n for _, n in c.mask]))
        for v, _ in c.mask:
            self.offsets["mask"].append(self.offsets["mask"][-1] + len(v))
        for n in c.person_counts:
            self.offsets["person"].append(self.offsets["person"][-1] + n)
        for k, v in c.people.items():
            self._append(f"people/{k}", np.asarray(v).reshape(-1, *self._SPECS[f"people/{k}"][0]))
        self._append("samples/image", [i + self.n_images for i in c.samples["image"]])
        self._append("samples/person", [p + self.n_people for p in c.samples["person"]])
        self.n_images += len(c.image["id"])
        self.n_people += len(c.people["area"])

    def finish(self) -> None:
        self.f["images/jpeg_offsets"] = np.asarray(self.offsets["jpeg"], np.int64)
        self.f["images/mask_offsets"] = np.asarray(self.offsets["mask"], np.int64)
        self.f["images/person_offsets"] = np.asarray(self.offsets["person"], np.int64)


_REQUIRED_SETTINGS = {"format_version": int, "input_size": int, "counts": dict, "images": list, "annotations": list}


def check_layout(f: h5py.File, path: str | Path) -> dict:
    """The settings of an open converted file, after checking that it has this module's layout.

    ``settings`` is parsed as JSON data, never evaluated; anything else (an edited attribute, a Python
    expression, a file of another tool, a missing dataset) is a UserError naming the file and the rebuild."""
    rebuild = "rebuild it with `python -m data.coco_to_hdf5`"
    raw = f.attrs.get("settings")
    if raw is None:
        raise UserError(
            f"{path} was not made by `python -m data.coco_to_hdf5` (no settings attribute); the original "
            "project's HDF5 files are not supported: rebuild it from the COCO files"
        )
    try:
        settings = json.loads(raw.decode() if isinstance(raw, bytes) else raw)
    except (TypeError, ValueError):  # JSONDecodeError, UnicodeDecodeError, an array attribute
        raise UserError(f"{path}: its 'settings' attribute is not JSON (edited or damaged); {rebuild}") from None
    wrong = [k for k, kind in _REQUIRED_SETTINGS.items() if not isinstance(settings, dict) or not
             isinstance(settings.get(k), kind) or isinstance(settings.get(k), bool)]  # fmt: skip
    if wrong or not isinstance(settings["counts"].get("samples"), int):
        raise UserError(f"{path}: its 'settings' lack or mistype {wrong or ['counts.samples']}; {rebuild}")
    offsets = ("images/jpeg_offsets", "images/mask_offsets", "images/person_offsets")
    missing = [name for name in (*_Writer._SPECS, *offsets) if name not in f]
    if missing:
        raise UserError(f"{path} lacks the datasets {missing} (damaged or made by another version); {rebuild}")
    return settings


@dataclass
class Source:
    """One annotation file with its image folder; ``start`` skips the first images (paper split)."""

    images: Path
    annotations: Path
    start: int = 0


@dataclass
class _Planned:
    """An image to convert: its annotation entry, persons, main persons and checked path."""

    img: dict
    anns: list[dict]
    mains: list[int]
    path: Path


def _plan(
    sources: list[tuple[Source, CocoKeypoints]], skip_bad: bool, bbox_bug: bool, counts: dict, skipped: list[dict]
) -> list[_Planned]:
    """Choose the images to convert and check their paths, so that bad paths fail before any work is done."""
    planned, missing = [], []
    for source, coco in sources:
        for b in coco.bad:
            skipped.append({"file": str(coco.path), "reason": f"annotation id {b['annotation_id']} of image id "
                            f"{b['image_id']}: {b['reason']}"})  # fmt: skip
            _warn(f"skipping image id {b['image_id']}: annotation id {b['annotation_id']} {b['reason']}")
        todo = coco.images[source.start :]
        counts["images_in_annotations"] += len(todo)
        bad_ids = coco.bad_image_ids
        for img in todo:
            anns = coco.annotations_by_image.get(img["id"], [])
            labelled = [a for a in anns if not a["iscrowd"] and a["num_keypoints"] > 0]
            counts["people_with_empty_box"] += sum(has_empty_box(a) for a in labelled)
            mains = main_person_indices(anns, bbox_bug)
            if img["id"] in bad_ids:
                continue
            if not mains:
                counts["images_without_main_person"] += 1
                continue
            path = _image_path(source.images, img, coco.path)
            if not skip_bad and not path.is_file():
                missing.append(path)
            planned.append(_Planned(img, anns, mains, path))
    if missing:
        listed = "\n  ".join(map(str, missing[:10])) + ("\n  ..." if len(missing) > 10 else "")
        raise UserError(
            f"{len(missing)} of {len(planned)} images are missing:\n  {listed}\ncheck that --images points at the "
            "right folder, or pass --skip-bad to skip missing images"
        )
    return planned


def convert(
    sources: list[Source],
    out: str | Path,
    input_size: int = 512,
    split: str = "train2017",
    skip_bad: bool = False,
    main_person_bbox_bug: bool = False,
    progress: bool = True,
) -> dict:
    """Build the HDF5 file at ``out`` (atomically) and return its settings dict."""
    out = Path(out)
    for s in sources:
        if not s.images.is_dir():
            raise UserError(f"image folder {s.images} not found; pass the folder holding the JPEG files (--images)")
    loaded = [(s, load_coco_keypoints(s.annotations, skip_bad)) for s in sources]
    skipped: list[dict] = []
    counts = {"images_in_annotations": 0, "images": 0, "people": 0, "samples": 0, "images_without_main_person": 0,
              "people_with_empty_box": 0}  # fmt: skip
    planned = _plan(loaded, skip_bad, main_person_bbox_bug, counts, skipped)
    with atomic_path(out) as tmp, h5py.File(tmp, "w") as f:
        writer = _Writer(f)
        cols = _Columns()
        for p in tqdm(planned, desc=f"converting to {out.name}", unit="img", disable=not progress):
            data = _read_image(p.path, p.img, skip_bad, skipped)
            if data is None:
                continue
            _add_image(cols, p.img, p.anns, p.mains, data)
            counts["images"] += 1
            counts["people"] += len(p.anns)
            counts["samples"] += len(p.mains)
            if len(cols.image["id"]) >= _FLUSH_EVERY:
                writer.flush(cols)
                cols = _Columns()
        writer.flush(cols)
        writer.finish()
        settings = {
            "format_version": FORMAT_VERSION,
            "input_size": input_size,
            "split": split,
            "annotations": [str(s.annotations) for s in sources],
            "images": [str(s.images) for s in sources],
            "first_image": [s.start for s in sources],
            "counts": counts,
            "skipped": skipped,
            "main_person_bbox_bug": main_person_bbox_bug,
        }
        f.attrs["settings"] = json.dumps(settings)
    return settings


def _warn(text: str) -> None:
    tqdm.write(f"warning: {text}", file=sys.stderr)


def _read_image(path: Path, img: dict, skip_bad: bool, skipped: list[dict]) -> bytes | None:
    try:
        data = path.read_bytes()
        reason = check_jpeg(data, img["width"], img["height"], path)
    except FileNotFoundError:
        reason = "missing"
    except OSError as e:
        reason = f"unreadable ({e.strerror})"
    if reason is None:
        return data
    hint = "replace the file (re-download it) or pass --skip-bad to skip such images"
    if reason == "missing":
        hint = "check that --images points at the right folder, or pass --skip-bad to skip missing images"
    if not skip_bad:
        raise UserError(f"image {path} (image id {img['id']}): {reason}; {hint}")
    skipped.append({"file": str(path), "reason": reason})
    _warn(f"skipping image {path}: {reason}")
    return None


def _add_image(cols: _Columns, img: dict, anns: list[dict], mains: list[int], data: bytes) -> None:
    h, w = img["height"], img["width"]
    mask_miss, mask_all = image_masks(anns, h, w)
    first_person = sum(cols.person_counts)
    image_row = len(cols.image["id"])
    cols.image["id"].append(img["id"])
    cols.image["height"].append(h)
    cols.image["width"].append(w)
    cols.image["has_ignore"].append(bool((mask_miss == 0).any()))
    cols.image["has_person"].append(bool(mask_all.any()))
    cols.jpeg.append(data)
    cols.mask.append(encode_mask_runs(mask_code(mask_miss, mask_all)))
    cols.person_counts.append(len(anns))
    for ann in anns:
        cols.people["keypoints"].append(np.asarray(ann["keypoints"], np.float32).reshape(17, 3))
        cols.people["bbox"].append(ann["bbox"])
        cols.people["area"].append(ann["area"])
        cols.people["num_keypoints"].append(ann["num_keypoints"])
        cols.people["iscrowd"].append(bool(ann["iscrowd"]))
        cols.people["annotation_id"].append(ann.get("id", -1))
    for m in mains:
        cols.samples["image"].append(image_row)
        cols.samples["person"].append(first_person + m)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m data.coco_to_hdf5", description=__doc__.split("\n\n")[0])
    p.add_argument("--images", required=True, type=Path, help="folder of the JPEG files (e.g. coco/train2017)")
    p.add_argument("--annotations", required=True, type=Path, help="COCO person_keypoints_*.json")
    p.add_argument("--out", required=True, type=Path, help="HDF5 file to write")
    p.add_argument("--input-size", type=int, default=512, help="network input size the file is meant for")
    p.add_argument(
        "--split",
        choices=["train2017", "train2017+val2017"],
        default="train2017",
        help="train2017: every image of --annotations (clean). train2017+val2017: the paper's mix, adding "
        f"val2017 images from position {VAL_HOLDOUT} on (needs --val-images and --val-annotations)",
    )
    p.add_argument("--val-images", type=Path, help="val2017 image folder (paper split)")
    p.add_argument("--val-annotations", type=Path, help="person_keypoints_val2017.json (paper split)")
    p.add_argument(
        "--skip-bad",
        action="store_true",
        help="skip, with a warning, missing or corrupt images and the images of corrupt annotations (wrong "
        "keypoint count, NaN, negative box size, unknown image id); all are listed in the settings' 'skipped'. "
        "Always left out and counted, with or without it: images without a main person; people with a zero-area "
        "box are never main persons. Always refused: invalid JSON, duplicate ids, file names outside --images",
    )
    p.add_argument(
        "--main-person-bbox-bug",
        action="store_true",
        help="reproduce the original's main-person spacing bug (uses the last annotation's bbox)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


@cli_main
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    sources = [Source(args.images, args.annotations)]
    if args.split == "train2017+val2017":
        if not (args.val_images and args.val_annotations):
            raise UserError("--split train2017+val2017 needs --val-images and --val-annotations")
        sources.append(Source(args.val_images, args.val_annotations, start=VAL_HOLDOUT))
    settings = convert(
        sources, args.out, args.input_size, args.split, args.skip_bad, args.main_person_bbox_bug, not args.no_progress
    )
    c = settings["counts"]
    print(
        f"wrote {args.out}: {c['images']} images, {c['people']} people, {c['samples']} samples; "
        f"{len(settings['skipped'])} images skipped as bad, {c['images_without_main_person']} images without a "
        f"main person left out, {c['people_with_empty_box']} people with a zero-area box not used as main persons"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
