"""The skeleton as data: keypoints, derived keypoints, limbs, flips, OKS sigmas, drawing and the channel layout.

A skeleton is a YAML file (``config/skeletons/NAME.yaml``; format: docs/skeleton.md#skeleton-files) read into one
immutable ``Skeleton`` (by ``config.skeleton_file``); every stage receives it as a parameter or attribute: the
converter (keypoints per annotation), the dataset (dataset -> internal order, flips), the targets and the loss
(channel layout), the network (output channels), flip fusion, decoding, drawing and evaluation (OKS sigmas).

    skeleton = load_skeleton("coco")          # config.skeleton_file: a name in config/skeletons/, or a YAML file
    skeleton = skeleton_of(cfg)               # config.skeleton_file: the one cfg.data.skeleton names
    Skeleton.from_dict(skeleton.to_dict())    # the plain-dict form checkpoints and HDF5 files carry

Two keypoint orders: the *dataset* order (annotations and results, e.g. COCO's 17) and the *internal* order (the
channels), which adds the derived keypoints (COCO's neck). Channel layout, with L limbs and K internal keypoints
(docs/skeleton.md#channel-layout):

    0 .. L-1      limb maps, in ``limbs`` order (scalar maps; the original calls them "paf")
    L .. L+K-1    keypoint maps, in internal order
    L+K           person mask (eroded segmentation of every person; the original calls it "background")
    L+K+1         pixel-wise max over the K keypoint maps (the original calls it "reverseKeypoint")

COCO (coco.yaml): L = 30, K = 18, 50 channels.
"""

from __future__ import annotations

import colorsys
import math
from collections.abc import Mapping
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

_KEYS = ("name", "dataset_keypoints", "derived", "keypoints", "limbs", "flip_pairs", "sigmas", "draw", "evaluation")
_DRAW_KEYS = ("sample_limbs", "result_edges", "colors")
_RULES = ("midpoint",)
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
        if self.colors == HUE_CIRCLE:
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

    @classmethod
    def from_dict(cls, data: Any, source: str = "") -> Skeleton:
        """Validate a skeleton definition (a parsed YAML file or ``to_dict``'s form). UserError naming ``source``,
        the entry and what to do when anything is wrong."""
        return _Parser(source or "the skeleton definition").skeleton(data)

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


def _mirrored_limbs(limbs, keypoint_flip) -> list[int | None]:
    """For each limb, the index of the limb joining its ends' mirrors (None when there is none)."""
    index = {frozenset(limb): i for i, limb in enumerate(limbs)}
    return [index.get(frozenset((keypoint_flip[a], keypoint_flip[b]))) for a, b in limbs]


class SkeletonFileError(UserError):
    """A skeleton definition that is not valid: ``file`` the file (or checkpoint) it came from, ``key`` the entry at
    fault (``limbs[6]``, ``sigmas``, ``derived.neck``...)."""


class _Parser:
    """Turns a parsed definition into a ``Skeleton``; every problem is a UserError naming the file and the entry."""

    def __init__(self, source: str):
        self.source = source

    def fail(self, what: str, fix: str, key: str | None = None) -> SkeletonFileError:
        return SkeletonFileError(
            f"skeleton {self.source}: {what}; {fix} (format: docs/skeleton.md#skeleton-files)",
            file=self.source,
            key=key,
        )

    def names(self, value: Any, entry: str) -> tuple[str, ...]:
        if not isinstance(value, list) or not value or not all(isinstance(n, str) and n for n in value):
            raise self.fail(
                f"'{entry}' must be a non-empty list of keypoint names, got {value!r}", "fix the list", key=entry
            )
        seen: set[str] = set()
        for n in value:
            if n in seen:
                raise self.fail(f"'{entry}' names {n!r} twice", "give every keypoint once", key=entry)
            seen.add(n)
        return tuple(value)

    def pairs(self, value: Any, entry: str, known: tuple[str, ...], kind: str) -> list[tuple[str, str]]:
        """A list of [a, b] name pairs, each name in ``known`` and a != b."""
        if not isinstance(value, list):
            raise self.fail(f"'{entry}' must be a list of [a, b] pairs, got {value!r}", "fix the list", key=entry)
        out = []
        for i, pair in enumerate(value):
            if not isinstance(pair, list) or len(pair) != 2 or not all(isinstance(n, str) for n in pair):
                raise self.fail(
                    f"{entry}[{i}] must be a pair of keypoint names [a, b], got {pair!r}", "fix it", key=f"{entry}[{i}]"
                )
            for n in pair:
                if n not in known:
                    raise self.fail(
                        f"{entry}[{i}] {pair} names the unknown keypoint {n!r}",
                        f"use one of the {kind}: {', '.join(known)}",
                        key=f"{entry}[{i}]",
                    )
            if pair[0] == pair[1]:
                raise self.fail(
                    f"{entry}[{i}] {pair} joins a keypoint to itself",
                    "give two different keypoints",
                    key=f"{entry}[{i}]",
                )
            out.append((pair[0], pair[1]))
        return out

    def skeleton(self, data: Any) -> Skeleton:
        if not isinstance(data, Mapping):
            raise self.fail(f"expected a mapping of {', '.join(_KEYS)}, got {type(data).__name__}", "fix the file")
        unknown = sorted(set(map(str, data)) - set(_KEYS))
        if unknown:
            raise self.fail(f"unknown entries {unknown}", f"the entries are {', '.join(_KEYS)}", key=unknown[0])
        for key in ("dataset_keypoints", "limbs", "sigmas"):
            if key not in data:
                raise self.fail(f"no '{key}' entry", "add it", key=key)
        name = data.get("name")
        if not isinstance(name, str) or not name:
            raise self.fail(f"'name' must be a non-empty string, got {name!r}", "name the skeleton", key="name")
        dataset = self.names(data["dataset_keypoints"], "dataset_keypoints")
        derived = self.derived(data.get("derived") or {}, dataset)
        keypoints = self.internal_order(data.get("keypoints"), dataset, derived)
        limb_names = self.pairs(data["limbs"], "limbs", keypoints, "keypoints")
        limbs = tuple((keypoints.index(a), keypoints.index(b)) for a, b in limb_names)
        self.check_limbs(limb_names, keypoints)
        flip_pairs = self.flip_pairs(data.get("flip_pairs") or [], keypoints)
        self.check_symmetry(limb_names, flip_pairs, derived)
        sigmas = self.sigmas(data["sigmas"], dataset, derived)
        draw_limbs, draw_edges, colors = self.draw(data.get("draw") or {}, limb_names, dataset)
        evaluation = data.get("evaluation", "coco")
        if evaluation not in EVALUATIONS:
            raise self.fail(
                f"'evaluation' must be one of {', '.join(EVALUATIONS)}, got {evaluation!r}",
                "coco for COCO-like files, crowdpose for CrowdPose's",
                key="evaluation",
            )
        return Skeleton(
            name,
            dataset,
            keypoints,
            derived,
            limbs,
            flip_pairs,
            sigmas,
            draw_limbs,
            draw_edges,
            colors,
            evaluation,
            source=self.source,
        )

    def derived(self, value: Any, dataset: tuple[str, ...]) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
        if not isinstance(value, Mapping):
            raise self.fail(
                f"'derived' must map keypoint names to rules, got {value!r}",
                "e.g. neck: {midpoint: [left_shoulder, right_shoulder]}",
                key="derived",
            )
        out = []
        for n, rule in value.items():
            where = f"derived keypoint {n!r}"
            if n in dataset:
                raise self.fail(
                    f"{where} is also a dataset keypoint", "rename it, or drop the rule", key=f"derived.{n}"
                )
            if not isinstance(rule, Mapping) or len(rule) != 1 or next(iter(rule)) not in _RULES:
                raise self.fail(
                    f"{where}: the rule must be one of {list(_RULES)}, got {rule!r}",
                    "e.g. neck: {midpoint: [left_shoulder, right_shoulder]}",
                    key=f"derived.{n}",
                )
            kind, sources = next(iter(rule.items()))
            if not isinstance(sources, list) or len(sources) < 2 or len(set(map(str, sources))) != len(sources):
                raise self.fail(
                    f"{where}: '{kind}' needs two or more different keypoints, got {sources!r}",
                    "fix it",
                    key=f"derived.{n}",
                )
            for s in sources:
                if s not in dataset:
                    raise self.fail(
                        f"{where}: '{kind}' names {s!r}, which is not a dataset keypoint",
                        f"use dataset keypoints: {', '.join(dataset)}",
                        key=f"derived.{n}",
                    )
            out.append((str(n), kind, tuple(sources)))
        return tuple(out)

    def internal_order(self, value: Any, dataset: tuple[str, ...], derived) -> tuple[str, ...]:
        everything = dataset + tuple(n for n, _, _ in derived)
        if value is None:
            return everything
        order = self.names(value, "keypoints")
        missing, extra = [n for n in everything if n not in order], [n for n in order if n not in everything]
        if missing or extra:
            raise self.fail(
                f"'keypoints' (the internal order) must list every dataset and derived keypoint once: missing "
                f"{missing}, unknown {extra}",
                "fix the list, or leave 'keypoints' out (dataset order, then derived)",
                key="keypoints",
            )
        return order

    def check_limbs(self, limbs: list[tuple[str, str]], keypoints: tuple[str, ...]) -> None:
        """No duplicate limb; every keypoint in a limb; all keypoints connected (one person is one component)."""
        seen: dict[frozenset, int] = {}
        for i, (a, b) in enumerate(limbs):
            if frozenset((a, b)) in seen:
                first = seen[frozenset((a, b))]
                raise self.fail(
                    f"limbs[{i}] [{a}, {b}] repeats limbs[{first}]", "give each limb once", key=f"limbs[{i}]"
                )
            seen[frozenset((a, b))] = i
        reached = {n for limb in limbs for n in limb}
        for n in keypoints:
            if n not in reached:
                raise self.fail(
                    f"keypoint {n!r} is in no limb, so the decoder could never attach it to a person",
                    f"add a limb joining it to a neighbouring keypoint to 'limbs', e.g. [NEIGHBOUR, {n}]",
                    key="limbs",
                )
        component = {limbs[0][0]}
        grew = True
        while grew:
            grew = False
            for a, b in limbs:
                if (a in component) != (b in component):
                    component |= {a, b}
                    grew = True
        apart = [n for n in keypoints if n not in component]
        if apart:
            raise self.fail(
                f"keypoints {apart} are not joined to {sorted(component)} by any chain of limbs, so the decoder "
                "would split every person in two",
                "add a limb between the two groups",
                key="limbs",
            )

    def flip_pairs(self, value: Any, keypoints: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
        pairs = self.pairs(value, "flip_pairs", keypoints, "keypoints")
        seen: dict[str, int] = {}
        for i, pair in enumerate(pairs):
            for n in pair:
                if n in seen:
                    raise self.fail(
                        f"flip_pairs[{i}] {list(pair)}: {n!r} is already in flip_pairs[{seen[n]}]",
                        "a keypoint mirrors to one other keypoint only",
                        key=f"flip_pairs[{i}]",
                    )
                seen[n] = i
        return tuple(pairs)

    def check_symmetry(self, limbs, flip_pairs, derived) -> None:
        """Mirroring maps every limb to a limb and every derived rule to the mirrored keypoint's rule."""
        mirror = {a: b for pair in flip_pairs for a, b in (pair, pair[::-1])}
        m = lambda n: mirror.get(n, n)  # noqa: E731
        limb_set = {frozenset(limb) for limb in limbs}
        for i, (a, b) in enumerate(limbs):
            if frozenset((m(a), m(b))) not in limb_set:
                raise self.fail(
                    f"limbs[{i}] [{a}, {b}] mirrors to [{m(a)}, {m(b)}] under flip_pairs, which is not a limb, so a "
                    "mirrored picture could not be mapped back (flip pairs that are not left/right symmetric)",
                    "add the mirrored limb, or fix flip_pairs",
                    key=f"limbs[{i}]",
                )
        rules = {n: (kind, frozenset(src)) for n, kind, src in derived}
        for n, (kind, src) in rules.items():
            mirrored = rules.get(m(n))
            if mirrored is None or mirrored != (kind, frozenset(map(m, src))):
                raise self.fail(
                    f"derived keypoint {n!r} ({kind} of {sorted(src)}) does not mirror to the rule of {m(n)!r} under "
                    "flip_pairs",
                    "pair derived keypoints whose sources are mirrors, or make the sources symmetric",
                    key=f"derived.{n}",
                )

    def sigmas(self, value: Any, dataset: tuple[str, ...], derived) -> tuple[float, ...]:
        if not isinstance(value, Mapping):
            raise self.fail(
                f"'sigmas' must map each dataset keypoint to its OKS sigma, got {value!r}", "fix it", key="sigmas"
            )
        unknown = [n for n in value if n not in dataset]
        if unknown:
            is_derived = any(n == d for d, _, _ in derived for n in unknown)
            hint = " (derived keypoints are not evaluated)" if is_derived else ""
            raise self.fail(
                f"'sigmas' names keypoints that are not dataset keypoints: {unknown}{hint}",
                f"give sigmas for exactly: {', '.join(dataset)}",
                key="sigmas",
            )
        missing = [n for n in dataset if n not in value]
        if missing:
            raise self.fail(
                f"'sigmas' lacks {missing}",
                "give an OKS sigma for every dataset keypoint (COCO's are 0.025-0.107)",
                key="sigmas",
            )
        out = []
        for n in dataset:
            s = value[n]
            if isinstance(s, bool) or not isinstance(s, (int, float)) or not math.isfinite(s) or s <= 0:
                raise self.fail(f"sigmas[{n!r}] must be a positive number, got {s!r}", "fix it", key=f"sigmas.{n}")
            out.append(float(s))
        return tuple(out)

    def draw(self, value: Any, limbs: list[tuple[str, str]], dataset: tuple[str, ...]):
        """(limb indices drawn on samples, dataset index pairs drawn on results, colours)."""
        if not isinstance(value, Mapping) or set(map(str, value)) - set(_DRAW_KEYS):
            raise self.fail(f"'draw' must be a mapping of {', '.join(_DRAW_KEYS)}, got {value!r}", "fix it", key="draw")
        index = {frozenset(limb): i for i, limb in enumerate(limbs)}
        every = sorted({n for limb in limbs for n in limb})
        drawn = range(len(limbs))
        if "sample_limbs" in value:
            drawn = []
            for i, pair in enumerate(self.pairs(value["sample_limbs"], "draw.sample_limbs", tuple(every), "keypoints")):
                if frozenset(pair) not in index:
                    raise self.fail(
                        f"draw.sample_limbs[{i}] {list(pair)} is not a limb",
                        "list limbs of 'limbs' only",
                        key=f"draw.sample_limbs[{i}]",
                    )
                drawn.append(index[frozenset(pair)])
        if "result_edges" in value:
            edges = self.pairs(value["result_edges"], "draw.result_edges", dataset, "dataset keypoints")
        else:
            edges = [limb for limb in limbs if limb[0] in dataset and limb[1] in dataset]
        colors = value.get("colors", HUE_CIRCLE)
        if colors != HUE_CIRCLE:
            ok = (
                isinstance(colors, list)
                and colors
                and all(
                    isinstance(c, list) and len(c) == 3 and all(isinstance(v, int) and 0 <= v <= 255 for v in c)
                    for c in colors
                )
            )
            if not ok:
                raise self.fail(
                    f"draw.colors must be {HUE_CIRCLE} or a list of [b, g, r] (0-255), got {colors!r}",
                    "fix it",
                    key="draw.colors",
                )
            colors = tuple(tuple(c) for c in colors)
        dataset_edges = tuple((dataset.index(a), dataset.index(b)) for a, b in edges)
        return tuple(sorted(set(drawn))), dataset_edges, colors
