"""COCO person keypoints (JSON + image folder) to one HDF5 training file, streaming: ``convert`` (what
``python -m simplepose.data.coco_to_hdf5`` runs) and ``rebuild_command`` (the command that makes a file again).

Only images with at least one main person (``data.main_person.main_person_indices``) are stored; each main
person is one sample. Left out and counted (``counts``, and the summary line): images without a main person
(legal, e.g. no people), people with a zero-area box as main persons (they stay as other persons). Always
refused, even with ``--skip-bad``: invalid JSON, duplicate image or annotation ids, ids of another type than the
evaluator takes (image ids: integers, annotation ids: integers or strings; any size, kept as given:
``data.h5_format.file_ids``), a file without any labelled person, and one whose images give no training sample at
all, an image ``file_name`` that leads outside ``--images`` (a ``..`` part, an absolute path; links in the folder
are followed), an ``--input-size`` training would refuse (``config.config_file.check_input_size``). All image paths are
checked, and all missing files listed, before anything is converted.
Images (any format OpenCV reads, data/image_files.py) are kept as their ORIGINAL bytes (no re-encoding), checked to
decode completely at the size the JSON states (or, when it states none, at the size their pixels have).
Bounding boxes are stored raw, so nothing depends on the input size; the size given with ``--input-size`` is
recorded, and the dataset refuses the file for another size so that a preset and its data file cannot be mixed
up silently; the same holds for the skeleton (its definition is stored). The file's layout (datasets, mask
coding, settings) is described and written by ``data.h5_format``.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

from simplepose.config.config_file import check_input_size
from simplepose.config.skeleton import Skeleton
from simplepose.config.skeleton_check import NameMatch
from simplepose.config.skeleton_file import load_skeleton
from simplepose.data.coco_annotations import CocoKeypoints, load_coco_keypoints
from simplepose.data.h5_format import (
    H5_FORMAT_VERSION,
    H5Writer,
    RowBuffer,
    encode_mask_runs,
    fits_id_column,
    mask_code,
)
from simplepose.data.image_files import (
    MAX_SKIPPED_SHARE,
    BadImages,
    check_image_folder,
    image_path,
    missing_files,
    read_checked,
)
from simplepose.data.main_person import has_empty_box, main_person_indices
from simplepose.data.person_masks import image_masks
from simplepose.utils.commands import command
from simplepose.utils.errors import UserError
from simplepose.utils.io import atomic_path
from simplepose.utils.ordered_pool import ordered_map
from simplepose.utils.progress_bar import progress_bar

log = logging.getLogger(__name__)

VAL_HOLDOUT = 100  # paper split: the first 100 val2017 images stay out of training (the original validated on them)
_FLUSH_EVERY = 64  # images buffered before appending to the file
POOL_FROM = 500  # images from which ``workers=None`` reads and draws them in worker processes (their start: ~1 s)
MAX_AUTO_WORKERS = 8


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
    source: int  # index into the sources
    box_regions: list[bool]  # per person of anns: no segmentation in the annotations, its box is its region


def _plan(
    sources: list[tuple[Source, CocoKeypoints]],
    bad_images: list[BadImages],
    bbox_bug: bool,
    counts: dict,
    skipped: list[dict],
) -> list[_Planned]:
    """Choose the images to convert and check their paths, so that bad paths fail before any work is done: every
    missing file is listed (without --skip-bad), or (with it) too many missing files stop the conversion at once."""
    planned: list[_Planned] = []
    for k, ((source, coco), bad) in enumerate(zip(sources, bad_images)):
        for b in coco.bad:  # already logged by load_coco_keypoints
            skipped.append(
                {
                    "file": str(coco.path),
                    "image_id": b["image_id"],
                    "reason": f"annotation id {b['annotation_id']} of image id {b['image_id']}: {b['reason']}",
                }
            )
        todo = coco.images[source.start :]
        counts["images_in_annotations"] += len(todo)
        bad_ids = coco.bad_image_ids
        mine = []
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
            boxes = coco.box_regions.get(img["id"], [False] * len(anns))
            mine.append(_Planned(img, anns, mains, image_path(source.images, img, coco.path), k, boxes))
        missing = missing_files([p.path for p in mine])
        if missing and not bad.skip_bad:
            listed = "\n  ".join(map(str, missing[:10])) + ("\n  ..." if len(missing) > 10 else "")
            raise UserError(
                f"{len(missing)} of {len(mine)} images are missing:\n  {listed}\ncheck that --images "
                f"({source.images}) is the folder of {coco.path}'s images, or pass --skip-bad to skip missing images",
                file=missing[0],
            )
        if len(missing) > MAX_SKIPPED_SHARE * len(mine):
            for path in missing:
                bad.skipped.append({"file": str(path), "image_id": None, "reason": "missing"})
            bad.check_share(len(mine))
        planned += mine
    if not planned:
        raise UserError(_no_sample_message(sources, counts, bbox_bug), file=sources[0][1].path, key="annotations")
    return planned


def _no_sample_message(sources: list[tuple[Source, CocoKeypoints]], counts: dict, bbox_bug: bool) -> str:
    """Why no image of the annotation files can make a training sample, with what they hold."""
    people = [
        a
        for source, coco in sources
        for img in coco.images[source.start :]
        for a in coco.annotations_by_image.get(img["id"], [])
        if not a["iscrowd"]
    ]
    labelled = [a for a in people if a["num_keypoints"] > 0]
    enough = [a for a in labelled if a["num_keypoints"] >= 5]
    large = [a for a in enough if a["area"] >= 32 * 32 and not has_empty_box(a)]
    bad = sum(len(coco.bad_image_ids) for _, coco in sources)
    files = " and ".join(str(coco.path) for _, coco in sources)
    return (
        f"no image of {files} has a main person, so the HDF5 file would hold no training sample: of its "
        f"{counts['images_in_annotations']} images' {len(people)} people, {len(labelled)} have labelled keypoints, "
        f"{len(enough)} at least 5, {len(large)} of those an area of at least 32x32 pixels and a box of non-zero size"
        + (f"; {bad} images skipped for bad annotations" if bad else "")
        + (" (--main-person-bbox-bug)" if bbox_bug else "")
        + "; a main person needs all three (docs/data.md#main-persons-and-samples): check that --annotations is "
        "the person_keypoints file of these images"
    )


def convert(
    sources: list[Source],
    out: str | Path,
    input_size: int = 512,
    split: str = "train2017",
    skip_bad: bool = False,
    main_person_bbox_bug: bool = False,
    progress: bool = True,
    skeleton: str | Skeleton = "coco",
    keypoint_names: NameMatch = "exact",
    workers: int | None = 0,
) -> dict:
    """Build the HDF5 file at ``out`` (atomically) and return its settings dict. ``skeleton``: the keypoint set of
    the annotations (a ``Skeleton``, or a name in config/skeletons/ or a YAML path); ``keypoint_names``: how the
    file's keypoint names are compared with the skeleton's (``config.skeleton_check.NameMatch``). ``workers``: worker
    processes that read, check and draw the images' masks (``utils.ordered_pool``; 0: all here; None: one per core
    the process may use, up to ``MAX_AUTO_WORKERS``, from ``POOL_FROM`` images on; the command's default). The file
    is the same for any number. Workers are spawned, so a script that calls this with workers must hold its own code
    under a main guard (Python's rule for spawned processes: multiprocessing's "safe importing of main module")."""
    out = Path(out)
    check_input_size(input_size, "--input-size")
    skeleton_file = skeleton.reference() if isinstance(skeleton, Skeleton) else str(skeleton)
    skeleton = skeleton if isinstance(skeleton, Skeleton) else load_skeleton(skeleton)
    for s in sources:
        check_image_folder(s.images)
    loaded = [
        (s, load_coco_keypoints(s.annotations, skeleton, skip_bad, keypoint_names, compact=True)) for s in sources
    ]
    skipped: list[dict] = []
    counts = {
        "images_in_annotations": 0,
        "images": 0,
        "people": 0,
        "samples": 0,
        "images_without_main_person": 0,
        "people_with_empty_box": 0,
        "people_with_box_as_region": sum(sum(boxes) for _, c in loaded for boxes in c.box_regions.values()),
        "images_without_size": sum(c.images_without_size for _, c in loaded),
    }
    bad_images = [BadImages(s.images, skip_bad) for s in sources]
    planned = _plan(loaded, bad_images, main_person_bbox_bug, counts, skipped)
    with atomic_path(out) as tmp, h5py.File(tmp, "w") as f:
        writer = H5Writer(f, skeleton.num_dataset_keypoints, _columns_needing_file_ids(planned))
        cols = RowBuffer()
        num_keypoints = skeleton.num_dataset_keypoints
        jobs = ((p.path, p.img, p.anns) for p in planned)
        prepared = ordered_map(_prepare, jobs, _worker_count(workers, len(planned)))
        desc = f"converting to {out.name}"
        bar = progress_bar(zip(planned, prepared), total=len(planned), desc=desc, unit="img", disable=not progress)
        for p, (data, size, problem, masks) in bar:
            if problem is not None:
                bad_images[p.source].report(p.path, p.img["id"], problem)
                continue
            assert data is not None and size is not None  # read_checked gives both when nothing is wrong
            img = {**p.img, "width": size[0], "height": size[1]}
            _add_image(cols, img, p.anns, p.mains, data, masks, num_keypoints, p.box_regions)
            counts["images"] += 1
            counts["people"] += len(p.anns)
            counts["samples"] += len(p.mains)
            if len(cols) >= _FLUSH_EVERY:
                writer.flush(cols)
                cols = RowBuffer()
        for k, bad in enumerate(bad_images):
            bad.check_share(sum(p.source == k for p in planned))
        writer.flush(cols)
        settings = {
            "format_version": H5_FORMAT_VERSION,
            "input_size": input_size,
            "split": split,
            "annotations": [str(s.annotations) for s in sources],
            "images": [str(s.images) for s in sources],
            "first_image": [s.start for s in sources],
            "counts": counts,
            "skipped": skipped + [s for bad in bad_images for s in bad.skipped],
            "filled": {k: sum(c.filled.get(k, 0) for _, c in loaded) for k in loaded[0][1].filled},
            "keypoint_names": {"match": keypoint_names, "files": [list(c.keypoint_names or []) for _, c in loaded]},
            "main_person_bbox_bug": main_person_bbox_bug,
            "skeleton": skeleton.to_dict(),
            "skeleton_file": skeleton_file,
        }
        writer.finish(settings)
    return settings


def _columns_needing_file_ids(planned: list[_Planned]) -> tuple[str, ...]:
    """The id columns (``data.h5_format.FILE_ID_DATASETS``) of which some planned id does not fit int64 (a string
    annotation id, an integer past +-2**63): their ids are then also stored as the file gives them."""
    ids = {
        "images/id": [p.img["id"] for p in planned],
        "people/annotation_id": [a.get("id") for p in planned for a in p.anns],
    }
    return tuple(c for c, values in ids.items() if any(v is not None and not fits_id_column(v) for v in values))


def _worker_count(workers: int | None, images: int) -> int:
    """The worker processes of a conversion of ``images`` images (``convert``'s ``workers``)."""
    if workers is not None:
        return max(0, workers)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return min(cores, MAX_AUTO_WORKERS) if images >= POOL_FROM and cores > 1 else 0


def _prepare(job: tuple[Path, dict, list[dict]]) -> tuple[bytes | None, tuple[int, int] | None, str | None, tuple]:
    """An image's work before writing (in a worker process, or here): its file read and checked
    (``read_checked``), its masks drawn and run-length coded. (bytes, (width, height), None, (mask runs,
    has_ignore, has_person)), or (None, None, what is wrong, ()) for a bad file."""
    path, img, anns = job
    data, size, problem = read_checked(path, img)
    if problem is not None:
        return None, None, problem, ()
    assert size is not None  # read_checked gives it when nothing is wrong
    mask_miss, mask_all = image_masks(anns, size[1], size[0])
    runs = encode_mask_runs(mask_code(mask_miss, mask_all))
    return data, size, None, (runs, bool((mask_miss == 0).any()), bool(mask_all.any()))


def _add_image(
    cols: RowBuffer,
    img: dict,
    anns: list[dict],
    mains: list[int],
    data: bytes,
    masks: tuple,
    num_keypoints: int,
    box_regions: list[bool],
) -> None:
    """Buffer one image's rows: ``masks`` as ``_prepare`` gives them; ``box_regions`` per person of ``anns``."""
    runs, has_ignore, has_person = masks
    first_person = sum(cols.person_counts)
    image_row = len(cols)
    cols.image["id"].append(img["id"])
    cols.image["height"].append(img["height"])
    cols.image["width"].append(img["width"])
    cols.image["has_ignore"].append(has_ignore)
    cols.image["has_person"].append(has_person)
    cols.jpeg.append(data)
    cols.mask.append(runs)
    cols.person_counts.append(len(anns))
    for ann in anns:
        cols.people["keypoints"].append(np.asarray(ann["keypoints"], np.float32).reshape(num_keypoints, 3))
        cols.people["bbox"].append(ann["bbox"])
        cols.people["area"].append(ann["area"])
        cols.people["num_keypoints"].append(ann["num_keypoints"])
        cols.people["iscrowd"].append(bool(ann["iscrowd"]))
        cols.people["annotation_id"].append(ann.get("id"))  # as given (None: none); data.h5_format stores it
    cols.people["box_region"] += box_regions
    for m in mains:
        cols.samples["image"].append(image_row)
        cols.samples["person"].append(first_person + m)


def rebuild_command(settings: dict, path: str | Path, input_size: int, skeleton: str | None = None) -> str:
    """The command of this converter that makes ``path`` again from the sources its ``settings`` (the file's stored
    build settings) name, for ``input_size`` and ``skeleton`` (a --skeleton value; default: the file's own). Its
    options are those of ``data.coco_to_hdf5.build_parser``; the dataset quotes it when a file does not fit a run."""
    parts = [command("data.coco_to_hdf5")]
    parts += [f"--images {settings['images'][0]}", f"--annotations {settings['annotations'][0]}"]
    if len(settings["images"]) > 1:
        parts += [f"--split {settings['split']}", f"--val-images {settings['images'][1]}"]
        parts += [f"--val-annotations {settings['annotations'][1]}"]
    if settings.get("main_person_bbox_bug"):
        parts.append("--main-person-bbox-bug")
    if settings.get("skipped"):
        parts.append("--skip-bad")
    own = settings.get("skeleton_file", "coco")
    if (skeleton or own) != "coco" or own != "coco":
        parts.append(f"--skeleton {skeleton or own}")
    return " ".join([*parts, f"--out {path}", f"--input-size {input_size}"])
