"""Where things are: the repository, its presets and the real COCO sample used by tests and benches."""

from __future__ import annotations

import os
from pathlib import Path

from utils.errors import UserError

REPO_ROOT = Path(__file__).resolve().parents[1]
TINY_PRESET = REPO_ROOT / "config" / "tiny.yaml"  # smoke runs and tests: a CPU run in seconds
PAPER_PRESET = REPO_ROOT / "config" / "simplepose_coco.yaml"  # the paper's model and recipe (512 input, 4 stacks)
COCO_SAMPLE_ANNOTATIONS = Path("annotations") / "person_keypoints_sample.json"


def coco_sample_dir() -> Path:
    """The real COCO sample (27 train2017 images: ``images/`` and ``annotations/person_keypoints_sample.json``):
    ``$SIMPLEPOSE_COCO_SAMPLE``, else ``../shared/data/coco_sample`` next to the repository. UserError when its
    annotation file is not there."""
    env = os.environ.get("SIMPLEPOSE_COCO_SAMPLE")
    root = Path(env) if env else (REPO_ROOT / ".." / "shared" / "data" / "coco_sample").resolve()
    if not (root / COCO_SAMPLE_ANNOTATIONS).is_file():
        raise UserError(
            f"real COCO sample not found at {root}: set SIMPLEPOSE_COCO_SAMPLE to the folder holding images/ and "
            f"{COCO_SAMPLE_ANNOTATIONS}"
        )
    return root
