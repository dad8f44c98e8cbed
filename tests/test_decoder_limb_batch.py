"""Limb scoring of all limbs in one call (``limbs.score_flat_pairs``, the decoder's path) against the criterion
written out sample by sample, and ``decode.find_connections`` against scoring each limb on its own."""

import numpy as np

from simplepose.codec.decoder.decode import find_connections
from simplepose.codec.decoder.limbs import candidate_pairs, match_limb, score_flat_pairs, score_pairs
from simplepose.config.schema import DecodeSettings
from tests.helpers import COCO

PARAMS = DecodeSettings(limb_threshold=0.3, connect_ratio=0.8, limb_samples=20)


def channels_last_maps(channels: int, h: int, w: int, seed: int) -> np.ndarray:
    """(channels, h, w) smooth random maps in [0, 1), a channels-first view of channels-last memory (as the decoder
    gets them from the resize), so that indexing them must follow their strides."""
    rng = np.random.default_rng(seed)
    coarse = rng.random((h // 4 + 2, w // 4 + 2, channels + 3)).astype(np.float32)
    fine = np.repeat(np.repeat(coarse, 4, 0), 4, 1)[:h, :w]
    return fine.transpose(2, 0, 1)[1 : channels + 1]


def criterion_by_hand(limb_map, a, b, scale_xy, image_height, params):
    """One pair's (score, length, accepted), one sample at a time."""
    dx, dy = b[0] - a[0], b[1] - a[1]
    length = float(np.hypot(dx * scale_xy[0], dy * scale_xy[1]))
    n = int(min(round(length + 1), params.limb_samples))
    values = []
    for i in range(n):
        t = min(i / max(n - 1, 1), 1.0)
        x = int(np.clip(np.rint(a[0] + t * dx), 0, limb_map.shape[1] - 1))
        y = int(np.clip(np.rint(a[1] + t * dy), 0, limb_map.shape[0] - 1))
        values.append(float(limb_map[y, x]))
    score = sum(values) / n + min(0.5 * image_height / max(length, 1e-12) - 1.0, 0.0)
    above = sum(v > params.limb_threshold for v in values)
    return score, length, above >= params.connect_ratio * n and score > 0 and length > 0


def test_flat_scoring_follows_the_criterion_on_strided_maps():
    maps = channels_last_maps(3, 40, 56, seed=0)
    assert not maps.flags.c_contiguous
    rng = np.random.default_rng(1)
    p = 3000  # more than one chunk
    limb = rng.integers(0, 3, p)
    a = rng.uniform(-2, 58, (p, 2))  # some ends outside the map: samples clipped to its edge
    b = a + rng.normal(0, 8, (p, 2))
    b[:5] = a[:5]  # zero length: never accepted
    score, length, accepted = score_flat_pairs(maps, limb, np.stack([a, b], 1), (4.0, 4.0), 160.0, PARAMS)
    assert 0.05 < accepted.mean() < 0.95  # both outcomes are tested
    assert not accepted[:5].any()
    for i in range(0, p, 7):
        s, ln, ok = criterion_by_hand(maps[limb[i]], a[i], b[i], (4.0, 4.0), 160.0, PARAMS)
        assert ok == accepted[i]
        assert ln == length[i]
        if ok:
            assert np.isclose(s, score[i], rtol=1e-6, atol=1e-6)


def test_connections_of_all_limbs_at_once_equal_each_limb_scored_alone():
    maps = channels_last_maps(len(COCO.limbs), 48, 64, seed=2)
    rng = np.random.default_rng(3)
    counts = rng.integers(0, 5, COCO.num_keypoints)  # some types without a peak
    part = np.repeat(np.arange(COCO.num_keypoints), counts)
    peaks = np.column_stack([rng.uniform(0, 63, len(part)), rng.uniform(0, 47, len(part)), rng.random(len(part))])
    start = np.searchsorted(part, np.arange(COCO.num_keypoints + 1))
    for matched in (True, False):
        got = find_connections(maps, peaks, part, PARAMS, (4.0, 4.0), 192.0, COCO, matched)
        for k, (ta, tb) in enumerate(COCO.limbs):
            a, b = peaks[start[ta] : start[ta + 1]], peaks[start[tb] : start[tb + 1]]
            if not len(a) or not len(b):
                assert len(got[k]) == 0
                continue
            pairs = score_pairs(maps[k], a[:, :2], b[:, :2], (4.0, 4.0), 192.0, PARAMS)
            rows = (match_limb if matched else candidate_pairs)(pairs, a[:, 2], b[:, 2])
            rows[:, :2] += (start[ta], start[tb])
            assert np.array_equal(got[k], rows)
    assert sum(len(c) for c in got) > 0
