"""Identities across a video's frames and steadier keypoints: people in, the same people with ``track_id`` out.

    tracker = PoseTracker(estimator.skeleton, TrackConfig(smooth=True))
    for t, image in frames:  # t: the frame's time, seconds
        people = tracker.update(estimator(image), t)  # list[Person], each with .track_id

Any skeleton: the OKS uses its sigmas. ``update`` (docs/design.md#tracking):

1. leaves out people scored below ``min_score`` (the decoder's fragments) and moves each track's last pose on by the
   track's velocity to the frame's time;
2. scores every (person, track) pair: the OKS over the keypoints found in both (scale: the larger area of the two
   keypoint boxes, so that a person half in view is not judged at half size), or the IoU of their boxes where
   fewer than ``min_shared_keypoints`` are found in both; a pair under ``min_oks`` / ``min_iou`` may not match;
3. matches the people to the confirmed tracks (those with an id, seen or lost) first, then the rest to the new
   tracks, each as an assignment problem (``scipy.optimize.linear_sum_assignment``: as many allowed pairs as
   possible, then the highest total similarity), so that a track takes one person and a person one track;
4. starts a new track for each person left over; a new track gets an id (1, 2, ... never reused) once matched in
   ``min_hits`` frames in a row, and ends at its first miss before that; a confirmed track unmatched for more than
   ``max_lost_frames`` frames ends;
5. returns the people of confirmed tracks in the order given, keypoints One-Euro smoothed when ``smooth``
   (else the detector's, unchanged); people of new tracks wait until their track is confirmed.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

import numpy as np
from scipy.optimize import linear_sum_assignment

from config.loader import check_track
from config.schema import TrackConfig
from config.skeleton import Skeleton
from evaluate.predictor import Person

LOG = logging.getLogger(__name__)

_NOT_ALLOWED = 1e6  # the cost of a pair that may not match: above any sum of allowed costs (each at most 1)
_VELOCITY_MEMORY = 0.5  # weight of the old velocity when a new match measures one


def one_euro(
    state: tuple[np.ndarray, np.ndarray, np.ndarray],
    points: np.ndarray,
    found: np.ndarray,
    t: float,
    cfg: TrackConfig,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One step of the One-Euro filter (Casiez, Roussel and Vogel, CHI 2012) of points (x, y), each with its own
    last time: the new state (x, dx, last time) of shapes (..., K, 2), (..., K, 2), (..., K) after the samples
    ``points`` (..., K, 2) found where ``found`` (..., K) at time ``t`` (s).

    A first-order low-pass filter whose cutoff rises with the point's speed: cutoff = ``cfg.min_cutoff`` +
    ``cfg.beta`` x speed (Hz; speed in px/s, itself low-passed at ``cfg.derivative_cutoff``). At rest the low
    cutoff removes jitter; moving fast, the higher one follows with little lag. A step spans the time since the
    point's last sample, so it holds at any frame rate. A point not found keeps its state as it was (its next
    sample spans the gap); a point's first sample (last time NaN) is taken as it is. The state's x, where found,
    is the filtered position.
    """
    x, dx, last = state
    first = np.isnan(last)
    dt = np.where(first, 1.0, t - last)[..., None]  # > 0: the tracker checks that time goes forward
    p = np.where(found[..., None], points, x)  # a missing point's NaN never enters the arithmetic
    new_dx = _weight(cfg.derivative_cutoff, dt) * ((p - x) / dt - dx) + dx
    cutoff = cfg.min_cutoff + cfg.beta * np.sqrt(new_dx[..., 0] ** 2 + new_dx[..., 1] ** 2)
    new_x = _weight(cutoff[..., None], dt) * (p - x) + x
    take, start = found[..., None], (found & first)[..., None]
    return (np.where(start, p, np.where(take, new_x, x)), np.where(start, 0.0, np.where(take, new_dx, dx)),
            np.where(found, t, last))  # fmt: skip


def _weight(cutoff_hz, dt_s):
    """Weight of a new sample in a first-order low-pass filter at ``cutoff_hz`` after ``dt_s`` seconds."""
    r = (2 * math.pi) * cutoff_hz * dt_s
    return r / (r + 1)


class OneEuroFilter:
    """``one_euro`` on one series of K points: ``smoothed = f(points (K, 2), found (K,), t)``, NaN where not found
    (the filter the tracker runs on each track's keypoints, for use on its own; ``cfg``'s One-Euro settings)."""

    def __init__(self, num_points: int, cfg: TrackConfig | None = None):
        self.cfg = cfg if cfg is not None else TrackConfig()
        self.state = (np.zeros((num_points, 2)), np.zeros((num_points, 2)), np.full(num_points, np.nan))

    def __call__(self, points: np.ndarray, found: np.ndarray, t: float) -> np.ndarray:
        found = np.asarray(found, bool)
        if np.any(found & (t <= self.state[2])):
            raise ValueError(f"OneEuroFilter: time {t} s is not after a point's last sample {np.nanmax(self.state[2])}")
        self.state = one_euro(self.state, np.asarray(points, np.float64), found, t, self.cfg)
        return np.where(found[:, None], self.state[0], np.nan)


class PoseTracker:
    """Track ids for the people of a video's frames, one frame at a time (module docstring; any skeleton).

    ``cfg``: a ``TrackConfig`` (default settings when None; ``python -m evaluate.demo`` takes ``track.*=...``).
    Tracks are held as arrays over tracks, so that a frame costs a few dozen NumPy calls, not a few per person.
    """

    def __init__(self, skeleton: Skeleton, cfg: TrackConfig | None = None):
        self.cfg = cfg if cfg is not None else TrackConfig()
        check_track(self.cfg)
        self.skeleton = skeleton
        self._k2 = (2 * np.asarray(skeleton.sigmas, np.float64)) ** 2  # COCO's OKS constant per keypoint
        self.reset()

    def reset(self) -> None:
        """Forget every track (a new video); ids start at 1 again."""
        k = self.skeleton.num_dataset_keypoints
        self._xy = np.zeros((0, k, 2))  # the last matched person's keypoints (the detector's), NaN: not found
        self._found = np.zeros((0, k), bool)
        self._time = np.zeros(0)  # of the last match, s
        self._velocity = np.zeros((0, 2))  # px/s: of the keypoints found in two successive matches
        self._moving = np.zeros(0, bool)  # the velocity was measured
        self._hits = np.zeros(0, np.int64)  # frames matched (in a row while new)
        self._lost = np.zeros(0, np.int64)  # frames since the last match
        self._ids = np.zeros(0, np.int64)  # 0 while new
        self._smooth = (np.zeros((0, k, 2)), np.zeros((0, k, 2)), np.zeros((0, k)))  # one_euro's state
        self._next_id = 1
        self._last: float | None = None

    @property
    def num_tracks(self) -> tuple[int, int, int]:
        """(tracks seen in the last frame, lost ones still waiting, new ones not yet confirmed)."""
        confirmed = self._ids > 0
        seen = int((confirmed & (self._lost == 0)).sum())
        return seen, int(confirmed.sum()) - seen, int((~confirmed).sum())

    def update(self, people: Sequence[Person], timestamp: float) -> list[Person]:
        """The people of the frame at ``timestamp`` (seconds, increasing) whose track is confirmed, in the order
        given, with ``track_id`` set (and smoothed keypoints and box when ``cfg.smooth``). ``people``: ``Person``
        objects of this skeleton (``PoseEstimator``'s); a person with no keypoint found, or scored below
        ``cfg.min_score``, is not tracked."""
        t = float(timestamp)
        if not math.isfinite(t) or (self._last is not None and t <= self._last):
            raise ValueError(f"PoseTracker.update: timestamps must be finite and increase (seconds); got {timestamp} "
                             f"after {self._last}")  # fmt: skip
        kp, xy, found = self._arrays(people)
        self._last = t
        scores = np.array([p.score for p in people], np.float64)
        present = np.flatnonzero(found.any(1) & (scores >= self.cfg.min_score))
        det, trk = self._match(xy[present], found[present], t)
        det = present[det]
        smoothed = self._move_matched(det, trk, xy, found, t)
        unmatched = np.ones(len(self._ids), bool)
        unmatched[trk] = False
        self._lost[unmatched] += 1
        keep = ~unmatched | ((self._ids > 0) & (self._lost <= self.cfg.max_lost_frames))
        if LOG.isEnabledFor(logging.DEBUG) and (ended := self._ids[~keep & (self._ids > 0)]).size:
            LOG.debug("tracks %s ended: unmatched for over %d frames", ended.tolist(), self.cfg.max_lost_frames)
        owner = np.full(len(people), -1)  # track of each person
        owner[det] = (np.cumsum(keep) - 1)[trk]
        self._keep(keep)
        taken = np.zeros(len(people), bool)
        taken[det] = True
        new = present[~taken[present]]
        owner[new] = len(self._ids) + np.arange(len(new))
        self._start(xy[new], found[new], t)
        confirmed = (self._ids == 0) & (self._hits >= self.cfg.min_hits)
        self._ids[confirmed] = self._next_id + np.arange(int(confirmed.sum()))
        self._next_id += int(confirmed.sum())
        out = present[self._ids[owner[present]] > 0]
        ids = self._ids[owner[out]].tolist()
        if smoothed is None:
            return [Person(people[d].keypoints, people[d].score, people[d].box, i) for d, i in zip(out.tolist(), ids)]
        row = np.full(len(people), -1)  # row of each person in the smoothed keypoints (new tracks: as found)
        row[det], row[new] = np.arange(len(det)), len(det) + np.arange(len(new))
        return self._smoothed_people(people, kp[out], out, np.concatenate([smoothed, xy[new]])[row[out]], ids)

    def _arrays(self, people: Sequence[Person]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """((P, K, 3) keypoints as given, (P, K, 2) with NaN where not found, (P, K) found)."""
        k = self.skeleton.num_dataset_keypoints
        try:
            kp = np.array([p.keypoints for p in people], np.float64) if people else np.zeros((0, k, 3))
        except ValueError:  # people of several shapes
            kp = None
        if kp is None or kp.shape[1:] != (k, 3):
            bad = next(i for i, p in enumerate(people) if np.shape(p.keypoints) != (k, 3))
            raise ValueError(f"PoseTracker.update: person {bad} has keypoints of shape "
                             f"{np.shape(people[bad].keypoints)}; this tracker's skeleton '{self.skeleton.name}' "
                             f"gives ({k}, 3)")  # fmt: skip
        found = (kp[:, :, 2] > 0) & np.isfinite(kp[:, :, 0]) & np.isfinite(kp[:, :, 1])
        return kp, np.where(found[..., None], kp[:, :, :2], np.nan), found

    def _match(self, xy: np.ndarray, found: np.ndarray, t: float) -> tuple[np.ndarray, np.ndarray]:
        """(person indices, track indices) of the matched pairs: confirmed tracks first, then new ones."""
        none = np.zeros(0, np.intp)
        if not len(xy) or not len(self._ids):
            return none, none
        predicted = self._xy + self._velocity[:, None] * (t - self._time)[:, None, None]
        similarity, allowed = pair_similarity(xy, found, predicted, self._found, self._k2, self.cfg)
        confirmed = self._ids > 0
        d1, k1 = _assign(similarity, allowed, np.arange(len(xy)), np.flatnonzero(confirmed))
        rest = np.ones(len(xy), bool)
        rest[d1] = False
        d2, k2 = _assign(similarity, allowed, np.flatnonzero(rest), np.flatnonzero(~confirmed))
        return np.concatenate([d1, d2]), np.concatenate([k1, k2])

    def _move_matched(self, det, trk, xy, found, t) -> np.ndarray | None:
        """Move the matched tracks ``trk`` on to their people ``det``; their smoothed keypoints (M, K, 2) (NaN where
        not found) when smoothing."""
        new_xy, new_found = xy[det], found[det]
        both = new_found & self._found[trk]
        count = both.sum(1)
        step = np.where(both[..., None], new_xy - self._xy[trk], 0.0).sum(1) / np.maximum(count, 1)[:, None]
        velocity = step / (t - self._time[trk])[:, None]
        memory = np.where(self._moving[trk], _VELOCITY_MEMORY, 0.0)[:, None]
        old = self._velocity[trk]
        self._velocity[trk] = np.where((count > 0)[:, None], memory * old + (1 - memory) * velocity, old)
        self._moving[trk] |= count > 0
        self._xy[trk], self._found[trk], self._time[trk] = new_xy, new_found, t
        self._hits[trk] += 1
        self._lost[trk] = 0
        if not self.cfg.smooth:
            return None
        state = one_euro(tuple(a[trk] for a in self._smooth), new_xy, new_found, t, self.cfg)
        for whole, part in zip(self._smooth, state):
            whole[trk] = part
        return np.where(new_found[..., None], state[0], np.nan)

    def _keep(self, keep: np.ndarray) -> None:
        if keep.all():
            return
        for name in ("_xy", "_found", "_time", "_velocity", "_moving", "_hits", "_lost", "_ids"):
            setattr(self, name, getattr(self, name)[keep])
        self._smooth = tuple(a[keep] for a in self._smooth)

    def _start(self, xy: np.ndarray, found: np.ndarray, t: float) -> None:
        """New tracks, matched in one frame, for the people (n, K, 2) / (n, K) no track took."""
        n = len(xy)
        if not n:
            return
        added = {"_xy": xy, "_found": found, "_time": np.full(n, t), "_velocity": np.zeros((n, 2)),
                 "_moving": np.zeros(n, bool), "_hits": np.ones(n, np.int64), "_lost": np.zeros(n, np.int64),
                 "_ids": np.zeros(n, np.int64)}  # fmt: skip
        for name, value in added.items():
            setattr(self, name, np.concatenate([getattr(self, name), value]))
        first = (np.where(found[..., None], xy, 0.0), np.zeros_like(xy), np.where(found, t, np.nan))
        self._smooth = tuple(np.concatenate([a, b]) for a, b in zip(self._smooth, first))

    def _smoothed_people(self, people, kp: np.ndarray, chosen: np.ndarray, smoothed, ids: list[int]) -> list[Person]:
        """``people[chosen]`` with their keypoints ``kp`` (n, K, 3) moved to ``smoothed`` (n, K, 2; NaN: as given)."""
        kp[..., :2] = np.where(np.isnan(smoothed), kp[..., :2], smoothed)
        boxes = _boxes(np.where(kp[..., 2:] > 0, kp[..., :2], np.nan)).tolist()
        return [
            Person(k, people[d].score, (x0, y0, x1 - x0, y1 - y0), i)
            for d, k, (x0, y0, x1, y1), i in zip(chosen.tolist(), kp, boxes, ids)
        ]


def _assign(similarity, allowed, rows: np.ndarray, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cols) matched by the assignment of ``rows`` to ``cols`` over the allowed pairs: as many pairs as
    possible, then the highest total similarity."""
    none = np.zeros(0, np.intp)
    if not len(rows) or not len(cols):
        return none, none
    ok = allowed[rows][:, cols]
    if not ok.any():
        return none, none
    r, c = linear_sum_assignment(np.where(ok, 1.0 - similarity[rows][:, cols], _NOT_ALLOWED))
    good = ok[r, c]
    return rows[r[good]], cols[c[good]]


def pair_similarity(
    a_xy: np.ndarray, a_found: np.ndarray, b_xy: np.ndarray, b_found: np.ndarray, k2: np.ndarray, cfg: TrackConfig
) -> tuple[np.ndarray, np.ndarray]:
    """((P, T) similarity, (P, T) may-match) of P poses ``a`` and T poses ``b`` ((n, K, 2) px, NaN where not found;
    (n, K) found): the OKS over the keypoints found in both (``k2``: (K,) (2 sigma)^2, scale: the larger of the two
    keypoint boxes' areas) where at least ``cfg.min_shared_keypoints`` are, else the IoU of the boxes."""
    shared = a_found[:, None, :] & b_found[None, :, :]  # (P, T, K)
    count = shared.sum(-1)
    diff = a_xy[:, None] - b_xy[None]  # NaN where either is not found: left out by `shared`
    d2 = diff[..., 0] ** 2 + diff[..., 1] ** 2  # (a sum over a last axis of 2 is several times slower)
    a_box, b_box = _boxes(a_xy), _boxes(b_xy)
    a_area, b_area = _area(a_box), _area(b_box)
    scale2 = np.maximum(np.maximum.outer(a_area, b_area), 1.0)  # px^2
    e = np.exp(d2 / (-2 * scale2[..., None] * k2))
    oks = np.where(shared, e, 0.0).sum(-1) / np.maximum(count, 1)
    by_oks = count >= cfg.min_shared_keypoints
    if by_oks.all():
        return oks, oks >= cfg.min_oks
    lo = np.maximum(a_box[:, None, :2], b_box[None, :, :2])
    hi = np.minimum(a_box[:, None, 2:], b_box[None, :, 2:])
    side = np.clip(hi - lo, 0, None)
    inter = side[..., 0] * side[..., 1]
    union = a_area[:, None] + b_area[None, :] - inter
    iou = np.where(union > 0, inter / np.where(union > 0, union, 1.0), 0.0)
    return np.where(by_oks, oks, iou), np.where(by_oks, oks >= cfg.min_oks, iou >= cfg.min_iou)


def _boxes(xy: np.ndarray) -> np.ndarray:
    """(n, 4) x0, y0, x1, y1 around the found keypoints of (n, K, 2) poses (NaN where not found; every pose has
    one)."""
    return np.concatenate([np.fmin.reduce(xy, axis=1), np.fmax.reduce(xy, axis=1)], axis=1)


def _area(box: np.ndarray) -> np.ndarray:
    return (box[:, 2] - box[:, 0]) * (box[:, 3] - box[:, 1])
