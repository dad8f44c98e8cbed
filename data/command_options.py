"""The options of the commands that read a person-keypoints annotation file and write one file from it
(``data.coco_to_hdf5``: an HDF5 training file; ``data.map_keypoints``: the file on another skeleton), written once
so that both say the same: ``--annotations FILE``, ``--skeleton NAME|FILE`` and ``--out FILE``."""

from __future__ import annotations

import argparse
from pathlib import Path

SKELETON_FORMS = "a name in config/skeletons/ (coco, crowdpose) or a skeleton YAML file"


def add_annotation_file_options(
    p: argparse.ArgumentParser, *, skeleton: str, out: str, skeleton_default: str | None = None, annotations: str = ""
) -> None:
    """``--annotations`` (required; ``annotations``: what the command needs of the file, if anything), ``--skeleton``
    (``skeleton``: what it is to the command; required when there is no ``skeleton_default``) and ``--out``
    (required; ``out``: what is written there), in that order."""
    p.add_argument(
        "--annotations",
        required=True,
        type=Path,
        help="COCO-format person_keypoints JSON (e.g. person_keypoints_train2017.json)" + annotations,
    )
    p.add_argument(
        "--skeleton",
        required=skeleton_default is None,
        default=skeleton_default,
        help=f"{skeleton}: {SKELETON_FORMS}",
    )
    p.add_argument("--out", required=True, type=Path, help=out)
