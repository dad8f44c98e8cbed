"""Tracking on synthetic videos with known identities: identities, keypoint steadiness, crowds, the tracker's time.

    python -m bench.tracking [--ckpt runs/quickstart/best.pt] [--videos 4 --frames 150 --people 5 --seed 0]
                             [--noise 2.0] [--crowd 2 --crowd-noise 2.0] [--versus CHECKOUT] [track.min_hits=3 ...]

The videos: ``--videos`` random ones of data/synthetic_video.py (figures walking both ways, crossing, hiding one
another, entering and leaving; 320x240 at 30 fps) and its crossing video (two figures, one hidden for 5 frames).
People come from two sources: the ground truth with noise added (each visible keypoint moved by N(0, ``--noise``
px), 5 % of them dropped, 2 % of people missed, a false person on 5 % of frames), and, with ``--ckpt``, a trained
network's output on the drawn frames (``PoseEstimator`` with the checkpoint's eval settings). Prints (one table
each; docs/benchmarks.md#tracking):

1. identities (PoseTracker, ``track.*`` settings): identity switches, MOTA and IDF1 (py-motmetrics), misses and
   false people. A ground-truth person of a frame is one with at least 3 visible keypoints; a person found
   matches one when their OKS is at least 0.5 (evaluate/metrics/oks.py, the sigmas, over the visible ground-truth
   keypoints, scale: the area of their box);
2. keypoints, smoothing off and on: jitter (mean |x[t+1] - 2 x[t] + x[t-1]| over the keypoints found in three
   frames in a row of a track, px/frame^2; the walkers' own motion has some), lag (frames: the time shift of the
   walkers' exact paths that fits the output best, positive when the output is late) and error (px to the exact
   keypoints);
3. crowds (``--crowd`` scenes for each of 10, 20 and 30 people, ``crowd_scene``; no pictures: the ground truth with
   ``--crowd-noise`` px of noise, 5 % of keypoints dropped, runs of 1-5 missed frames, a false person on 5 % of
   frames): the identities of table 1 per number of people, and for whole and partial people apart the track ids
   per person and the share of their frames tracked. Scale of the ground truth: the box of the whole pose, also
   for people seen in part;
4. the time of ``PoseTracker.update`` per frame at 1, 10 and 50 people (ground truth with noise, everyone in view;
   wall clock and CPU time of this one process: NumPy's element-wise work and SciPy's assignment run on one thread).

``--versus CHECKOUT``: that checkout's evaluate/track.py (the rest of the code is this one's) is measured beside
this one's in tables 3 and 4 (before and after a change to the tracker).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import math
import time
from collections.abc import Sequence
from pathlib import Path

import motmetrics
import numpy as np
from scipy.optimize import linear_sum_assignment

from simplepose.codec.person import Person, keypoint_box
from simplepose.config.config_file import add_config_arguments, config_from_args
from simplepose.config.schema import TrackConfig
from simplepose.config.skeleton import Skeleton
from simplepose.data.synthetic_clips import SyntheticVideo, Walker, crossing_video, random_video, walker_poses
from simplepose.data.synthetic_images import COCO as COCO_PERSON_SKELETON
from simplepose.data.synthetic_images import COCO_PERSON
from simplepose.evaluate.estimator import PoseEstimator
from simplepose.evaluate.metrics.oks import oks_matrix, person_area
from simplepose.evaluate.track import PoseTracker
from simplepose.utils.errors import UserError, cli_main

MIN_GT_KEYPOINTS = 3  # visible keypoints of a ground-truth person
MATCH_OKS = 0.5
KEYPOINT_DROP, PERSON_DROP, FALSE_PERSON = 0.05, 0.02, 0.05
LAG_GRID = np.arange(-3.0, 3.0001, 0.05)  # frames
TIMED_PEOPLE = (1, 10, 50)


@dataclasses.dataclass
class Truth:
    """One frame's ground-truth people: identities (N,), keypoints (N, K, 2), visible (N, K), and the area (N,) px^2
    each is judged at (None: the box of its visible keypoints, as COCO's annotations of whole people)."""

    ids: np.ndarray
    xy: np.ndarray
    visible: np.ndarray
    area: np.ndarray | None = None


def frame_truth(annotations: list[dict], num_keypoints: int) -> Truth:
    """The people of a frame's annotations with at least MIN_GT_KEYPOINTS visible keypoints."""
    ids, xy, visible = [], [], []
    for a in annotations:
        kp = np.asarray(a["keypoints"], np.float64).reshape(num_keypoints, 3)
        if (kp[:, 2] == 2).sum() >= MIN_GT_KEYPOINTS:
            ids.append(a["track_id"])
            xy.append(kp[:, :2])
            visible.append(kp[:, 2] == 2)
    return Truth(np.array(ids, int), np.array(xy).reshape(-1, num_keypoints, 2),
                 np.array(visible, bool).reshape(-1, num_keypoints))  # fmt: skip


def noisy_people(
    truth: Truth, rng: np.random.Generator, noise_px: float, size_hw: tuple[int, int], missed: np.ndarray | None = None
) -> list[Person]:
    """What a detector with ``noise_px`` of keypoint noise might find: the visible keypoints moved, some dropped,
    some people missed, now and then a false person (a moved copy of someone's pose, or of a random place).
    ``missed``: (P,) bool, the people not seen in this frame (a crowd scene's runs of misses); None: each person is
    missed at random (``PERSON_DROP``)."""
    people = []
    for i, (xy, visible) in enumerate(zip(truth.xy, truth.visible)):
        if missed[i] if missed is not None else rng.random() < PERSON_DROP:
            continue
        found = visible & (rng.random(len(visible)) >= KEYPOINT_DROP)
        people.append(found_person(xy + rng.normal(0, noise_px, xy.shape), found))
    if len(truth.ids) and rng.random() < FALSE_PERSON:
        j = int(rng.integers(len(truth.ids)))
        shift = rng.uniform((0, 0), size_hw[::-1]) - np.nanmean(truth.xy[j], 0)
        people.append(found_person(truth.xy[j] + shift, truth.visible[j]))
    return people


def found_person(xy: np.ndarray, found: np.ndarray, score: float = 0.95) -> Person:
    """A ``Person`` with keypoints (K, 2) found where ``found`` (K,), as PoseEstimator gives them (``score`` 0.95: a
    person of a total evidence of 9, tracked at the default ``track.min_score``)."""
    kp = np.zeros((len(xy), 3))
    kp[:, :2] = np.where(found[:, None], xy, np.nan)
    kp[:, 2] = np.where(found, score, 0.0)
    return Person(kp, score, keypoint_box(kp))


def track(frames: Sequence[Sequence[Person]], fps: float, skeleton: Skeleton, cfg: TrackConfig,
          tracker_type: type = PoseTracker) -> list[list[Person]]:  # fmt: skip
    tracker = tracker_type(skeleton, cfg)
    return [tracker.update(people, i / fps) for i, people in enumerate(frames)]


def tracker_of(checkout: str | Path) -> type:
    """The ``PoseTracker`` of another checkout's evaluate/track.py (imported under another name; the rest of the
    project is this one's), to measure it beside this one."""
    path = Path(checkout) / "evaluate" / "track.py"
    if not path.is_file():
        raise UserError(f"--versus {checkout}: no evaluate/track.py there; give a checkout of this project")
    spec = importlib.util.spec_from_file_location("versus_track", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.PoseTracker


def truth_oks(truth: Truth, people: Sequence[Person], sigmas: np.ndarray) -> np.ndarray:
    """(N, P) OKS of ground-truth people and people found (evaluate.metrics.oks, COCO's: over each truth's visible
    keypoints, at ``truth.area``)."""
    if not len(truth.ids) or not people:
        return np.zeros((len(truth.ids), len(people)))
    hyp = np.array([p.keypoints for p in people])  # (P, K, 3)
    found = (hyp[:, :, 2] > 0) & np.isfinite(hyp[:, :, :2]).all(-1)
    area = truth.area if truth.area is not None else person_area(truth.xy, truth.visible, None)
    return oks_matrix(truth.xy, truth.visible, hyp[:, :, :2], found, sigmas, area[:, None], over="a")[0]


def identity_metrics(
    runs: Sequence[tuple[Sequence[Truth], Sequence[Sequence[Person]]]], sigmas: np.ndarray
) -> tuple[dict[str, float], list[list[dict[int, int]]]]:
    """({switches, mota, idf1, misses, false_people, truths} over every (ground truth per frame, tracked people per
    frame) run, one video each; per run and frame {index of a tracked person: the identity it matched})."""
    accumulators, matched = [], []
    for truths, tracked in runs:
        acc = motmetrics.MOTAccumulator(auto_id=True)
        matched.append([])
        for truth, people in zip(truths, tracked):
            oks = truth_oks(truth, people, sigmas)
            allowed = oks >= MATCH_OKS
            acc.update(truth.ids.tolist(), [p.track_id for p in people], np.where(allowed, 1 - oks, np.nan))
            rows, cols = linear_sum_assignment(np.where(allowed, 1 - oks, 1e6))
            matched[-1].append({int(c): int(truth.ids[r]) for r, c in zip(rows, cols) if allowed[r, c]})
        accumulators.append(acc)
    names = ["num_switches", "mota", "idf1", "num_misses", "num_false_positives", "num_objects"]
    summary = (
        motmetrics.metrics.create()
        .compute_many(accumulators, metrics=names, names=[str(i) for i in range(len(runs))], generate_overall=True)
        .loc["OVERALL"]
    )
    keys = ["switches", "mota", "idf1", "misses", "false_people", "truths"]
    return {k: float(summary[n]) for k, n in zip(keys, names)}, matched


def ids_of_identities(tracked: Sequence[Sequence[Person]], matched: Sequence[dict[int, int]]) -> dict[int, set[int]]:
    """Per identity, the track ids of the people matched to it (``identity_metrics``' matches of one run): a single id
    each when nothing switched."""
    ids: dict[int, set[int]] = {}
    for people, match in zip(tracked, matched):
        for j, identity in match.items():
            ids.setdefault(identity, set()).add(people[j].track_id)
    return ids


def keypoint_metrics(runs: Sequence[tuple[SyntheticVideo, Sequence[Sequence[Person]], Sequence[dict[int, int]]]]):
    """{jitter (px/frame^2), lag (frames), error (px)} of the tracked keypoints of each (video, tracked people per
    frame, ``identity_metrics``' matches per frame) against the walkers' exact paths, pooled over the runs."""
    series: dict[tuple[int, int], dict[int, np.ndarray]] = {}  # (run, track id) -> frame -> (K, 2), NaN: not found
    errors = []  # per (run, identity): (lags, points) squared distances of the matched keypoints to the exact ones
    for r, (video, tracked, matched) in enumerate(runs):
        points: dict[int, list[tuple[int, np.ndarray]]] = {}  # identity -> (frame, (K, 2))
        for i, (people, match) in enumerate(zip(tracked, matched)):
            for j, p in enumerate(people):
                series.setdefault((r, p.track_id), {})[i] = p.keypoints[:, :2]
                if j in match:
                    points.setdefault(match[j], []).append((i, p.keypoints[:, :2]))
        walkers = {w.identity: w for w in video.walkers}
        for identity, items in points.items():
            frames = np.array([i for i, _ in items], np.float64)
            xy = np.array([k for _, k in items])  # (F, K, 2)
            exact = np.stack([walkers[identity].keypoints((frames - lag) / video.fps) for lag in LAG_GRID])
            errors.append(((xy[None] - exact) ** 2).sum(-1).reshape(len(LAG_GRID), -1))
    jitter = _jitter(series)
    if not errors:
        return {"jitter": jitter, "lag": math.nan, "error": math.nan}
    d2 = np.concatenate(errors, axis=1)
    d2 = d2[:, ~np.isnan(d2[0])]
    zero = int(np.argmin(np.abs(LAG_GRID)))
    return {"jitter": jitter, "lag": float(LAG_GRID[np.argmin(d2.mean(1))]), "error": float(np.sqrt(d2[zero]).mean())}


def truth_jitter(truths: Sequence[Truth]) -> float:
    """The jitter of the ground truth's visible keypoints themselves (the walkers' own acceleration)."""
    series: dict[int, dict[int, np.ndarray]] = {}  # identity -> frame -> (K, 2)
    for i, truth in enumerate(truths):
        for identity, xy, visible in zip(truth.ids, truth.xy, truth.visible):
            series.setdefault(int(identity), {})[i] = np.where(visible[:, None], xy, np.nan)
    return _jitter(series)


def _jitter(series: dict) -> float:
    """Mean |x[t+1] - 2 x[t] + x[t-1]| (px/frame^2) over the keypoints found in three frames in a row of a series
    (key -> frame -> (K, 2), NaN where not found)."""
    total, count = 0.0, 0
    for frames in series.values():
        for i, xy in frames.items():
            if i - 1 in frames and i + 1 in frames:
                a = np.hypot(*(frames[i + 1] - 2 * xy + frames[i - 1]).T)
                a = a[~np.isnan(a)]
                total, count = total + float(a.sum()), count + len(a)
    return total / count if count else math.nan


def timing(people: int, frames: int, noise_px: float, skeleton: Skeleton, cfg: TrackConfig, seed: int,
           tracker_type: type = PoseTracker):  # fmt: skip
    """(wall ms, CPU ms) of one PoseTracker.update per frame with ``people`` in view (after 10 warm-up frames)."""
    rng = np.random.default_rng(seed)
    size = (720, 1280)
    video = random_video(rng, frames, people, size, skeleton=skeleton)
    walkers = [dataclasses.replace(w, enter_s=0.0, leave_s=math.inf, start=tuple(rng.uniform((0, 0), size[::-1])))
               for w in video.walkers]  # fmt: skip
    inputs = [[found_person(w.keypoints(i / video.fps) + rng.normal(0, noise_px, (skeleton.num_dataset_keypoints, 2)),
                       np.ones(skeleton.num_dataset_keypoints, bool)) for w in walkers]
              for i in range(frames)]  # fmt: skip
    tracker = tracker_type(skeleton, cfg)
    wall = cpu = 0.0
    for i, found in enumerate(inputs):
        w0, c0 = time.perf_counter(), time.process_time()
        tracker.update(found, i / video.fps)
        if i >= 10:
            wall += time.perf_counter() - w0
            cpu += time.process_time() - c0
    n = max(frames - 10, 1)
    return wall / n * 1000, cpu / n * 1000


PARTS = {  # what partial people show, by COCO keypoint name
    "face": ("nose", "left_eye", "right_eye", "left_ear", "right_ear"),
    "upper body": ("nose", "left_eye", "right_eye", "left_ear", "right_ear", "left_shoulder", "right_shoulder",
                   "left_elbow", "right_elbow", "left_wrist", "right_wrist"),
    "left side": ("nose", "left_eye", "left_ear", "left_shoulder", "left_elbow", "left_wrist", "left_hip",
                  "left_knee", "left_ankle"),
    "right side": ("nose", "right_eye", "right_ear", "right_shoulder", "right_elbow", "right_wrist", "right_hip",
                   "right_knee", "right_ankle"),
}  # fmt: skip
CROWD_SIZE, CROWD_FPS = (720, 1280), 30.0
CROWD_PEOPLE = (10, 20, 30)
PARTIAL_SHARE, NEWCOMER_SHARE, GROUP_SHARE, LEAVING_SHARE = 0.35, 0.25, 0.2, 0.25
BESIDE = (0.1, 0.35)  # a newcomer's or a companion's distance to the side of the other one, of that one's height
CROWD_COVER = 0.08  # of the nearer one's height: closer than this, the one behind is hidden (videos: COVER_RADIUS)
MISS_START, MISS_FRAMES = 0.015, (1, 5)  # per person and frame: the chance a run of misses starts, its length


@dataclasses.dataclass
class CrowdScene:
    """A crowded synthetic scene without pictures: ``walkers`` (data/synthetic_video.py's, COCO persons), the
    keypoints each can show (W, K), the frames in which the detector misses each (W, F), and the frame size."""

    walkers: tuple[Walker, ...]
    shown: np.ndarray
    missed: np.ndarray
    num_frames: int
    size: tuple[int, int] = CROWD_SIZE
    fps: float = CROWD_FPS

    @property
    def partial(self) -> set[int]:
        """Identities of the people who show only a part of the body."""
        return {w.identity for w, s in zip(self.walkers, self.shown) if not s.all()}


def crowd_scene(rng: np.random.Generator, num_people: int, num_frames: int = 150) -> CrowdScene:
    """``num_people`` COCO persons 100-220 px tall in a 1280 x 720 picture at 30 fps, in a few horizontal lanes
    walking both ways at 0.2-0.8 of their height per second, so they cross; one whose centre comes within CROWD_COVER
    of a nearer one's height (one at least 0.8 as tall) is hidden, data.synthetic_video's rule for solid bodies with
    a smaller radius: in a crowd the one behind still shows. NEWCOMER_SHARE appear at a random time beside someone in
    view and GROUP_SHARE walk beside a companion from the start (BESIDE: 0.1-0.35 of that one's height to the side),
    a fifth walk in from a side, the rest start in view; LEAVING_SHARE vanish at a random time; PARTIAL_SHARE show
    only their face, their upper body or one side (``PARTS``). The detector misses each person now and then for 1-5
    frames in a row (MISS_START, MISS_FRAMES)."""
    h, w = CROWD_SIZE
    duration = num_frames / CROWD_FPS
    names = COCO_PERSON_SKELETON.dataset_keypoints
    lanes = rng.uniform(0.3 * h, 0.75 * h, max(2, num_people // 6))
    walkers: list[Walker] = []
    for identity in range(1, num_people + 1):
        height = rng.uniform(100, 220)
        direction = rng.choice([-1.0, 1.0])
        velocity = (direction * rng.uniform(0.2, 0.8) * height, 0.0)
        y = rng.choice(lanes) + rng.normal(0, 0.05 * height)
        kind = rng.random()
        enter = 0.0
        if kind < NEWCOMER_SHARE + GROUP_SHARE and walkers:
            newcomer = kind < NEWCOMER_SHARE
            enter = rng.uniform(0.1, 0.8) * duration if newcomer else 0.0
            beside = [v for v in walkers if v.alive(enter) and 0 < v.centre(enter)[0] < w]
            other = beside[int(rng.integers(len(beside)))] if beside else None
            if other is not None:
                side = rng.choice([-1.0, 1.0]) * rng.uniform(*BESIDE) * other.height
                at = other.centre(enter) + (side, rng.normal(0, 0.05 * height))
                if not newcomer:  # walks with the other one
                    velocity = other.velocity
            else:
                at = np.array([rng.uniform(0.1 * w, 0.9 * w), y])
        elif kind < NEWCOMER_SHARE + GROUP_SHARE + 0.2:  # walks in from outside the side it comes from
            enter = rng.uniform(0, duration / 2)
            at = np.array([-0.4 * height if direction > 0 else w + 0.4 * height, y])
        else:
            at = np.array([rng.uniform(0.05 * w, 0.95 * w), y])
        start = tuple(at - np.asarray(velocity) * enter)
        leave = enter + rng.uniform(duration / 4, duration) if rng.random() < LEAVING_SHARE else math.inf
        walkers.append(Walker(identity, walker_poses(rng, COCO_PERSON), height, start, velocity,
                              gait_hz=rng.uniform(0.8, 1.5), phase=rng.uniform(0, 2 * math.pi), depth=rng.uniform(),
                              seed=identity, enter_s=enter, leave_s=leave))  # fmt: skip
    shown = np.ones((num_people, len(names)), bool)
    kinds = list(PARTS)
    for i in np.flatnonzero(rng.random(num_people) < PARTIAL_SHARE):
        shown[i] = np.isin(names, PARTS[kinds[int(rng.integers(len(kinds)))]])
    missed = np.zeros((num_people, num_frames), bool)
    for i in range(num_people):
        for f in np.flatnonzero(rng.random(num_frames) < MISS_START):
            missed[i, f : f + int(rng.integers(MISS_FRAMES[0], MISS_FRAMES[1] + 1))] = True
    return CrowdScene(tuple(walkers), shown, missed, num_frames)


def crowd_truth(scene: CrowdScene, index: int) -> tuple[Truth, np.ndarray]:
    """(the ground truth of frame ``index``: people in view, not hidden, with at least MIN_GT_KEYPOINTS keypoints
    shown inside the picture, each judged at the box area of its whole pose; whether the detector misses each)."""
    t = index / scene.fps
    h, w = scene.size
    alive = np.array([v.alive(t) for v in scene.walkers])
    centre = np.array([v.centre(t) for v in scene.walkers])
    height = np.array([v.height for v in scene.walkers])
    depth = np.array([v.depth for v in scene.walkers])
    gap = np.hypot(*(centre[:, None] - centre[None]).transpose(2, 0, 1))  # (W, W): [hidden one, nearer one]
    covers = alive[None] & (depth[None] > depth[:, None]) & (height[None] >= 0.8 * height[:, None])
    hidden = (covers & (gap < CROWD_COVER * height[None])).any(1)
    xy = np.array([v.keypoints(t) for v in scene.walkers])  # (W, K, 2)
    inside = (xy[..., 0] >= 0) & (xy[..., 0] < w) & (xy[..., 1] >= 0) & (xy[..., 1] < h)
    visible = scene.shown & inside
    keep = np.flatnonzero(alive & ~hidden & (visible.sum(1) >= MIN_GT_KEYPOINTS))
    whole = np.prod(xy[keep].max(1) - xy[keep].min(1), axis=1)
    ids = np.array([scene.walkers[i].identity for i in keep], int)
    return Truth(ids, xy[keep], visible[keep], whole), scene.missed[keep, index]


def crowd_runs(count: int, frames: int, noise_px: float, seed: int):
    """Per number of people (CROWD_PEOPLE): ``count`` scenes, each (scene, truths per frame, people per frame)."""
    runs = {}
    for n in CROWD_PEOPLE:
        runs[n] = []
        for i in range(count):
            scene = crowd_scene(np.random.default_rng([seed, n, i]), n, frames)
            rng = np.random.default_rng([seed, n, i, 1])
            truths, people = [], []
            for f in range(frames):
                truth, missed = crowd_truth(scene, f)
                truths.append(truth)
                people.append(noisy_people(truth, rng, noise_px, scene.size, missed))
            runs[n].append((scene, truths, people))
    return runs


def partial_figures(runs, tracked_runs, sigmas) -> dict[str, tuple[float, float]]:
    """{"whole" / "partial": (track ids per person, share of the person's frames tracked)} over the runs."""
    ids_per, frames_per = {"whole": [], "partial": []}, {"whole": [], "partial": []}
    for (scene, truths, _), tracked in zip(runs, tracked_runs):
        _, matched = identity_metrics([(truths, tracked)], sigmas)
        ids = ids_of_identities(tracked, matched[0])
        seen = {int(i): 0 for t in truths for i in t.ids}
        for t in truths:
            for i in t.ids:
                seen[int(i)] += 1
        hits = {i: 0 for i in seen}
        for match in matched[0]:
            for identity in match.values():
                hits[identity] += 1
        for identity, count in seen.items():
            group = "partial" if identity in scene.partial else "whole"
            ids_per[group].append(len(ids.get(identity, ())))
            frames_per[group].append(hits[identity] / count)
    return {g: (float(np.mean(ids_per[g])) if ids_per[g] else math.nan,
                float(np.mean(frames_per[g])) if frames_per[g] else math.nan) for g in ids_per}  # fmt: skip


def videos(count: int, frames: int, people: int, seed: int) -> list[tuple[str, SyntheticVideo]]:
    out = [(f"random {i}", random_video(np.random.default_rng([seed, i]), frames, people)) for i in range(count)]
    return out + [("crossing", crossing_video(hidden_frames=5))]


def crowd_table(count: int, frames: int, noise_px: float, seed: int, skeleton: Skeleton, cfg: TrackConfig,
                trackers: dict[str, type]) -> None:  # fmt: skip
    """Prints the identities table of the crowded scenes (``crowd_scene``), per tracker and number of people."""
    runs = crowd_runs(count, frames, noise_px, seed)
    sigmas = np.asarray(skeleton.sigmas)
    people = {n: sum(len(t.ids) for _, truths, _ in r for t in truths) for n, r in runs.items()}
    partial = sum(len(scene.partial) for r in runs.values() for scene, _, _ in r)
    total = sum(len(scene.walkers) for r in runs.values() for scene, _, _ in r)
    print(f"\ncrowded scenes: {count} per number of people, {frames} frames each at {CROWD_FPS:g} fps, "
          f"{CROWD_SIZE[1]} x {CROWD_SIZE[0]}; {total} people, {partial} of them partial (face, upper body or one "
          f"side); keypoint noise {noise_px:g} px, runs of 1-5 missed frames; ground-truth people per frame: "
          + ", ".join(f"{n} people: {people[n] / (count * frames):.1f}" for n in runs))  # fmt: skip
    print(
        "tracker | people | ID switches | MOTA | IDF1 | misses | false | track ids per person, whole / partial | "
        "frames tracked, whole / partial"
    )
    for label, tracker_type in trackers.items():
        pooled = []
        for n, scenes in [*runs.items(), ("all", [s for r in runs.values() for s in r])]:
            tracked = [track(p, CROWD_FPS, skeleton, cfg, tracker_type) for _, _, p in scenes]
            ids, _ = identity_metrics([(truths, t) for (_, truths, _), t in zip(scenes, tracked)], sigmas)
            parts = partial_figures(scenes, tracked, sigmas)
            pooled.append(ids)
            print(f"{label} | {n} | {ids['switches']:.0f} | {ids['mota']:.3f} | {ids['idf1']:.3f} | "
                  f"{ids['misses']:.0f} | {ids['false_people']:.0f} | {parts['whole'][0]:.2f} / "
                  f"{parts['partial'][0]:.2f} | {parts['whole'][1]:.1%} / {parts['partial'][1]:.1%}")  # fmt: skip


@cli_main
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.tracking", description=__doc__.split("\n\n")[0])
    p.add_argument("--ckpt", help="a trained checkpoint: also track its people on the drawn frames")
    p.add_argument("--videos", type=int, default=4, help="random videos (the crossing video comes on top)")
    p.add_argument("--frames", type=int, default=150)
    p.add_argument("--people", type=int, default=5)
    p.add_argument("--noise", type=float, default=2.0, help="keypoint noise of the ground truth source, px")
    p.add_argument("--timing-frames", type=int, default=200)
    p.add_argument("--crowd", type=int, default=2, help="crowded scenes per number of people (10, 20, 30); 0: none")
    p.add_argument("--crowd-frames", type=int, default=150)
    p.add_argument("--crowd-noise", type=float, default=2.0, help="keypoint noise in the crowded scenes, px")
    p.add_argument("--versus", metavar="CHECKOUT", help="another checkout: its evaluate/track.py measured beside this "
                                                        "one's (crowded scenes and time)")  # fmt: skip
    p.add_argument("--seed", type=int, default=0)
    add_config_arguments(p)
    args = p.parse_args(argv)
    cfg = config_from_args(args).track
    clips = videos(args.videos, args.frames, args.people, args.seed)
    skeleton = clips[0][1].skeleton
    sigmas = np.asarray(skeleton.sigmas)
    rendered = [[video.frame(i) for i in range(video.num_frames)] for _, video in clips]
    truths = [[frame_truth(anns, skeleton.num_dataset_keypoints) for _, anns in frames] for frames in rendered]
    rng = np.random.default_rng(args.seed)
    sources = {f"ground truth + noise {args.noise:g} px": [
        [noisy_people(t, rng, args.noise, video.size) for t in clip_truths]
        for (_, video), clip_truths in zip(clips, truths)]}  # fmt: skip
    if args.ckpt:
        estimator = PoseEstimator.from_checkpoint(args.ckpt, device="cpu")
        sources[f"network {args.ckpt}"] = [[estimator(image) for image, _ in frames] for frames in rendered]
    num_frames = sum(video.num_frames for _, video in clips)
    print(f"{len(clips)} synthetic videos, {num_frames} frames at 30 fps, "
          f"{sum(len(t.ids) for ts in truths for t in ts)} ground-truth people; track: {cfg}")  # fmt: skip
    print(f"ground truth's own jitter: {truth_jitter([t for ts in truths for t in ts]):.2f} px/frame^2")
    print("\nsource | tracker | ID switches | MOTA | IDF1 | misses | false | jitter px/frame^2 | lag frames | error px")
    for name, per_clip in sources.items():
        found = [p for frames in per_clip for people in frames for p in people]
        good = sum(int((truth_oks(t, people, sigmas) >= MATCH_OKS).any(0).sum())
                   for ts, frames in zip(truths, per_clip) for t, people in zip(ts, frames))  # fmt: skip
        low = sum(p.score < cfg.min_score for p in found)
        print(
            f"{name}: {len(found) / num_frames:.2f} people per frame, {good / max(len(found), 1):.1%} of them "
            f"matching a ground-truth person, {low / max(len(found), 1):.1%} scored below track.min_score"
        )
        runs = {f"smoothing {w}": dataclasses.replace(cfg, smooth=w == "on") for w in ("off", "on")}
        if cfg.min_score > -math.inf and low:
            runs["every person (min_score=-inf)"] = dataclasses.replace(cfg, smooth=False, min_score=-math.inf)
        for label, settings in runs.items():
            tracked = [track(frames, video.fps, skeleton, settings) for frames, (_, video) in zip(per_clip, clips)]
            ids, matched = identity_metrics(list(zip(truths, tracked)), sigmas)
            kp = keypoint_metrics([(video, t, m) for (_, video), t, m in zip(clips, tracked, matched)])
            print(f"{name} | {label} | {ids['switches']:.0f} | {ids['mota']:.3f} | {ids['idf1']:.3f} | "
                  f"{ids['misses']:.0f} | {ids['false_people']:.0f} | {kp['jitter']:.2f} | {kp['lag']:+.2f} | "
                  f"{kp['error']:.2f}")  # fmt: skip
    trackers = {"this": PoseTracker} | ({f"--versus {args.versus}": tracker_of(args.versus)} if args.versus else {})
    if args.crowd:
        crowd_table(args.crowd, args.crowd_frames, args.crowd_noise, args.seed, skeleton, cfg, trackers)
    print("\ntracker | people | update ms/frame, smoothing off (CPU ms) | smoothing on (CPU ms)")
    for n in TIMED_PEOPLE:
        for label, tracker_type in trackers.items():
            off, on = (timing(n, args.timing_frames, args.noise, skeleton, dataclasses.replace(cfg, smooth=smooth),
                              args.seed, tracker_type) for smooth in (False, True))  # fmt: skip
            print(f"{label} | {n} | {off[0]:.3f} ({off[1]:.3f}) | {on[0]:.3f} ({on[1]:.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
