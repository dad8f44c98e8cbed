"""Command-line tools of the test-time path: coco_eval with a checkpoint (with and without annotations), demo, the
drawn boxes and scores, the quick start's sheet of predictions beside the ground truth.

The ONNX export and runner: tests/test_eval_onnx.py."""

import json
import re
import shutil

import cv2
import numpy as np
import pytest
import torch

from simplepose.codec.person import keypoint_box
from simplepose.config.config_file import with_overrides
from simplepose.config.schema import EvalConfig
from simplepose.config.skeleton_file import load_skeleton
from simplepose.evaluate import Person, coco_eval, demo
from simplepose.evaluate import prediction_sheet as layout
from simplepose.evaluate.draw import draw_boxes, draw_detections, draw_people, draw_tracked, track_color
from simplepose.evaluate.inference.checkpoint_model import load_model
from simplepose.evaluate.metrics.annotations import load_ground_truth
from simplepose.evaluate.metrics.coco_results import sort_results
from simplepose.evaluate.prediction_sheet import draw_predictions, ground_truth_keypoints, pair_tile
from tests.helpers import LANDSCAPE, UNSCORED_IMAGES, image_folder, image_id, pycocotools_coco

# Single scale at a small box, for the briefly trained model (people in both UNSCORED_IMAGES).
UNSCORED_EVAL = ["--scales", "1", "--no-flip", "eval.boxsize=128"]


def test_coco_eval_cli_with_a_checkpoint(
    tiny_ckpt, synthetic_sample_images, synthetic_sample_annotations, tmp_path, capsys
):
    out = tmp_path / "res.json"
    data = ["--images", str(synthetic_sample_images), "--annotations", str(synthetic_sample_annotations)]
    args = ["--ckpt", str(tiny_ckpt), *data]
    small = ["eval.boxsize=64", "eval.max_images=2"]
    rc = coco_eval.main([*args, "--scales", "1", "--no-flip", "--out", str(out), *small])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "AP " in printed and out.is_file()
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    assert coco_eval.main(["--ckpt", str(bad), *data]) == 2
    assert "bad.pt" in capsys.readouterr().err
    assert coco_eval.main(["--images", str(synthetic_sample_images), "--annotations", str(tmp_path / "none.json")]) == 2


def test_coco_eval_without_annotations_writes_results_of_a_folder(
    trained_tiny_ckpt, synthetic_sample_images, synthetic_sample_annotations, tmp_path, capsys
):
    images, out = image_folder(synthetic_sample_images, tmp_path / "images"), tmp_path / "results.json"
    rc = coco_eval.main(["--ckpt", str(trained_tiny_ckpt), "--images", str(images), "--out", str(out), *UNSCORED_EVAL])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "nothing was scored" in printed and "AP " not in printed
    assert "the number each file name ends with" in printed
    results = json.loads(out.read_text())
    assert {r["image_id"] for r in results} == set(map(image_id, UNSCORED_IMAGES))  # the numbers of the file names
    assert results == sort_results(results) and all(len(r["keypoints"]) == 51 for r in results)
    assert len(pycocotools_coco(synthetic_sample_annotations).loadRes(str(out)).getAnnIds()) == len(
        results
    )  # server-ready

    # file names without numbers: ids 1..N in sorted order
    plain = image_folder(synthetic_sample_images, tmp_path / "plain", renamed=("b.jpg", "a.jpg"))
    argv = ["--ckpt", str(trained_tiny_ckpt), "--images", str(plain), "--out", str(out), *UNSCORED_EVAL]
    rc = coco_eval.main([*argv, "--overwrite"])  # the first folder's results file replaced, as asked
    assert rc == 0 and "1..N in sorted file-name order" in capsys.readouterr().out
    by_id = {i: [r for r in json.loads(out.read_text()) if r["image_id"] == i] for i in (1, 2)}
    assert by_id[1] == [dict(r, image_id=1) for r in results if r["image_id"] == image_id(UNSCORED_IMAGES[1])]  # a.jpg
    assert by_id[2] == [dict(r, image_id=2) for r in results if r["image_id"] == image_id(UNSCORED_IMAGES[0])]  # b.jpg


def test_coco_eval_with_an_image_info_file_uses_its_ids(
    trained_tiny_ckpt, synthetic_sample_images, synthetic_sample_annotations, tmp_path
):
    images = image_folder(synthetic_sample_images, tmp_path / "test2017")
    sample = json.loads(synthetic_sample_annotations.read_text())
    kept = [img for img in sample["images"] if img["file_name"] in UNSCORED_IMAGES]
    listed = [dict(img, id=k + 7) for k, img in enumerate(kept)]  # ids unlike the file names' numbers
    info = tmp_path / "image_info_test.json"
    info.write_text(json.dumps({"images": listed, "categories": sample["categories"]}))
    out = tmp_path / "results.json"
    argv = ["--ckpt", str(trained_tiny_ckpt), "--images", str(images), "--image-info", str(info), "--out", str(out)]
    assert coco_eval.main([*argv, *UNSCORED_EVAL]) == 0
    assert {r["image_id"] for r in json.loads(out.read_text())} == {7, 8}


@pytest.mark.parametrize(
    "case, expected",
    [
        ("no_out", "give --out"),
        ("both", "not both"),
        ("ground_truth", "--from-ground-truth draws the maps of the annotations"),
        ("empty_folder", "holds no images"),
        ("missing_image", "000000999999.jpg not found"),
        ("missing_info", "image-info file"),
    ],
)
def test_coco_eval_without_annotations_bad_input(case, expected, tiny_ckpt, synthetic_sample_images, tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    info = tmp_path / "info.json"
    info.write_text(json.dumps({"images": [{"id": 1, "file_name": "000000999999.jpg", "width": 64, "height": 64}]}))
    out = ["--out", str(tmp_path / "r.json")]
    source = ["--ckpt", str(tiny_ckpt), "--images", str(synthetic_sample_images)]
    argv = {
        "no_out": source,
        "both": [*source, "--annotations", str(info), "--image-info", str(info), *out],
        "ground_truth": ["--from-ground-truth", "--images", str(synthetic_sample_images), *out],
        "empty_folder": ["--ckpt", str(tiny_ckpt), "--images", str(empty), *out],
        "missing_image": [*source, "--image-info", str(info), *out],
        "missing_info": [*source, "--image-info", str(tmp_path / "none.json"), *out],
    }[case]
    assert coco_eval.main([*argv, "eval.scales=[1.0]", "eval.boxsize=64"]) == 2
    assert expected in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()


def test_demo_draws_skeletons_on_a_picture(synthetic_sample_images, synthetic_sample_annotations, tmp_path, capsys):
    src = synthetic_sample_images / LANDSCAPE
    rc = demo.main([
        "--from-ground-truth", "--annotations", str(synthetic_sample_annotations), "--input", str(src),
        "--out", str(tmp_path), "eval.scales=[1.0]",
    ])  # fmt: skip
    assert rc == 0
    drawn = cv2.imread(str(tmp_path / LANDSCAPE.replace(".jpg", "_pose.jpg")))
    original = cv2.imread(str(src))
    assert drawn.shape == original.shape
    assert np.abs(drawn.astype(int) - original).mean() > 1.0
    printed = capsys.readouterr().out
    assert re.search(rf"{LANDSCAPE}: [1-9]\d* (person|people), network [\d.]+ ms, decoding [\d.]+ ms", printed), printed
    # counts in words ("1 person", "1 image"), a number that only ends in 1 left alone ("40.71 images/s")
    assert not re.search(r"(?<![\d.])(0 people|1 people|1 images)", printed), printed


def test_demo_with_a_checkpoint_on_a_folder_and_a_video(tiny_ckpt, tmp_path, capsys):
    frames = tmp_path / "in"
    frames.mkdir()
    rng = np.random.default_rng(0)
    for i in range(1):
        cv2.imwrite(str(frames / f"f{i}.png"), rng.integers(0, 255, (48, 64, 3), dtype=np.uint8))
    common = ["--ckpt", str(tiny_ckpt), "--out", str(tmp_path / "out"), "eval.scales=[1.0]", "eval.boxsize=64"]
    assert demo.main(["--input", str(frames), *common]) == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["f0_pose.jpg"]
    video = tmp_path / "clip.mp4"
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"mp4v"), 5, (64, 48))
    for _ in range(2):
        writer.write(rng.integers(0, 255, (48, 64, 3), dtype=np.uint8))
    writer.release()
    assert demo.main(["--input", str(video), *common]) == 0
    assert (tmp_path / "out" / "clip_pose.mp4").stat().st_size > 0
    assert "clip: 2 frames" in capsys.readouterr().out


def figure(scale: float, score: float, top: float = 40.0, track_id=None) -> Person:
    """A person of 6 found keypoints (COCO order: shoulders, hips, knees) in a 160 x 120 image, times ``scale``."""
    kp = np.zeros((17, 3))
    kp[:] = (np.nan, np.nan, 0.0)
    for k, (x, y) in zip((5, 6, 11, 12, 13, 14), ((60, 0), (90, 0), (62, 30), (88, 30), (60, 55), (90, 55))):
        kp[k] = (x * scale, (top + y) * scale, 0.9)
    return Person(kp, score, keypoint_box(kp), track_id)


def tag_rows(canvas: np.ndarray, untagged: np.ndarray) -> np.ndarray:
    """The rows where ``canvas`` differs from the same drawing without the score tags."""
    return np.flatnonzero((canvas != untagged).any(-1).any(1))


@pytest.mark.parametrize("scale", [1, 16])  # 160 x 120 and 2560 x 1920
def test_each_person_gets_a_box_and_a_readable_score_tag(scale):
    coco = load_skeleton("coco")
    image = np.full((120 * scale, 160 * scale, 3), 128, np.uint8)
    person = figure(scale, 0.87)
    color = track_color(1)  # the first person's colour
    canvas = draw_detections(image, [person], coco)
    skeleton_only = draw_people(image, person.keypoints[None], coco)
    untagged = draw_boxes(skeleton_only, [person.box], [""], [color])
    x, y, w, h = person.box
    side = untagged[int(y + h / 2), : int(x)]  # the box's left edge, a few pixels left of the outer keypoints
    close = np.abs(side.astype(int) - color).max(-1) < 60
    assert close.any() and int(x) - np.flatnonzero(close).max() <= 4 * scale
    rows = tag_rows(canvas, untagged)
    assert len(rows) and rows.max() < y  # the tag sits above the box's top
    height = rows.max() - rows.min() + 1
    assert height >= 9 * (1 if scale == 1 else 4)  # about 9 px on a thumbnail, in proportion on a big image
    tag = canvas[rows.min() : rows.max() + 1]
    assert (tag == np.array(color, np.uint8)).all(-1).sum() > 20 * scale  # a filled tag of the person's colour
    assert ((tag.max(-1) < 40) | (tag.min(-1) > 215)).sum() > 10 * scale  # black or white digits on it
    other = draw_detections(image, [figure(scale, 0.25)], coco)
    assert not np.array_equal(canvas, other)  # the tag says the score
    assert np.array_equal(draw_detections(image, [], coco), image)

    high = figure(scale, 0.5, top=0.0)  # no room above: inside the box's top, all of it in the image
    untagged = draw_boxes(draw_people(image, high.keypoints[None], coco), [high.box], [""], [color])
    rows = tag_rows(draw_detections(image, [high], coco), untagged)
    assert rows.min() == 0 and 0 <= rows.max() + 1 - height <= scale // 2  # (above, the box's edge hid its foot)
    tracked = figure(scale, 0.5, track_id=3)  # tracked: "#3 0.50" in id 3's colour
    drawn = draw_tracked(image, [tracked], coco)
    assert (drawn == np.array(track_color(3), np.uint8)).all(-1).sum() > 20 * scale
    assert not (drawn == np.array(color, np.uint8)).all(-1).any()


def test_the_quick_start_sheet_shows_each_image_beside_its_ground_truth(
    trained_tiny_ckpt, synthetic_sample_images, synthetic_sample_annotations, tmp_path, one_thread
):
    _, cfg = load_model(str(trained_tiny_ckpt), None, None, torch.device("cpu"))
    data = {"data.val_annotations": str(synthetic_sample_annotations), "data.val_images": str(synthetic_sample_images)}
    cfg = with_overrides(cfg, {**data, "eval.scales": [1.0], "eval.boxsize": 128}, "test")
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(trained_tiny_ckpt, run / "best.pt")
    sheet = cv2.imread(str(draw_predictions(cfg, run, num_images=4)))
    rows = 2  # 4 images, 2 pairs a row
    caption, tile_height, gap = layout.CAPTION_HEIGHT, layout.TILE_HEIGHT, layout.PAIR_GAP
    assert sheet.shape[0] == caption + 8 + gap + rows * (caption + tile_height + gap)

    coco = load_ground_truth(synthetic_sample_annotations, load_skeleton("coco"), EvalConfig()).coco
    image_id = sorted(coco.getImgIds())[0]
    image = cv2.imread(str(synthetic_sample_images / coco.imgs[image_id]["file_name"]))
    truth = ground_truth_keypoints(coco, image_id, load_skeleton("coco"))
    anns = [a for a in coco.loadAnns(coco.getAnnIds([image_id])) if not a["iscrowd"]]
    labelled = sum(int((np.asarray(a["keypoints"])[2::3] > 0).sum()) for a in anns)
    assert len(truth) >= 1 and (truth[..., 2] > 0).sum() == labelled
    tile = pair_tile(image, image_id, truth, [figure(image.shape[0] / 120 * 0.5, 0.9)], load_skeleton("coco"))
    half = (tile.shape[1] - layout.TILE_GAP) // 2
    left, right = tile[caption:, :half], tile[caption:, -half:]
    assert left.shape[0] == tile_height and (tile[caption:, half : half + layout.TILE_GAP] == 255).all()
    scale = tile_height / image.shape[0]
    white = [np.all(left[int(round(y * scale)), int(round(x * scale))] > 200)  # each keypoint's dot: white centre
             for x, y, v in truth.reshape(-1, 3) if v > 0]  # fmt: skip
    assert np.mean(white) > 0.8
    tag = np.array(track_color(1), np.uint8)
    assert (right == tag).all(-1).sum() > 100 and not (left == tag).all(-1).any()  # the box's filled tag
