"""From one image's averaged maps to people: peaks, limb scoring, greedy assembly (docs/design.md#decoding).

people = decode_people(maps, cfg.eval, scale=(sx, sy))
people.keypoints  # (P, 17, 3) COCO order: x, y in image pixels, keypoint score (0 = not found)
people.scores     # (P,) person score: 1 - 1 / total as in the original; one-keypoint people rank last
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from config.schema import EvalConfig
from config.skeleton import (
    COCO_TO_INTERNAL,
    KEYPOINT_CHANNELS,
    LIMB_CHANNELS,
    LIMBS,
    NUM_COCO_KEYPOINTS,
    NUM_KEYPOINTS,
)
from evaluate.assemble import AssemblyParams, assemble_people, person_scores
from evaluate.limbs import match_limb, score_pairs
from evaluate.peaks import find_peaks


@dataclass
class People:
    """The people found in one image: the decoder's result (``decode_people``), in COCO keypoint order."""

    keypoints: np.ndarray  # (P, 17, 3) float64: x, y (image pixels), keypoint score; all 0 when not found
    scores: np.ndarray  # (P,) float64

    def __len__(self) -> int:
        return len(self.scores)

    @staticmethod
    def empty() -> People:
        return People(np.zeros((0, NUM_COCO_KEYPOINTS, 3)), np.zeros(0))


def assembly_params(cfg: EvalConfig) -> AssemblyParams:
    return AssemblyParams(
        len_rate=cfg.len_rate,
        connection_tolerance=cfg.connection_tolerance,
        remove_recon=cfg.remove_recon,
        min_parts=cfg.min_parts,
        min_mean_score=cfg.min_mean_score,
    )


def find_connections(
    limb_maps: np.ndarray,
    peaks: np.ndarray,
    part: np.ndarray,
    cfg: EvalConfig,
    scale_xy: tuple[float, float],
    image_height: float,
) -> list[np.ndarray]:
    """Accepted connections of every limb: per limb (M, 4) rows (peak id a, peak id b, score, length)."""
    start = np.searchsorted(part, np.arange(NUM_KEYPOINTS + 1))
    connections = []
    for k, (a, b) in enumerate(LIMBS):
        a0, a1, b0, b1 = start[a], start[a + 1], start[b], start[b + 1]
        if a1 == a0 or b1 == b0:
            connections.append(np.zeros((0, 4)))
            continue
        score, length, accepted = score_pairs(
            limb_maps[k],
            peaks[a0:a1, :2],
            peaks[b0:b1, :2],
            scale_xy,
            image_height,
            cfg.limb_threshold,
            cfg.connect_ratio,
            cfg.limb_samples,
        )
        rows = match_limb(score, length, accepted, peaks[a0:a1, 2], peaks[b0:b1, 2])
        rows[:, 0] += a0
        rows[:, 1] += b0
        connections.append(rows)
    return connections


def decode_people(maps: np.ndarray, cfg: EvalConfig, scale: float | tuple[float, float] = 1.0) -> People:
    """Decode the people of one image.

    Args:
        maps: (C >= 48, h, w) float averaged maps in the channel layout of ``config.skeleton``.
        cfg: thresholds (``config.eval``).
        scale: image pixels per map pixel, one number or (sx, sy); a map pixel centre x maps to the image
            coordinate (x + 0.5) * sx - 0.5.
    """
    sx, sy = (scale, scale) if np.isscalar(scale) else scale
    maps = np.asarray(maps, dtype=np.float32)
    if maps.ndim != 3 or maps.shape[0] < KEYPOINT_CHANNELS.stop:
        raise ValueError(f"maps must be (>= {KEYPOINT_CHANNELS.stop}, h, w), got {maps.shape}")
    heat = maps[KEYPOINT_CHANNELS]
    image_height = maps.shape[1] * sy
    input_px = image_height / cfg.boxsize  # image pixels per pixel of the scale-1 network input
    peaks, part = find_peaks(
        heat,
        cfg.peak_threshold,
        cfg.refine_radius,
        cfg.peak_score,
        cfg.refine_xy_swap_bug,
        cfg.refine_mode,
        cfg.max_peaks,
        (input_px / sx, input_px / sy),
    )
    if len(peaks) < 2:
        return People.empty()
    limb_maps = maps[LIMB_CHANNELS]
    connections = find_connections(limb_maps, peaks, part, cfg, (sx, sy), image_height)
    slots, totals = assemble_people(connections, LIMBS, peaks[:, 2], part, NUM_KEYPOINTS, assembly_params(cfg))
    return people_from_slots(slots, totals, peaks, (sx, sy), cfg.min_mean_score)


def people_from_slots(
    slots: np.ndarray, totals: np.ndarray, peaks: np.ndarray, scale_xy: tuple[float, float], min_mean_score: float
) -> People:
    """(P, 18) peak ids -> COCO-order keypoints in image pixels (neck dropped) and person scores
    (``evaluate.assemble.person_scores``)."""
    if len(slots) == 0:
        return People.empty()
    found = slots >= 0
    rows = peaks[np.where(found, slots, 0)]  # (P, 18, 3)
    internal = np.zeros(rows.shape)
    internal[..., 0] = (rows[..., 0] + 0.5) * scale_xy[0] - 0.5
    internal[..., 1] = (rows[..., 1] + 0.5) * scale_xy[1] - 0.5
    internal[..., 2] = rows[..., 2]
    internal[~found] = 0.0
    return People(internal[:, COCO_TO_INTERNAL], person_scores(totals, found.sum(1), min_mean_score))
