"""Shared fixtures. The real COCO sample is found at ../shared/data/coco_sample relative to the repo root,
or wherever the environment variable SIMPLEPOSE_COCO_SAMPLE points."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def coco_sample_dir() -> Path:
    env = os.environ.get("SIMPLEPOSE_COCO_SAMPLE")
    return Path(env) if env else (REPO_ROOT / ".." / "shared" / "data" / "coco_sample").resolve()


@pytest.fixture(scope="session")
def coco_sample() -> Path:
    """Folder with images/ and annotations/person_keypoints_sample.json (27 real train2017 images)."""
    root = coco_sample_dir()
    if not (root / "annotations" / "person_keypoints_sample.json").is_file():
        pytest.fail(
            f"real COCO sample not found at {root}: set SIMPLEPOSE_COCO_SAMPLE to the folder holding "
            "images/ and annotations/person_keypoints_sample.json"
        )
    return root


@pytest.fixture(scope="session")
def coco_sample_annotations(coco_sample: Path) -> Path:
    return coco_sample / "annotations" / "person_keypoints_sample.json"


@pytest.fixture(scope="session")
def coco_sample_images(coco_sample: Path) -> Path:
    return coco_sample / "images"
