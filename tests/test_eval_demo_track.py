"""python -m evaluate.demo --track on a short video made here (data/synthetic_video.py, two figures crossing, one
hidden behind the other for 5 frames): track ids in the JSON, stable against the video's known identities, the
file loads in pycocotools; the same ids from PoseEstimator.video and from a folder of the video's frames."""

from __future__ import annotations

import json
import re
import runpy

import cv2
import numpy as np
import pytest
from pycocotools.coco import COCO as CocoApi

from bench.tracking import found_person, frame_truth, identity_metrics, ids_of_identities
from simplepose.config.config_file import load_config
from simplepose.config.schema import EvalConfig
from simplepose.config.skeleton_file import load_skeleton
from simplepose.data import synthetic_video
from simplepose.data.synthetic_clips import coco_annotations, crossing_video, write_video
from simplepose.evaluate import PoseEstimator, PoseTracker, demo
from simplepose.evaluate import video as video_reader
from simplepose.evaluate.draw import track_color
from simplepose.evaluate.metrics.annotations import load_ground_truth
from tests.helpers import InterruptedCamera
from tests.paths import REPO_ROOT

COCO = load_skeleton("coco")
FAST = ["eval.scales=[1.0]", "eval.flip=false", "eval.boxsize=128"]  # the ground-truth maps at one scale


@pytest.fixture(scope="module")
def crossing_clip(tmp_path_factory):
    """(video file, its ground-truth annotations file, the SyntheticVideo): 31 frames at 15 fps, 128 x 176."""
    folder = tmp_path_factory.mktemp("crossing")
    video = crossing_video(hidden_frames=5, size=(128, 176), fps=15.0, height=72.0, num_frames=31)
    write_video(video, folder / "clip.mp4")
    (folder / "clip.json").write_text(json.dumps(coco_annotations(video, name="clip")))
    return folder / "clip.mp4", folder / "clip.json", video


def people_of(results: list[dict], num_frames: int) -> list[list]:
    """The results JSON as Person objects with their track_id, per frame."""
    frames = [[] for _ in range(num_frames)]
    for r in results:
        kp = np.asarray(r["keypoints"], np.float64).reshape(-1, 3)
        person = found_person(kp[:, :2], kp[:, 2] > 0)
        frames[r["image_id"]].append(type(person)(person.keypoints, r["score"], person.box, r["track_id"]))
    return frames


def ids_per_identity(annotations: dict, tracked: list[list]) -> tuple[dict, dict[int, set[int]]]:
    per_frame = [[a for a in annotations["annotations"] if a["image_id"] == i] for i in range(len(tracked))]
    truths = [frame_truth(anns, COCO.num_dataset_keypoints) for anns in per_frame]
    metrics, matched = identity_metrics([(truths, tracked)], np.asarray(COCO.sigmas))
    return metrics, ids_of_identities(tracked, matched[0])


def test_demo_track_json_has_stable_ids_and_loads_in_pycocotools(crossing_clip, tmp_path, capsys):
    video_file, gt_file, video = crossing_clip
    out_json, out_dir = tmp_path / "tracks.json", tmp_path / "drawn"
    argv = ["--from-ground-truth", "--annotations", str(gt_file), "--input", str(video_file), "--track", "--smooth",
            "--json", str(out_json), "--out", str(out_dir), *FAST]  # fmt: skip
    assert demo.main(argv) == 0
    assert "track ids" in capsys.readouterr().out
    results = json.loads(out_json.read_text())
    assert results and all(isinstance(r["track_id"], int) and r["track_id"] >= 1 for r in results)
    assert {r["image_id"] for r in results} <= set(range(video.num_frames))  # the frame index as image id
    gt = CocoApi(str(gt_file))
    loaded = gt.loadRes(str(out_json))
    assert len(loaded.getAnnIds()) == len(results)
    assert {a["track_id"] for a in loaded.loadAnns(loaded.getAnnIds())} == {r["track_id"] for r in results}

    tracked = people_of(results, video.num_frames)
    for people in tracked:
        ids = [p.track_id for p in people]
        assert len(ids) == len(set(ids))
    metrics, ids = ids_per_identity(json.loads(gt_file.read_text()), tracked)
    assert set(ids) == {1, 2} and len(ids[1]) == len(ids[2]) == 1 and ids[1] != ids[2], ids
    assert metrics["switches"] == 0 and metrics["false_people"] == 0
    # the min_hits - 1 first frames of each person wait for its track to be confirmed; nothing else is missed
    assert metrics["misses"] <= 2 * 2

    drawn = cv2.VideoCapture(str(out_dir / "clip_pose.mp4"))
    frames = []
    while (read := drawn.read())[0]:
        frames.append(read[1])
    drawn.release()
    assert len(frames) == video.num_frames
    # each id in its own colour: both ids' colours are drawn in a frame where both are seen
    both = next(i for i, people in enumerate(tracked) if len(people) == 2)
    for track_id in (p.track_id for p in tracked[both]):
        close = np.abs(frames[both].astype(int) - track_color(track_id)).max(-1) < 40
        assert close.sum() > 20, track_id

    # without --track: no track ids in the file
    plain = tmp_path / "plain.json"
    assert demo.main([*argv[:5], "--json", str(plain), *FAST]) == 0
    assert all("track_id" not in r for r in json.loads(plain.read_text()))


def test_python_api_and_a_folder_of_frames_give_the_demos_ids(crossing_clip, tmp_path):
    video_file, gt_file, video = crossing_clip
    out_json = tmp_path / "tracks.json"
    base = ["--from-ground-truth", "--annotations", str(gt_file), "--track"]
    assert demo.main([*base, "--input", str(video_file), "--json", str(out_json), *FAST]) == 0
    from_demo = people_of(json.loads(out_json.read_text()), video.num_frames)

    cfg = load_config(None, FAST)
    truth = load_ground_truth(gt_file, COCO, EvalConfig())
    estimator = PoseEstimator.from_ground_truth(truth.coco, cfg, COCO)  # frame i: image i
    frames = list(estimator.stream(video_file, PoseTracker(COCO)))
    assert [f.index for f in frames] == list(range(video.num_frames))
    assert [f.timestamp for f in frames] == pytest.approx([i / 15.0 for i in range(video.num_frames)])
    assert [sorted(p.track_id for p in f.people) for f in frames] == [
        sorted(p.track_id for p in people) for people in from_demo
    ]

    # the frames as a folder of images, 15 fps apart: named as the annotations list them
    folder = tmp_path / "frames"
    folder.mkdir()
    for f in frames:
        cv2.imwrite(str(folder / f"clip_{f.index:06d}.png"), f.image)
    gt = json.loads(gt_file.read_text())
    for image in gt["images"]:
        image["file_name"] = image["file_name"].replace(".jpg", ".png")
    (tmp_path / "frames.json").write_text(json.dumps(gt))
    folder_json = tmp_path / "folder.json"
    argv = ["--from-ground-truth", "--annotations", str(tmp_path / "frames.json"), "--track", "--fps", "15",
            "--input", str(folder), "--json", str(folder_json), *FAST]  # fmt: skip
    assert demo.main(argv) == 0
    assert folder_json.read_text() == out_json.read_text()


def frames_folder(video_file, folder):
    """The video's frames as PNG pictures ``clip_<index>.png`` in ``folder``."""
    folder.mkdir()
    capture = cv2.VideoCapture(str(video_file))
    index = 0
    while (read := capture.read())[0]:
        cv2.imwrite(str(folder / f"clip_{index:06d}.png"), read[1])
        index += 1
    capture.release()
    return folder


def test_a_folder_of_frames_counts_what_tracking_held_back_apart_from_min_score(crossing_clip, tmp_path, capsys):
    """--track on a folder of frames: a person's first track.min_hits - 1 frames are said to be held back by
    tracking (never "below --min-score", which was not given), the run ends with one line counting them and what
    to type to report everyone at once; with track.min_hits=1 nobody is held back and every person is reported."""
    video_file, gt_file, video = crossing_clip
    folder = frames_folder(video_file, tmp_path / "frames")
    gt = json.loads(gt_file.read_text())
    for image in gt["images"]:
        image["file_name"] = image["file_name"].replace(".jpg", ".png")
    (tmp_path / "frames.json").write_text(json.dumps(gt))
    base = ["--from-ground-truth", "--annotations", str(tmp_path / "frames.json"), "--fps", "15", "--input",
            str(folder), *FAST]  # fmt: skip
    plain = tmp_path / "plain.json"
    assert demo.main([*base, "--json", str(plain)]) == 0
    found = json.loads(plain.read_text())
    capsys.readouterr()
    tracked_file = tmp_path / "tracked.json"
    assert demo.main([*base, "--track", "--json", str(tracked_file)]) == 0
    printed = capsys.readouterr().out
    tracked = json.loads(tracked_file.read_text())
    held = len(found) - len(tracked)
    assert held > 0 and "--min-score" not in printed
    (summary,) = [line for line in printed.splitlines() if line.startswith("tracking held back")]
    counts = re.fullmatch(
        rf"tracking held back {held} people: (\d+) in tracks not yet confirmed \(a person is reported from the frame "
        r"their track has been matched in track.min_hits=3 frames in a row; track.min_hits=1 reports everyone from "
        r"their first frame\)(?:, (\d+) scored below track.min_score=0.9167 \(fragments, not tracked; "
        r"track.min_score=0 tracks everyone\))?",
        summary,
    )
    assert counts, summary
    unconfirmed, untracked = int(counts[1]), int(counts[2] or 0)
    assert unconfirmed > 0 and unconfirmed + untracked == held
    # the first frame: everyone waits for their track (or is a fragment), and the line says which
    line = next(x for x in printed.splitlines() if x.startswith("clip_000000.png:"))
    waiting = re.match(r"clip_000000.png: 0 people \((\d+) held back by tracking \(track.min_hits\)", line)
    assert waiting and int(waiting[1]) > 0, line
    # track.min_hits=1: everyone tracked is reported from their first frame; only the fragments are held back
    assert demo.main([*base, "--track", "track.min_hits=1", "--json", str(tracked_file), "--overwrite"]) == 0
    printed = capsys.readouterr().out
    assert len(json.loads(tracked_file.read_text())) == len(found) - untracked
    assert "held back by tracking" not in printed and "in tracks not yet confirmed" not in printed


def test_unrelated_pictures_are_not_tracked_as_frames(synthetic_sample_images, tiny_ckpt, tmp_path, capsys):
    """--track on pictures of several sizes (not frames of one video) or on one picture: one line saying so and
    what to do, before the model loads; nothing written."""
    from tests.helpers import LANDSCAPE, PORTRAIT, SMALL

    folder = tmp_path / "pictures"
    folder.mkdir()
    for name in (LANDSCAPE, PORTRAIT, SMALL):
        (folder / name).write_bytes((synthetic_sample_images / name).read_bytes())
    out = tmp_path / "trk.json"
    for given, words in (
        (str(folder / "*.jpg"), "not frames of one sequence"),
        (str(folder / LANDSCAPE), "one picture"),
    ):
        assert demo.main(["--ckpt", str(tiny_ckpt), "--input", given, "--track", "--json", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and err.startswith("error: --track follows people across the frames")
        assert words in err and "drop --track" in err.lower() and not out.exists()
    assert "3 pictures of --input" in demo_refusal(tiny_ckpt, folder, out, capsys)
    # the same pictures without --track: found in each
    assert demo.main(["--ckpt", str(tiny_ckpt), "--input", str(folder), "--json", str(out), *FAST]) == 0


def demo_refusal(ckpt, folder, out, capsys) -> str:
    assert demo.main(["--ckpt", str(ckpt), "--input", str(folder), "--track", "--json", str(out)]) == 2
    return capsys.readouterr().err


def test_demo_tracks_a_networks_people(crossing_clip, trained_tiny_ckpt, tmp_path, one_thread):
    video_file, gt_file, video = crossing_clip
    out_json = tmp_path / "net.json"
    argv = ["--ckpt", str(trained_tiny_ckpt), "--input", str(video_file), "--track", "--smooth", "--json",
            str(out_json), "track.min_hits=1", *FAST]  # fmt: skip
    assert demo.main(argv) == 0
    results = json.loads(out_json.read_text())
    assert all(isinstance(r["track_id"], int) for r in results)
    CocoApi(str(gt_file)).loadRes(str(out_json))
    for i in range(video.num_frames):
        ids = [r["track_id"] for r in results if r["image_id"] == i]
        assert len(ids) == len(set(ids))


def test_min_score_is_the_trackers_gate(crossing_clip, trained_tiny_ckpt, tmp_path, one_thread, capsys):
    """--min-score on a video with --track is the tracker's one gate (track.min_score): the JSON holds only people
    scored at least S, each with its track id, the people below S start no track (the tracker sees the video as if
    they were not found), and the last line counts them under --min-score."""
    video_file, _, video = crossing_clip
    # track.min_score=0: only --min-score leaves people out here (the tracker's own threshold is tested elsewhere)
    base = ["--ckpt", str(trained_tiny_ckpt), "--input", str(video_file), "track.min_hits=1", "track.min_score=0"]
    base += FAST
    everyone = tmp_path / "all.json"
    assert demo.main([*base, "--json", str(everyone)]) == 0
    scores = sorted(r["score"] for r in json.loads(everyone.read_text()))
    threshold = round(float(np.median(scores)), 3)
    expected = len([s for s in scores if s >= threshold])
    assert 0 < expected < len(scores)
    capsys.readouterr()
    some = tmp_path / "some.json"
    assert demo.main([*base, "--track", "--min-score", str(threshold), "--json", str(some)]) == 0
    assert f"{len(scores) - expected} scored below --min-score={threshold:g}" in capsys.readouterr().out
    results = json.loads(some.read_text())
    assert results and all(r["score"] >= threshold and isinstance(r["track_id"], int) for r in results)
    assert len(results) == expected  # min_hits=1: every kept person is reported with a track

    cfg = load_config(None, ["track.min_hits=1", "track.min_score=0", *FAST])
    estimator = PoseEstimator.from_checkpoint(trained_tiny_ckpt, device="cpu", scales=[1.0], flip=False, boxsize=128)
    tracker = PoseTracker(estimator.skeleton, cfg.track)
    by_hand = [tracker.update([p for p in f.people if p.score >= threshold], f.timestamp)
               for f in estimator.stream(video_file)]  # fmt: skip
    assert sorted((r["image_id"], r["track_id"]) for r in results) == sorted(
        (i, p.track_id) for i, people in enumerate(by_hand) for p in people
    )


@pytest.mark.parametrize(
    "extra, expected",
    [
        (["track.min_hits=0"], "track.min_hits must be >= 1"),
        (["--fps", "0"], "--fps must be > 0"),
    ],
)
def test_demo_track_bad_settings_give_one_clean_error(crossing_clip, tmp_path, capsys, extra, expected):
    video_file, gt_file, _ = crossing_clip
    argv = ["--from-ground-truth", "--annotations", str(gt_file), "--input", str(video_file), "--track", "--json",
            str(tmp_path / "r.json"), *extra]  # fmt: skip
    assert demo.main(argv) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err and not (tmp_path / "r.json").exists()


def test_readme_video_example_runs(crossing_clip, trained_tiny_ckpt, tmp_path, one_thread, capsys):
    section = (REPO_ROOT / "README.md").read_text().split("## Video: ids and steady keypoints", 1)[1].split("\n## ")[0]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert '"runs/quickstart/best.pt"' in code and '"clip.mp4"' in code  # what the test swaps for real files
    code = code.replace('"runs/quickstart/best.pt"', repr(str(trained_tiny_ckpt)))
    fast = "PoseEstimator.from_checkpoint(scales=[1.0], flip=False, path="  # seconds on a CPU
    code = code.replace("PoseEstimator.from_checkpoint(", fast)
    code = code.replace('"clip.mp4"', repr(str(crossing_clip[0])))
    script = tmp_path / "readme_video.py"
    script.write_text(code)
    runpy.run_path(str(script))
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == crossing_clip[2].num_frames and lines[1].startswith("1 0.0666")  # index, seconds, people

    # the README's command that makes a video: its files, loadable
    out = tmp_path / "synth_video"
    command = next(line for line in section.splitlines() if line.startswith("python -m data.synthetic_video"))
    args = command.split("#")[0].split()[3:]
    assert args[:2] == ["--out", "runs/synth_video"]
    assert synthetic_video.main(["--out", str(out), *args[2:], "--frames", "12", "--people", "2"]) == 0
    gt = CocoApi(str(out / "annotations.json"))
    assert len(gt.getImgIds()) == 12 and {a["track_id"] for a in gt.loadAnns(gt.getAnnIds())} <= {1, 2}
    cap = cv2.VideoCapture(str(out / "video.mp4"))
    assert int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) == 12
    cap.release()


def test_camera_tracks_as_the_video_file(crossing_clip, trained_tiny_ckpt, tmp_path, monkeypatch, capsys, one_thread):
    """--input 0 --track, the camera giving the clip's frames then Ctrl-C, read by a clock that ticks at the clip's
    frame rate: the video file's people, ids and keypoints (a camera's frames are timed by the clock as read, and the
    tracker predicts motion by time), and what was read is written."""
    video_file, _, video = crossing_clip
    base = ["--ckpt", str(trained_tiny_ckpt), "--track", "track.min_hits=1", *FAST]
    from_file = tmp_path / "file.json"
    assert demo.main([*base, "--input", str(video_file), "--json", str(from_file)]) == 0
    cap, frames = cv2.VideoCapture(str(video_file)), []
    while (read := cap.read())[0]:
        frames.append(read[1])
    cap.release()
    assert len(frames) == video.num_frames
    cameras = []

    def open_camera(source):
        assert source == 0
        cameras.append(InterruptedCamera(frames))
        return cameras[-1]

    class FrameClock:  # time.monotonic for evaluate.video: one frame of the clip a call
        calls = 0

        @classmethod
        def monotonic(cls):
            cls.calls += 1
            return (cls.calls - 1) / video.fps

    monkeypatch.setattr(cv2, "VideoCapture", open_camera)
    monkeypatch.setattr(video_reader, "time", FrameClock)
    from_camera, out_dir = tmp_path / "camera.json", tmp_path / "drawn"
    assert demo.main([*base, "--input", "0", "--json", str(from_camera), "--out", str(out_dir)]) == 0
    monkeypatch.undo()
    assert "interrupted: writing what was read" in capsys.readouterr().out and cameras[0].released
    results = json.loads(from_camera.read_text())
    assert len(results) >= video.num_frames and all(isinstance(r["track_id"], int) for r in results)
    assert FrameClock.calls == video.num_frames and results == json.loads(from_file.read_text())
    drawn = cv2.VideoCapture(str(out_dir / "camera0_pose.mp4"))
    assert int(drawn.get(cv2.CAP_PROP_FRAME_COUNT)) == video.num_frames
    drawn.release()
