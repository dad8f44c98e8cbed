"""The person channel along a segment between two peaks: whether a join crosses background
(docs/evaluation.md#person-assembly).

along = PersonAlong(maps[layout.person_mask], peaks[:, :2], samples=20)
along.mean(a_ids, b_ids)   # (M,) mean of the channel on the segments from peak a to peak b, in [0, 1] on targets
"""

from __future__ import annotations

import numpy as np


class PersonAlong:
    """The person channel (h, w) of one image's maps, sampled on segments between peaks (``peak_xy`` (N, 2) x, y in
    map pixels): ``samples`` points from one end to the other, ends included, each read at the nearest map pixel."""

    def __init__(self, channel: np.ndarray, peak_xy: np.ndarray, samples: int):
        self.channel = channel
        self.xy = np.asarray(peak_xy, np.float64)
        self.t = np.linspace(0.0, 1.0, max(samples, 2))

    def mean(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """(M,) mean of the channel along each segment from peak ``a[i]`` to peak ``b[i]`` (peak ids, (M,) each)."""
        h, w = self.channel.shape
        start = self.xy[np.asarray(a, np.int64)]
        step = self.xy[np.asarray(b, np.int64)] - start
        x = np.clip(np.rint(start[:, 0, None] + self.t * step[:, 0, None]), 0, w - 1).astype(np.int64)
        y = np.clip(np.rint(start[:, 1, None] + self.t * step[:, 1, None]), 0, h - 1).astype(np.int64)
        return self.channel[y, x].mean(-1)
