"""A skeleton definition (a parsed YAML file of ``config/skeletons/``, or ``Skeleton.to_dict``'s plain-data form)
checked entry by entry and read into a ``config.skeleton.Skeleton``; every problem is a ``SkeletonFileError`` naming
the file, the entry and what to do (format: docs/skeleton.md#skeleton-files).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from simplepose.config.skeleton import EVALUATIONS, HUE_CIRCLE, Skeleton, SkeletonFileError

_KEYS = ("name", "dataset_keypoints", "derived", "keypoints", "limbs", "flip_pairs", "sigmas", "draw", "evaluation")
_DRAW_KEYS = ("sample_limbs", "result_edges", "colors")
_RULES = ("midpoint",)


def skeleton_from_dict(data: Any, source: str = "") -> Skeleton:
    """The ``Skeleton`` of a definition (a parsed YAML file or ``Skeleton.to_dict``'s form), checked. UserError
    naming ``source`` (the file or checkpoint it came from), the entry and what to do when anything is wrong."""
    return _Parser(source or "the skeleton definition").skeleton(data)


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

    def require_known(self, names, known: tuple[str, ...], what: str, kind: str, key: str) -> None:
        """A failure for the first of ``names`` not in ``known``: ``what`` with ``{name}`` as its repr, and the
        ``kind`` of names to use instead."""
        for name in names:
            if name not in known:
                raise self.fail(what.replace("{name}", repr(name)), f"use {kind}: {', '.join(known)}", key=key)

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
            what = f"{entry}[{i}] {pair} names the unknown keypoint {{name}}"
            self.require_known(pair, known, what, f"one of the {kind}", f"{entry}[{i}]")
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
            what = f"{where}: '{kind}' names {{name}}, which is not a dataset keypoint"
            self.require_known(sources, dataset, what, "dataset keypoints", f"derived.{n}")
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
        drawn = list(range(len(limbs)))
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
