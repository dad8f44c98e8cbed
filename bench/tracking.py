"""Tracking on synthetic videos with known identities: identities, keypoint steadiness, and the tracker's time.

    python -m bench.tracking [--ckpt runs/quickstart/best.pt] [--videos 4 --frames 150 --people 5 --seed 0]
                             [--noise 2.0] [track.min_hits=3 ...]

The videos: ``--videos`` random ones of data/synthetic_video.py (figures walking both ways, crossing, hiding one
another, entering and leaving; 320x240 at 30 fps) and its crossing video (two figures, one hidden for 5 frames).
People come from two sources: the ground truth with noise added (each visible keypoint moved by N(0, ``--noise``
px), 5 % of them dropped, 2 % of people missed, a false person on 5 % of frames), and, with ``--ckpt``, a trained
network's output on the drawn frames (``PoseEstimator`` with the checkpoint's eval settings). Prints (one table
each; docs/benchmarks.md#tracking):

1. identities (PoseTracker, ``track.*`` settings): identity switches, MOTA and IDF1 (py-motmetrics), misses and
   false people. A ground-truth person of a frame is one with at least 3 visible keypoints; a person found
   matches one when their OKS is at least 0.5 (the sigmas, over the visible ground-truth keypoints, scale: the
   area of their box);
2. keypoints, smoothing off and on: jitter (mean |x[t+1] - 2 x[t] + x[t-1]| over the keypoints found in three
   frames in a row of a track, px/frame^2; the walkers' own motion has some), lag (frames: the time shift of the
   walkers' exact paths that fits the output best, positive when the output is late) and error (px to the exact
   keypoints);
3. the time of ``PoseTracker.update`` per frame at 1, 10 and 50 people (ground truth with noise, everyone in view;
   wall clock and CPU time of this one process: NumPy's element-wise work and SciPy's assignment run on one thread).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import time
from collections.abc import Sequence

import motmetrics
import numpy as np
from scipy.optimize import linear_sum_assignment

from config.loader import add_config_arguments, config_from_args
from config.schema import TrackConfig
from config.skeleton import Skeleton
from data.synthetic_video import SyntheticVideo, crossing_video, random_video
from evaluate.predictor import Person, PoseEstimator, keypoint_box
from evaluate.track import PoseTracker
from utils.errors import cli_main

MIN_GT_KEYPOINTS = 3  # visible keypoints of a ground-truth person
MATCH_OKS = 0.5
KEYPOINT_DROP, PERSON_DROP, FALSE_PERSON = 0.05, 0.02, 0.05
LAG_GRID = np.arange(-3.0, 3.0001, 0.05)  # frames
TIMED_PEOPLE = (1, 10, 50)


@dataclasses.dataclass
class Truth:
    """One frame's ground-truth people: identities (N,), keypoints (N, K, 2), visible (N, K)."""

    ids: np.ndarray
    xy: np.ndarray
    visible: np.ndarray


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


def noisy_people(truth: Truth, rng: np.random.Generator, noise_px: float, size_hw: tuple[int, int]) -> list[Person]:
    """What a detector with ``noise_px`` of keypoint noise might find: the visible keypoints moved, some dropped,
    some people missed, now and then a false person (a moved copy of someone's pose, or of a random place)."""
    people = []
    for xy, visible in zip(truth.xy, truth.visible):
        if rng.random() < PERSON_DROP:
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


def track(frames: Sequence[Sequence[Person]], fps: float, skeleton: Skeleton, cfg: TrackConfig) -> list[list[Person]]:
    tracker = PoseTracker(skeleton, cfg)
    return [tracker.update(people, i / fps) for i, people in enumerate(frames)]


def oks_matrix(truth: Truth, people: Sequence[Person], sigmas: np.ndarray) -> np.ndarray:
    """(N, P) OKS of ground-truth people and people found, over each truth's visible keypoints."""
    if not len(truth.ids) or not people:
        return np.zeros((len(truth.ids), len(people)))
    hyp = np.array([p.keypoints for p in people])  # (P, K, 3)
    found = hyp[:, :, 2] > 0
    box = np.where(truth.visible[..., None], truth.xy, np.nan)
    area = np.prod(np.nanmax(box, 1) - np.nanmin(box, 1), axis=1)  # (N,)
    d2 = ((truth.xy[:, None] - np.nan_to_num(hyp[None, :, :, :2])) ** 2).sum(-1)  # (N, P, K)
    e = np.exp(-d2 / (2 * np.maximum(area, 1.0)[:, None, None] * (2 * sigmas) ** 2))
    counted = truth.visible[:, None, :]
    return np.where(counted & found[None], e, 0.0).sum(-1) / np.maximum(counted.sum(-1), 1)


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
            oks = oks_matrix(truth, people, sigmas)
            allowed = oks >= MATCH_OKS
            acc.update(truth.ids.tolist(), [p.track_id for p in people], np.where(allowed, 1 - oks, np.nan))
            rows, cols = linear_sum_assignment(np.where(allowed, 1 - oks, 1e6))
            matched[-1].append({int(c): int(truth.ids[r]) for r, c in zip(rows, cols) if allowed[r, c]})
        accumulators.append(acc)
    names = ["num_switches", "mota", "idf1", "num_misses", "num_false_positives", "num_objects"]
    summary = motmetrics.metrics.create().compute_many(
        accumulators, metrics=names, names=[str(i) for i in range(len(runs))], generate_overall=True
    ).loc["OVERALL"]
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


def timing(people: int, frames: int, noise_px: float, skeleton: Skeleton, cfg: TrackConfig, seed: int):
    """(wall ms, CPU ms) of one PoseTracker.update per frame with ``people`` in view (after 10 warm-up frames)."""
    rng = np.random.default_rng(seed)
    size = (720, 1280)
    video = random_video(rng, frames, people, size, skeleton=skeleton)
    walkers = [dataclasses.replace(w, enter_s=0.0, leave_s=math.inf, start=tuple(rng.uniform((0, 0), size[::-1])))
               for w in video.walkers]  # fmt: skip
    inputs = [[found_person(w.keypoints(i / video.fps) + rng.normal(0, noise_px, (skeleton.num_dataset_keypoints, 2)),
                       np.ones(skeleton.num_dataset_keypoints, bool)) for w in walkers]
              for i in range(frames)]  # fmt: skip
    tracker = PoseTracker(skeleton, cfg)
    wall = cpu = 0.0
    for i, found in enumerate(inputs):
        w0, c0 = time.perf_counter(), time.process_time()
        tracker.update(found, i / video.fps)
        if i >= 10:
            wall += time.perf_counter() - w0
            cpu += time.process_time() - c0
    n = max(frames - 10, 1)
    return wall / n * 1000, cpu / n * 1000


def videos(count: int, frames: int, people: int, seed: int) -> list[tuple[str, SyntheticVideo]]:
    out = [(f"random {i}", random_video(np.random.default_rng([seed, i]), frames, people)) for i in range(count)]
    return out + [("crossing", crossing_video(hidden_frames=5))]


@cli_main
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.tracking", description=__doc__.split("\n\n")[0])
    p.add_argument("--ckpt", help="a trained checkpoint: also track its people on the drawn frames")
    p.add_argument("--videos", type=int, default=4, help="random videos (the crossing video comes on top)")
    p.add_argument("--frames", type=int, default=150)
    p.add_argument("--people", type=int, default=5)
    p.add_argument("--noise", type=float, default=2.0, help="keypoint noise of the ground truth source, px")
    p.add_argument("--timing-frames", type=int, default=200)
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
        good = sum(int((oks_matrix(t, people, sigmas) >= MATCH_OKS).any(0).sum())
                   for ts, frames in zip(truths, per_clip) for t, people in zip(ts, frames))  # fmt: skip
        low = sum(p.score < cfg.min_score for p in found)
        print(f"{name}: {len(found) / num_frames:.2f} people per frame, {good / max(len(found), 1):.1%} of them "
              f"matching a ground-truth person, {low / max(len(found), 1):.1%} scored below track.min_score")
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
    print("\npeople | update ms/frame, smoothing off (CPU ms) | smoothing on (CPU ms)")
    for n in TIMED_PEOPLE:
        off = timing(n, args.timing_frames, args.noise, skeleton, dataclasses.replace(cfg, smooth=False), args.seed)
        on = timing(n, args.timing_frames, args.noise, skeleton, dataclasses.replace(cfg, smooth=True), args.seed)
        print(f"{n} | {off[0]:.3f} ({off[1]:.3f}) | {on[0]:.3f} ({on[1]:.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
