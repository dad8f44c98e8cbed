"""Convert COCO person keypoints (JSON + image folder) into one HDF5 training file, streaming.

    simplepose convert --images coco/train2017 \\
        --annotations coco/annotations/person_keypoints_train2017.json --out coco_train512.h5 [--input-size 512] \\
        [--skeleton coco]

Options: ``--split train2017+val2017 --val-images coco/val2017 --val-annotations .../person_keypoints_val2017.json``
adds val2017 from its 101st image on (the paper's training set; evaluating on val2017 is then contaminated);
``--skip-bad`` skips, with a warning, missing or corrupt images and the images of corrupt annotations (listed in
the settings' ``skipped``); ``--main-person-bbox-bug`` reproduces the original's main-person spacing bug (the
spacing between main persons used the image's last annotation's box); ``--skeleton NAME|FILE`` (default coco: a
name in config/skeletons/ or a skeleton YAML file) says which keypoints every annotation holds, in which order;
``--keypoint-names exact|spelling|position`` how the file's own keypoint names are compared with the skeleton's.

The conversion itself, what it keeps, leaves out and refuses: ``data.conversion``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from simplepose.config.skeleton_check import NAME_MATCHES
from simplepose.data.command_options import add_annotation_file_options
from simplepose.data.conversion import MAX_AUTO_WORKERS, POOL_FROM, VAL_HOLDOUT, Source, convert
from simplepose.data.image_files import MAX_SKIPPED_SHARE
from simplepose.utils.commands import command, commands_here
from simplepose.utils.errors import UserError, cli_main
from simplepose.utils.io import refuse_to_overwrite


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=command("data.coco_to_hdf5"), description=commands_here(__doc__.split("\n\n")[0]))
    p.add_argument(
        "--images",
        required=True,
        type=Path,
        help="folder of the image files (e.g. coco/train2017; JPEG, PNG, BMP, WebP: any format OpenCV reads)",
    )
    add_annotation_file_options(
        p,
        skeleton="the keypoint set of the annotations (train with the same data.skeleton)",
        out="HDF5 file to write (an existing one: with --overwrite)",
        skeleton_default="coco",
    )
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
        "--keypoint-names",
        choices=NAME_MATCHES,
        default="exact",
        help="how the keypoint names the file's category lists are compared with the skeleton's (same order "
        "always): exact; spelling (case, spaces, hyphens, underscores and dots ignored: Right-ankle = right_ankle); "
        "position (not compared: other names for the same keypoints, on your word). A file listing no names is "
        "read in the skeleton's order, with a note",
    )
    p.add_argument(
        "--workers",
        type=int,
        help=f"processes that read, check and draw the images (0: none, all in this one; default: one per core, up to "
        f"{MAX_AUTO_WORKERS}, from {POOL_FROM} images on); the file is the same for any number",
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
    if args.workers is not None and args.workers < 0:
        raise UserError(f"--workers must be 0 or more, got {args.workers}")
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
        args.workers,
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
