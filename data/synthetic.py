"""A synthetic COCO-format keypoint dataset that a small network learns in minutes on a CPU.

    simplepose synthetic --out synth [--num-images 600 --seed 0 --val-fraction 0.2] [--skeleton NAME|FILE]

writes ``synth/images/*.jpg`` and ``synth/annotations/person_keypoints_{train,val}.json`` (images, annotations
with 17 keypoints, num_keypoints, bbox, area, polygon segmentation, iscrowd, categories), to be converted with
``simplepose convert`` like COCO itself. Deterministic from the seed.

``--skeleton`` (default coco) draws figures of another keypoint set instead, articulated from its limb graph
(data/synthetic_figures.py), with the same backgrounds, sizes, occlusion, tiny figures and crowds, and annotations
in that skeleton's dataset order; a skeleton evaluated as CrowdPose (``evaluation: crowdpose``) also gets each
image's ``crowdIndex``. Convert such a set with the same ``--skeleton``.

An ``--out`` folder holding an earlier set (its annotation files, or any file in its ``images/``) is refused before
anything is written, unless ``--overwrite``. How the pictures are drawn: ``data.synthetic_images``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from simplepose.config.skeleton_file import load_skeleton
from simplepose.data.synthetic_images import generate
from simplepose.utils.commands import command, commands_here
from simplepose.utils.errors import cli_main
from simplepose.utils.io import refuse_to_overwrite


def planned_files(out: Path) -> list[Path]:
    """What a run would write over in ``out``: the two annotation files, and the images folder when it holds files."""
    images = out / "images"
    held = [images] if images.is_dir() and any(images.iterdir()) else []
    return [out / "annotations" / f"person_keypoints_{split}.json" for split in ("train", "val")] + held


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=command("data.synthetic"), description=commands_here(__doc__.split("\n\n")[0]))
    p.add_argument("--out", required=True, type=Path, help="output folder")
    p.add_argument("--num-images", type=int, default=600)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--val-fraction", type=float, default=0.2)
    p.add_argument(
        "--skeleton",
        default="coco",
        help="the keypoint set drawn: a name in config/skeletons/ (coco, crowdpose, quadruped6) or a "
        "skeleton YAML file",
    )
    p.add_argument("--overwrite", action="store_true", help="replace the set of an earlier run in --out")
    return p


@cli_main
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not args.overwrite:
        refuse_to_overwrite(planned_files(args.out))
    skeleton = load_skeleton(args.skeleton)
    counts = generate(args.out, args.num_images, args.seed, args.val_fraction, skeleton)
    print(f"wrote {args.out}: {counts['train']} training and {counts['val']} validation images")
    given = "" if args.skeleton == "coco" else f" --skeleton {args.skeleton}"
    print(
        f"next: {command('data.coco_to_hdf5')} --images {args.out}/images "
        f"--annotations {args.out}/annotations/person_keypoints_train.json --out {args.out}/train256.h5 "
        f"--input-size 256{given}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
