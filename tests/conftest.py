"""Shared fixtures. The real COCO sample is found at ../shared/data/coco_sample relative to the repo root,
or wherever the environment variable SIMPLEPOSE_COCO_SAMPLE points (utils.paths.coco_sample_dir)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from config.loader import to_dict
from tests.helpers import briefly_trained_model, tiny_cfg, tiny_model, tiny_model_cfg
from utils.errors import UserError
from utils.paths import COCO_SAMPLE_ANNOTATIONS, coco_sample_dir


@pytest.fixture(scope="session")
def coco_sample() -> Path:
    """Folder with images/ and annotations/person_keypoints_sample.json (27 real train2017 images)."""
    try:
        return coco_sample_dir()
    except UserError as e:
        pytest.fail(str(e))


@pytest.fixture(scope="session")
def coco_sample_annotations(coco_sample: Path) -> Path:
    return coco_sample / COCO_SAMPLE_ANNOTATIONS


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
def sample_h5_64(coco_sample_images: Path, coco_sample_annotations: Path, tmp_path_factory) -> Path:
    """The real COCO sample converted once per session for input size 64 (the tiny preset's)."""
    from data.coco_to_hdf5 import Source, convert

    out = tmp_path_factory.mktemp("h5") / "sample64.h5"
    convert([Source(coco_sample_images, coco_sample_annotations)], out, input_size=64, progress=False)
    return out


@pytest.fixture(scope="session")
def synthetic_coco(tmp_path_factory) -> Path:
    """A small synthetic dataset (data.synthetic, 12 images, seed 0): images/ and annotations/."""
    from data.synthetic import generate

    out = tmp_path_factory.mktemp("synthetic_coco")
    generate(out, num_images=12, seed=0, val_fraction=0.25)
    return out


@pytest.fixture(scope="session")
def synthetic_crowdpose(tmp_path_factory) -> Path:
    """A small synthetic set of CrowdPose figures (data.synthetic --skeleton crowdpose, 16 images, seed 0)."""
    from config.skeleton import load_skeleton
    from data.synthetic import generate

    out = tmp_path_factory.mktemp("synthetic_crowdpose")
    generate(out, num_images=16, seed=0, val_fraction=0.25, skeleton=load_skeleton("crowdpose"))
    return out


@pytest.fixture
def one_thread(monkeypatch):
    """One intra-op thread: two threads on a busy 2-core machine can be tens of times slower. OMP_NUM_THREADS=1 too,
    so that a Trainer built inside keeps it (engine.runtime.configure_cpu_threads leaves the count to that)."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny_ckpt(tmp_path_factory) -> Path:
    """A checkpoint of ``tests.helpers.tiny_model()`` (random weights) with its config, as training saves it."""
    path = tmp_path_factory.mktemp("ckpt") / "tiny.pt"
    torch.save({"model": tiny_model().state_dict(), "config": to_dict(tiny_model_cfg()), "epoch": 0}, path)
    return path


@pytest.fixture(scope="session")
def trained_tiny_ckpt(sample_h5_64, tmp_path_factory) -> Path:
    """A checkpoint of the tiny preset fitted 40 steps to 4 real samples (a few seconds): on the sample's images it
    finds people of several keypoints at the default thresholds, so test-time paths have people to compare."""
    out = tmp_path_factory.mktemp("trained")
    cfg = tiny_cfg(sample_h5_64, out)
    model = briefly_trained_model(cfg, sample_h5_64)
    path = out / "tiny_trained.pt"
    torch.save({"model": model.state_dict(), "config": to_dict(cfg), "epoch": 0}, path)
    return path
