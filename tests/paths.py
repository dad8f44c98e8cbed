"""Where things are: the repository, its presets and the real COCO sample used by tests and benches."""

from __future__ import annotations

import json
import os
from pathlib import Path

from simplepose.utils.commands import command
from simplepose.utils.errors import UserError

REPO_ROOT = Path(__file__).resolve().parents[1]
TINY_PRESET = REPO_ROOT / "config" / "tiny.yaml"  # smoke runs and tests: a CPU run in seconds
PAPER_PRESET = REPO_ROOT / "config" / "simplepose_coco.yaml"  # the paper's model and recipe (512 input, 4 stacks)
COCO_SAMPLE_ANNOTATIONS = Path("annotations") / "person_keypoints_sample.json"


COCO_SAMPLE_FETCHED = REPO_ROOT / "tests" / "coco_sample"  # the shipped annotations; images/ once fetched (ignored)
COCO_SAMPLE_SHARED = REPO_ROOT / ".." / "shared" / "data" / "coco_sample"  # this project's own machines
FETCH_COMMAND = command("tests.fetch_coco_sample")  # the checkout's root alone


def missing_sample_images(root: Path) -> list[str]:
    """File names listed in ``root``'s sample annotations whose JPEG is not in ``root / "images"`` (every name
    when the annotation file itself is missing or unreadable)."""
    try:
        images = json.loads((root / COCO_SAMPLE_ANNOTATIONS).read_text())["images"]
    except (OSError, ValueError, KeyError):
        return ["(annotations)"]
    return [img["file_name"] for img in images if not (root / "images" / img["file_name"]).is_file()]


def coco_sample_dir() -> Path:
    """The real COCO sample (27 train2017 images: ``images/`` and ``annotations/person_keypoints_sample.json``):
    ``$SIMPLEPOSE_COCO_SAMPLE`` when set, else the first complete one of ``tests/coco_sample`` (what
    ``python -m tests.fetch_coco_sample`` fills) and ``../shared/data/coco_sample`` next to the repository.
    UserError (one line, saying how to get it) when none is complete."""
    env = os.environ.get("SIMPLEPOSE_COCO_SAMPLE")
    if env:
        missing = missing_sample_images(Path(env))
        if missing:
            raise UserError(
                f"SIMPLEPOSE_COCO_SAMPLE={env} is not a complete COCO sample ({len(missing)} of its files missing, "
                f"e.g. {missing[0]}): run {FETCH_COMMAND} {env}, or unset it"
            )
        return Path(env)
    for root in (COCO_SAMPLE_FETCHED, COCO_SAMPLE_SHARED.resolve()):
        if not missing_sample_images(root):
            return root
    where = COCO_SAMPLE_FETCHED / "images"
    shown = where.relative_to(REPO_ROOT) if where.is_relative_to(REPO_ROOT) else where
    raise UserError(
        f"real COCO sample not found (27 train2017 photos, 4.4 MB): run {FETCH_COMMAND} to download it into "
        f"{shown}, or set SIMPLEPOSE_COCO_SAMPLE"
    )


def inputs_or_sample(images: Path | None, annotations: Path | None) -> tuple[Path, Path]:
    """(image folder, annotation file): those given, else the real COCO sample's (tests.paths.coco_sample_dir)."""
    if images is not None and annotations is not None:
        return images, annotations
    sample = coco_sample_dir()
    return images or sample / "images", annotations or sample / COCO_SAMPLE_ANNOTATIONS
