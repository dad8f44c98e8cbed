"""python -m evaluate.demo on the Python API: COCO results JSON of an image folder (pycocotools loads it against the
sample's annotations; the same file as coco_eval's), a quoted pattern (recursive, sub-folders kept), a video round
trip, a camera stopped by Ctrl-C, a folder stopped by SIGTERM or Ctrl-C (the results of the images done written),
the default numbered output folder, no earlier result replaced without --overwrite, --min-score in the pictures and
the JSON, bad input. --onnx: tests/test_eval_onnx.py."""

import json
import os
import shutil
import signal
from pathlib import Path

import cv2
import numpy as np
import pytest

from simplepose.data.image_files import read_image
from simplepose.evaluate import PoseEstimator, coco_eval, coco_results_json, demo, demo_output
from tests.helpers import LANDSCAPE, UNSCORED_IMAGES, InterruptedCamera, pycocotools_coco

FRAME_HW = (96, 128)
FAST = ["eval.scales=[1.0]", "eval.flip=false", "eval.boxsize=128"]  # seconds for the briefly trained model


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
    coco = pycocotools_coco(synthetic_sample_annotations)
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

    monkeypatch.setattr(cv2, "VideoCapture", open_camera)
    out_dir, out_json = tmp_path / "out", tmp_path / "camera.json"
    argv = ["--ckpt", str(trained_tiny_ckpt), "--input", "0", "--out", str(out_dir), "--json", str(out_json)]
    assert demo.main(argv) == 0
    assert "interrupted: writing what was read" in capsys.readouterr().out
    assert cameras[0].released
    monkeypatch.undo()
    assert len(read_video(out_dir / "camera0_pose.mp4")) == 3
    assert {r["image_id"] for r in json.loads(out_json.read_text())} <= {0, 1, 2}

    # without --out and --json: both in a new runs/demo/<n>, the same results
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cv2, "VideoCapture", open_camera)
    assert demo.main(["--ckpt", str(trained_tiny_ckpt), "--input", "0"]) == 0
    monkeypatch.undo()
    folder = tmp_path / "runs" / "demo" / "1"
    assert sorted(p.name for p in folder.iterdir()) == ["camera0_pose.mp4", "results.json"]
    assert (folder / "results.json").read_text() == out_json.read_text()
    assert "writing to runs/demo/1" in capsys.readouterr().out


@pytest.mark.parametrize(
    "case, expected",
    [
        ("missing", "input {tmp}/none.jpg not found"),
        ("bad_image", "could not be decoded"),
        ("bad_video", "video {tmp}/bad.mp4 could not be opened"),
        ("no_camera", "camera 9 could not be opened"),
        ("pattern_matches_no_image", "input pattern '{tmp}/*.png' matches no image files"),
        ("unquoted_pattern", "'{tmp}/b.jpg' is not a key=value override; for several images give a folder"),
        ("min_score_nan", "--min-score is a person's score, in [0, 1], got nan"),
        ("json_exists", "{tmp}/r.json exists: an earlier result is never replaced silently; give --overwrite"),
        ("two_models", "give one of --ckpt CKPT, --onnx FILE"),
        ("onnx_model_override", "--onnx takes only eval.* and track.* overrides"),
        ("missing_ckpt", "checkpoint {tmp}/none.pt not found"),
        ("out_is_a_file", "--out {tmp}/r.json is a file, not a folder: name a folder"),
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
        "pattern_matches_no_image": [*ckpt, "--input", str(tmp_path / "*.png"), *out],
        "unquoted_pattern": [*ckpt, "--input", str(tmp_path / "bad.jpg"), str(tmp_path / "b.jpg"), *out],
        "min_score_nan": [*ckpt, "--input", str(tmp_path / "bad.jpg"), "--min-score", "nan", *out],
        "json_exists": [*ckpt, "--input", str(tmp_path / "bad.jpg"), *out],
        "two_models": [*ckpt, "--onnx", str(tmp_path / "m.onnx"), "--input", str(tmp_path / "bad.jpg"), *out],
        "missing_ckpt": ["--ckpt", str(tmp_path / "none.pt"), "--input", str(tmp_path / "bad.jpg"), *out],
        "out_is_a_file": [*ckpt, "--input", str(tmp_path / "bad.jpg"), "--out", str(tmp_path / "r.json")],
        "onnx_model_override": [
            "--onnx",
            str(tmp_path / "m.onnx"),
            "--input",
            str(tmp_path / "bad.jpg"),
            *out,
            "data.skeleton=coco",
        ],  # fmt: skip
    }[case]
    if case in ("json_exists", "out_is_a_file"):
        (tmp_path / "r.json").write_text("[]\n")  # an earlier run's results
    assert demo.main([*argv, "eval.boxsize=64"] if case != "onnx_model_override" else argv) == 2
    err = capsys.readouterr().err
    assert expected.format(tmp=tmp_path) in err and "Traceback" not in err
    assert not (tmp_path / "r.json").exists() or (tmp_path / "r.json").read_text() == "[]\n"
    assert not (tmp_path / "out").exists()  # a failed start leaves no (empty) folder


@pytest.mark.parametrize("failure", ["missing_ckpt", "unreadable_input"])
def test_a_failed_start_leaves_no_empty_runs_folder(failure, tiny_ckpt, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # runs/demo would be made here
    Path("notes.txt").write_text("not a picture\n")
    ckpt = "none.pt" if failure == "missing_ckpt" else str(tiny_ckpt)
    assert demo.main(["--ckpt", ckpt, "--input", "notes.txt", "eval.boxsize=64"]) == 2
    assert "error: " in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    assert demo.main(["--ckpt", ckpt, "--input", "notes.txt", "--out", "a/b", "eval.boxsize=64"]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_demo_expands_a_quoted_pattern_recursively_keeping_sub_folders(trained_tiny_ckpt, synthetic_sample_images,
                                                                      tmp_path, capsys, one_thread):  # fmt: skip
    """``--input 'photos/**/*'``: the images at any depth (not the other files), in name order; each picture below
    its sub-folder, two images of one stem in one folder told apart by their suffix; ``'photos/b/*.jpg'``: flat."""
    photos = tmp_path / "photos"
    (photos / "a").mkdir(parents=True)
    (photos / "b").mkdir()
    first, second = UNSCORED_IMAGES
    shutil.copy(synthetic_sample_images / first, photos / "a" / first)
    shutil.copy(synthetic_sample_images / second, photos / "b" / second)
    cv2.imwrite(str(photos / "b" / second.replace(".jpg", ".png")), read_image(synthetic_sample_images / first))
    (photos / "b" / "notes.txt").write_text("not an image")
    out, out_json = tmp_path / "out", tmp_path / "r.json"
    argv = ["--ckpt", str(trained_tiny_ckpt), "--input", str(photos / "**" / "*"), "--out", str(out)]
    assert demo.main([*argv, "--json", str(out_json), *FAST]) == 0
    pictures = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    stem = second.removesuffix(".jpg")
    assert pictures == [f"a/{first.replace('.jpg', '_pose.jpg')}", f"b/{stem}_jpg_pose.jpg", f"b/{stem}_png_pose.jpg"]
    inputs = [photos / "a" / first, photos / "b" / second, photos / "b" / f"{stem}.png"]
    estimator = PoseEstimator.from_checkpoint(trained_tiny_ckpt, device="cpu", scales=[1.0], flip=False, boxsize=128)
    want = [estimator(path) for path in inputs]
    assert sum(map(len, want)) > 0
    assert out_json.read_text() == coco_results_json([1, 2, 3], want)  # two files end in one number: ids 1..N
    assert "image ids: 1..N" in capsys.readouterr().out

    flat, flat_json = tmp_path / "flat", tmp_path / "flat.json"
    argv = ["--ckpt", str(trained_tiny_ckpt), "--input", str(photos / "b" / "*.jpg"), "--out", str(flat)]
    assert demo.main([*argv, "--json", str(flat_json), *FAST]) == 0
    assert [p.name for p in flat.iterdir()] == [second.replace(".jpg", "_pose.jpg")]
    assert flat_json.read_text() == coco_results_json([int(stem)], want[1:2])


def test_demo_without_out_or_json_writes_to_a_new_numbered_folder(
    trained_tiny_ckpt, synthetic_sample_images, tmp_path, monkeypatch, capsys, one_thread
):
    monkeypatch.chdir(tmp_path)  # runs/demo is relative to the working directory, as a user runs the demo
    image = synthetic_sample_images / LANDSCAPE
    base = ["--ckpt", str(trained_tiny_ckpt), *FAST]
    for n in (1, 2):
        assert demo.main([*base, "--input", str(image)]) == 0
        printed = capsys.readouterr().out
        assert f"writing to runs/demo/{n} (pictures and results.json" in printed
        assert f"wrote runs/demo/{n}/results.json" in printed
        folder = tmp_path / "runs" / "demo" / str(n)
        assert sorted(p.name for p in folder.iterdir()) == [LANDSCAPE.replace(".jpg", "_pose.jpg"), "results.json"]
    first, again = (tmp_path / "runs" / "demo" / str(n) / "results.json" for n in (1, 2))
    assert first.read_text() == again.read_text() and json.loads(first.read_text())

    (tmp_path / "runs" / "demo" / "5").mkdir()  # the next number is one more than the highest, gaps left alone
    video = tmp_path / "clip.mp4"
    write_video(video, frames_of(synthetic_sample_images, 3))
    assert demo.main([*base, "--input", str(video)]) == 0
    assert "writing to runs/demo/6" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "runs" / "demo" / "6").iterdir()) == ["clip_pose.mp4", "results.json"]
    assert len(read_video(tmp_path / "runs" / "demo" / "6" / "clip_pose.mp4")) == 3

    (tmp_path / "bad.jpg").write_bytes(b"not an image")  # a run that fails leaves no empty folder behind
    assert demo.main([*base, "--input", str(tmp_path / "bad.jpg")]) == 2
    assert sorted(p.name for p in (tmp_path / "runs" / "demo").iterdir()) == ["1", "2", "5", "6"]


def test_demo_never_replaces_an_earlier_result_without_overwrite(trained_tiny_ckpt, synthetic_sample_images,
                                                                tmp_path, monkeypatch, capsys, one_thread):  # fmt: skip
    out, out_json = tmp_path / "out", tmp_path / "r.json"
    picture = out / LANDSCAPE.replace(".jpg", "_pose.jpg")
    argv = ["--ckpt", str(trained_tiny_ckpt), "--input", str(synthetic_sample_images / LANDSCAPE), *FAST]
    assert demo.main([*argv, "--out", str(out), "--json", str(out_json)]) == 0
    before = picture.read_bytes(), out_json.read_bytes()
    picture.write_bytes(b"an earlier picture")
    out_json.write_text("[]\n")
    for given, named in (([*argv, "--out", str(out), "--json", str(out_json)], f"{picture} exists (and 1 more of "),
                         ([*argv, "--out", str(tmp_path / "new"), "--json", str(out_json)], f"{out_json} exists:"),
                         ([*argv, "--out", str(out)], f"{picture} exists:")):  # fmt: skip
        assert demo.main(given) == 2
        err = capsys.readouterr().err
        assert named in err and "give --overwrite to replace it, or another --out / --json" in err, err
        assert picture.read_bytes() == b"an earlier picture" and out_json.read_text() == "[]\n"
    assert not (tmp_path / "new").exists() or not any((tmp_path / "new").iterdir())
    assert demo.main([*argv, "--out", str(out), "--json", str(out_json), "--overwrite"]) == 0
    assert (picture.read_bytes(), out_json.read_bytes()) == before

    def no_camera(source):
        raise AssertionError("the camera was opened before the outputs were checked")

    monkeypatch.setattr(cv2, "VideoCapture", no_camera)
    (out / "camera0_pose.mp4").write_bytes(b"an earlier recording")
    assert demo.main(["--ckpt", str(trained_tiny_ckpt), "--input", "0", "--out", str(out)]) == 2
    assert f"{out / 'camera0_pose.mp4'} exists" in capsys.readouterr().err


def test_demo_min_score_leaves_people_out_of_the_pictures_and_the_json(
    trained_tiny_ckpt, synthetic_sample_images, tmp_path, monkeypatch, capsys, one_thread
):
    folder = tmp_path / "photos"
    folder.mkdir()
    for name in UNSCORED_IMAGES:
        shutil.copy(synthetic_sample_images / name, folder / name)
    base = ["--ckpt", str(trained_tiny_ckpt), "--input", str(folder), *FAST]
    everyone = tmp_path / "all.json"
    assert demo.main([*base, "--json", str(everyone)]) == 0  # the default keeps everyone
    assert "--min-score" not in capsys.readouterr().out
    scores = sorted(r["score"] for r in json.loads(everyone.read_text()))
    threshold = round(float(np.median(scores)), 3)
    kept = [r for r in json.loads(everyone.read_text()) if r["score"] >= threshold]
    assert 0 < len(kept) < len(scores)

    drawn = []
    real_draw = demo_output.draw_detections

    def recording_draw(image, people, skeleton):
        drawn.append([p.score for p in people])
        return real_draw(image, people, skeleton)

    monkeypatch.setattr(demo_output, "draw_detections", recording_draw)
    some = tmp_path / "some.json"
    args = [*base, "--json", str(some), "--out", str(tmp_path / "drawn"), "--min-score", str(threshold)]
    assert demo.main(args) == 0
    printed = capsys.readouterr().out
    assert f"--min-score {threshold:g}: {len(scores) - len(kept)} of {len(scores)} people scored below it" in printed
    assert "below --min-score)" in printed
    assert json.loads(some.read_text()) == kept  # the same people, in the same order
    assert len(drawn) == len(UNSCORED_IMAGES) and sum(map(len, drawn)) == len(kept)
    assert all(score >= threshold for scores_drawn in drawn for score in scores_drawn)


def test_demo_fast_is_one_scale_without_flip_in_auto_precision_as_the_apis_fast(
    trained_tiny_ckpt, synthetic_sample_images, tmp_path, capsys, one_thread
):
    from simplepose.evaluate import FAST
    from tests.helpers import image_folder

    folder = image_folder(synthetic_sample_images, tmp_path / "images")
    fast, explicit = tmp_path / "fast.json", tmp_path / "explicit.json"
    common = ["--ckpt", str(trained_tiny_ckpt), "--input", str(folder), "eval.boxsize=128"]
    assert demo.main([*common, "--fast", "--json", str(fast)]) == 0
    assert demo.main([*common, "eval.scales=[1.0]", "eval.flip=false", "eval.amp=auto", "--json", str(explicit)]) == 0
    assert fast.read_bytes() == explicit.read_bytes()
    estimator = PoseEstimator.from_checkpoint(trained_tiny_ckpt, device="cpu", **FAST)
    assert (estimator.cfg.scales, estimator.cfg.flip, estimator.cfg.amp) == ([1.0], False, "auto")
    later = tmp_path / "later.json"  # an override after --fast wins
    assert demo.main([*common, "--fast", "eval.flip=true", "--json", str(later)]) == 0
    assert later.read_bytes() != fast.read_bytes()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_demo_over_a_folder_stopped_by_a_signal_writes_the_results_of_the_images_done(
    trained_tiny_ckpt, synthetic_sample_images, tmp_path, capsys, monkeypatch, one_thread, signum
):
    """SIGTERM or Ctrl-C during the second picture: it is finished, the loop ends there, the JSON holds the people of
    the two pictures done (as a run over those two alone), one line says so, exit 128 + the signal."""
    out_json = tmp_path / "out.json"
    kept, calls = demo.Run.kept, []

    def kept_then_signal(self, people):
        calls.append(1)
        if len(calls) == 2:
            os.kill(os.getpid(), signum)
        return kept(self, people)

    monkeypatch.setattr(demo.Run, "kept", kept_then_signal)
    argv = ["--ckpt", str(trained_tiny_ckpt), *FAST, "--input", str(synthetic_sample_images), "--json", str(out_json)]
    assert demo.main(argv) == 128 + signum
    names = sorted(p.name for p in synthetic_sample_images.glob("*.jpg"))
    how = "interrupted (SIGINT)" if signum == signal.SIGINT else "terminated (SIGTERM)"
    err = capsys.readouterr().err
    assert f"{how}: stopped after 2 of {len(names)} images; the results of those are in {out_json}" in err
    assert "Traceback" not in err
    results = json.loads(out_json.read_text())

    monkeypatch.setattr(demo.Run, "kept", kept)
    two = tmp_path / "two"
    two.mkdir()
    for name in names[:2]:
        shutil.copy(synthetic_sample_images / name, two / name)
    alone = tmp_path / "alone.json"
    assert demo.main(["--ckpt", str(trained_tiny_ckpt), *FAST, "--input", str(two), "--json", str(alone)]) == 0
    assert results == json.loads(alone.read_text()) and results
