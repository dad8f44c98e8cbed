"""Identities across a video's frames and steadier keypoints: people in, the same people with ``track_id`` out.

    tracker = PoseTracker(estimator.skeleton, TrackConfig(smooth=True))
    for t, image in frames:  # t: the frame's time, seconds
        people = tracker.update(estimator(image), t)  # list[Person], each with .track_id

Any skeleton: the OKS uses its sigmas. ``update`` (docs/evaluation.md#tracking):

1. leaves out people scored below ``min_score`` (the decoder's fragments) and moves each track's last pose on by the
   track's velocity to the frame's time;
2. scores every (person, track) pair: the OKS over the keypoints found in both (evaluate/metrics/oks.py; scale: the
   larger of the two poses' ``person_area``, a whole body's box at the size the keypoints found show, so that a person
   seen by the face, the upper body or one side is judged at their size, not at their few keypoints' box), or the IoU of
   their keypoint boxes where fewer than ``min_shared_keypoints`` are found in both; a pair under ``min_oks`` /
   ``min_iou`` may not match;
3. matches the people to the confirmed tracks (those with an id, seen or lost) first, then the rest to the new
   tracks, each similarity first (``_assign``): a person and a track that are each other's most similar allowed
   pair are matched together (a track that matches its person well never yields it to a newcomer for the sake of
   one more pair), the others by ``scipy.optimize.linear_sum_assignment`` on 1 - similarity, the highest total
   similarity; a track takes one person and a person one track;
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
from typing import NamedTuple

import numpy as np
from scipy.optimize import linear_sum_assignment

from simplepose.codec.person import Person
from simplepose.config.config_file import check_track
from simplepose.config.schema import TrackConfig
from simplepose.config.skeleton import Skeleton
from simplepose.evaluate.metrics.oks import BodyTemplate, oks_matrix, person_area

LOG = logging.getLogger(__name__)

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
    return (
        np.where(start, p, np.where(take, new_x, x)),
        np.where(start, 0.0, np.where(take, new_dx, dx)),
        np.where(found, t, last),
    )


def _weight(cutoff_hz, dt_s):
    """Weight of a new sample in a first-order low-pass filter at ``cutoff_hz`` after ``dt_s`` seconds."""
    r = (2 * math.pi) * cutoff_hz * dt_s
    return r / (r + 1)


class OneEuroFilter:
    """``one_euro`` on one series of K points: ``smoothed = f(points (K, 2), found (K,), t)``, NaN where not found
    (the filter the tracker runs on each track's keypoints, for use on its own; ``cfg``'s One-Euro settings).

    A point that is not a number (NaN, inf) is taken as not found: it leaves its state as it was and comes back NaN.
    Refused with a ValueError, the state unchanged: arrays of other shapes than (K, 2) and (K,) (nothing is
    broadcast), ``found`` that is not booleans (or 0 / 1), a time that is not finite, or not after the last sample of
    a point found now."""

    def __init__(self, num_points: int, cfg: TrackConfig | None = None):
        if int(num_points) != num_points or num_points < 1:
            raise ValueError(f"OneEuroFilter: num_points must be a whole number >= 1, got {num_points!r}")
        k = int(num_points)
        self.cfg = cfg if cfg is not None else TrackConfig()
        self.state = (np.zeros((k, 2)), np.zeros((k, 2)), np.full(k, np.nan))

    def __call__(self, points: np.ndarray, found: np.ndarray, t: float) -> np.ndarray:
        k = len(self.state[2])
        points, found = np.asarray(points, np.float64), np.asarray(found)
        if points.shape != (k, 2) or found.shape != (k,):
            raise ValueError(
                f"OneEuroFilter of {k} points: points must be ({k}, 2) and found ({k},), got "
                f"{points.shape} and {found.shape}"
            )
        if found.dtype != bool and not np.isin(found, (0, 1)).all():
            raise ValueError(f"OneEuroFilter: found must be booleans (or 0 / 1), got {found.tolist()}")
        t = float(t)
        if not math.isfinite(t):
            raise ValueError(f"OneEuroFilter: time {t} s is not a finite number")
        found = found.astype(bool) & np.isfinite(points).all(1)
        if np.any(found & (t <= self.state[2])):
            last = float(np.nanmax(np.where(found, self.state[2], np.nan)))
            raise ValueError(f"OneEuroFilter: time {t} s is not after a point's last sample {last} s")
        self.state = one_euro(self.state, points, found, t, self.cfg)
        return np.where(found[:, None], self.state[0], np.nan)


class HeldBack(NamedTuple):
    """The people of a frame ``PoseTracker.update`` did not return, by why: ``untracked``, scored below
    ``track.min_score`` (or with no keypoint found); ``unconfirmed``, in tracks not yet matched in ``track.min_hits``
    frames in a row."""

    untracked: int = 0
    unconfirmed: int = 0


class PoseTracker:
    """Track ids for the people of a video's frames, one frame at a time (module docstring; any skeleton).

    ``cfg``: a ``TrackConfig`` (default settings when None; ``python -m simplepose.evaluate.demo`` takes
    ``track.*=...``).
    Tracks are held as arrays over tracks, so that a frame costs a few dozen NumPy calls, not a few per person.
    """

    def __init__(self, skeleton: Skeleton, cfg: TrackConfig | None = None):
        self.cfg = cfg if cfg is not None else TrackConfig()
        check_track(self.cfg)
        self.skeleton = skeleton
        self._sigmas = np.asarray(skeleton.sigmas, np.float64)
        self._template = BodyTemplate.of(skeleton)  # None: not a human body; people are judged at their keypoint box
        self.reset()

    def reset(self) -> None:
        """Forget every track (a new video); ids start at 1 again."""
        k = self.skeleton.num_dataset_keypoints
        self._xy = np.zeros((0, k, 2))  # the last matched person's keypoints (the detector's), NaN: not found
        self._found = np.zeros((0, k), bool)
        self._area = np.zeros(0)  # px^2: the scale of the last matched pose (evaluate.metrics.oks.person_area)
        self._time = np.zeros(0)  # of the last match, s
        self._velocity = np.zeros((0, 2))  # px/s: of the keypoints found in two successive matches
        self._moving = np.zeros(0, bool)  # the velocity was measured
        self._hits = np.zeros(0, np.int64)  # frames matched (in a row while new)
        self._lost = np.zeros(0, np.int64)  # frames since the last match
        self._ids = np.zeros(0, np.int64)  # 0 while new
        # one_euro's state
        self._smooth: tuple[np.ndarray, ...] = (np.zeros((0, k, 2)), np.zeros((0, k, 2)), np.zeros((0, k)))
        self._next_id = 1
        self._last: float | None = None
        self.held_back = HeldBack()  # of the last update
        self.held_back_total = HeldBack()  # of every update since the last reset

    def update(self, people: Sequence[Person], timestamp: float) -> list[Person]:
        """The people of the frame at ``timestamp`` (seconds, increasing) whose track is confirmed, in the order
        given, with ``track_id`` set (and smoothed keypoints and box when ``cfg.smooth``). ``people``: ``Person``
        objects of this skeleton (``PoseEstimator``'s); a person with no keypoint found, or scored below
        ``cfg.min_score``, is not tracked. ``held_back`` counts the people not returned, by why (``held_back_total``:
        since the last ``reset``)."""
        t = float(timestamp)
        if not math.isfinite(t) or (self._last is not None and t <= self._last):
            raise ValueError(
                f"PoseTracker.update: timestamps must be finite and increase (seconds); got {timestamp} "
                f"after {self._last}"
            )
        kp, xy, found = self._arrays(people)
        self._last = t
        scores = np.array([p.score for p in people], np.float64)
        present = np.flatnonzero(found.any(1) & (scores >= self.cfg.min_score))
        area = np.zeros(len(people))
        area[present] = person_area(xy[present], found[present], self._template)
        det, trk = self._match(xy[present], found[present], area[present], t)
        det = present[det]
        smoothed = self._move_matched(det, trk, xy, found, area, t)
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
        self._start(xy[new], found[new], area[new], t)
        confirmed = (self._ids == 0) & (self._hits >= self.cfg.min_hits)
        self._ids[confirmed] = self._next_id + np.arange(int(confirmed.sum()))
        self._next_id += int(confirmed.sum())
        out = present[self._ids[owner[present]] > 0]
        ids = self._ids[owner[out]].tolist()
        self.held_back = HeldBack(len(people) - len(present), len(present) - len(out))
        self.held_back_total = HeldBack(*(a + b for a, b in zip(self.held_back_total, self.held_back)))
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
            raise ValueError(
                f"PoseTracker.update: person {bad} has keypoints of shape "
                f"{np.shape(people[bad].keypoints)}; this tracker's skeleton '{self.skeleton.name}' "
                f"gives ({k}, 3)"
            )
        found = (kp[:, :, 2] > 0) & np.isfinite(kp[:, :, 0]) & np.isfinite(kp[:, :, 1])
        return kp, np.where(found[..., None], kp[:, :, :2], np.nan), found

    def _match(self, xy: np.ndarray, found: np.ndarray, area: np.ndarray, t: float) -> tuple[np.ndarray, np.ndarray]:
        """(person indices, track indices) of the matched pairs: confirmed tracks first, then new ones."""
        none = np.zeros(0, np.intp)
        if not len(xy) or not len(self._ids):
            return none, none
        predicted = self._xy + self._velocity[:, None] * (t - self._time)[:, None, None]
        similarity, allowed = pair_similarity(
            xy, found, area, predicted, self._found, self._area, self._sigmas, self.cfg
        )
        confirmed = self._ids > 0
        d1, k1 = _assign(similarity, allowed, np.arange(len(xy)), np.flatnonzero(confirmed))
        rest = np.ones(len(xy), bool)
        rest[d1] = False
        d2, k2 = _assign(similarity, allowed, np.flatnonzero(rest), np.flatnonzero(~confirmed))
        return np.concatenate([d1, d2]), np.concatenate([k1, k2])

    def _move_matched(self, det, trk, xy, found, area, t) -> np.ndarray | None:
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
        self._xy[trk], self._found[trk], self._area[trk], self._time[trk] = new_xy, new_found, area[det], t
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
        for name in ("_xy", "_found", "_area", "_time", "_velocity", "_moving", "_hits", "_lost", "_ids"):
            setattr(self, name, getattr(self, name)[keep])
        self._smooth = tuple(a[keep] for a in self._smooth)

    def _start(self, xy: np.ndarray, found: np.ndarray, area: np.ndarray, t: float) -> None:
        """New tracks, matched in one frame, for the people (n, K, 2) / (n, K) / (n,) no track took."""
        n = len(xy)
        if not n:
            return
        added = {
            "_xy": xy,
            "_found": found,
            "_area": area,
            "_time": np.full(n, t),
            "_velocity": np.zeros((n, 2)),
            "_moving": np.zeros(n, bool),
            "_hits": np.ones(n, np.int64),
            "_lost": np.zeros(n, np.int64),
            "_ids": np.zeros(n, np.int64),
        }
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
    """(rows, cols) matched among ``rows`` x ``cols`` of the (P, T) ``similarity``, only where ``allowed``,
    similarity first: a row and a column that are each other's most similar allowed pair are matched; the others by
    the assignment of the highest total similarity (``linear_sum_assignment`` on 1 - similarity, a pair that may not
    match costing 1, as much as leaving both unmatched, and dropped after), never more pairs for worse ones."""
    none = np.zeros(0, np.intp)
    if not len(rows) or not len(cols):
        return none, none
    ok = allowed[np.ix_(rows, cols)]
    if not ok.any():
        return none, none
    cost = np.where(ok, 1.0 - similarity[np.ix_(rows, cols)], 1.0)
    best_col, best_row = cost.argmin(1), cost.argmin(0)
    every = np.arange(len(rows))
    r = np.flatnonzero((best_row[best_col] == every) & ok[every, best_col])
    c = best_col[r]
    free_r, free_c = np.ones(len(rows), bool), np.ones(len(cols), bool)
    free_r[r], free_c[c] = False, False
    if free_r.any() and free_c.any() and (rest := ok[free_r][:, free_c]).any():
        rest_r, rest_c = np.flatnonzero(free_r), np.flatnonzero(free_c)
        more_r, more_c = linear_sum_assignment(cost[free_r][:, free_c])
        take = rest[more_r, more_c]
        r, c = np.concatenate([r, rest_r[more_r[take]]]), np.concatenate([c, rest_c[more_c[take]]])
    return rows[r], cols[c]


def pair_similarity(
    a_xy: np.ndarray,
    a_found: np.ndarray,
    a_area: np.ndarray,
    b_xy: np.ndarray,
    b_found: np.ndarray,
    b_area: np.ndarray,
    sigmas: np.ndarray,
    cfg: TrackConfig,
) -> tuple[np.ndarray, np.ndarray]:
    """((P, T) similarity, (P, T) may-match) of P poses ``a`` and T poses ``b`` ((n, K, 2) px, NaN where not found;
    (n, K) found; (n,) their ``person_area``, px^2): the OKS over the keypoints found in both (evaluate.metrics.oks,
    ``sigmas`` (K,), scale: the larger of the two areas) where at least ``cfg.min_shared_keypoints`` are, else the
    IoU of the keypoint boxes."""
    oks, count = oks_matrix(a_xy, a_found, b_xy, b_found, sigmas, np.maximum.outer(a_area, b_area))
    by_oks = count >= cfg.min_shared_keypoints
    if by_oks.all():
        return oks, oks >= cfg.min_oks
    a_box, b_box = _boxes(a_xy), _boxes(b_xy)
    lo = np.maximum(a_box[:, None, :2], b_box[None, :, :2])
    hi = np.minimum(a_box[:, None, 2:], b_box[None, :, 2:])
    side = np.clip(hi - lo, 0, None)
    inter = side[..., 0] * side[..., 1]
    union = _area(a_box)[:, None] + _area(b_box)[None, :] - inter
    iou = np.where(union > 0, inter / np.where(union > 0, union, 1.0), 0.0)
    return np.where(by_oks, oks, iou), np.where(by_oks, oks >= cfg.min_oks, iou >= cfg.min_iou)


def _boxes(xy: np.ndarray) -> np.ndarray:
    """(n, 4) x0, y0, x1, y1 around the found keypoints of (n, K, 2) poses (NaN where not found; every pose has
    one)."""
    return np.concatenate([np.fmin.reduce(xy, axis=1), np.fmax.reduce(xy, axis=1)], axis=1)


def _area(box: np.ndarray) -> np.ndarray:
    return (box[:, 2] - box[:, 0]) * (box[:, 3] - box[:, 1])
