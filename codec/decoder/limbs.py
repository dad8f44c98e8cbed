"""Limb scoring: which keypoint candidates a limb map connects, all pairs of a limb at once.

See docs/evaluation.md#limb-scoring.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from simplepose.config.schema import DecodeSettings

_CHUNK = 2048  # pairs scored at once: their samples, a few (P, S) arrays, stay in the cache


class LimbPairs(NamedTuple):
    """Every (a_i, b_j) candidate pair of one limb type, each (na, nb): ``score`` (mean sampled value plus the
    length prior), ``length`` (image pixels), ``accepted`` (passes the criterion)."""

    score: np.ndarray
    length: np.ndarray
    accepted: np.ndarray


def score_pairs(
    limb_map: np.ndarray,
    a_xy: np.ndarray,
    b_xy: np.ndarray,
    scale_xy: tuple[float, float],
    image_height: float,
    params: DecodeSettings,
) -> LimbPairs:
    """Score every (a_i, b_j) pair of one limb type.

    Args:
        limb_map: (h, w) limb heatmap.
        a_xy, b_xy: (na, 2) and (nb, 2) candidate positions (x, y) in map pixels.
        scale_xy: image pixels per map pixel along x and y (lengths are measured in image pixels).
        image_height: in image pixels; limbs longer than half of it are penalised (the original names this
            the image width but passes the height).
        params: the threshold, the fraction of samples above it, the number of samples.
    Returns:
        ``LimbPairs`` (score, length, accepted), each (na, nb): mean sampled value plus the length prior, the length
        in image pixels, and whether the pair passes the criterion (enough samples above ``params.limb_threshold``,
        positive score, non-zero length).
    """
    na, nb = len(a_xy), len(b_xy)
    ends = np.stack([np.repeat(np.asarray(a_xy, np.float64), nb, 0), np.tile(np.asarray(b_xy, np.float64), (na, 1))], 1)
    flat = score_flat_pairs(limb_map[None], np.zeros(na * nb, np.int64), ends, scale_xy, image_height, params)
    return LimbPairs(*(x.reshape(na, nb) for x in flat))


def score_flat_pairs(
    limb_maps: np.ndarray,
    limb: np.ndarray,
    ends: np.ndarray,
    scale_xy: tuple[float, float],
    image_height: float,
    params,
) -> LimbPairs:
    """``score_pairs`` for a flat list of pairs of any limb types at once (one call for all limbs of an image: numpy's
    cost per call, not the arithmetic, is most of the time on photos of a few people).

    Args:
        limb_maps: (L, h, w) limb heatmaps; limb: (P,) the map of each pair; ends: (P, 2, 2) its ends a and b, (x, y)
            in map pixels; params: ``DecodeSettings``.
    Returns:
        ``LimbPairs`` of (P,) arrays, each pair's values as ``score_pairs`` gives them.
    """
    flat, strides = _flat_view(limb_maps)
    a_xy, b_xy = ends[:, 0], ends[:, 1]
    parts = [
        _score_chunk(
            flat,
            strides,
            limb_maps.shape[1:],
            limb[i : i + _CHUNK],
            a_xy[i : i + _CHUNK],
            b_xy[i : i + _CHUNK],
            scale_xy,
            image_height,
            params,
        )
        for i in range(0, max(len(limb), 1), _CHUNK)
    ]
    return parts[0] if len(parts) == 1 else LimbPairs(*(np.concatenate(x) for x in zip(*parts)))


def _flat_view(maps: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]]:
    """A 1-D view of the memory ``maps`` spans, and ``maps``' strides in elements: ``maps[i, j, k]`` is
    ``flat[i * s0 + j * s1 + k * s2]``. One gather from it is twice as fast as numpy's three-array indexing, and the
    maps need not be copied (the decoder's are a channels-first view of channels-last maps)."""
    item = maps.itemsize
    if any(s < 0 or s % item for s in maps.strides):
        maps = np.ascontiguousarray(maps)
    strides = tuple(s // item for s in maps.strides)
    span = 1 + sum((n - 1) * s for n, s in zip(maps.shape, strides)) if maps.size else 0
    return np.lib.stride_tricks.as_strided(maps, shape=(span,), strides=(item,), writeable=False), strides


def _score_chunk(flat, strides, hw, limb, a_xy, b_xy, scale_xy, image_height, params: DecodeSettings) -> LimbPairs:
    """``score_flat_pairs`` of a few pairs at once (their (P, S) samples stay in the cache), reading the maps through
    ``_flat_view``'s ``flat`` and ``strides``; ``hw``: the maps' (h, w).

    Every other sample of each pair is read first, and the rest only for the pairs these leave a chance of passing
    (in crowds most pairs join keypoints of different people, and half their samples already fail them): the others
    are not accepted, and their score is left at 0."""
    d = b_xy - a_xy  # (P, 2) map pixels
    length = np.hypot(d[:, 0] * scale_xy[0], d[:, 1] * scale_xy[1])
    # Python's round (half to even) as in the original, like np.rint
    n = np.minimum(np.rint(length + 1), params.limb_samples).astype(np.int64)
    steps = np.arange(params.limb_samples)
    view = _FlatMaps(flat, strides, hw)
    even, valid = view.samples(limb, a_xy, d, n, steps[0::2])
    fails = (valid & ~(even > params.limb_threshold)).sum(-1)
    todo = np.flatnonzero((n - fails >= params.connect_ratio * n) & (length > 0))
    score = np.zeros(len(limb))
    accepted = np.zeros(len(limb), bool)
    if len(todo):
        n_todo = n[todo]
        samples = np.empty((len(todo), len(steps)), even.dtype)  # in step order: the sum is the same as at once
        samples[:, 0::2] = even[todo]
        samples[:, 1::2] = view.samples(limb[todo], a_xy[todo], d[todo], n_todo, steps[1::2])[0]
        above = ((samples > params.limb_threshold) & (steps < n_todo[:, None])).sum(-1)
        score[todo] = samples.sum(-1) / n_todo + np.minimum(0.5 * image_height / length[todo] - 1.0, 0.0)
        accepted[todo] = (above >= params.connect_ratio * n_todo) & (score[todo] > 0)
    return LimbPairs(score, length, accepted)


class _FlatMaps(NamedTuple):
    """Limb maps read through ``_flat_view``: ``flat``, ``strides``, and their (h, w)."""

    flat: np.ndarray
    strides: tuple[int, ...]
    hw: tuple[int, int]

    def samples(self, limb, a_xy, d, n, steps) -> tuple[np.ndarray, np.ndarray]:
        """(P, len(steps)) map values at the given sample ``steps`` of each pair (map ``limb``, from ``a_xy`` along
        ``d``, ``n`` samples: the last at b), 0 where a step is >= n; and where it is < n."""
        t = steps / np.maximum(n - 1, 1)[:, None]  # (P, S)
        valid = steps < n[:, None]
        np.minimum(t, 1.0, out=t)
        px = np.rint(a_xy[:, 0, None] + t * d[:, 0, None])
        py = np.rint(a_xy[:, 1, None] + t * d[:, 1, None])
        np.clip(px, 0, self.hw[1] - 1, out=px)
        np.clip(py, 0, self.hw[0] - 1, out=py)
        # whole numbers in float64: the offsets are exact
        offset = py * self.strides[1] + px * self.strides[2] + (limb * self.strides[0])[:, None]
        return np.where(valid, self.flat[offset.astype(np.int64)], 0.0), valid


def pair_keys(
    pairs: LimbPairs, a_score: np.ndarray, b_score: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The accepted pairs of one limb type in a-major order: (i, j, limb score s, key), each (M,); the key, a pair's
    evidence, is ``0.5 s + 0.25 score(a_i) + 0.25 score(b_j)`` (the original's)."""
    ii, jj = np.nonzero(pairs.accepted)
    s = pairs.score[ii, jj]
    return ii, jj, s, 0.5 * s + 0.25 * a_score[ii] + 0.25 * b_score[jj]


def match_limb(pairs: LimbPairs, a_score: np.ndarray, b_score: np.ndarray) -> np.ndarray:
    """Greedy one-to-one matching of the accepted pairs of one limb type (``a_score`` (na,), ``b_score`` (nb,): the
    candidates' peak scores).

    Pairs are taken in descending order of ``0.5 s + 0.25 score(a) + 0.25 score(b)`` (stable, so ties keep
    a-major order as the original); a pair is kept if neither end is used yet; at most min(na, nb) pairs.
    Returns (M, 4) rows (i, j, s, L): local candidate indices, limb score, length in image pixels.
    """
    ii, jj, s, key = pair_keys(pairs, a_score, b_score)
    if ii.size == 0:
        return np.zeros((0, 4))
    order = np.argsort(-key, kind="stable")
    limit = min(pairs.score.shape)
    used_a: set[int] = set()
    used_b: set[int] = set()
    rows = []
    lengths = pairs.length[ii, jj][order].tolist()
    for i, j, sc, ln in zip(ii[order].tolist(), jj[order].tolist(), s[order].tolist(), lengths):
        if i in used_a or j in used_b:
            continue
        used_a.add(i)
        used_b.add(j)
        rows.append((i, j, sc, ln))
        if len(rows) >= limit:
            break
    return np.asarray(rows, np.float64)


def candidate_pairs(pairs: LimbPairs, a_score: np.ndarray, b_score: np.ndarray) -> np.ndarray:
    """Every accepted pair of one limb type, unmatched: (M, 5) rows (i, j, s, L, margin) in a-major order; the assembly
    settles which of them hold, largest margin first.

    A pair's evidence is its key (``pair_keys``); its margin is that key less the
    best key of any other accepted pair sharing one of its ends (0 when none does). A connection that clearly beats
    its alternatives comes first; near-ties (parallel limbs of people side by side, one limb map covering two people's
    limbs) come last, when the clear connections have already built most of each person."""
    ii, jj, s, key = pair_keys(pairs, a_score, b_score)
    if ii.size:
        keys = np.zeros(pairs.score.shape)
        keys[ii, jj] = key
        key = key - np.maximum(_best_other(keys, ii, jj), _best_other(keys.T, jj, ii))
    return np.column_stack([ii, jj, s, pairs.length[ii, jj], key]).astype(np.float64).reshape(-1, 5)


def _best_other(keys: np.ndarray, ii: np.ndarray, jj: np.ndarray) -> np.ndarray:
    """For each pair (ii, jj) of a (na, nb) key matrix (0 where not accepted): the best key of row ii but column jj."""
    if keys.shape[1] < 2:
        return np.zeros(ii.size)
    top2 = np.sort(keys, axis=1)[:, -2:]  # (na, 2): second best, best
    best_col = keys.argmax(1)
    return np.where(jj == best_col[ii], top2[ii, 0], top2[ii, 1])
