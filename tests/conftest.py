"""Shared fixtures.

Two samples of COCO-format people, laid out alike (``images/`` and ``annotations/person_keypoints_sample.json``):

* the real COCO sample (``coco_sample*``: 27 train2017 photos), found by ``tests.paths.coco_sample_dir``
  (``$SIMPLEPOSE_COCO_SAMPLE``, ``tests/coco_sample`` once ``python -m tests.fetch_coco_sample`` has filled it, or
  ``../shared/data/coco_sample``). Without it the tests that use it are skipped, with one line saying how to get it;
* the synthetic sample (``synthetic_sample*``), generated once per session (tests.helpers.make_synthetic_sample):
  every behaviour that does not need a real photo is tested on it, so a fresh clone tests it too.

``sample*`` fixtures are each of the two in turn (test ids ``[synthetic]`` and ``[real]``): the checks of the data
itself (conversion, masks, JPEG decoding, the oracle) run on the generated people and on the real ones.
"""

from __future__ import annotations

import functools
import gc
import multiprocessing
import os
from pathlib import Path

import pytest
import torch

import tests.own_tree  # noqa: F401  (first of the project: stops at once when simplepose is another tree's)
from simplepose.utils.errors import UserError
from tests.helpers import (
    briefly_trained_model,
    make_synthetic_sample,
    save_tiny_checkpoint,
    tiny_cfg,
    tiny_model,
    tiny_model_cfg,
)
from tests.paths import COCO_SAMPLE_ANNOTATIONS, coco_sample_dir


def converted(sample: Path, out: Path, input_size: int) -> Path:
    """The sample at ``sample`` (images/, annotations/) converted by data.coco_to_hdf5 to ``out`` for ``input_size``."""
    from simplepose.data.conversion import Source, convert

    convert([Source(sample / "images", sample / COCO_SAMPLE_ANNOTATIONS)], out, input_size=input_size, progress=False)
    return out


@pytest.fixture(autouse=True)
def torch_threads_kept():
    """Torch's thread count as it was before each test: a test, or a bench script's ``main`` run in this process,
    that sets it would otherwise change what later tests compute (the session's trained fixtures among them), so that
    a test's result would depend on the order the tests ran in."""
    threads = torch.get_num_threads()
    yield
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def no_process_left():
    """Each test ends the worker processes it started (DataLoader workers, process pools). Python's exit joins the
    ones left: a worker that did not end kept the finished suite, and the CI job reading its output, waiting for
    ever. A test that leaves one fails here, naming it, and the process is killed."""
    before = set(multiprocessing.active_children())
    yield
    left = [p for p in multiprocessing.active_children() if p not in before]
    if not left:
        return
    gc.collect()  # an iterator kept by a reference cycle ends its workers when collected
    for p in left:
        p.join(5)
    alive = [p for p in left if p.is_alive()]
    for p in alive:
        p.kill()
        p.join(5)
    assert not alive, f"worker processes left running by this test (killed now): {alive}"


# ---------------------------------------------------------------------------------------------- the real sample

REAL_SAMPLE_FIXTURES = {"coco_sample", "coco_sample_h5"}


@functools.cache
def real_sample_missing() -> str | None:
    """Why the tests on the real sample are skipped: the one-line message of tests.paths.coco_sample_dir; None when
    it is found, or when $SIMPLEPOSE_COCO_SAMPLE asks for one (a wrong setting fails those tests instead)."""
    try:
        coco_sample_dir()
    except UserError as e:
        return None if os.environ.get("SIMPLEPOSE_COCO_SAMPLE") else str(e)
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip the tests on the real sample when there is none, from this one place: pytest's summary then folds them
    into one line (a skip raised by a fixture is reported at each test)."""
    params = getattr(item, "callspec", None)
    real = REAL_SAMPLE_FIXTURES & set(item.fixturenames) or (params and params.params.get("sample_kind") == "real")
    if real and real_sample_missing():
        pytest.skip(real_sample_missing())


@pytest.fixture(scope="session")
def coco_sample() -> Path:
    """Folder with images/ and annotations/person_keypoints_sample.json (27 real train2017 images). Skips when there
    is none; fails when $SIMPLEPOSE_COCO_SAMPLE names a folder that is not one (a setting gone wrong)."""
    try:
        return coco_sample_dir()
    except UserError as e:
        if os.environ.get("SIMPLEPOSE_COCO_SAMPLE"):
            pytest.fail(str(e))
        pytest.skip(str(e))


@pytest.fixture(scope="session")
def coco_sample_h5(coco_sample: Path, tmp_path_factory) -> Path:
    """The real COCO sample converted once per session by data.coco_to_hdf5, for input size 256."""
    return converted(coco_sample, tmp_path_factory.mktemp("coco_sample_h5") / "sample256.h5", 256)


# ---------------------------------------------------------------------------------------------- the synthetic sample


@pytest.fixture(scope="session")
def synthetic_sample(tmp_path_factory) -> Path:
    """The real sample's stand-in, laid out like it: 27 synthetic pictures of people, with occluded keypoints
    (v = 1), people without keypoints and crowd regions written as COCO writes them (uncompressed RLE)."""
    return make_synthetic_sample(tmp_path_factory.mktemp("synthetic_sample"))


@pytest.fixture(scope="session")
def synthetic_sample_annotations(synthetic_sample: Path) -> Path:
    return synthetic_sample / COCO_SAMPLE_ANNOTATIONS


@pytest.fixture(scope="session")
def synthetic_sample_images(synthetic_sample: Path) -> Path:
    return synthetic_sample / "images"


@pytest.fixture(scope="session")
def synthetic_sample_h5(synthetic_sample: Path, tmp_path_factory) -> Path:
    """The synthetic sample converted once per session for input size 256."""
    return converted(synthetic_sample, tmp_path_factory.mktemp("synthetic_sample_h5") / "synthetic256.h5", 256)


@pytest.fixture(scope="session")
def synthetic_h5_64(synthetic_sample: Path, tmp_path_factory) -> Path:
    """The synthetic sample converted once per session for input size 64 (the tiny preset's)."""
    return converted(synthetic_sample, tmp_path_factory.mktemp("h5") / "synthetic64.h5", 64)


# ---------------------------------------------------------------------------------------------- each of the two


@pytest.fixture(scope="session", params=["synthetic", "real"])
def sample_kind(request) -> str:
    """Which sample the ``sample*`` fixtures give: the fixture-name prefix of the synthetic one, then the real one."""
    return "coco" if request.param == "real" else "synthetic"


@pytest.fixture(scope="session")
def sample(request, sample_kind: str) -> Path:
    """The synthetic sample, then the real one (skipped when there is none)."""
    return request.getfixturevalue(f"{sample_kind}_sample")


@pytest.fixture(scope="session")
def sample_annotations(sample: Path) -> Path:
    return sample / COCO_SAMPLE_ANNOTATIONS


@pytest.fixture(scope="session")
def sample_images(sample: Path) -> Path:
    return sample / "images"


@pytest.fixture(scope="session")
def sample_h5(request, sample_kind: str) -> Path:
    """``sample`` converted for input size 256 (the session's one conversion of each)."""
    return request.getfixturevalue(f"{sample_kind}_sample_h5")


@pytest.fixture(scope="session")
def synthetic_coco(tmp_path_factory) -> Path:
    """A small synthetic dataset (data.synthetic, 12 images, seed 0): images/ and annotations/."""
    from simplepose.data.synthetic_images import generate

    out = tmp_path_factory.mktemp("synthetic_coco")
    generate(out, num_images=12, seed=0, val_fraction=0.25)
    return out


@pytest.fixture(scope="session")
def synthetic_crowdpose(tmp_path_factory) -> Path:
    """A small synthetic set of CrowdPose figures (data.synthetic --skeleton crowdpose, 16 images, seed 0)."""
    from simplepose.config.skeleton_file import load_skeleton
    from simplepose.data.synthetic_images import generate

    out = tmp_path_factory.mktemp("synthetic_crowdpose")
    generate(out, num_images=16, seed=0, val_fraction=0.25, skeleton=load_skeleton("crowdpose"))
    return out


@pytest.fixture
def one_thread(monkeypatch):
    """One intra-op thread: two threads on a busy 2-core machine can be tens of times slower. OMP_NUM_THREADS=1 too,
    so that a Trainer built inside keeps it (engine.process_setup.configure_cpu_threads leaves the count to that)."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny_ckpt(tmp_path_factory) -> Path:
    """A checkpoint of ``tests.helpers.tiny_model()`` (random weights) with its config and skeleton, written by the
    checkpoint format's own writer."""
    return save_tiny_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny.pt", tiny_model(), tiny_model_cfg())


@pytest.fixture(scope="session")
def trained_tiny_ckpt(synthetic_h5_64, tmp_path_factory) -> Path:
    """A checkpoint of the tiny preset fitted 40 steps to 4 synthetic samples (a few seconds): on the synthetic
    sample's pictures it finds people of several keypoints at the default thresholds, so test-time paths have
    people to compare."""
    out = tmp_path_factory.mktemp("trained")
    cfg = tiny_cfg(synthetic_h5_64, out)
    model = briefly_trained_model(cfg, synthetic_h5_64)
    return save_tiny_checkpoint(out / "tiny_trained.pt", model, cfg)
