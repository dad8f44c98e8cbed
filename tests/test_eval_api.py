"""The Python API (evaluate.PoseEstimator): the README's example on a picture, the documented result format, batches
of mixed sizes, eval overrides checked as the config checks them, bad images, COCO results JSON identical to
coco_eval's. The demo built on it: tests/test_eval_demo.py; from_onnx: tests/test_eval_onnx.py."""

import json
import math
import runpy

import cv2
import numpy as np
import pytest
import torch

from config.loader import ConfigError
from engine.checkpoint import CheckpointError
from evaluate import Person, PoseEstimator, coco_eval, coco_results_json
from evaluate.coco_eval import load_coco
from evaluate.inference import multiscale_maps
from evaluate.predictor import Timing
from tests.helpers import (
    COCO,
    LANDSCAPE,
    PORTRAIT,
    SMALL,
    UNSCORED_IMAGES,
    assert_people_agree,
    image_folder,
    image_id,
    people_agreement,
)
from utils.errors import UserError
from utils.paths import REPO_ROOT

CPU = torch.device("cpu")

IMAGE = LANDSCAPE  # a synthetic picture on which the briefly trained model finds people of many keypoints


def readme_python_example() -> str:
    """The first Python block of the README's "Use in Python" section."""
    section = (REPO_ROOT / "README.md").read_text().split("## Use in Python", 1)[1].split("\n## ", 1)[0]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def read(path) -> np.ndarray:
    return cv2.imread(str(path), cv2.IMREAD_COLOR | cv2.IMREAD_IGNORE_ORIENTATION)


def check_person_format(person: Person, estimator: PoseEstimator, image_hw: tuple[int, int]) -> int:
    """Assert the documented format of one person; returns its number of found keypoints."""
    assert isinstance(person, Person) and isinstance(person.score, float) and 0 <= person.score < 1
    kp = person.keypoints
    assert isinstance(kp, np.ndarray) and kp.dtype == np.float64
    assert kp.shape == (len(estimator.keypoint_names), 3) == (estimator.skeleton.num_dataset_keypoints, 3)
    found = kp[:, 2] > 0
    assert found.any()
    assert np.isnan(kp[~found, :2]).all() and (kp[~found, 2] == 0).all()  # not found: nan, nan, 0
    assert np.isfinite(kp[found]).all() and (kp[found, 2] <= 1.0).all()
    h, w = image_hw
    x_in, y_in = (kp[found, 0] > -1) & (kp[found, 0] < w), (kp[found, 1] > -1) & (kp[found, 1] < h)
    assert x_in.all() and y_in.all()  # image pixels
    x, y, bw, bh = person.box
    assert all(isinstance(v, float) for v in person.box)
    assert math.isclose(x, kp[found, 0].min()) and math.isclose(y, kp[found, 1].min())
    assert math.isclose(x + bw, kp[found, 0].max()) and math.isclose(y + bh, kp[found, 1].max())
    return int(found.sum())


def test_readme_python_example_runs_on_a_picture(
    trained_tiny_ckpt, synthetic_sample_images, tmp_path, one_thread, capsys
):
    code = readme_python_example()
    assert '"runs/quickstart/best.pt"' in code and '"photo.jpg"' in code  # what the test swaps for real files
    code = code.replace('"runs/quickstart/best.pt"', repr(str(trained_tiny_ckpt)))
    code = code.replace('"photo.jpg"', repr(str(synthetic_sample_images / IMAGE)))
    script = tmp_path / "readme_example.py"  # run as a user runs it: saved as a script
    script.write_text(code)
    namespace = runpy.run_path(str(script))
    printed = capsys.readouterr().out

    estimator = namespace["estimator"]
    assert isinstance(estimator, PoseEstimator) and estimator.keypoint_names[0] == "nose"
    image = cv2.imread(str(synthetic_sample_images / IMAGE))
    people = estimator(image)
    assert isinstance(people, list) and len(people) >= 2
    assert str(people[0].score) in printed and str(people[-1].score) in printed  # the example printed them all
    counts = [check_person_format(p, estimator, image.shape[:2]) for p in people]
    assert max(counts) >= 10 and min(counts) < len(estimator.keypoint_names)  # full and partial people were checked


def test_scores_stay_in_their_documented_ranges_where_the_maps_overshoot(trained_tiny_ckpt, synthetic_sample_images):
    """Keypoint scores in (0, 1] and person scores in [0, 1) (Person), though this model's keypoint maps peak above
    1 as trained networks' do; the results JSON keeps each keypoint's score as its v."""
    estimator = PoseEstimator.from_checkpoint(trained_tiny_ckpt, device="cpu", scales=[1.0], flip=False)
    images = [read(p) for p in sorted(synthetic_sample_images.iterdir())[:8]]
    maps = [multiscale_maps(im, estimator.cfg, estimator.network, CPU, skeleton=COCO)[0] for im in images]
    peaks = [m[COCO.keypoint_channels].max() for m in maps]
    assert max(peaks) > 1.0  # the clip is exercised
    results = estimator(images)
    people = [p for found in results for p in found]
    assert len(people) > 20 and all(0 <= p.score < 1 for p in people)
    for found, image in zip(results, images):
        for person in found:
            check_person_format(person, estimator, image.shape[:2])
    assert min(p.score for p in people) < 0.5 <= max(p.score for p in people)  # lone keypoints and whole people
    written = json.loads(coco_results_json(list(range(len(images))), results))
    v = np.concatenate([np.reshape(r["keypoints"], (-1, 3))[:, 2] for r in written])
    assert v.min() >= 0 and v.max() <= 1 and 0 < np.isin(v, [0.0, 1.0]).mean() < 1  # confidences, not 1/0 flags


def test_batches_of_mixed_sizes_equal_one_image_at_a_time(trained_tiny_ckpt, synthetic_sample_images, one_thread):
    images = [read(synthetic_sample_images / name) for name in (IMAGE, PORTRAIT, IMAGE, SMALL)]
    assert len({im.shape for im in images}) == 3
    one = PoseEstimator.from_checkpoint(trained_tiny_ckpt, device="cpu")
    alone = [one(im) for im in images]
    batched = PoseEstimator.from_checkpoint(trained_tiny_ckpt, device="cpu", batch_size=2)
    together = batched(images)  # the two copies of IMAGE share one forward pass
    assert isinstance(together, list) and len(together) == len(images)
    # a batch of two may run other kernels than one image: the same people, as maps equal to float rounding give
    # (docs/design.md#tests-and-their-data)
    keypoints = lambda people: [p.keypoints for p in people]  # noqa: E731
    agreements = [people_agreement(keypoints(b), keypoints(a), COCO.sigmas) for a, b in zip(alone, together)]
    assert_people_agree(agreements, min_people=5)
    assert batched.timing.images == 4  # the seconds themselves: bench/ scripts print them
    assert one.timing.images == 1 and one.total_timing.images == 4
    assert "4 images" in batched.timing.describe() and "ms per image" in batched.timing.describe()
    assert batched([]) == [] and batched.timing.images == 0


def test_timing_adds_up_calls_and_reports_per_image():
    total = Timing()
    total.add(Timing(images=2, network_s=0.3, decoding_s=0.1))
    total.add(Timing(images=3, network_s=0.2, decoding_s=0.4))
    assert (total.images, total.network_s, total.decoding_s) == (5, 0.5, 0.5)
    assert total.images_per_s == 5.0 and Timing().images_per_s == 0.0
    assert total.describe("frame") == "5 frames, 5.00 frames/s (network 100.0 ms + decoding 100.0 ms per frame)"


def test_keyword_overrides_are_checked_as_the_config_checks_them(trained_tiny_ckpt):
    estimator = PoseEstimator.from_checkpoint(trained_tiny_ckpt, device="cpu", scales=[1, 2], flip=False)
    assert estimator.cfg.scales == [1.0, 2.0] and estimator.cfg.flip is False
    assert estimator.cfg.boxsize == 64  # the rest: the checkpoint's own eval settings (the tiny preset's)
    assert PoseEstimator.from_checkpoint(trained_tiny_ckpt).device.type in ("cpu", "cuda")  # "auto"
    with pytest.raises(ConfigError) as e:
        PoseEstimator.from_checkpoint(trained_tiny_ckpt, device="cpu", scalez=[1.0])
    assert e.value.key == "eval.scalez" and "eval.scales" in e.value.suggestions
    for bad, key in ((dict(flip="sometimes"), "eval.flip"), (dict(scales=[]), "eval.scales")):
        with pytest.raises(ConfigError) as e:
            PoseEstimator.from_checkpoint(trained_tiny_ckpt, device="cpu", **bad)
        assert e.value.key == key
    with pytest.raises(CheckpointError) as e:
        PoseEstimator.from_checkpoint(trained_tiny_ckpt.parent / "none.pt")
    assert e.value.file == str(trained_tiny_ckpt.parent / "none.pt")


def test_images_that_are_not_bgr_uint8_are_refused(tiny_ckpt):
    estimator = PoseEstimator.from_checkpoint(tiny_ckpt, device="cpu")
    good = np.zeros((64, 64, 3), np.uint8)
    for bad in (np.zeros((64, 64), np.uint8), np.zeros((64, 64, 3), np.float32), np.zeros((0, 64, 3), np.uint8)):
        with pytest.raises(UserError) as e:
            estimator(bad)
        assert (e.value.key, e.value.sample) == ("image", 0)
    with pytest.raises(UserError) as e:
        estimator([good, "photo.jpg"])
    assert (e.value.key, e.value.sample) == ("image", 1)
    with pytest.raises(ValueError, match="no network"):
        PoseEstimator(None, estimator.cfg, estimator.skeleton, estimator.device)(good)


def test_coco_results_json_is_the_file_coco_eval_writes(
    trained_tiny_ckpt, synthetic_sample_images, synthetic_sample_annotations, tmp_path, one_thread
):
    folder, written = image_folder(synthetic_sample_images, tmp_path / "images"), tmp_path / "results.json"
    argv = ["--ckpt", str(trained_tiny_ckpt), "--images", str(folder), "--out", str(written), "--scales", "1"]
    assert coco_eval.main([*argv, "--no-flip", "eval.boxsize=128"]) == 0
    estimator = PoseEstimator.from_checkpoint(trained_tiny_ckpt, device="cpu", scales=[1.0], flip=False, boxsize=128)
    results = estimator([read(folder / name) for name in UNSCORED_IMAGES])
    ids = [image_id(name) for name in UNSCORED_IMAGES]
    text = coco_results_json(ids, results)
    assert text == written.read_text() and text.count('"image_id"') == sum(map(len, results)) > 0
    assert len(load_coco(synthetic_sample_annotations).loadRes(str(written)).getAnnIds()) == sum(map(len, results))
    assert coco_results_json([1], [[]]) == "[]\n"
    with pytest.raises(ValueError, match="2 image ids for 1 images"):
        coco_results_json([1, 2], [[]])
