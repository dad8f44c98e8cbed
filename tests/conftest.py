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


@pytest.fixture(scope="session")
def coco_sample_h5(coco_sample_images: Path, coco_sample_annotations: Path, tmp_path_factory) -> Path:
    """The real COCO sample converted once per session by data.coco_to_hdf5, for input size 256."""
    from data.coco_to_hdf5 import Source, convert

    out = tmp_path_factory.mktemp("coco_sample_h5") / "sample256.h5"
    convert([Source(coco_sample_images, coco_sample_annotations)], out, input_size=256, progress=False)
    return out


@pytest.fixture(scope="session")
def synthetic_coco(tmp_path_factory) -> Path:
    """A small synthetic dataset (data.synthetic, 12 images, seed 0): images/ and annotations/."""
    from data.synthetic import generate

    out = tmp_path_factory.mktemp("synthetic_coco")
    generate(out, num_images=12, seed=0, val_fraction=0.25)
    return out
