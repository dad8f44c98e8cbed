"""From one image's averaged maps to people: peaks, limb scoring, greedy assembly (docs/evaluation.md#decoding).

people = decode_people(maps, cfg.eval, scale=(sx, sy), skeleton=skeleton)   # any config.schema.DecodeSettings
people = PoseCodec(skeleton, decoding=cfg.eval).decode(maps, (sx, sy))     # the same, through the codec
people[0].keypoints  # (D, 3) dataset order (COCO: 17): x, y in image pixels, score; NaN, NaN, 0: not found
people[0].score      # person score in [0, 1): 2+ keypoints in [0.5, 1) in the original's order, lone keypoints below
(``codec.person.Person``: the one result type)
"""

from __future__ import annotations

import numpy as np

from simplepose.codec.decoder.assemble import assemble_people, assemble_strongest_first, person_scores
from simplepose.codec.decoder.limbs import LimbPairs, candidate_pairs, match_limb, score_flat_pairs
from simplepose.codec.decoder.peaks import find_peaks
from simplepose.codec.decoder.person_channel import PersonAlong
from simplepose.codec.layout import ChannelLayout
from simplepose.codec.person import Person
from simplepose.config.schema import DecodeSettings
from simplepose.config.skeleton import Skeleton

MIN_KEYPOINT_SCORE = 1e-4  # the lowest score of a found keypoint (0 means not found); the results JSON keeps 4 decimals


def find_connections(
    limb_maps: np.ndarray,
    peaks: np.ndarray,
    part: np.ndarray,
    params: DecodeSettings,
    scale_xy: tuple[float, float],
    image_height: float,
    skeleton: Skeleton,
    matched: bool = True,
) -> list[np.ndarray]:
    """Accepted connections of every limb of ``skeleton``: per limb (M, 4) rows (peak id a, peak id b, score,
    length), one-to-one (``limbs.match_limb``); ``matched=False``: every accepted pair, (M, 5) rows with their key
    (``limbs.candidate_pairs``)."""
    start = np.searchsorted(part, np.arange(skeleton.num_keypoints + 1))
    count = np.diff(start)
    # every (a, b) candidate pair of every limb, a-major within each limb, scored in one call
    ids_a, ids_b, limb_of = [], [], []
    for k, (a, b) in enumerate(skeleton.limbs):
        ids = np.arange(start[a], start[a + 1])
        ids_a.append(np.repeat(ids, count[b]))
        ids_b.append(np.tile(np.arange(start[b], start[b + 1]), len(ids)))
        limb_of.append(np.full(len(ids) * count[b], k))
    pa, pb, limb = (np.concatenate(x).astype(np.int64) for x in (ids_a, ids_b, limb_of))
    flat = score_flat_pairs(
        limb_maps, limb, np.stack([peaks[pa, :2], peaks[pb, :2]], 1), scale_xy, image_height, params
    )
    ends = np.searchsorted(limb, np.arange(len(skeleton.limbs) + 1))
    connections = []
    for k, (a, b) in enumerate(skeleton.limbs):
        a0, b0, na, nb = start[a], start[b], count[a], count[b]
        if na == 0 or nb == 0:
            connections.append(np.zeros((0, 4 if matched else 5)))
            continue
        pairs = LimbPairs(*(x[ends[k] : ends[k + 1]].reshape(na, nb) for x in flat))
        rows = (match_limb if matched else candidate_pairs)(pairs, peaks[a0 : a0 + na, 2], peaks[b0 : b0 + nb, 2])
        rows[:, 0] += a0
        rows[:, 1] += b0
        connections.append(rows)
    return connections


def decode_people(
    maps: np.ndarray,
    params: DecodeSettings,
    scale: float | tuple[float, float] = 1.0,
    *,
    skeleton: Skeleton,
    layout: ChannelLayout | None = None,
) -> list[Person]:
    """Decode the people of one image.

    Args:
        maps: (C' >= L + K, h, w) float averaged maps in ``skeleton``'s channel layout (the two auxiliary channels
            are not read).
        params: the decoder's settings (``cfg.eval``, or a ``DecodeSettings`` built by hand); ``params.boxsize``:
            the image height scale 1 resizes to, so the ``input_window`` score's samples are one pixel of that
            input apart.
        scale: image pixels per map pixel, one number or (sx, sy); a map pixel centre x maps to the image
            coordinate (x + 0.5) * sx - 0.5.
        skeleton: what each channel is, and the dataset order of the result.
        layout: ``skeleton``'s channel layout when the caller holds it (``PoseCodec.layout``); else made here.
    """
    sx, sy = (float(s) for s in np.broadcast_to(np.asarray(scale, dtype=np.float64), (2,)))
    maps = np.asarray(maps, dtype=np.float32)
    layout = ChannelLayout.of(skeleton) if layout is None else layout
    channels = layout.keypoints
    if maps.ndim != 3 or maps.shape[0] < channels.stop:
        raise ValueError(f"maps must be (>= {channels.stop}, h, w), got {maps.shape}")
    heat = maps[channels]
    image_height = maps.shape[1] * sy
    input_px = image_height / params.boxsize  # image pixels per pixel of the scale-1 network input
    peaks, part = find_peaks(heat, params, window_step=(input_px / sx, input_px / sy))
    if len(peaks) == 0:
        return []
    limb_maps = maps[layout.limbs]
    in_order = params.grouping == "limb_order"
    connections = find_connections(limb_maps, peaks, part, params, (sx, sy), image_height, skeleton, in_order)
    if in_order:
        slots, totals = assemble_people(connections, skeleton.limbs, peaks[:, 2], part, skeleton.num_keypoints, params)
    else:
        person = (
            PersonAlong(maps[layout.person_mask], peaks[:, :2], params.limb_samples) if params.join_person else None
        )
        slots, totals = assemble_strongest_first(
            connections,
            peaks[:, 2],
            part,
            skeleton.num_keypoints,
            params,
            peaks[:, :2] * (sx, sy),
            skeleton.limbs,
            person,
        )
    return people_from_slots(slots, totals, peaks, (sx, sy), skeleton)


def people_from_slots(
    slots: np.ndarray,
    totals: np.ndarray,
    peaks: np.ndarray,
    scale_xy: tuple[float, float],
    skeleton: Skeleton,
) -> list[Person]:
    """(P, K) peak ids -> the people: dataset-order keypoints in image pixels (derived keypoints such as COCO's neck
    dropped), each person's score (``codec.decoder.assemble.person_scores``).

    A keypoint's score is its peak's, clipped to [``MIN_KEYPOINT_SCORE``, 1]: a network's peaks overshoot its
    targets' 1 and a window-mean score can fall to 0 or below, where a found keypoint would read as not found. The
    person scores come from the unclipped totals (the original's ranking)."""
    if len(slots) == 0:
        return []
    found = slots >= 0
    rows = peaks[np.where(found, slots, 0)]  # (P, K, 3)
    internal = np.zeros(rows.shape)
    internal[..., 0] = (rows[..., 0] + 0.5) * scale_xy[0] - 0.5
    internal[..., 1] = (rows[..., 1] + 0.5) * scale_xy[1] - 0.5
    internal[..., 2] = np.clip(rows[..., 2], MIN_KEYPOINT_SCORE, 1.0)
    internal[~found] = 0.0
    scores = person_scores(totals, found.sum(1))
    dataset_order = internal[:, list(skeleton.dataset_to_internal)]
    return [Person.from_keypoints(kp, score) for kp, score in zip(dataset_order, scores)]
