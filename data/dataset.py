"""The training dataset: one HDF5 sample (layout: ``data.h5_format``) -> augmented image, targets and masks.

    ds = SimplePoseDataset("coco_train512.h5", cfg, train=True)   # skeleton: cfg.data.skeleton's unless given
    ds.set_epoch(epoch)          # before iterating a DataLoader over it (each epoch)
    sample = ds[i]               # {"image", "targets", "masks", "meta"}
    loader = DataLoader(ds, batch_size=B, collate_fn=collate, ...)    # data.batching: a batch of samples
    images, targets, masks = batch_to_device(batch, device)   # images (B, 3, H, W) float32 BGR/255
    ds.close()                   # this process's handle on the file closed (as ``with`` does); a read reopens it

Image as uint8 (a deliberate departure from "image float tensor"): a sample's image is the warped uint8 picture,
(3, H, W) as a channels-last view of its (H, W, 3) pixels. The float conversion (/255) happens once per batch, on
the device, in ``data.batching.images_to_float``: the worker -> main process and host -> device copies are 4x
smaller, the worker is spared the conversion (docs/benchmarks.md#data-pipeline-stages), and on a GPU it is free.
``data.batching.collate`` keeps the batch channels-last.

Randomness: sample ``i`` of epoch ``e`` uses its own generator seeded from ``(cfg.train.seed, e, i)``, so it is
the same whatever the number of workers and whichever worker draws it, and differs between epochs. The epoch
lives in a one-element shared-memory tensor: ``set_epoch`` in the main process is seen by workers that already
exist (persistent workers) as well as by new ones (fork or spawn). Call it before ``iter(loader)``, since
workers start prefetching as soon as the iterator is created.

Workers: the HDF5 file is opened lazily, once per process, on first access (h5py handles must not cross a
fork). The sample index and the per-person records are numpy arrays read at construction (no per-sample Python
objects, so no copy-on-read growth in forked workers); only JPEG and mask bytes are read per item.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import h5py
import numpy as np
import torch

from simplepose.codec.layout import ChannelLayout
from simplepose.codec.pose_codec import PoseCodec
from simplepose.config.schema import OUTPUT_STRIDE, Config
from simplepose.config.skeleton import Skeleton
from simplepose.config.skeleton_check import KeypointSet, check_compatible
from simplepose.config.skeleton_file import load_skeleton, skeleton_of
from simplepose.data import augment
from simplepose.data.blob_reader import BlobReader, map_file
from simplepose.data.conversion import rebuild_command
from simplepose.data.h5_format import (
    FILE_ID_DATASETS,
    H5_FORMAT_VERSION,
    MASK_IGNORE_BIT,
    MASK_PERSON_BIT,
    box_region_images,
    check_layout,
    decode_mask_runs,
    file_ids,
)
from simplepose.data.jpeg import decode_bgra
from simplepose.data.keypoint_mapping import KeypointMapping
from simplepose.utils.commands import command
from simplepose.utils.errors import DataFileError, UserError
from simplepose.utils.file_kind import file_kind

log = logging.getLogger(__name__)

# Look-up tables from the stored mask code (bit 0 ignore, bit 1 person) to the two {0,255} masks.
_LUT_MISS = np.array([0 if c & MASK_IGNORE_BIT else 255 for c in range(256)], np.uint8)
_LUT_ALL = np.array([255 if c & MASK_PERSON_BIT else 0 for c in range(256)], np.uint8)
# Both at once: little-endian uint16 (mask_miss, mask_all) byte pairs, so that one run is one element.
_LUT_BOTH = (_LUT_MISS | _LUT_ALL.astype(np.uint16) << 8).astype("<u2")


def keep_freed_memory() -> None:
    """Let glibc reuse freed large blocks instead of returning them to the OS (Linux/glibc only; else a no-op).

    Every sample allocates several MB of fresh arrays (image, 50 target maps, 5 scales). By default glibc serves
    blocks over 128 kB with mmap and unmaps them on free, so each new sample page-faults all of its memory in
    again, a large share of the pipeline's time (docs/benchmarks.md#data-pipeline-stages). Keeping them in the
    heap removes that; RSS stays at its peak.
    """
    import ctypes
    import ctypes.util

    m_trim_threshold, m_mmap_threshold = -1, -3
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt(m_mmap_threshold, 64 << 20)
        libc.mallopt(m_trim_threshold, 512 << 20)
    except (OSError, AttributeError):
        pass


def _open(path: str | Path) -> h5py.File:
    # Read-only and without HDF5 file locking, which fails on some network file systems and is not needed
    # for readers.
    return h5py.File(path, "r", locking=False)


def read_settings(h5_path: str | Path) -> dict:
    """The build settings stored in a file made by ``data.coco_to_hdf5`` (JSON, parsed as data)."""
    path = Path(h5_path)
    if not path.is_file():
        raise DataFileError(
            f"HDF5 file {path} not found; make it with `{command('data.coco_to_hdf5', f'... --out {path}')}`", file=path
        )
    try:
        with _open(path) as f:
            return check_layout(f, path)
    except OSError:
        kind = file_kind(path)
        if kind.name not in ("hdf5", "unknown", "empty"):  # an image, a checkpoint, a JSON... in the wrong place
            make = command("data.coco_to_hdf5", "--images DIR --annotations FILE.json --out FILE.h5")
            raise DataFileError(
                f"{path} is {kind.description}, not an HDF5 training file: give the file made by `{make}`", file=path
            ) from None
        raise DataFileError(
            f"{path} is not a readable HDF5 file; rebuild it with `{command('data.coco_to_hdf5')}`", file=path
        ) from None


def stored_keypoints(settings: dict) -> KeypointSet:
    """The dataset keypoints a converted file holds (names, in order), from its settings; COCO's for files made before
    the skeleton was stored."""
    stored = settings.get("skeleton")
    if isinstance(stored, dict) and isinstance(stored.get("dataset_keypoints"), list):
        names = tuple(map(str, stored["dataset_keypoints"]))
        return KeypointSet(name=str(stored.get("name", "?")), dataset_keypoints=names)
    return KeypointSet.of(load_skeleton("coco"), assumed="converted before files stored their skeleton")


def image_to_tensor(image_hwc: np.ndarray) -> torch.Tensor:
    """(H, W, 3) uint8 -> (3, H, W) uint8 tensor sharing its memory (a channels-last view, no copy)."""
    return torch.from_numpy(image_hwc).permute(2, 0, 1)


class SimplePoseDataset(torch.utils.data.Dataset):
    """Samples of an HDF5 file made by ``python -m simplepose.data.coco_to_hdf5``.

    Item: ``{"image": (3, H, W) uint8 BGR (a view of (H, W, 3) pixels), "targets": [(C, h/2^k, w/2^k)],
    "masks": [(1, h/2^k, w/2^k)], "meta": {"image_id", "index", "epoch", "flip"}}`` with ``h = H / stride``
    and k < ``cfg.model.num_scales``; ``image_id`` is the int64 id column's (-1 for an id past +-2**63, which
    ``file_image_id`` holds). With a ``mapping`` (the file is one of several sources, its keypoints mapped onto
    ``skeleton`` by name) the item also holds ``"labelled"``: (C,) float32, 0 for the channels its source cannot
    teach (``data.keypoint_mapping``); so does every item of a file where some people's regions are their boxes (no
    segmentation), with the person-mask channel 0 for the samples of those images (``channel_weights``).
    Masks are the ignore masks (1 = supervise), resized and thresholded per scale (docs/data.md#five-scales).
    Batch with ``collate`` and convert images with ``images_to_float`` (see the module docstring for why).
    ``train=False`` applies the identity augmentation (the main person is still centred and scaled).
    C = ``skeleton.num_channels``; ``skeleton`` defaults to the one ``cfg.data.skeleton`` names, and the file must
    have been converted for its keypoints.
    """

    epoch_reaches_workers = True  # set_epoch writes shared memory: persistent workers see it (engine.batches)

    def __init__(
        self,
        h5_path: str | Path,
        cfg: Config,
        train: bool,
        skeleton: Skeleton | None = None,
        mapping: KeypointMapping | None = None,
    ):
        keep_freed_memory()
        self.path = str(h5_path)
        self.cfg = cfg
        self.train = train
        self.skeleton = skeleton or skeleton_of(cfg)
        settings = read_settings(h5_path)
        if settings.get("format_version") != H5_FORMAT_VERSION:
            raise DataFileError(
                f"{h5_path} has format version {settings.get('format_version')}, this code reads version "
                f"{H5_FORMAT_VERSION}; rebuild it with: {rebuild_command(settings, h5_path, cfg.data.input_size)}",
                file=h5_path,
                key="format_version",
            )
        if settings["input_size"] != cfg.data.input_size:
            raise DataFileError(
                f"{h5_path} was built for input size {settings['input_size']} but data.input_size is "
                f"{cfg.data.input_size}; either set data.input_size={settings['input_size']} or rebuild the file "
                f"with: {rebuild_command(settings, h5_path, cfg.data.input_size)}",
                file=h5_path,
                key="data.input_size",
            )
        self.settings = settings
        # one of several sources: its keypoints mapped onto the skeleton's by name, each sample saying which channels
        # it teaches ("labelled"); else the file's dataset keypoints must be the skeleton's (the limbs may differ:
        # they are drawn at load time)
        self.mapping = mapping
        source_keypoints = mapping.source_keypoints if mapping else self.skeleton.dataset_keypoints
        if mapping is None:
            rebuild = rebuild_command(settings, h5_path, cfg.data.input_size, self.skeleton.reference())
            check_compatible(
                self.skeleton,
                stored_keypoints(settings),
                where=f"HDF5 file {h5_path}",
                need="keypoints",
                fix=f"set data.skeleton={settings.get('skeleton_file', 'coco')} (the file's), or convert the "
                f"annotations again: {rebuild}",
                file=str(h5_path),
            )
        if not settings["counts"]["samples"]:
            raise DataFileError(
                f"{h5_path} holds no samples: none of its images has a main person (>= 5 keypoints, area >= 32x32); "
                "check that --annotations is a person_keypoints file",
                file=h5_path,
                key="samples",
            )
        with _open(self.path) as f:
            self.sample_image = f["samples/image"][:]
            self.sample_person = f["samples/person"][:]
            self.image_id = f["images/id"][:]  # int64; MISSING_ID where only images/file_id holds the file's id
            # the ids as the annotation file gives them, for messages (a list only where some do not fit int64)
            self.file_image_id = file_ids(f, "images/id") if FILE_ID_DATASETS["images/id"] in f else self.image_id
            self.height = f["images/height"][:]
            self.width = f["images/width"][:]
            self.jpeg_offsets = f["images/jpeg_offsets"][:]
            self.mask_offsets = f["images/mask_offsets"][:]
            self.person_offsets = f["images/person_offsets"][:]
            self.has_ignore = f["images/has_ignore"][:]
            self.has_person = f["images/has_person"][:]
            # Per-person records are small (about 0.25 kB each): kept in memory, keypoints already internal.
            stored = f["people/keypoints"]
            if stored.shape[1:] != (len(source_keypoints), 3):
                raise DataFileError(
                    f"{h5_path}: people/keypoints has shape {stored.shape}, not (P, "
                    f"{len(source_keypoints)}, 3) as its settings say (damaged); "
                    f"rebuild it: {rebuild_command(settings, h5_path, cfg.data.input_size)}",
                    file=h5_path,
                    key="people/keypoints",
                )
            self.keypoints = self.skeleton.to_internal(mapping.apply(stored[:]) if mapping else stored[:])
            self.bbox = f["people/bbox"][:]
            self.has_keypoints = (f["people/num_keypoints"][:] > 0) & ~f["people/iscrowd"][:]
            self.box_region = box_region_images(f, settings)  # (N,) bool: the image's person mask holds boxes
        self.input_hw = (cfg.data.input_size, cfg.data.input_size)
        self.stride = OUTPUT_STRIDE
        self.grid_hw = (self.input_hw[0] // self.stride, self.input_hw[1] // self.stride)
        self.codec = PoseCodec(self.skeleton, cfg.targets, stride=self.stride)  # draws the targets
        self._weights = self._channel_weight_table()
        self._epoch = torch.zeros(1, dtype=torch.int64).share_memory_()
        self._file: h5py.File | None = None
        self._blobs: dict[str, h5py.Dataset] = {}
        self._file_pid = -1

    def __len__(self) -> int:
        return len(self.sample_image)

    @property
    def num_images(self) -> int:
        """The images of the file (a sample is a main person: an image of several gives several, one of none none)."""
        return len(self.height)

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch whose random augmentation the next items use (shared with worker processes)."""
        self._epoch[0] = int(epoch)

    @property
    def epoch(self) -> int:
        return int(self._epoch[0])

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_file"], state["_blobs"], state["_file_pid"] = None, {}, -1
        return state

    def close(self) -> None:
        """Close this process's handle on the file (opened again by the next read). The engine closes its datasets
        when a run ends: a handle left to the garbage collector (the dataset may sit in a reference cycle) stays open
        after the run, and HDF5 refuses to open the file again in this process with other locking settings."""
        if self._file is not None and self._file_pid == os.getpid():
            self._file.close()
        self._file, self._blobs, self._file_pid = None, {}, -1

    def __enter__(self) -> SimplePoseDataset:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _blob(self, name: str) -> BlobReader:
        """The reader of dataset ``images/<name>`` on this process's own handle on the file (opened on first use)."""
        if self._file is None or self._file_pid != os.getpid():
            self._file = _open(self.path)
            self._file_pid = os.getpid()
            buffer = map_file(self.path)
            names = ("jpeg", "mask_values", "mask_lengths")
            self._blobs = {k: BlobReader(self._file[f"images/{k}"], buffer) for k in names}
        return self._blobs[name]

    def rng(self, index: int, epoch: int | None = None) -> np.random.Generator:
        """The generator of sample ``index`` in ``epoch`` (default: the current epoch)."""
        e = self.epoch if epoch is None else epoch
        return np.random.default_rng([self.cfg.train.seed, e, index])

    # ------------------------------------------------------------------ reading
    def read_people(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """(P, K, 3) internal keypoints of the sample, main person first, and the main person's bbox."""
        img = self.sample_image[index]
        a, b = self.person_offsets[img], self.person_offsets[img + 1]
        main = self.sample_person[index]
        others = a + np.nonzero(self.has_keypoints[a:b])[0]
        order = np.concatenate([[main], others[others != main]])
        return self.keypoints[order], self.bbox[main]

    def read_jpeg(self, image: int) -> np.ndarray:
        return self._blob("jpeg").read(self.jpeg_offsets[image], self.jpeg_offsets[image + 1])

    def read_masks(self, image: int, both: bool, rows: tuple[int, int] | None = None) -> np.ndarray:
        """An image's masks as uint8 {0, 255}, expanded straight from the stored runs (no per-pixel look-up):
        (H0, W0, 2) (mask_miss, mask_all) if ``both``, else mask_all alone, (H0, W0); only rows y0 .. y1 - 1
        if ``rows=(y0, y1)``."""
        a, b = self.mask_offsets[image], self.mask_offsets[image + 1]
        values, lengths = self._blob("mask_values").read(a, b), self._blob("mask_lengths").read(a, b)
        h, w = int(self.height[image]), int(self.width[image])
        n = h if rows is None else rows[1] - rows[0]
        if not both:
            return decode_mask_runs(_LUT_ALL[values], lengths, h, w, rows)
        return decode_mask_runs(_LUT_BOTH[values], lengths, h, w, rows).view(np.uint8).reshape(n, w, 2)

    def decode_stored_image(self, image: int, matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Decode image ``image`` as stored in the HDF5 file (BGRA, see ``data.jpeg``), at a reduced size when the
        affine shrinks it enough; returns it and the matrix adjusted to the decoded pixels (reduced pixel u covers
        original pixels r*u .. r*u + r - 1)."""
        data = self.read_jpeg(image)
        factor = 1
        if self.cfg.augment.reduced_decode:
            zoom = augment.linear_scale(matrix)
            while factor < 8 and zoom * factor * 2 <= 1.0:
                factor *= 2
        img = decode_bgra(data, factor)
        if img is None:
            raise DataFileError(
                f"{self.path}: the stored bytes of image {self.file_image_id[image]} do not decode (corrupt file)",
                file=self.path,
                key="images/jpeg",
            )
        if factor == 1:
            return img, matrix
        up = np.array([[factor, 0, (factor - 1) / 2], [0, factor, (factor - 1) / 2], [0, 0, 1]])
        return img, matrix @ up

    # ------------------------------------------------------------------ channel weights
    def _channel_weight_table(self) -> dict[tuple[bool, bool], np.ndarray] | None:
        """(box regions, flipped) -> (C,) loss weight per channel; None when every sample teaches every channel (no
        mapping, silhouettes only). The person-mask channel of an image whose person mask holds boxes is 0: a box
        would teach the rectangle around a person as "person" and its corners next to the silhouettes of other
        sources' people (docs/training.md#sources-without-silhouettes)."""
        boxed = int(self.box_region.sum())
        if boxed:
            log.info(
                "%s: %d of %d images hold people without a silhouette (no segmentation: their box is their region); "
                "the person-mask channel is not taught on those images' samples",
                self.path,
                boxed,
                self.num_images,
            )
        elif self.mapping is None:
            return None
        ones = np.ones(self.skeleton.num_channels, np.float32)
        straight, mirrored = (self.mapping.labelled, self.mapping.labelled_mirrored) if self.mapping else (ones, ones)
        person = ChannelLayout.of(self.skeleton).person_mask
        table = {}
        for flip, weight in ((False, straight), (True, mirrored)):
            table[False, flip] = weight
            table[True, flip] = weight.copy()
            table[True, flip][person] = 0.0
        return table

    def channel_weights(self, image: int, flip: bool) -> np.ndarray | None:
        """(C,) float32 loss weight per channel of a sample of image ``image`` (``flip``: mirrored), or None where
        every sample of the file teaches every channel: 0 for what its source cannot label (``mapping.labelled``)
        and for the person-mask channel where the image's person regions include boxes."""
        if self._weights is None:
            return None
        return self._weights[bool(self.box_region[image]), bool(flip)]

    # ------------------------------------------------------------------ one sample
    def sample_params(self, index: int, epoch: int | None = None) -> augment.AugmentParams:
        """The augmentation of sample ``index`` in ``epoch`` (default: the current epoch)."""
        return augment.random_params(self.rng(index, epoch), self.cfg.augment) if self.train else augment.IDENTITY

    def warp_masks(self, image: int, matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(mask_miss, mask_all) on the output grid, float32 in [0, 1] (1 = supervise / person)."""
        ss = {"faithful": self.stride, "half": self.stride // 2, "grid": 1}[self.cfg.augment.mask_warp]
        if not self.has_ignore[image] and not self.has_person[image]:
            return np.ones(self.grid_hw, np.float32), np.zeros(self.grid_hw, np.float32)
        # Only the rows the warp can sample are expanded from the runs (a zoomed-in crop reads few of them).
        image_hw = (int(self.height[image]), int(self.width[image]))
        x0, y0, x1, y1 = augment.sampled_region(image_hw, matrix, self.input_hw)
        rows = (y0, y1) if y1 > y0 and x1 > x0 else None
        if rows:
            matrix = augment.crop_matrix(matrix, 0, y0)
        if not self.has_ignore[image]:  # mask_miss is all "supervise", and so is the border
            person = self.read_masks(image, both=False, rows=rows)
            return np.ones(self.grid_hw, np.float32), augment.warp_mask_to_grid(
                person, matrix, self.input_hw, self.stride, 0, ss
            )
        both = self.read_masks(image, both=True, rows=rows)
        warped = augment.warp_mask_to_grid(both, matrix, self.input_hw, self.stride, (255, 0), ss)
        return np.ascontiguousarray(warped[..., 0]), np.ascontiguousarray(warped[..., 1])

    def place(self, index: int, params: augment.AugmentParams) -> tuple[np.ndarray, np.ndarray]:
        """(affine 2x3 from image to input pixels, every person's (P, K, 3) keypoints moved by it and flipped)."""
        keypoints, bbox = self.read_people(index)
        center = (bbox[0] + bbox[2] / 2, bbox[1] + bbox[3] / 2)
        matrix = augment.affine_matrix(center, float(bbox[3]), params, self.input_hw, self.cfg.augment.target_dist)
        return matrix, augment.transform_keypoints(keypoints, matrix, params.flip, self.skeleton)

    def __getitem__(self, index: int) -> dict:
        try:
            return self.build(int(index))
        except Exception as e:  # named here: in a DataLoader worker only the message reaches the user
            image_id = self.file_image_id[self.sample_image[index]] if 0 <= index < len(self) else "?"
            where = f"sample {index} (image id {image_id}) of {self.path}"
            rebuild = rebuild_command(self.settings, self.path, self.cfg.data.input_size)
            if isinstance(e, UserError):  # the file's content is at fault
                raise DataFileError(
                    f"{where} cannot be loaded: {e}; rebuild the file with: {rebuild}",
                    file=self.path,
                    key=e.key,
                    sample=index,
                ) from e
            # Anything else may be a bug: keep its type and traceback, and say which sample raised it.
            if hasattr(e, "add_note"):  # Python 3.11+
                e.add_note(f"while loading {where}; if the file changed since it was built, rebuild it with: {rebuild}")
            raise

    def augment_image(self, pixels: np.ndarray, pixel_matrix: np.ndarray, params: augment.AugmentParams) -> np.ndarray:
        """The pixels of ``decode_stored_image`` tinted if ``params.tint``, then warped to the (H, W, 3) uint8 input."""
        cfg = self.cfg.augment
        if params.tint:
            pixels, pixel_matrix = augment.crop_to_output(pixels, pixel_matrix, self.input_hw)
            pixels = augment.tint(pixels, params.hsv, cfg.hue_wrap)
        return augment.warp_image(pixels, pixel_matrix, self.input_hw, cfg.border_bgr)

    def build(self, index: int, params: augment.AugmentParams | None = None) -> dict:
        """Sample ``index`` with the given augmentation (default: this epoch's draw, or identity if not train).

        The stages, in order (bench/data_pipeline.py times each): read and decode, augment, masks, targets,
        scales, to-tensor."""
        cfg = self.cfg
        image = int(self.sample_image[index])
        epoch = self.epoch  # read once: set_epoch may run meanwhile in the main process
        params = self.sample_params(index, epoch) if params is None else params
        matrix, keypoints = self.place(index, params)
        pixels, pixel_matrix = self.decode_stored_image(image, matrix)
        warped = self.augment_image(pixels, pixel_matrix, params)
        mask_miss, mask_all = self.warp_masks(image, matrix)
        masks = self.codec.encode_masks(mask_miss, cfg.model.num_scales, cfg.loss.mask_threshold)
        targets = self.codec.encode(keypoints, mask_all, self.grid_hw, cfg.model.num_scales)
        sample = sample_tensors(warped, targets, masks)
        labelled = self.channel_weights(image, params.flip)
        if labelled is not None:
            sample["labelled"] = torch.from_numpy(labelled)
        sample["meta"] = {"image_id": int(self.image_id[image]), "index": index, "epoch": epoch, "flip": params.flip}
        return sample


def sample_tensors(image_hwc: np.ndarray, targets: list[np.ndarray], masks: list[np.ndarray]) -> dict:
    """A sample's arrays as tensors (no copies): ``{"image": (3, H, W) uint8 view, "targets": [(C, h, w)],
    "masks": [(1, h, w)]}`` per scale, from the (H, W, 3) image, (C, h, w) targets and (h, w) masks."""
    return {
        "image": image_to_tensor(image_hwc),
        "targets": [torch.from_numpy(t) for t in targets],
        "masks": [torch.from_numpy(m[None]) for m in masks],
    }
