"""The skeleton as data: keypoints, derived keypoints, limbs, flips, OKS sigmas, drawing, and the channel count.

A skeleton is a YAML file (``config/skeletons/NAME.yaml``; format: docs/skeleton.md#skeleton-files) read into one
immutable ``Skeleton`` (by ``config.skeleton_file``, checked by ``config.skeleton_definition``); every stage receives
it as a parameter or attribute: the converter (keypoints per annotation), the dataset (dataset -> internal order,
flips), the targets and the loss (through the codec's channel layout), the network (output channels), flip fusion,
decoding, drawing and evaluation (OKS sigmas).

    skeleton = load_skeleton("coco")          # config.skeleton_file: a name in config/skeletons/, or a YAML file
    skeleton = skeleton_of(cfg)               # config.skeleton_file: the one cfg.data.skeleton names
    skeleton_from_dict(skeleton.to_dict())    # config.skeleton_definition: the plain-dict form files carry

Two keypoint orders: the *dataset* order (annotations and results, e.g. COCO's 17) and the *internal* order (the
channels), which adds the derived keypoints (COCO's neck). The channel layout the codec derives from it
(``codec.layout.ChannelLayout``; docs/skeleton.md#channel-layout), with L limbs and K internal keypoints:

    0 .. L-1      limb maps, in ``limbs`` order (scalar maps; the original calls them "paf")
    L .. L+K-1    keypoint maps, in internal order
    L+K           person mask (eroded segmentation of every person; the original calls it "background")
    L+K+1         pixel-wise max over the K keypoint maps (the original calls it "reverseKeypoint")

COCO (coco.yaml): L = 30, K = 18, 50 channels.
"""

from __future__ import annotations

import colorsys
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from simplepose.utils.errors import UserError

SKELETON_DIR = Path(__file__).resolve().parent / "skeletons"
AUX_CHANNELS = 2  # person mask, max keypoint

# Visibility codes inside the project (docs/skeleton.md#keypoints): 1 visible (dataset v=2), 0 occluded (dataset
# v=1), 2 not annotated (dataset v=0). A keypoint takes part in the targets iff v < 2.
VIS_OCCLUDED, VIS_VISIBLE, VIS_UNLABELLED = 0, 1, 2

HUE_CIRCLE = "hue_circle"
# How results are scored (evaluate/coco_eval.py keypoint_stats): coco: pycocotools' keypoint AP/AR with the
# annotations' area; crowdpose: CrowdPose's (evaluate/metrics/crowdpose_eval.py, faster-coco-eval's keypoints_crowd: OKS
# scale 0.53 x box area, AP/AR and AP easy/medium/hard by the images' crowdIndex).
EVALUATIONS = ("coco", "crowdpose")


@dataclass(frozen=True)
class Skeleton:
    """One keypoint set, validated. Built by ``from_dict`` / ``config.skeleton_file.load_skeleton``, never by hand.

    Indices are into the internal order unless named ``dataset``. Equality compares the definition (not where it
    was read from)."""

    name: str
    dataset_keypoints: tuple[str, ...]
    keypoints: tuple[str, ...]  # internal (channel) order
    derived: tuple[tuple[str, str, tuple[str, ...]], ...]  # (keypoint, rule, source keypoints)
    limbs: tuple[tuple[int, int], ...]  # (from, to), grouping order
    flip_pairs: tuple[tuple[str, str], ...]
    sigmas: tuple[float, ...]  # OKS sigma per dataset keypoint
    draw_limbs: tuple[int, ...]  # limbs drawn on training samples, ascending
    draw_edges: tuple[tuple[int, int], ...]  # dataset keypoint pairs drawn on results
    colors: tuple[tuple[int, int, int], ...] | str  # BGR list, or HUE_CIRCLE
    evaluation: str = "coco"  # one of EVALUATIONS
    source: str = field(default="", compare=False)  # the file (or checkpoint) it came from, for messages

    # ------------------------------------------------------------------ sizes and channel layout
    @property
    def num_keypoints(self) -> int:
        """Internal keypoints K (dataset keypoints + derived ones)."""
        return len(self.keypoints)

    @property
    def num_dataset_keypoints(self) -> int:
        return len(self.dataset_keypoints)

    @property
    def num_limbs(self) -> int:
        return len(self.limbs)

    @property
    def num_channels(self) -> int:
        """Output channels: limbs + keypoints + person mask + max keypoint (which is which: ``codec.layout``)."""
        return self.num_limbs + self.num_keypoints + AUX_CHANNELS

    def index(self, name: str) -> int:
        """Internal index of keypoint ``name``."""
        return self.keypoints.index(name)

    def reference(self) -> str:
        """The ``data.skeleton`` / ``--skeleton`` value that loads this skeleton: its name for
        config/skeletons/NAME.yaml, else the file it was read from (its name when it came from elsewhere)."""
        if self.source and Path(self.source).resolve() != (SKELETON_DIR / f"{self.name}.yaml").resolve():
            return self.source if Path(self.source).is_file() else self.name
        return self.name

    def describe(self) -> str:
        """For messages: name, counts and where it came from."""
        where = f"; {self.source}" if self.source else ""
        return (
            f"'{self.name}' ({self.num_dataset_keypoints} dataset keypoints, {self.num_keypoints} internal, "
            f"{self.num_limbs} limbs, {self.num_channels} channels{where})"
        )

    # ------------------------------------------------------------------ orders and flips (computed once)
    @cached_property
    def dataset_to_internal(self) -> tuple[int, ...]:
        """Internal index of each dataset keypoint."""
        return tuple(self.keypoints.index(n) for n in self.dataset_keypoints)

    @cached_property
    def keypoint_flip(self) -> tuple[int, ...]:
        """Keypoint i of a mirrored person is keypoint ``keypoint_flip[i]`` of the original (an involution)."""
        mirror = {a: b for pair in self.flip_pairs for a, b in (pair, pair[::-1])}
        return tuple(self.keypoints.index(mirror.get(n, n)) for n in self.keypoints)

    @cached_property
    def dataset_keypoint_flip(self) -> tuple[int, ...]:
        """``keypoint_flip`` in the dataset's order: dataset keypoint i's left-right counterpart (itself if none)."""
        internal = self.dataset_to_internal
        return tuple(internal.index(self.keypoint_flip[i]) for i in internal)

    @cached_property
    def limb_flip(self) -> tuple[int, ...]:
        """Limb k of a mirrored person is limb ``limb_flip[k]`` of the original."""
        return tuple(_mirrored_limbs(self.limbs, self.keypoint_flip))

    @cached_property
    def limb_ends(self) -> tuple[np.ndarray, np.ndarray]:
        """(from, to) internal indices of every limb, as two read-only (L,) intp arrays."""
        ends = np.array(self.limbs, np.intp).reshape(-1, 2)
        return _frozen(ends[:, 0].copy()), _frozen(ends[:, 1].copy())

    @cached_property
    def colors_bgr(self) -> tuple[tuple[int, int, int], ...]:
        """One BGR colour per limb (the ``colors`` list cycled, or the hue circle in limb order)."""
        if isinstance(self.colors, str):  # HUE_CIRCLE, the one word the definition allows
            n = self.num_limbs
            return tuple(
                (int(255 * b), int(255 * g), int(255 * r))
                for r, g, b in (colorsys.hsv_to_rgb(i / n, 0.9, 1.0) for i in range(n))
            )
        return tuple(self.colors[k % len(self.colors)] for k in range(self.num_limbs))

    @cached_property
    def _derived_indices(self) -> tuple[tuple[int, np.ndarray], ...]:
        return tuple((self.index(n), np.array([self.index(s) for s in src], np.intp)) for n, _, src in self.derived)

    # ------------------------------------------------------------------ keypoint arrays
    def to_internal(self, dataset_keypoints: np.ndarray) -> np.ndarray:
        """Dataset-order keypoints to the internal layout.

        Args:
            dataset_keypoints: (P, D, 3) (or flat) (x, y, v) with dataset visibility (0 unlabelled, 1 occluded,
                2 visible), image pixels; D = ``num_dataset_keypoints``.
        Returns:
            (P, K, 3) float32 (x, y, v) with internal visibility codes (1 visible, 0 occluded, 2 unlabelled).
            A derived keypoint is the mean of its sources when all are labelled, with the smallest of their codes;
            otherwise it is unlabelled at (0, 0).
        """
        kp = np.asarray(dataset_keypoints, dtype=np.float32).reshape(-1, self.num_dataset_keypoints, 3)
        out = np.zeros((kp.shape[0], self.num_keypoints, 3), np.float32)
        out[:, :, 2] = VIS_UNLABELLED
        vis = np.full(kp.shape[:2], VIS_UNLABELLED, np.float32)
        vis[kp[:, :, 2] == 2] = VIS_VISIBLE
        vis[kp[:, :, 2] == 1] = VIS_OCCLUDED
        into = list(self.dataset_to_internal)
        out[:, into, :2] = kp[:, :, :2]
        out[:, into, 2] = vis
        for target, sources in self._derived_indices:
            src = out[:, sources]  # (P, n, 3)
            labelled = (src[:, :, 2] < VIS_UNLABELLED).all(axis=1)
            total = src[labelled, 0, :2]
            for j in range(1, len(sources)):
                total = total + src[labelled, j, :2]
            out[labelled, target, :2] = total / len(sources)
            out[labelled, target, 2] = src[labelled, :, 2].min(axis=1)
        return out

    def flip_keypoints(self, keypoints: np.ndarray) -> np.ndarray:
        """Swap the left and right keypoint rows of (..., K, C) internal keypoints (x, y and v move together)."""
        return keypoints[..., self.keypoint_flip, :]

    # ------------------------------------------------------------------ plain-dict form
    def to_dict(self) -> dict[str, Any]:
        """The definition as plain data (the YAML file's form): what checkpoints and HDF5 settings carry."""
        k = self.keypoints
        return {
            "name": self.name,
            "dataset_keypoints": list(self.dataset_keypoints),
            "derived": {n: {rule: list(src)} for n, rule, src in self.derived},
            "keypoints": list(k),
            "limbs": [[k[a], k[b]] for a, b in self.limbs],
            "flip_pairs": [list(p) for p in self.flip_pairs],
            "sigmas": dict(zip(self.dataset_keypoints, self.sigmas)),
            "draw": {
                "sample_limbs": [[k[self.limbs[i][0]], k[self.limbs[i][1]]] for i in self.draw_limbs],
                "result_edges": [[self.dataset_keypoints[a], self.dataset_keypoints[b]] for a, b in self.draw_edges],
                "colors": self.colors if isinstance(self.colors, str) else [list(c) for c in self.colors],
            },
            # only when not the default, so that COCO's definition (stored in HDF5 files) stays as it was
            **({"evaluation": self.evaluation} if self.evaluation != "coco" else {}),
        }

    @property
    def scored_as_crowdpose(self) -> bool:
        """Whether results are scored as CrowdPose scores them (``evaluation: crowdpose``: OKS scale from the box,
        AP easy / medium / hard by crowd index), not as COCO does."""
        return self.evaluation == "crowdpose"

    def same_layout(self, other: Skeleton) -> bool:
        """Whether a network trained for ``other`` means the same by every channel and every result of this one
        (keypoints, derived rules, limbs and flips equal; name, sigmas and drawing may differ)."""
        return (self.dataset_keypoints, self.keypoints, self.derived, self.limbs, self.flip_pairs) == (
            other.dataset_keypoints,
            other.keypoints,
            other.derived,
            other.limbs,
            other.flip_pairs,
        )


def _frozen(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def _mirrored_limbs(limbs, keypoint_flip) -> list[int]:
    """For each limb, the index of the limb joining its ends' mirrors (a skeleton's definition has one for every
    limb: config.skeleton_definition checks it)."""
    index = {frozenset(limb): i for i, limb in enumerate(limbs)}
    return [index[frozenset((keypoint_flip[a], keypoint_flip[b]))] for a, b in limbs]


class SkeletonFileError(UserError):
    """A skeleton definition that is not valid: ``file`` the file (or checkpoint) it came from, ``key`` the entry at
    fault (``limbs[6]``, ``sigmas``, ``derived.neck``...)."""
