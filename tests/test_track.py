"""evaluate.track: ids across frames on synthetic videos with known identities (data/synthetic_video.py), One-Euro
smoothing, the settings' checks; and the bench's identity metrics on a case counted by hand."""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pytest

from bench import tracking
from bench.tracking import (
    Truth,
    found_person,
    frame_truth,
    identity_metrics,
    keypoint_metrics,
    noisy_people,
    track,
)
from simplepose.config.config_file import ConfigError, load_config
from simplepose.config.schema import TrackConfig
from simplepose.config.skeleton_file import load_skeleton
from simplepose.data.synthetic_clips import SyntheticVideo, Walker, crossing_video, random_video, walker_poses
from simplepose.data.synthetic_images import COCO_PERSON
from simplepose.evaluate.metrics.oks import BodyTemplate, oks_matrix, person_area
from simplepose.evaluate.track import HeldBack, OneEuroFilter, PoseTracker, pair_similarity
from tests.helpers import COCO


def truths_of(video: SyntheticVideo) -> list[Truth]:
    return [frame_truth(anns, video.skeleton.num_dataset_keypoints) for _, anns in video.frames()]


def detections(truths: list[Truth], video: SyntheticVideo, seed: int = 0, noise: float = 2.0):
    rng = np.random.default_rng(seed)
    return [noisy_people(t, rng, noise, video.size) for t in truths]


def metrics_and_ids(truths, tracked, skeleton=COCO) -> tuple[dict, dict[int, set[int]]]:
    """(identity metrics, identity -> the track ids of the people matched to it)."""
    metrics, matched = identity_metrics([(truths, tracked)], np.asarray(skeleton.sigmas))
    return metrics, tracking.ids_of_identities(tracked, matched[0])


def assert_no_id_twice(tracked) -> None:
    for i, people in enumerate(tracked):
        ids = [p.track_id for p in people]
        assert all(isinstance(t, int) and t >= 1 for t in ids), ids
        assert len(ids) == len(set(ids)), f"frame {i}: {ids}"


def test_two_figures_crossing_with_five_frames_of_full_occlusion_keep_their_ids():
    video = crossing_video(hidden_frames=5)
    truths = truths_of(video)
    seen = [1 in t.ids for t in truths]
    gone = [i for i, s in enumerate(seen) if not s]
    assert len(gone) == 5 and gone == list(range(gone[0], gone[0] + 5))  # five frames in a row, fully hidden
    assert all(2 in t.ids for t in truths)
    tracked = track(detections(truths, video), video.fps, COCO, TrackConfig())
    assert_no_id_twice(tracked)
    assert all(len(tracked[i]) == 1 for i in gone)  # the hidden one is not invented
    metrics, ids = metrics_and_ids(truths, tracked)
    assert ids[1] and ids[2] and ids[1] != ids[2]
    assert len(ids[1]) == len(ids[2]) == 1, ids  # the same id before and after the occlusion
    assert metrics["switches"] == 0
    # the figure behind is seen again right after the occlusion under its id
    after = next(i for i in range(gone[-1] + 1, len(truths)) if len(tracked[i]) == 2)
    assert after <= gone[-1] + 2


def _walker(identity, x, velocity, enter_s=0.0, leave_s=math.inf, seed=0, height=100.0):
    """A COCO person at height 120 px; the same ``seed``, the same poses and gait."""
    poses = walker_poses(np.random.default_rng(seed), COCO_PERSON)
    return Walker(identity, poses, height, (x, 120.0), (velocity, 0.0), gait_hz=1.0, depth=identity, seed=identity,
                  enter_s=enter_s, leave_s=leave_s)  # fmt: skip


def test_a_person_leaving_and_a_new_one_entering_get_different_ids():
    fps = 30.0
    # 1 walks out at the right edge; 2, the same figure, walks in at the left edge a few frames later
    out_right = _walker(1, 200.0, 90.0)
    in_left = _walker(2, -60.0 - 90.0 * 1.5, 90.0, enter_s=1.2)
    # 3 vanishes (a door) in the middle of the picture; 4, the same figure, appears at the same place after the
    # lost track has ended (30 frames)
    vanish = _walker(3, 160.0, 0.0, leave_s=0.6, seed=5)
    appear = _walker(4, 160.0, 0.0, enter_s=0.6 + 40 / fps, seed=5)
    for walkers in ((out_right, in_left), (vanish, appear)):
        video = SyntheticVideo(walkers, (240, 320), fps, 90, COCO_PERSON)
        truths = truths_of(video)
        identities = {int(i) for t in truths for i in t.ids}
        assert identities == {w.identity for w in walkers}
        tracked = track(detections(truths, video, noise=1.0), fps, COCO, TrackConfig())
        assert_no_id_twice(tracked)
        _, ids = metrics_and_ids(truths, tracked)
        first, second = (ids[w.identity] for w in walkers)
        assert len(first) == len(second) == 1 and first != second, ids


def test_no_id_is_given_twice_in_a_frame_even_to_duplicate_detections():
    video = random_video(np.random.default_rng(3), num_frames=90, num_people=7)
    truths = truths_of(video)
    frames = detections(truths, video, seed=1)
    # the detector reports some people twice (a second, slightly moved copy): one track takes one of them
    rng = np.random.default_rng(2)
    doubled = [people + [dataclasses.replace(p, keypoints=p.keypoints + (rng.normal(0, 1), rng.normal(0, 1), 0))
                         for p in people if rng.random() < 0.3] for people in frames]  # fmt: skip
    for cfg in (TrackConfig(), TrackConfig(min_hits=1, max_lost_frames=0), TrackConfig(smooth=True)):
        tracked = track(doubled, video.fps, COCO, cfg)
        assert_no_id_twice(tracked)
        assert sum(map(len, tracked)) > 0.8 * sum(map(len, frames))
    metrics, _ = metrics_and_ids(truths, track(frames, video.fps, COCO, TrackConfig()))
    assert metrics["mota"] > 0.8 and metrics["idf1"] > 0.8  # seven people walking across each other


def test_any_skeleton_keeps_ids_through_a_crossing():
    quadruped = load_skeleton("quadruped6")
    video = crossing_video(hidden_frames=5, skeleton=quadruped)
    truths = truths_of(video)
    assert sum(1 not in t.ids for t in truths) == 5
    tracked = track(detections(truths, video), video.fps, quadruped, TrackConfig(min_shared_keypoints=2))
    assert_no_id_twice(tracked)
    metrics, ids = metrics_and_ids(truths, tracked, quadruped)
    assert len(ids[1]) == len(ids[2]) == 1 and ids[1] != ids[2] and metrics["switches"] == 0


def test_a_person_who_matches_their_track_never_yields_it_to_a_newcomer():
    """A and B stand close (their OKS over 0.3: each could continue the other's track); B is missed for one frame
    while a newcomer C appears as close on A's other side. Matching as many pairs as possible would move A onto B's
    track and give A's to C; similarity first, A keeps its id, B gets its own back, C gets a new one."""
    pose = walker_poses(np.random.default_rng(0), COCO_PERSON)[0] * 120 + (200.0, 150.0)
    offset = 17.0  # px: an OKS of about 0.4 between A and B (and between A and C)
    a, b, c = (found_person(pose + (dx, 0.0), np.ones(17, bool)) for dx in (0.0, offset, -offset))
    xy = np.stack([pose, pose + (offset, 0.0)])
    found = np.ones((2, 17), bool)
    area = person_area(xy, found, BodyTemplate.of(COCO))
    similarity, allowed = pair_similarity(xy, found, area, xy, found, area, np.asarray(COCO.sigmas), TrackConfig())
    assert allowed[0, 1] and similarity[0, 1] < 0.5  # A may continue B's track: the case is a real one
    frames = [[a, b]] * 5 + [[a, c]] + [[a, b, c]] * 4
    for cfg in (TrackConfig(), TrackConfig(smooth=True), TrackConfig(min_hits=1)):
        tracker = PoseTracker(COCO, cfg)
        ids = [[p.track_id for p in tracker.update(people, i / 30)] for i, people in enumerate(frames)]
        first = cfg.min_hits - 1
        assert all(frame[:2] == [1, 2] for frame in ids[first:5]), ids
        assert ids[5][0] == 1 and all(frame[:2] == [1, 2] for frame in ids[6:]), ids  # A and B as before
        newcomer = {frame[2] for frame in ids[6:] if len(frame) == 3} | ({ids[5][1]} if len(ids[5]) == 2 else set())
        assert newcomer == {3}, ids  # C: one new id


@pytest.mark.parametrize("part", ["face", "upper body", "left side", "whole body"])
def test_people_seen_in_part_keep_one_id_as_whole_bodies_do(part):
    """A person 200 px tall walking at 100 px/s, 60 frames at 30 fps, seen only by a part of the body (the face: 5
    keypoints whose box is about 25 x 5 px), keypoints moved by 1 px of noise: one id over the 60 frames, reported
    from the third (min_hits)."""
    shown = np.isin(COCO.dataset_keypoints, tracking.PARTS[part]) if part != "whole body" else np.ones(17, bool)
    for seed in range(3):
        rng = np.random.default_rng(seed)
        walker = Walker(1, walker_poses(rng, COCO_PERSON), 200.0, (150.0, 200.0), (100.0, 0.0), gait_hz=1.0)
        tracker = PoseTracker(COCO, TrackConfig())
        ids = []
        for i in range(60):
            xy = walker.keypoints(i / 30) + rng.normal(0, 1.0, (17, 2))
            ids += [p.track_id for p in tracker.update([found_person(xy, shown)], i / 30)]
        assert ids == [1] * 58, (part, seed, ids)


def test_person_area_is_a_whole_bodys_for_people_seen_in_part():
    """A person's area from their face, upper body or one side is within a factor of 2 of their whole pose's box area
    (the face's own box is 200 times smaller); a skeleton that is not a human body keeps the keypoint box."""
    pose = walker_poses(np.random.default_rng(1), COCO_PERSON)[0] * 200 + (300.0, 300.0)
    template = BodyTemplate.of(COCO)
    whole = person_area(pose[None], np.ones((1, 17), bool), None)[0]
    for part, names in tracking.PARTS.items():
        shown = np.isin(COCO.dataset_keypoints, names)[None]
        assert whole / 2 < person_area(pose[None], shown, template)[0] < 2 * whole, part
    face = np.isin(COCO.dataset_keypoints, tracking.PARTS["face"])[None]
    assert person_area(pose[None], face, None)[0] < whole / 50
    assert BodyTemplate.of(load_skeleton("quadruped6")) is None
    for name in ("crowdpose", "mpii", "aic", "halpe", "coco_wholebody"):
        assert BodyTemplate.of(load_skeleton(name)) is not None, name
    one = np.zeros((1, 17), bool)
    one[0, 0] = True
    assert person_area(pose[None], one, template)[0] == 0.0  # one keypoint: no size


def test_oks_matrix_on_a_case_computed_by_hand():
    """Two 3-keypoint poses: b is a with its second keypoint moved 3 px and its third not found."""
    sigmas = np.array([0.1, 0.2, 0.05])
    a = np.array([[[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]]])
    b = a.copy()
    b[0, 1, 0] += 3.0
    b[0, 2] = np.nan
    a_found, b_found = np.ones((1, 3), bool), np.array([[True, True, False]])
    e = math.exp(-9.0 / (2 * 100.0 * 0.4**2))  # area 100 px^2, (2 sigma)^2 = 0.16
    oks, shared = oks_matrix(a, a_found, b, b_found, sigmas, np.array([[100.0]]))
    assert shared.tolist() == [[2]] and oks[0, 0] == pytest.approx((1 + e) / 2)
    oks, _ = oks_matrix(a, a_found, b, b_found, sigmas, 100.0, over="a")  # COCO's: the missing keypoint counts 0
    assert oks[0, 0] == pytest.approx((1 + e) / 3)
    truth = Truth(np.array([7]), a[0][None], a_found)
    assert tracking.truth_oks(truth, [found_person(b[0], b_found[0])], sigmas)[0, 0] == pytest.approx((1 + e) / 3)
    with pytest.raises(ValueError, match="over must be"):
        oks_matrix(a, a_found, b, b_found, sigmas, 100.0, over="b")


def test_one_euro_filter_takes_nan_points_as_not_found_and_refuses_bad_calls():
    f = OneEuroFilter(3)
    f(np.array([[0.0, 0.0], [5.0, 5.0], [9.0, 9.0]]), [True, True, True], 0.0)
    before = [a.copy() for a in f.state]
    out = f(np.array([[np.nan, 1.0], [6.0, 5.0], [np.inf, 9.0]]), [True, True, True], 1 / 30)
    assert np.isnan(out[[0, 2]]).all() and np.isfinite(out[1]).all()  # not a number: not found, reported NaN
    for now, then in zip(f.state, before):
        np.testing.assert_array_equal(now[[0, 2]], then[[0, 2]])  # their state as it was
    for i in range(2, 6):  # and nothing poisoned after
        out = f(np.array([[1.0, 1.0], [6.0, 5.0], [9.0, 9.0]]), [True, True, True], i / 30)
    assert np.isfinite(out).all()
    state = [a.copy() for a in f.state]
    points = np.zeros((3, 2))
    for bad, message in [
        (lambda: f(points, [True, True, True], math.nan), r"time nan s is not a finite number"),
        (lambda: f(points, [True, True, True], math.inf), r"time inf s is not a finite number"),
        (lambda: f(points, [True, True], 1.0), r"found \(3,\), got \(3, 2\) and \(2,\)"),
        (lambda: f(points, [True], 1.0), r"found \(3,\), got \(3, 2\) and \(1,\)"),  # not broadcast
        (lambda: f(points[:2], [True, True, True], 1.0), r"points must be \(3, 2\)"),
        (lambda: f(points, [1.0, math.nan, 0.0], 1.0), r"found must be booleans"),
        (lambda: f(points, [True, True, True], 5 / 30), r"time 0.1666.* s is not after a point's last sample"),
    ]:
        with pytest.raises(ValueError, match=message):
            bad()
        assert all(np.array_equal(a, b) for a, b in zip(f.state, state))  # a refused call changes nothing
    with pytest.raises(ValueError, match="num_points must be a whole number >= 1"):
        OneEuroFilter(0)


def walking_figure(num_frames: int = 150, fps: float = 30.0) -> SyntheticVideo:
    """One figure walking across at 0.6 of its height per second."""
    walker = _walker(1, 40.0, 72.0)
    return SyntheticVideo((walker,), (240, 320), fps, num_frames, COCO_PERSON)


def test_smoothing_halves_the_jitter_of_a_noisy_walk_at_30_fps_with_under_a_frame_of_lag():
    video = walking_figure()
    truths = truths_of(video)
    frames = detections(truths, video, noise=2.0)
    results = {}
    for smooth in (False, True):
        tracked = track(frames, video.fps, COCO, TrackConfig(smooth=smooth))
        _, matched = identity_metrics([(truths, tracked)], np.asarray(COCO.sigmas))
        results[smooth] = keypoint_metrics([(video, tracked, matched[0])])
    off, on = results[False], results[True]
    assert on["jitter"] <= 0.5 * off["jitter"], results
    assert abs(off["lag"]) < 0.1 and 0 <= on["lag"] <= 1.0, results
    assert on["error"] < off["error"]  # closer to the true keypoints, too


def test_without_smoothing_the_keypoints_are_the_detectors():
    video = walking_figure(40)
    frames = detections(truths_of(video), video)
    tracker = PoseTracker(COCO, TrackConfig(min_hits=1, smooth=False))
    for i, people in enumerate(frames):
        out = tracker.update(people, i / video.fps)
        assert len(out) == len(people)
        for given, got in zip(people, out):
            np.testing.assert_array_equal(got.keypoints, given.keypoints)  # NaN where not found, as given
            assert got.box == given.box and got.score == given.score and given.track_id is None


def test_a_missing_keypoint_neither_moves_the_filter_nor_is_invented():
    video = walking_figure(30)
    truths = truths_of(video)
    tracker = PoseTracker(COCO, TrackConfig(min_hits=1, smooth=True))
    hidden = range(10, 15)
    nose = COCO.dataset_keypoints.index("nose")
    smoothed = []
    for i, truth in enumerate(truths):
        visible = truth.visible[0].copy()
        visible[nose] = visible[nose] and i not in hidden
        (person,) = tracker.update([found_person(truth.xy[0], visible)], i / video.fps)
        smoothed.append(person.keypoints)
        if i in hidden:
            assert np.isnan(person.keypoints[nose, :2]).all() and person.keypoints[nose, 2] == 0
    assert np.isfinite(smoothed[15][nose, :2]).all()
    # the filter on its own: a missing sample leaves its state as it was
    f = OneEuroFilter(2)
    f(np.array([[0.0, 0.0], [5.0, 5.0]]), np.array([True, True]), 0.0)
    before = [a.copy() for a in f.state]
    out = f(np.array([[np.nan, np.nan], [6.0, 5.0]]), np.array([False, True]), 1 / 30)
    assert np.isnan(out[0]).all() and np.isfinite(out[1]).all()
    assert all(np.array_equal(a[0], b[0], equal_nan=True) for a, b in zip(f.state, before))


def test_the_filter_follows_timestamps_not_frame_counts():
    """A ramp at 100 px/s: the steady-state lag in seconds is the same at 30 and 120 fps, and with frames dropped."""
    cfg = TrackConfig(beta=0.0)  # a fixed cutoff: lag = 1 / (2 pi min_cutoff) s
    lags = []
    at_30 = np.arange(0, 3, 1 / 30)
    for times in (at_30, np.arange(0, 3, 1 / 120), np.unique(np.r_[at_30[::3], at_30[1::7]])):
        f = OneEuroFilter(1, cfg)
        for t in times:
            out = f(np.array([[100.0 * t, 0.0]]), np.array([True]), t)
        lags.append((100.0 * times[-1] - out[0, 0]) / 100.0)
    expected = 1 / (2 * math.pi * cfg.min_cutoff)
    assert all(abs(lag - expected) < 0.12 * expected for lag in lags), (lags, expected)


def test_settings_out_of_range_and_bad_calls_are_refused():
    with pytest.raises(ConfigError) as e:
        load_config(None, ["track.min_hits=0"])
    assert e.value.key == "track.min_hits"
    with pytest.raises(ConfigError) as e:
        PoseTracker(COCO, TrackConfig(min_oks=0.0))
    assert e.value.key == "track.min_oks"
    assert load_config(None, ["track.smooth=true", "track.beta=0.1"]).track == TrackConfig(smooth=True, beta=0.1)
    tracker = PoseTracker(COCO)  # min_hits=3: a track is confirmed at its third frame in a row
    person = found_person(np.zeros((17, 2)) + 50, np.ones(17, bool))
    assert tracker.update([person], 1.0) == [] and tracker.held_back == HeldBack(unconfirmed=1)
    with pytest.raises(ValueError, match=r"timestamps must be finite and increase .* got 1.0 after 1.0"):
        tracker.update([person], 1.0)
    with pytest.raises(ValueError, match=r"person 1 has keypoints of shape \(6, 3\); .*'coco' gives \(17, 3\)"):
        tracker.update([person, found_person(np.zeros((6, 2)), np.ones(6, bool))], 2.0)
    # the refused calls left the new track as it was: its second frame holds it back, its third confirms it
    assert tracker.update([person], 2.0) == [] and tracker.held_back == HeldBack(unconfirmed=1)
    assert [p.track_id for p in tracker.update([person], 3.0)] == [1]
    again = PoseTracker(COCO)  # a new track ends at its first miss: the person starts over, three frames again
    assert again.update([person], 1.0) == again.update([], 2.0) == again.update([person], 3.0) == []
    assert again.update([person], 4.0) == [] and [p.track_id for p in again.update([person], 5.0)] == [1]


def test_identity_metrics_on_a_case_counted_by_hand():
    """Two people in each of four frames. Frame 0: both found (1 as id 7, 2 as id 8); frame 1: the ids swap; frame 2:
    person 2 missed; frame 3: as frame 1, plus a false person far away (id 9). Counted by hand: 8 truths, 1 miss,
    1 false person, 2 switches (both in frame 1; frames 2 and 3 keep frame 1's ids): MOTA = 1 - (1 + 1 + 2) / 8 =
    0.5. IDF1: 8 people found; the best one-to-one ids are 1 <-> 8 (frames 1, 2, 3) and 2 <-> 7 (frames 1, 3):
    IDTP = 5, IDF1 = 2 x 5 / (8 + 8) = 0.625."""
    a = np.array([[0.0, 0], [10, 0], [0, 30], [10, 30], [5, 60]])  # a five-keypoint figure
    skeleton_sigmas = np.full(5, 0.1)
    b, far = a + (100, 0), a + (300, 200)
    truth = Truth(np.array([1, 2]), np.stack([a, b]), np.ones((2, 5), bool))
    person = {"a": a, "b": b, "far": far}

    def found(pairs):
        return [dataclasses.replace(found_person(person[k], np.ones(5, bool)), track_id=i) for k, i in pairs]

    tracked = [found([("a", 7), ("b", 8)]), found([("a", 8), ("b", 7)]), found([("a", 8)]),
               found([("a", 8), ("b", 7), ("far", 9)])]  # fmt: skip
    metrics, matched = identity_metrics([([truth] * 4, tracked)], skeleton_sigmas)
    assert metrics["truths"] == 8 and metrics["misses"] == 1 and metrics["false_people"] == 1
    assert metrics["switches"] == 2
    assert metrics["mota"] == pytest.approx(0.5)
    assert metrics["idf1"] == pytest.approx(0.625)
    assert matched[0][3] == {0: 1, 1: 2}  # the false person matched nobody


def test_tracking_bench_prints_its_four_tables(capsys):
    assert tracking.main(["--videos", "1", "--frames", "30", "--timing-frames", "12", "--crowd", "1",
                          "--crowd-frames", "20", "track.min_hits=2"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "2 synthetic videos" in out and "min_hits=2" in out
    rows = re.findall(r"^ground truth \+ noise 2 px \| smoothing (off|on) \| (\d+) \| ([0-9.]+) \| ([0-9.]+) \|", out,
                      re.M)  # fmt: skip
    assert "people per frame" in out
    assert [r[0] for r in rows] == ["off", "on"] and all(0 < float(r[3]) <= 1 for r in rows)
    crowd = re.findall(r"^this \| (\d+|all) \| (\d+) \| (-?[0-9.]+) \| ([0-9.]+) \|", out, re.M)
    assert [c[0] for c in crowd] == ["10", "20", "30", "all"] and all(0 < float(c[3]) <= 1 for c in crowd)
    timed = re.findall(r"^this \| (\d+) \| ([0-9.]+) \(([0-9.]+)\) \| ([0-9.]+) \(([0-9.]+)\)$", out, re.M)
    assert [int(t[0]) for t in timed] == [1, 10, 50]
