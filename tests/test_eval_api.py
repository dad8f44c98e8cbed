"""The Python API (evaluate.PoseEstimator): the README's example on a picture, the documented result format, batches
of mixed sizes, eval overrides checked as the config checks them, every kind of image it takes (paths, PIL images,
greyscale, BGRA, mixed lists) and what it refuses, COCO results JSON identical to coco_eval's. The demo built on
it: tests/test_eval_demo.py; from_onnx: tests/test_eval_onnx.py."""

import json
import logging
import math
import runpy

import cv2
import numpy as np
import pytest
import torch
from PIL import Image

from simplepose.checkpoint.format import CheckpointError
from simplepose.config.config_file import ConfigError
from simplepose.data.image_files import ImageFileError, read_image
from simplepose.evaluate import Person, PoseEstimator, coco_eval, coco_results_json
from simplepose.evaluate.estimator_base import Timing
from simplepose.evaluate.frame_sources import open_inputs
from simplepose.evaluate.image_to_bgr import as_bgr
from simplepose.evaluate.inference.multiscale import multiscale_maps
from simplepose.utils.errors import UserError
from tests.helpers import (
    COCO,
    COCO_LAYOUT,
    LANDSCAPE,
    MORE_PEOPLE,
    PORTRAIT,
    SMALL,
    UNSCORED_IMAGES,
    assert_people_agree,
    image_folder,
    image_id,
    people_agreement,
    pycocotools_coco,
)
from tests.paths import REPO_ROOT

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
    assert isinstance(people, list) and len(people) >= 1
    assert str(people[0].score) in printed and str(people[-1].score) in printed  # the example printed them all
    # full and partial people: grouped as the original (limb by limb, fragments not joined), this briefly trained
    # model's picture holds both on every CPU; the default may join them all into one person
    pieces = PoseEstimator.from_checkpoint(
        trained_tiny_ckpt, device="cpu", grouping="limb_order", join_fragments=0.0, one_per_plateau=False
    )
    counts = [check_person_format(p, estimator, image.shape[:2]) for p in people + pieces(image)]
    for name in MORE_PEOPLE:  # which picture holds a partial person depends on the CPU's rounding of the training
        if min(counts) < len(estimator.keypoint_names):
            break
        other = read(synthetic_sample_images / name)
        counts += [check_person_format(p, estimator, other.shape[:2]) for p in estimator(other) + pieces(other)]
    assert max(counts) >= 10 and min(counts) < len(estimator.keypoint_names)  # full and partial people were checked


def test_scores_stay_in_their_documented_ranges_where_the_maps_overshoot(trained_tiny_ckpt, synthetic_sample_images):
    """Keypoint scores in (0, 1] and person scores in [0, 1) (Person), though the keypoint maps peak above 1 as trained
    networks' do (this model's maps, scaled by 1.5); the results JSON keeps each keypoint's score as its v. Grouped limb
    by limb and fragments not joined (the original's grouping), so that lone keypoints (scored below 0.5) are among the
    people: the default links nearly every candidate of this briefly trained model to another."""
    estimator = PoseEstimator.from_checkpoint(
        trained_tiny_ckpt,
        device="cpu",
        scales=[1.0],
        flip=False,
        grouping="limb_order",
        join_fragments=0.0,
        one_per_plateau=False,
    )
    network = estimator.source

    def overshooting(batch):  # peaks above the targets' 1, as a trained network's are (how far this briefly trained
        return network(batch) * 1.5  # model's own go depends on the CPU's rounding of its training)

    estimator.source = overshooting
    images = [read(p) for p in sorted(synthetic_sample_images.iterdir())[:8]]
    maps = [multiscale_maps(im, estimator.cfg, estimator.source, CPU, skeleton=COCO)[0] for im in images]
    peaks = [m[COCO_LAYOUT.keypoints].max() for m in maps]
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
    names = (IMAGE, PORTRAIT, IMAGE, SMALL, *MORE_PEOPLE)  # enough people to compare on every CPU
    images = [read(synthetic_sample_images / name) for name in names]
    assert len({im.shape for im in images}) == len(images) - 1  # only the two copies of IMAGE share a size
    one = PoseEstimator.from_checkpoint(trained_tiny_ckpt, device="cpu")
    alone = [one(im) for im in images]
    batched = PoseEstimator.from_checkpoint(trained_tiny_ckpt, device="cpu", batch_size=2)
    together = batched(images)  # the two copies of IMAGE share one forward pass
    assert isinstance(together, list) and len(together) == len(images)
    # a batch of two may run other kernels than one image: the same people, as maps equal to float rounding give
    # (docs/testing.md#tests-and-their-data)
    keypoints = lambda people: [p.keypoints for p in people]  # noqa: E731
    agreements = [people_agreement(keypoints(b), keypoints(a), COCO.sigmas) for a, b in zip(alone, together)]
    assert_people_agree(agreements, min_people=5)
    assert batched.timing.images == len(images)  # the seconds themselves: bench/ scripts print them
    assert one.timing.images == 1 and one.total_timing.images == len(images)
    assert f"{len(images)} images" in batched.timing.describe() and "ms per image" in batched.timing.describe()
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


def test_every_kind_of_image_gives_the_pixels_of_its_bgr_array(synthetic_sample_images, tmp_path):
    """A path, a PIL image of each common mode, greyscale and BGRA arrays: the BGR array that the network reads."""
    path = synthetic_sample_images / IMAGE
    bgr = read_image(path)
    grey = cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY)
    grey_bgr = cv2.cvtColor(grey, cv2.COLOR_GRAY2BGR)
    alpha = np.random.default_rng(0).integers(0, 256, bgr.shape[:2], dtype=np.uint8)
    rgb = Image.fromarray(bgr[:, :, ::-1])
    deep = (grey.astype(np.uint16) << 8) | 0x7F  # 16 bits whose top byte is the grey image
    cv2.imwrite(str(tmp_path / "deep.png"), deep)
    palette = rgb.quantize(64)
    same = {
        "str path": (str(path), bgr),
        "Path": (path, bgr),
        "BGR array": (bgr, bgr),
        "PIL RGB": (rgb, bgr),
        "PIL RGBA": (Image.fromarray(np.dstack([bgr[:, :, ::-1], alpha])), bgr),  # alpha dropped, not blended
        "PIL L": (Image.fromarray(grey), grey_bgr),
        "PIL P": (palette, np.asarray(palette.convert("RGB"))[:, :, ::-1]),
        "PIL I;16": (Image.open(tmp_path / "deep.png"), read_image(tmp_path / "deep.png")),  # as the file reads
        "grey (H, W)": (grey, grey_bgr),
        "grey (H, W, 1)": (grey[:, :, None], grey_bgr),
        "BGRA (H, W, 4)": (np.dstack([bgr, alpha]), bgr),
        "BGR view": (np.dstack([bgr, alpha])[:, :, :3], bgr),  # not contiguous
    }
    assert Image.open(tmp_path / "deep.png").mode.startswith("I")
    for name, (given, want) in same.items():
        got = as_bgr(given, 0)
        assert got.dtype == np.uint8 and got.shape == bgr.shape, name
        assert np.abs(got.astype(int) - want).max() <= (1 if name == "PIL I;16" else 0), name
    assert np.array_equal(as_bgr(Image.open(tmp_path / "deep.png"), 0), grey_bgr)  # 16 bits scaled as OpenCV does
    assert np.array_equal(as_bgr(Image.fromarray(deep.astype(np.int32), "I"), 0), grey_bgr)  # older Pillows' mode


def test_the_estimator_takes_paths_pil_images_greyscale_and_mixed_lists(trained_tiny_ckpt, synthetic_sample_images,
                                                                        one_thread):  # fmt: skip
    estimator = PoseEstimator.from_checkpoint(trained_tiny_ckpt, device="cpu", scales=[1.0], flip=False, boxsize=128)
    path = synthetic_sample_images / IMAGE
    bgr = read(path)
    want = estimator(bgr)
    assert len(want) >= 2
    grey = cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY)
    given = [str(path), Image.open(path), grey, np.dstack([bgr, np.full(bgr.shape[:2], 9, np.uint8)]), path]
    results = estimator(given)  # one list per image, in the order given
    assert len(results) == len(given) and estimator.timing.images == len(given)
    grey_people = estimator(cv2.cvtColor(grey, cv2.COLOR_GRAY2BGR))
    for got, expected in zip(results, [want, want, grey_people, want, want]):
        assert [p.score for p in got] == pytest.approx([p.score for p in expected], abs=1e-6)
        np.testing.assert_allclose([p.keypoints for p in got], [p.keypoints for p in expected], atol=1e-6)
    single = estimator(str(path))  # one image (not in a list): its people
    assert [p.score for p in single] == pytest.approx([p.score for p in want], abs=1e-6)


@pytest.mark.parametrize(
    "given, named",
    [
        (np.zeros((64, 64, 3), np.float32), "a float32 array of shape (64, 64, 3) (values in 0..1? give (image * 255)"),
        (np.zeros((64, 64), np.uint16), "a uint16 array of shape (64, 64) (16 bits? give (image / 256)"),
        (np.zeros((64, 64, 2), np.uint8), "a uint8 array of shape (64, 64, 2)"),
        (np.zeros((2, 64, 64, 3), np.uint8), "a uint8 array of shape (2, 64, 64, 3)"),
        (np.zeros((0, 64, 3), np.uint8), "a uint8 array of shape (0, 64, 3)"),
        (None, "None, not an image"),
        (b"\xff\xd8", "a bytes object (an encoded file's bytes? decode them with data.image_files.decode_image)"),
        (Image.new("F", (8, 8)), "a PIL image of mode F (32-bit float)"),
        (3.5, "a float"),
    ],
)
def test_what_is_not_an_image_is_refused_naming_it_and_what_to_give(given, named, tiny_ckpt):
    estimator = PoseEstimator.from_checkpoint(tiny_ckpt, device="cpu")
    good = np.zeros((64, 64, 3), np.uint8)
    with pytest.raises(UserError) as e:
        estimator([good, given])
    assert (e.value.key, e.value.sample) == ("image", 1)
    message = str(e.value)
    assert message.startswith(f"image 1 is {named}") and "give BGR uint8 arrays (H, W, 3)" in message, message
    assert "PIL images or image file paths" in message


def test_a_missing_file_and_a_single_image_for_a_batch_are_named(tiny_ckpt, tmp_path):
    estimator = PoseEstimator.from_checkpoint(tiny_ckpt, device="cpu")
    with pytest.raises(ImageFileError) as e:
        estimator(tmp_path / "none.jpg")
    assert e.value.file == str(tmp_path / "none.jpg") and "not found" in str(e.value)
    (tmp_path / "text.jpg").write_text("not an image")
    with pytest.raises(ImageFileError, match="could not be decoded"):
        estimator([np.zeros((64, 64, 3), np.uint8), str(tmp_path / "text.jpg")])
    with pytest.raises(UserError, match=r"images: a str, not a list of images; give a list \(one image: estimator"):
        estimator.predict_batch("photo.jpg")


@pytest.mark.parametrize(
    "given, what, read_as", [("photos", "a folder", "pictures"), ("photos/*.jpg", "a pattern", "pictures"),
                             ("clip.mp4", "a video", "frames")],
)  # fmt: skip
def test_inputs_of_many_pictures_point_to_stream(given, what, read_as, tiny_ckpt, tmp_path):
    """A folder, a pattern or a video given where one image is expected: refused naming ``stream``."""
    (tmp_path / "photos").mkdir()
    estimator = PoseEstimator.from_checkpoint(tiny_ckpt, device="cpu")
    path = str(tmp_path / given)
    for call in (lambda: estimator(path), lambda: estimator([np.zeros((64, 64, 3), np.uint8), path])):
        with pytest.raises(UserError) as e:
            call()
        assert f"{path} is {what}" in str(e.value) and f"the {read_as} of {what}" in str(e.value)
        assert f"estimator.stream({path!r})" in str(e.value) and e.value.file == path


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
    loaded = pycocotools_coco(synthetic_sample_annotations).loadRes(str(written))
    assert len(loaded.getAnnIds()) == sum(map(len, results))
    assert coco_results_json([1], [[]]) == "[]\n"
    with pytest.raises(ValueError, match="2 image ids for 1 images"):
        coco_results_json([1, 2], [[]])


def test_stream_gives_the_people_of_every_kind_of_input_as_predict_does(
    trained_tiny_ckpt, synthetic_sample_images, tmp_path, one_thread
):
    """``stream`` over a list of files in two folders, a folder, a quoted pattern and arrays: frames in order, each
    with its file, time (``index / fps``) and the people ``__call__`` finds on the same picture; an unreadable file is a
    frame with its error and no people, and the stream goes on."""
    estimator = PoseEstimator.from_checkpoint(trained_tiny_ckpt, device="cpu", scales=[1.0], flip=False, boxsize=128)
    names = [LANDSCAPE, PORTRAIT, SMALL]
    want = {n: estimator(synthetic_sample_images / n) for n in names}
    for sub, n in zip(("a", "b/c", "b/c"), names):
        (tmp_path / sub).mkdir(parents=True, exist_ok=True)
        (tmp_path / sub / n).write_bytes((synthetic_sample_images / n).read_bytes())
    (tmp_path / "b" / "c" / "zz_broken.jpg").write_bytes(b"not a picture")
    listed = [tmp_path / "a" / LANDSCAPE, tmp_path / "b/c" / PORTRAIT]
    assert open_inputs(listed).root == tmp_path  # the deepest folder holding both: where the demo's outputs keep names
    cases = {
        "list": (listed, [LANDSCAPE, PORTRAIT]),
        "folder": (tmp_path / "b" / "c", sorted([PORTRAIT, SMALL]) + ["zz_broken.jpg"]),
        "pattern": (str(tmp_path / "b" / "*" / "0*.jpg"), sorted([PORTRAIT, SMALL])),
    }
    for kind, (given, order) in cases.items():
        frames = list(estimator.stream(given, fps=10.0))
        assert [f.path.name for f in frames] == order, kind
        for i, frame in enumerate(frames):
            assert frame.index == i and frame.timestamp == pytest.approx(i / 10.0)
            if frame.path.name == "zz_broken.jpg":
                assert frame.image is None and frame.people == [] and frame.error is not None
                continue
            expected = want[frame.path.name]
            assert [p.score for p in frame.people] == pytest.approx([p.score for p in expected], abs=1e-6), kind
    arrays = [read(synthetic_sample_images / n) for n in names]
    frames = list(estimator.stream(arrays))
    assert [f.path for f in frames] == [None] * 3
    for frame, n in zip(frames, names):
        assert [p.score for p in frame.people] == pytest.approx([p.score for p in want[n]], abs=1e-6)


def test_a_name_the_api_lacks_is_named_with_its_package():
    import simplepose
    from simplepose import evaluate

    for module in (simplepose, evaluate):
        with pytest.raises(AttributeError, match=rf"^module '{module.__name__}' has no attribute 'PoseEstimater'$"):
            module.PoseEstimater  # noqa: B018


def test_stream_logs_an_item_it_cannot_read(tiny_ckpt, tmp_path, caplog):
    """``stream("notes.txt")``: one frame without an image, its ``error`` saying why, and a warning naming the file
    (a program sees warnings by default)."""
    (tmp_path / "notes.txt").write_text("shopping list\n")
    estimator = PoseEstimator.from_checkpoint(tiny_ckpt, device="cpu", scales=[1.0], flip=False, boxsize=64)
    with caplog.at_level(logging.WARNING, logger="simplepose"):
        frames = list(estimator.stream(str(tmp_path / "notes.txt")))
    assert len(frames) == 1 and frames[0].image is None and frames[0].people == []
    assert frames[0].error is not None and frames[0].path == tmp_path / "notes.txt"
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warned == [f"{tmp_path / 'notes.txt'}: skipped, {frames[0].error.reason} ({frames[0].error})"]
