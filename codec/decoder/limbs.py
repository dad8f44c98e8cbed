"""Limb scoring: which keypoint candidates a limb map connects, all pairs of a limb at once.

See docs/evaluation.md#limb-scoring.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from simplepose.config.schema import DecodeSettings


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
    threshold, ratio, max_samples = params.limb_threshold, params.connect_ratio, params.limb_samples
    h, w = limb_map.shape
    d = b_xy[None, :, :] - a_xy[:, None, :]  # (na, nb, 2) map pixels
    length = np.hypot(d[..., 0] * scale_xy[0], d[..., 1] * scale_xy[1])
    # Python's round (half to even) as in the original, like np.rint
    n = np.minimum(np.rint(length + 1), max_samples).astype(np.int64)
    steps = np.arange(max_samples)
    t = steps / np.maximum(n - 1, 1)[..., None]  # (na, nb, S); steps >= n are masked below
    valid = steps < n[..., None]
    t = np.minimum(t, 1.0)
    px = np.clip(np.rint(a_xy[:, None, None, 0] + t * d[..., None, 0]), 0, w - 1).astype(np.int64)
    py = np.clip(np.rint(a_xy[:, None, None, 1] + t * d[..., None, 1]), 0, h - 1).astype(np.int64)
    samples = np.where(valid, limb_map[py, px], 0.0)
    above = ((samples > threshold) & valid).sum(-1)
    safe_length = np.where(length > 0, length, 1.0)
    score = samples.sum(-1) / n + np.minimum(0.5 * image_height / safe_length - 1.0, 0.0)
    accepted = (above >= ratio * n) & (score > 0) & (length > 0)
    return LimbPairs(score, length, accepted)


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
