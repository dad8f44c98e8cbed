"""Short synthetic videos of moving figures with known identities, for tracking (any skeleton).

    simplepose synthetic-video --out synth_video [--frames 90 --people 4 --fps 30 --seed 0 --skeleton NAME]

writes ``synth_video/video.mp4`` and ``synth_video/annotations.json``: COCO keypoint annotations, one image per
frame (image id = frame index from 0, as ``simplepose demo --json`` numbers a video's frames), each person
with its identity as ``track_id`` (as PoseTrack's files).

An earlier run's ``video.mp4`` or ``annotations.json`` in ``--out`` is refused before anything is written, unless
``--overwrite``. How the clips are made: ``data.synthetic_clips``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from simplepose.config.skeleton_file import load_skeleton
from simplepose.data.synthetic_clips import coco_annotations, random_video, write_video
from simplepose.utils.commands import command, commands_here
from simplepose.utils.errors import UserError, cli_main
from simplepose.utils.io import atomic_write_text, refuse_to_overwrite


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=command("data.synthetic_video"), description=commands_here(__doc__.split("\n\n")[0])
    )
    p.add_argument("--out", required=True, type=Path, help="output folder")
    p.add_argument("--frames", type=int, default=90)
    p.add_argument("--people", type=int, default=4)
    p.add_argument("--fps", type=float, default=30.0)
    p.add_argument("--size", type=int, nargs=2, default=(240, 320), metavar=("H", "W"))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--skeleton", default="coco", help="a name in config/skeletons/ or a skeleton YAML file")
    p.add_argument("--overwrite", action="store_true", help="replace the video and annotations of an earlier run")
    return p


@cli_main
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not args.overwrite:
        refuse_to_overwrite([args.out / "video.mp4", args.out / "annotations.json"])
    if args.frames < 1 or args.people < 0 or args.fps <= 0:
        raise UserError("--frames must be >= 1, --people >= 0 and --fps > 0")
    skeleton = load_skeleton(args.skeleton)
    video = random_video(
        np.random.default_rng(args.seed), args.frames, args.people, tuple(args.size), args.fps, skeleton
    )
    args.out.mkdir(parents=True, exist_ok=True)
    write_video(video, args.out / "video.mp4")
    atomic_write_text(args.out / "annotations.json", json.dumps(coco_annotations(video)))
    print(f"wrote {args.out}/video.mp4 ({args.frames} frames, {args.people} people) and {args.out}/annotations.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
