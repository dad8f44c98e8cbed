"""The HDF5 training file's layout, in one place: ``data.coco_to_hdf5`` writes it, ``data.dataset`` reads it.

Layout (``H5_FORMAT_VERSION`` 1). ``N`` images, ``P`` person annotations (crowds included), ``S`` samples:

    attrs["settings"]          JSON: format_version, input_size, split, annotations, images, first_image, counts,
                               skipped (list of {file, reason}), main_person_bbox_bug, skeleton (the definition,
                               config.skeleton's plain-dict form; absent in files made before it: COCO's),
                               skeleton_file (the --skeleton name or path)
    images/id                  (N,)   int64    COCO image id
    images/height, width       (N,)   int32    pixels
    images/jpeg                (sum,) uint8    concatenated original image files (any format OpenCV reads, as given)
    images/jpeg_offsets        (N+1,) int64    image i is jpeg[jpeg_offsets[i]:jpeg_offsets[i+1]]
    images/mask_values         (R,)   uint8    run-length encoded mask code, row-major, all images concatenated:
    images/mask_lengths        (R,)   uint32   run values and lengths (decode: np.repeat(values, lengths));
                                               code bit 0 = ignore (NOT mask_miss), bit 1 = person (mask_all)
    images/mask_offsets        (N+1,) int64    runs of image i are [mask_offsets[i], mask_offsets[i+1])
    images/has_ignore          (N,)   bool     any ignored pixel (else mask_miss is all "supervise")
    images/has_person          (N,)   bool     any person pixel
    images/person_offsets      (N+1,) int64    persons of image i are people[person_offsets[i]:...[i+1]]
    people/keypoints           (P, D, 3) float32  the skeleton's D dataset keypoints in dataset order, (x, y, v) with
                                                  COCO's v (0 unlabelled, 1 occluded, 2 visible); COCO: D = 17
    people/bbox                (P, 4) float32  [x, y, w, h], original pixels (raw heights: no input size baked in)
    people/area                (P,)   float32
    people/num_keypoints       (P,)   int32
    people/iscrowd             (P,)   bool
    people/annotation_id       (P,)   int64
    people/box_region          (P,)   bool     the annotation had no segmentation: its box is its region in the masks
                                               (absent in files made before it: ``box_region_images``)
    samples/image              (S,)   int32    index into images/
    samples/person             (S,)   int64    index into people/ of the main person
    images/file_id             (N,)   str      optional: each image id as the annotation file gives it, as JSON text,
    people/file_id             (P,)   str      and each annotation id ("null": none); written only when some id
                                               does not fit the int64 column (a string annotation id such as
                                               "ann-0", an integer past +-2**63), which then holds MISSING_ID (-1)
                                               there. ``file_ids`` reads the ids back either way.

Masks (made by ``data.person_masks.image_masks``): ``mask_miss`` 255 = supervise / 0 = ignore, covering
people without keypoints and all crowd regions; ``mask_all`` = every person pixel, crowds included.
The other people of a sample are the image's non-crowd persons with keypoints, in annotation order.

Writing: fill a ``RowBuffer``, ``H5Writer.flush`` it every few images, and ``H5Writer.finish(settings)`` at the
end. Reading: ``check_layout`` returns the settings of a file after checking its layout; ``file_ids`` the ids as the
annotation file gave them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import h5py
import numpy as np

from simplepose.utils.commands import command
from simplepose.utils.errors import DataFileError

H5_FORMAT_VERSION = 1  # bump when the layout changes: the dataset refuses files of another version
SETTINGS_ATTR = "settings"
MASK_IGNORE_BIT, MASK_PERSON_BIT = 1, 2

# The datasets that grow by rows: name -> (shape of one row, dtype); KEYPOINTS_ROW stands for the skeleton's dataset
# keypoint count (``row_datasets``).
KEYPOINTS_ROW = -1
ROW_DATASETS = {
    "images/id": ((), np.int64),
    "images/height": ((), np.int32),
    "images/width": ((), np.int32),
    "images/has_ignore": ((), bool),
    "images/has_person": ((), bool),
    "images/jpeg": ((), np.uint8),
    "images/mask_values": ((), np.uint8),
    "images/mask_lengths": ((), np.uint32),
    "people/keypoints": ((KEYPOINTS_ROW, 3), np.float32),
    "people/bbox": ((4,), np.float32),
    "people/area": ((), np.float32),
    "people/num_keypoints": ((), np.int32),
    "people/iscrowd": ((), bool),
    "people/annotation_id": ((), np.int64),
    "people/box_region": ((), bool),
    "samples/image": ((), np.int32),
    "samples/person": ((), np.int64),
}
# The optional string datasets that keep ids the int64 columns cannot hold (``file_ids``), by the column they complete.
FILE_ID_DATASETS = {"images/id": "images/file_id", "people/annotation_id": "people/file_id"}
MISSING_ID = -1  # an id column's value for an annotation without an id, or for an id only its file_id holds
_INT64 = np.iinfo(np.int64)
# The (N+1,) int64 offsets written once at the end: blob or person range of each image.
OFFSET_DATASETS = {"jpeg": "images/jpeg_offsets", "mask": "images/mask_offsets", "person": "images/person_offsets"}
# Row datasets a file made by an earlier version may lack (each reader says what stands in).
OPTIONAL_DATASETS = ("people/box_region",)
_REQUIRED_SETTINGS = {"format_version": int, "input_size": int, "counts": dict, "images": list, "annotations": list}


def row_datasets(num_keypoints: int) -> dict[str, tuple[tuple[int, ...], type]]:
    """``ROW_DATASETS`` for a skeleton of ``num_keypoints`` dataset keypoints."""
    return {**ROW_DATASETS, "people/keypoints": ((num_keypoints, 3), np.float32)}


def fits_id_column(file_id) -> bool:
    """The annotation file's id (an int of any size, a string, or None: none given) is an int64 the id columns hold."""
    return isinstance(file_id, int) and not isinstance(file_id, bool) and _INT64.min <= file_id <= _INT64.max


def id_column_value(file_id) -> int:
    """What an id column stores for ``file_id``: itself when it fits, else ``MISSING_ID`` (its file_id keeps it)."""
    return file_id if fits_id_column(file_id) else MISSING_ID


def file_ids(f: h5py.File, column: str) -> list:
    """The ids of ``column`` (a key of ``FILE_ID_DATASETS``) as the annotation files give them: ints of any size,
    strings, None where an annotation has none (or, in a file without the optional file_id dataset, MISSING_ID)."""
    side = FILE_ID_DATASETS[column]
    if side in f:
        return [json.loads(text) for text in f[side].asstr()[:]]
    return f[column][:].tolist()


def mask_code(mask_miss: np.ndarray, mask_all: np.ndarray) -> np.ndarray:
    """Pack the two {0,255} (H, W) masks into one (H, W) uint8 image of bits (see the module docstring)."""
    ignore = (mask_miss == 0).view(np.uint8) * np.uint8(MASK_IGNORE_BIT)
    return ignore | (mask_all > 0).view(np.uint8) * np.uint8(MASK_PERSON_BIT)


def encode_mask_runs(code: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row-major run-length encoding of a uint8 image: (values uint8, lengths uint32) of its runs.

    Decoding is one ``np.repeat``, much cheaper than a PNG decode (docs/benchmarks.md#data-pipeline-stages; see
    ``decode_mask_runs``)."""
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


@dataclass
class RowBuffer:
    """Per-image and per-person rows buffered between flushes. Image and person indices in ``samples`` count from
    the start of this buffer; ``mask`` holds ``encode_mask_runs`` pairs; ``person_counts`` the persons per image."""

    image: dict = field(default_factory=lambda: {k: [] for k in ("id", "height", "width", "has_ignore", "has_person")})
    jpeg: list = field(default_factory=list)
    mask: list = field(default_factory=list)
    person_counts: list = field(default_factory=list)
    people: dict = field(
        default_factory=lambda: {
            k: [] for k in ("keypoints", "bbox", "area", "num_keypoints", "iscrowd", "annotation_id", "box_region")
        }
    )
    samples: dict = field(default_factory=lambda: {"image": [], "person": []})

    def __len__(self) -> int:
        """Images buffered."""
        return len(self.image["id"])


class H5Writer:
    """Appends ``RowBuffer``s to the resizable datasets of an open, empty file; ``finish`` completes the file.
    ``num_keypoints``: dataset keypoints per person (the skeleton's). ``keep_file_ids``: the id columns (keys of
    ``FILE_ID_DATASETS``) whose ids are also written as JSON text, because some do not fit int64 (the caller knows
    every id before writing: ``fits_id_column``). The buffers hold the ids as the file gives them."""

    def __init__(self, f: h5py.File, num_keypoints: int, keep_file_ids: tuple[str, ...] = ()):
        self.f = f
        self.rows = row_datasets(num_keypoints)
        for name, (shape, dtype) in self.rows.items():
            row_bytes = np.dtype(dtype).itemsize * int(np.prod(shape))
            chunk_bytes = 1 << 18 if name.startswith(("images/jpeg", "images/mask")) else 1 << 14
            chunk = (max(1, chunk_bytes // row_bytes), *shape)
            f.create_dataset(name, (0, *shape), dtype=dtype, maxshape=(None, *shape), chunks=chunk)
        self.keep_file_ids = tuple(keep_file_ids)
        for column in self.keep_file_ids:
            f.create_dataset(
                FILE_ID_DATASETS[column], (0,), dtype=h5py.string_dtype(), maxshape=(None,), chunks=(4096,)
            )
        self.offsets = {k: [0] for k in OFFSET_DATASETS}
        self.n_images = self.n_people = 0

    def _append(self, name: str, rows) -> None:
        if name in FILE_ID_DATASETS:
            if name in self.keep_file_ids:
                self._append_rows(FILE_ID_DATASETS[name], np.array([json.dumps(i) for i in rows], dtype=object))
            rows = [id_column_value(i) for i in rows]
        self._append_rows(name, np.asarray(rows, dtype=self.rows[name][1]))

    def _append_rows(self, name: str, rows: np.ndarray) -> None:
        if not len(rows):
            return
        d = self.f[name]
        n = d.shape[0]
        d.resize(n + len(rows), axis=0)
        d[n:] = rows

    def flush(self, c: RowBuffer) -> None:
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
            name = f"people/{k}"
            self._append(name, v if name in FILE_ID_DATASETS else np.asarray(v).reshape(-1, *self.rows[name][0]))
        self._append("samples/image", [i + self.n_images for i in c.samples["image"]])
        self._append("samples/person", [p + self.n_people for p in c.samples["person"]])
        self.n_images += len(c.image["id"])
        self.n_people += len(c.people["area"])

    def finish(self, settings: dict) -> None:
        """Write the offsets and the settings attribute (``settings`` as JSON; its format_version is the caller's)."""
        for key, name in OFFSET_DATASETS.items():
            self.f[name] = np.asarray(self.offsets[key], np.int64)
        self.f.attrs[SETTINGS_ATTR] = json.dumps(settings)


def check_layout(f: h5py.File, path: str | Path) -> dict:
    """The settings of an open converted file, after checking that it has this module's layout.

    ``settings`` is parsed as JSON data, never evaluated; anything else (an edited attribute, a Python
    expression, a file of another tool, a missing dataset) is a DataFileError naming the file and the rebuild."""
    rebuild = f"rebuild it with `{command('data.coco_to_hdf5')}`"
    raw = f.attrs.get(SETTINGS_ATTR)
    if raw is None:
        raise DataFileError(
            f"{path} was not made by `{command('data.coco_to_hdf5')}` (no settings attribute); the original "
            "project's HDF5 files are not supported: rebuild it from the COCO files",
            file=path,
            key=SETTINGS_ATTR,
        )
    try:
        settings = json.loads(raw.decode() if isinstance(raw, bytes) else raw)
    except (TypeError, ValueError):  # JSONDecodeError, UnicodeDecodeError, an array attribute
        raise DataFileError(
            f"{path}: its 'settings' attribute is not JSON (edited or damaged); {rebuild}", file=path, key=SETTINGS_ATTR
        ) from None
    wrong = [
        k
        for k, kind in _REQUIRED_SETTINGS.items()
        if not isinstance(settings, dict) or not isinstance(settings.get(k), kind) or isinstance(settings.get(k), bool)
    ]
    if wrong or not isinstance(settings["counts"].get("samples"), int):
        wrong = wrong or ["counts.samples"]
        raise DataFileError(
            f"{path}: its 'settings' lack or mistype {wrong}; {rebuild}", file=path, key=f"{SETTINGS_ATTR}.{wrong[0]}"
        )
    required = [name for name in ROW_DATASETS if name not in OPTIONAL_DATASETS]
    missing = [name for name in (*required, *OFFSET_DATASETS.values()) if name not in f]
    if missing:
        raise DataFileError(
            f"{path} lacks the datasets {missing} (damaged or made by another version); {rebuild}",
            file=path,
            key=missing[0],
        )
    return settings


def box_region_images(f: h5py.File, settings: dict) -> np.ndarray:
    """(N,) bool per image of an open converted file: some person's region in its masks is that person's box (the
    annotations gave no segmentation), so its person mask holds boxes, not silhouettes. A file made before
    ``people/box_region`` was written only counts such people (``counts.people_with_box_as_region``): where it
    counts any, every image is taken as holding boxes."""
    offsets = f[OFFSET_DATASETS["person"]][:]
    if "people/box_region" in f:
        boxes = np.r_[0, np.cumsum(f["people/box_region"][:], dtype=np.int64)]
        return boxes[offsets[1:]] > boxes[offsets[:-1]]
    return np.full(len(offsets) - 1, bool(settings["counts"].get("people_with_box_as_region", 0)))
