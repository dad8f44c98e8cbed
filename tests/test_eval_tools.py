"""Command-line tools of the test-time path: coco_eval with a checkpoint (with and without annotations), demo.

The ONNX export and runner: tests/test_eval_onnx.py."""

import json

import cv2
import numpy as np
import pytest

from evaluate import coco_eval, demo
from evaluate.coco_eval import load_coco
from tests.helpers import LANDSCAPE, UNSCORED_IMAGES, image_folder, image_id

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
    assert results == coco_eval.sort_results(results) and all(len(r["keypoints"]) == 51 for r in results)
    assert len(load_coco(synthetic_sample_annotations).loadRes(str(out)).getAnnIds()) == len(results)  # server-ready

    # file names without numbers: ids 1..N in sorted order
    plain = image_folder(synthetic_sample_images, tmp_path / "plain", renamed=("b.jpg", "a.jpg"))
    rc = coco_eval.main(["--ckpt", str(trained_tiny_ckpt), "--images", str(plain), "--out", str(out), *UNSCORED_EVAL])
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
    assert "people" in printed and "network" in printed and "decoding" in printed
    assert " 0 people" not in printed


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
