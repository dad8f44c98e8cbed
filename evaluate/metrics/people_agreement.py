"""How far two decodings of one image agree, person by person: people matched one to one by OKS, then their
keypoints compared. Used to show that two ways of running a network (float32 / bf16, NCHW / channels_last,
PyTorch / ONNX Runtime, two batch sizes) find the same people (bench/test_time_precision.py, the tests)."""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment

from simplepose.evaluate.metrics.oks import oks_matrix


def people_agreement(
    got: np.ndarray, want: np.ndarray, sigmas, min_oks: float = 0.5, distances: list[float] | None = None
) -> dict[str, int]:
    """How far two decodings of one image agree: ``got`` and ``want`` (P, K, 3) keypoints (x, y, score; score 0 or
    x NaN where not found) matched one to one by OKS (``evaluate.metrics.oks.oks_matrix`` over the ``want`` person's
    keypoints, scale: the area of its keypoint box), pairs below ``min_oks`` left unmatched. Returns the people of
    each side, the matched pairs, their keypoints found on both sides and those within 1 px, and the keypoints
    found on one side only. ``distances``: a list that receives the pixel distance of every shared keypoint."""
    got, want = (
        np.asarray(p, np.float64).reshape(len(p), -1, 3) if len(p) else np.zeros((0, 1, 3)) for p in (got, want)
    )
    found_g, found_w = ((p[..., 2] > 0) & ~np.isnan(p[..., 0]) for p in (got, want))
    out = {"got": len(got), "want": len(want), "matched": 0, "shared": 0, "within_1px": 0, "one_side": 0}
    if not len(got) or not len(want):
        return out
    span = np.array([np.ptp(w[f, :2], axis=0) if f.any() else np.zeros(2) for w, f in zip(want, found_w)])
    oks, _ = oks_matrix(want[..., :2], found_w, got[..., :2], found_g, sigmas, span.prod(1)[:, None], over="a")
    rows, cols = linear_sum_assignment(-oks)
    for w, g in zip(rows, cols):
        if oks[w, g] < min_oks:
            continue
        both = found_g[g] & found_w[w]
        distance = np.hypot(*(got[g, both, :2] - want[w, both, :2]).T)
        out["matched"] += 1
        out["shared"] += int(both.sum())
        out["within_1px"] += int((distance <= 1.0).sum())
        out["one_side"] += int((found_g[g] ^ found_w[w]).sum())
        if distances is not None:
            distances.extend(distance.tolist())
    return out
