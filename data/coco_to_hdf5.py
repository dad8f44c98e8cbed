"""Convert COCO person keypoints (JSON + image folder) into one HDF5 training file, streaming.

    python -m data.coco_to_hdf5 --images coco/train2017 \\
        --annotations coco/annotations/person_keypoints_train2017.json --out coco_train512.h5 [--input-size 512] \\
        [--skeleton coco]

Options: ``--split train2017+val2017 --val-images coco/val2017 --val-annotations .../person_keypoints_val2017.json``
adds val2017 from its 101st image on (the paper's training set; evaluating on val2017 is then contaminated);
``--skip-bad`` skips, with a warning, missing or corrupt images and the images of corrupt annotations (listed in
the settings' ``skipped``); ``--main-person-bbox-bug`` reproduces the original's main-person spacing bug (the
spacing between main persons used the image's last annotation's box); ``--skeleton NAME|FILE`` (default coco: a
name in config/skeletons/ or a skeleton YAML file) says which keypoints every annotation holds, in which order;
``--keypoint-names exact|spelling|position`` how the file's own keypoint names are compared with the skeleton's.

Only images with at least one main person (``data.coco_annotations.main_person_indices``) are stored; each main
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

import argparse
import logging
import sys
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

from config.config_file import check_input_size
from config.skeleton import Skeleton
from config.skeleton_check import NAME_MATCHES, NameMatch
from config.skeleton_file import load_skeleton
from data.coco_annotations import (
    CocoKeypoints,
    has_empty_box,
    image_masks,
    load_coco_keypoints,
    main_person_indices,
)
from data.h5_format import H5_FORMAT_VERSION, H5Writer, RowBuffer, encode_mask_runs, fits_id_column, mask_code
from data.image_files import MAX_SKIPPED_SHARE, BadImages, image_path, missing_files, read_checked
from utils.errors import UserError, cli_main
from utils.io import atomic_path, refuse_to_overwrite
from utils.progress_bar import progress_bar

log = logging.getLogger(__name__)

VAL_HOLDOUT = 100  # paper split: the first 100 val2017 images stay out of training (the original validated on them)
_FLUSH_EVERY = 64  # images buffered before appending to the file


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
            mine.append(_Planned(img, anns, mains, image_path(source.images, img, coco.path), k))
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
) -> dict:
    """Build the HDF5 file at ``out`` (atomically) and return its settings dict. ``skeleton``: the keypoint set of
    the annotations (a ``Skeleton``, or a name in config/skeletons/ or a YAML path); ``keypoint_names``: how the
    file's keypoint names are compared with the skeleton's (``config.skeleton_check.NameMatch``)."""
    out = Path(out)
    check_input_size(input_size, "--input-size")
    skeleton_file = skeleton.reference() if isinstance(skeleton, Skeleton) else str(skeleton)
    skeleton = skeleton if isinstance(skeleton, Skeleton) else load_skeleton(skeleton)
    for s in sources:
        if not s.images.is_dir():
            raise UserError(
                f"image folder {s.images} not found; pass the folder holding the image files (--images)", file=s.images
            )
    loaded = [(s, load_coco_keypoints(s.annotations, skeleton, skip_bad, keypoint_names)) for s in sources]
    skipped: list[dict] = []
    counts = {
        "images_in_annotations": 0,
        "images": 0,
        "people": 0,
        "samples": 0,
        "images_without_main_person": 0,
        "people_with_empty_box": 0,
        "people_with_box_as_region": sum(c.stand_ins for _, c in loaded),
        "images_without_size": sum(c.images_without_size for _, c in loaded),
    }
    bad_images = [BadImages(s.images, skip_bad) for s in sources]
    planned = _plan(loaded, bad_images, main_person_bbox_bug, counts, skipped)
    with atomic_path(out) as tmp, h5py.File(tmp, "w") as f:
        writer = H5Writer(f, skeleton.num_dataset_keypoints, _columns_needing_file_ids(planned))
        cols = RowBuffer()
        for p in progress_bar(planned, desc=f"converting to {out.name}", unit="img", disable=not progress):
            data, size, problem = read_checked(p.path, p.img)
            if problem is not None:
                bad_images[p.source].report(p.path, p.img["id"], problem)
                continue
            _add_image(
                cols,
                {**p.img, "width": size[0], "height": size[1]},
                p.anns,
                p.mains,
                data,
                skeleton.num_dataset_keypoints,
            )
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


def _add_image(cols: RowBuffer, img: dict, anns: list[dict], mains: list[int], data: bytes, num_keypoints: int) -> None:
    h, w = img["height"], img["width"]
    mask_miss, mask_all = image_masks(anns, h, w)
    first_person = sum(cols.person_counts)
    image_row = len(cols)
    cols.image["id"].append(img["id"])
    cols.image["height"].append(h)
    cols.image["width"].append(w)
    cols.image["has_ignore"].append(bool((mask_miss == 0).any()))
    cols.image["has_person"].append(bool(mask_all.any()))
    cols.jpeg.append(data)
    cols.mask.append(encode_mask_runs(mask_code(mask_miss, mask_all)))
    cols.person_counts.append(len(anns))
    for ann in anns:
        cols.people["keypoints"].append(np.asarray(ann["keypoints"], np.float32).reshape(num_keypoints, 3))
        cols.people["bbox"].append(ann["bbox"])
        cols.people["area"].append(ann["area"])
        cols.people["num_keypoints"].append(ann["num_keypoints"])
        cols.people["iscrowd"].append(bool(ann["iscrowd"]))
        cols.people["annotation_id"].append(ann.get("id"))  # as given (None: none); data.h5_format stores it
    for m in mains:
        cols.samples["image"].append(image_row)
        cols.samples["person"].append(first_person + m)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m data.coco_to_hdf5", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--images",
        required=True,
        type=Path,
        help="folder of the image files (e.g. coco/train2017; JPEG, PNG, BMP, WebP: any format OpenCV reads)",
    )
    p.add_argument("--annotations", required=True, type=Path, help="COCO person_keypoints_*.json")
    p.add_argument("--out", required=True, type=Path, help="HDF5 file to write (an existing one: with --overwrite)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    p.add_argument(
        "--input-size",
        type=int,
        default=512,
        help="network input size the file is meant for: a multiple of 64 (64, 128, 192, 256, ..., 512), "
        "as data.input_size; train with the same",
    )
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
        f"More than {MAX_SKIPPED_SHARE:.0%}% of the images skipped stops the conversion all the same (a wrong "
        "--images folder). Always left out and counted, with or without it: images without a main person; people "
        "with a zero-area box are never main persons. Always refused: invalid JSON, duplicate ids, file names "
        "outside --images",
    )
    p.add_argument(
        "--main-person-bbox-bug",
        action="store_true",
        help="reproduce the original's main-person spacing bug (uses the last annotation's bbox)",
    )
    p.add_argument(
        "--skeleton",
        default="coco",
        help="the keypoint set of the annotations: a name in config/skeletons/ (coco) or a skeleton YAML file; "
        "train with the same data.skeleton",
    )
    p.add_argument(
        "--keypoint-names",
        choices=NAME_MATCHES,
        default="exact",
        help="how the keypoint names the file's category lists are compared with the skeleton's (same order "
        "always): exact; spelling (case, spaces, hyphens, underscores and dots ignored: Right-ankle = right_ankle); "
        "position (not compared: other names for the same keypoints, on your word). A file listing no names is "
        "read in the skeleton's order, with a note",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def rebuild_command(settings: dict, path: str | Path, input_size: int, skeleton: str | None = None) -> str:
    """The command of this converter that makes ``path`` again from the sources its ``settings`` (the file's stored
    build settings) name, for ``input_size`` and ``skeleton`` (a --skeleton value; default: the file's own). Its
    options are those of ``build_parser``; the dataset quotes it when a file does not fit a run."""
    parts = ["python -m data.coco_to_hdf5"]
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


@cli_main
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    sources = [Source(args.images, args.annotations)]
    if args.split == "train2017+val2017":
        if not (args.val_images and args.val_annotations):
            raise UserError("--split train2017+val2017 needs --val-images and --val-annotations")
        sources.append(Source(args.val_images, args.val_annotations, start=VAL_HOLDOUT))
    if not args.overwrite:
        refuse_to_overwrite([args.out])
    settings = convert(
        sources,
        args.out,
        args.input_size,
        args.split,
        args.skip_bad,
        args.main_person_bbox_bug,
        not args.no_progress,
        args.skeleton,
        args.keypoint_names,
    )
    c = settings["counts"]
    print(
        f"wrote {args.out}: {c['images']} images, {c['people']} people, {c['samples']} samples; "
        f"{len(settings['skipped'])} images skipped as bad, {c['images_without_main_person']} images without a "
        f"main person left out, {c['people_with_empty_box']} people with a zero-area box not used as main persons"
        + (
            f"; {c['people_with_box_as_region']} people without 'segmentation' or 'area': their box stands in"
            if c["people_with_box_as_region"]
            else ""
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
