"""Write a COCO-format person-keypoints JSON again with its keypoints on another skeleton, matched by name.

    simplepose map-keypoints --annotations crowdpose_val.json --skeleton coco --out crowdpose_val_coco.json \\
        [--keypoint-names spelling|exact|position] [--rename OLD=NEW ...]

Prints what is kept, what the file cannot label (unlabelled: 0, 0, 0 in every annotation) and what is dropped.
Names are matched however the dataset spells them (``--keypoint-names spelling``, the default: AI Challenger's
``Right Shoulder``, MPII's ``r shoulder``, OpenPose's ``RShoulder`` are ``right_shoulder``; docs/keypoint_sets.md
lists each dataset's); ``exact`` matches equal names only, ``position`` takes the file's keypoints as the skeleton's
in order. ``--rename OLD=NEW`` (repeatable) renames a keypoint of the file before matching, for a name the rule does
not know. An existing --out is never replaced; the file is written whole or not at all. The mapping itself:
``data.annotation_mapping.map_annotation_file``.
"""

from __future__ import annotations

import argparse
import json
import sys

from simplepose.config.skeleton_check import NAME_MATCHES
from simplepose.config.skeleton_file import load_skeleton
from simplepose.data.annotation_mapping import map_annotation_file
from simplepose.data.coco_annotations import read_annotation_file
from simplepose.data.command_options import add_annotation_file_options
from simplepose.utils.commands import command, commands_here
from simplepose.utils.errors import UserError, cli_main
from simplepose.utils.io import atomic_write_bytes


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=command("data.map_keypoints"), description=commands_here(__doc__.split("\n\n")[0]))
    add_annotation_file_options(
        p,
        skeleton="the skeleton to map onto",
        out="JSON file to write (must not exist)",
        annotations="; its person category names its keypoints",
    )
    p.add_argument(
        "--keypoint-names",
        choices=NAME_MATCHES,
        default="spelling",
        help="how the file's keypoint names meet the skeleton's: spelling (default: the same point however spelt, "
        "'Right Shoulder', 'r shoulder', 'RShoulder'), exact, or position (the skeleton's keypoints in order)",
    )
    p.add_argument(
        "--rename",
        action="append",
        default=[],
        metavar="OLD=NEW",
        help="rename the file's keypoint OLD to NEW before matching by name (repeatable)",
    )
    return p


def parse_renames(items: list[str]) -> dict[str, str]:
    """``["a=b", ...]`` -> ``{"a": "b", ...}``; UserError for an item that is not OLD=NEW or an OLD given twice."""
    out: dict[str, str] = {}
    for item in items:
        old, sep, new = item.partition("=")
        old, new = old.strip(), new.strip()
        if not sep or not old or not new:
            raise UserError(f"--rename {item!r}: write it as OLD=NEW, e.g. --rename head_top=head", key="--rename")
        if old in out:
            raise UserError(f"--rename: {old!r} is renamed twice ({out[old]!r} and {new!r}); give it once")
        out[old] = new
    return out


@cli_main
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    rename = parse_renames(args.rename)
    if args.out.resolve() == args.annotations.resolve():
        raise UserError(
            f"--out {args.out} is the --annotations file: write the mapped annotations to another path", file=args.out
        )
    if args.out.exists():
        raise UserError(
            f"{args.out} exists: an earlier file is never replaced; pick another --out path, or delete it",
            file=args.out,
        )
    skeleton = load_skeleton(args.skeleton)
    data = read_annotation_file(args.annotations, "pass the COCO-format person_keypoints JSON whose keypoints to map")
    mapped, mapping = map_annotation_file(data, skeleton, str(args.annotations), rename, args.keypoint_names)
    print(mapping.coverage())
    atomic_write_bytes(args.out, json.dumps(mapped, separators=(",", ":")).encode())
    people = sum(isinstance(a, dict) and "keypoints" in a for a in mapped["annotations"])
    print(
        f"wrote {args.out}: {len(mapped.get('images') or [])} images, {len(mapped['annotations'])} annotations "
        f"({people} with keypoints) in skeleton {skeleton.name}'s {len(skeleton.dataset_keypoints)} keypoints"
        + (f"; dropped from every annotation: {', '.join(mapping.dropped)}" if mapping.dropped else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
