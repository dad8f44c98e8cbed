"""python -m evaluate.demo on the Python API: COCO results JSON of an image folder (pycocotools loads it against the
sample's annotations; the same file as coco_eval's), a video round trip, a camera stopped by Ctrl-C, bad input.
--onnx: tests/test_eval_onnx.py."""

import json

import cv2
import numpy as np
import pytest

from evaluate import PoseEstimator, coco_eval, coco_results_json, demo
from evaluate.coco_eval import load_coco
from tests.helpers import LANDSCAPE, InterruptedCamera

FRAME_HW = (96, 128)


def frames_of(images, count: int, step: int = 8) -> list[np.ndarray]:
    """``count`` frames of FRAME_HW cut from a synthetic picture scaled to ``step`` columns a frame more than
    FRAME_HW, sliding right by ``step`` (people move between frames)."""
    image = cv2.imread(str(images / LANDSCAPE))
    width = FRAME_HW[1] + step * count
    height = round(image.shape[0] * width / image.shape[1])
    assert height >= FRAME_HW[0]
    image = cv2.resize(image, (width, height))
    top = (height - FRAME_HW[0]) // 2
    rows = slice(top, top + FRAME_HW[0])
    return [np.ascontiguousarray(image[rows, step * i : step * i + FRAME_HW[1]]) for i in range(count)]


def write_video(path, frames, fps: float = 5.0) -> None:
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, (FRAME_HW[1], FRAME_HW[0]))
    assert writer.isOpened()
    for frame in frames:
        writer.write(frame)
    writer.release()


def read_video(path) -> list[np.ndarray]:
    cap = cv2.VideoCapture(str(path))
    frames = []
    while True:
        ok, frame = cap.read()
        if not ok:
            break
        frames.append(frame)
    cap.release()
    return frames


def test_demo_json_of_an_image_folder_loads_against_the_annotations(
    trained_tiny_ckpt, synthetic_sample_images, synthetic_sample_annotations, tmp_path, capsys, one_thread
):
    out_json, out_dir = tmp_path / "out.json", tmp_path / "drawn"
    argv = ["--ckpt", str(trained_tiny_ckpt), "--input", str(synthetic_sample_images)]
    assert demo.main([*argv, "--json", str(out_json), "--out", str(out_dir)]) == 0
    printed = capsys.readouterr().out
    names = sorted(p.name for p in synthetic_sample_images.glob("*.jpg"))
    assert sorted(p.name for p in out_dir.iterdir()) == sorted(n.replace(".jpg", "_pose.jpg") for n in names)
    assert f"images: {len(names)} images, " in printed and "ms per image)" in printed and "images/s" in printed

    results = json.loads(out_json.read_text())
    coco = load_coco(synthetic_sample_annotations)
    loaded = coco.loadRes(str(out_json))  # pycocotools asserts that every image id is one of the annotations'
    assert len(loaded.getAnnIds()) == len(results) > 0
    assert {r["image_id"] for r in results} <= set(coco.getImgIds())
    assert all(len(r["keypoints"]) == 51 and r["category_id"] == 1 for r in results)

    # the same file as the evaluation writes for this folder: one "image in, people out" path
    reference = tmp_path / "coco_eval.json"
    assert coco_eval.main(["--ckpt", str(trained_tiny_ckpt), "--images", str(synthetic_sample_images),
                           "--out", str(reference)]) == 0  # fmt: skip
    assert out_json.read_bytes() == reference.read_bytes()


def test_demo_video_round_trip(trained_tiny_ckpt, synthetic_sample_images, tmp_path, capsys, one_thread):
    video, out_dir, out_json = tmp_path / "clip.mp4", tmp_path / "out", tmp_path / "clip.json"
    write_video(video, frames_of(synthetic_sample_images, 4))
    argv = ["--ckpt", str(trained_tiny_ckpt), "--input", str(video), "--json", str(out_json)]
    assert demo.main([*argv, "--out", str(out_dir)]) == 0
    out = capsys.readouterr()
    assert "clip: 4 frames, " in out.out and "ms per frame)" in out.out
    assert "clip 4/4 frame (100 %)" in out.out  # the progress (lines: not a terminal) knew the length

    assert [p.name for p in out_dir.iterdir()] == ["clip_pose.mp4"]  # no temporary file left
    drawn = read_video(out_dir / "clip_pose.mp4")
    assert len(drawn) == 4 and all(f.shape == (*FRAME_HW, 3) for f in drawn)
    inputs = read_video(video)  # the frames the demo decoded
    assert np.abs(drawn[0].astype(int) - inputs[0]).mean() > 1.0  # skeletons were drawn

    results = json.loads(out_json.read_text())
    assert results and {r["image_id"] for r in results} <= {0, 1, 2, 3}  # frame index from 0
    estimator = PoseEstimator.from_checkpoint(trained_tiny_ckpt, device="cpu")
    assert out_json.read_text() == coco_results_json(range(4), estimator(inputs))

    # --json alone: no video written
    only_json = tmp_path / "only.json"
    assert demo.main(["--ckpt", str(trained_tiny_ckpt), "--input", str(video), "--json", str(only_json)]) == 0
    assert only_json.read_text() == out_json.read_text() and [p.name for p in out_dir.iterdir()] == ["clip_pose.mp4"]


def test_demo_camera_reads_until_ctrl_c_then_writes_what_it_has(
    trained_tiny_ckpt, synthetic_sample_images, tmp_path, monkeypatch, capsys, one_thread
):
    cameras = []

    def open_camera(source):
        assert source == 0  # --input 0 is camera index 0
        cameras.append(InterruptedCamera(frames_of(synthetic_sample_images, 3)))
        return cameras[-1]

    monkeypatch.setattr(demo.cv2, "VideoCapture", open_camera)
    out_dir, out_json = tmp_path / "out", tmp_path / "camera.json"
    argv = ["--ckpt", str(trained_tiny_ckpt), "--input", "0", "--out", str(out_dir), "--json", str(out_json)]
    assert demo.main(argv) == 0
    assert "interrupted: writing what was read" in capsys.readouterr().out
    assert cameras[0].released
    monkeypatch.undo()
    assert len(read_video(out_dir / "camera0_pose.mp4")) == 3
    assert {r["image_id"] for r in json.loads(out_json.read_text())} <= {0, 1, 2}


@pytest.mark.parametrize(
    "case, expected",
    [
        ("missing", "input {tmp}/none.jpg not found"),
        ("bad_image", "could not be decoded"),
        ("bad_video", "video {tmp}/bad.mp4 could not be opened"),
        ("no_camera", "camera 9 could not be opened"),
        ("no_output", "give --out DIR"),
        ("two_models", "give one of --ckpt CKPT, --onnx FILE"),
        ("onnx_model_override", "--onnx takes only eval.* and track.* overrides"),
    ],
)
def test_demo_bad_input_gives_one_clean_error(case, expected, tiny_ckpt, tmp_path, capsys):
    (tmp_path / "bad.jpg").write_bytes(b"not an image")
    (tmp_path / "bad.mp4").write_bytes(b"not a video")
    out = ["--out", str(tmp_path / "out"), "--json", str(tmp_path / "r.json")]
    ckpt = ["--ckpt", str(tiny_ckpt)]
    argv = {
        "missing": [*ckpt, "--input", str(tmp_path / "none.jpg"), *out],
        "bad_image": [*ckpt, "--input", str(tmp_path / "bad.jpg"), *out],
        "bad_video": [*ckpt, "--input", str(tmp_path / "bad.mp4"), *out],
        "no_camera": [*ckpt, "--input", "9", *out],
        "no_output": [*ckpt, "--input", str(tmp_path / "bad.jpg")],
        "two_models": [*ckpt, "--onnx", str(tmp_path / "m.onnx"), "--input", str(tmp_path / "bad.jpg"), *out],
        "onnx_model_override": ["--onnx", str(tmp_path / "m.onnx"), "--input", str(tmp_path / "bad.jpg"), *out,
                                "data.skeleton=coco"],  # fmt: skip
    }[case]
    assert demo.main([*argv, "eval.boxsize=64"] if case != "onnx_model_override" else argv) == 2
    err = capsys.readouterr().err
    assert expected.format(tmp=tmp_path) in err and "Traceback" not in err
    assert not (tmp_path / "r.json").exists()
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
