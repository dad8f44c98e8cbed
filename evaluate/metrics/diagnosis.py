"""Where the AP goes: keypoint error diagnosis of COCO-format keypoint results (Ronchi and Perona, "Benchmarking and
Error Diagnosis in Multi-Instance Pose Estimation", ICCV 2017), for any skeleton (its left-right pairs and sigmas).

    diagnosis = diagnose("person_keypoints_val2017.json", "results.json")   # files, or loaded: see diagnose
    diagnosis.keypoint_errors        # {"good": n, "jitter": n, "inversion": n, "swap": n, "miss": n}
    diagnosis.ap                     # AP as found, then after correcting each error type in turn, ...
    diagnosis.to_dict()              # what diagnosis.json holds (diagnosis_report.py writes it, with plots)

The definitions (docs/evaluation.md#error-diagnosis):

* each detection is matched to ground truth as COCO's evaluation matches it (score order, the 20 best per image,
  crowds and people without keypoints ignored), at an OKS of 0.1: the loosest match that still says which person a
  detection is about;
* every labelled keypoint of a matched person is compared by keypoint similarity (KS, the OKS of one keypoint, with
  the person's sigmas and area) with its own ground truth, with its left-right counterpart, and with the same
  keypoint and its counterpart of every other person of the image. The best of these decides: **good** (its own,
  KS >= 0.85), **jitter** (its own, 0.5 <= KS < 0.85), **inversion** (its own counterpart, KS >= 0.5), **swap**
  (another person's, KS >= 0.5), **miss** (nothing within KS 0.5, or not found);
* correcting an error type moves each keypoint of that type to its own ground truth at the KS of the next better
  class: a miss to KS 0.5 (a jitter), a jitter to 0.85 (good), an inversion or a swap to the KS it had with the
  wrong target. The AP is measured after correcting miss, swap, inversion and jitter in turn (cumulatively, as the
  paper's figure), and after each alone;
* scoring errors: after all keypoint corrections each detection is rescored by its best OKS with any person, with
  soft non-maximum suppression of duplicates (``optimal rescoring``);
* background errors: then the detections that match no person at an OKS threshold are left out at that threshold
  (false positives), and finally the people no detection matches (false negatives);
* people lost at OKS 0.5 (matched by no detection there), by cause: **merged** (a detection reaches OKS 0.5 with them
  but was matched to another person: one detection holds two people) or **missed** (none does), and the AP each
  cause costs (the AP with those people left out of the ground truth, less the baseline).

Everything is counted over COCO's area ranges (all, medium, large) and over the number of other people a person
overlaps (box IoU > 0.1: 0, 1-2, 3 or more).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import io
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from simplepose.config.skeleton import Skeleton
from simplepose.config.skeleton_file import load_skeleton
from simplepose.data.coco_annotations import BOX_AREA_FACTOR, keypoint_category, load_coco_keypoints
from simplepose.evaluate.metrics.crowdpose_eval import with_box_areas
from simplepose.evaluate.metrics.own_ids import empty_results, renumbered
from simplepose.evaluate.metrics.own_ids import ground_truth as own_ground_truth
from simplepose.evaluate.metrics.results_file import read_results

ERROR_TYPES = ("good", "jitter", "inversion", "swap", "miss")
LOST_CAUSES = ("merged", "missed")  # why a person no detection matches at OKS 0.5 is lost
CLASS_NAMES = {**dict(enumerate(ERROR_TYPES)), -1: None}  # a keypoint's class index -> its name (-1: unlabelled)
CORRECTED = ("miss", "swap", "inversion", "jitter")  # the order of the paper's cumulative corrections
AREA_RANGES = {"all": (0.0, 1e10), "medium": (32.0**2, 96.0**2), "large": (96.0**2, 1e10)}  # pycocotools' own
OVERLAP_GROUPS = {"0": (0, 0), "1-2": (1, 2), "3+": (3, 10**9)}


@dataclass(frozen=True)
class DiagnosisParams:
    """The thresholds of the definitions (the paper's values)."""

    localisation_oks: float = 0.1  # a detection is about the person it matches at this OKS
    good_ks: float = 0.85  # KS at or above: good (else jitter, down to ``jitter_ks``)
    jitter_ks: float = 0.5  # KS below: a miss, unless another target is within it
    overlap_iou: float = 0.1  # two people overlap when their boxes' IoU is above this
    max_dets: int = 20  # COCO's keypoint evaluation keeps the 20 best detections per image
    worst: int = 8  # detections listed (and drawn) as the worst examples


@dataclass
class Diagnosis:
    """The figures of one diagnosis (``diagnose``); ``to_dict`` is the JSON form."""

    skeleton: str
    keypoint_names: tuple[str, ...]
    images: int
    detections: int
    people: int  # ground-truth people with labelled keypoints, not crowds
    keypoint_errors: dict[str, int]
    per_keypoint: dict[str, dict[str, int]]
    ap: dict[str, float]  # "baseline", then cumulative: "+miss", "+swap", "+inversion", "+jitter", "+score", ...
    ap_alone: dict[str, float]  # each keypoint error type corrected alone
    ap_gains: dict[str, float]  # the cumulative steps' gains (the paper's AP improvement)
    background: dict[str, int]
    by_size: dict[str, dict]
    by_overlap: dict[str, dict]
    pr_curves: dict[str, dict[str, list[float]]]  # OKS threshold -> {"recall": [...], stage: precision [...]}
    worst: list[dict]  # the worst detections: image, person, keypoint classes
    # people no detection matches at OKS 0.5, by cause (LOST_CAUSES): {"merged": n, "missed": n}; the AP gained
    # with each cause's people left out of the ground truth; and each lost person (``_LostPeople.listed``)
    lost_people: dict[str, int] = field(default_factory=dict)
    lost_ap_cost: dict[str, float] = field(default_factory=dict)
    lost: list[dict] = field(default_factory=list)
    params: DiagnosisParams = field(default_factory=DiagnosisParams)
    # every matched detection: its index in the results given -> the class of each keypoint (None: not labelled).
    # Not in diagnosis.json (a COCO-sized file has tens of thousands); for finding, say, every inversion in Python.
    detection_classes: dict[int, list[str | None]] = field(default_factory=dict)

    def to_dict(self) -> dict:
        out = asdict(self)
        del out["detection_classes"]
        out["keypoint_names"] = list(self.keypoint_names)
        total = max(sum(self.keypoint_errors.values()), 1)
        out["keypoint_error_fractions"] = {k: v / total for k, v in self.keypoint_errors.items()}
        return out


def diagnose(
    ground_truth,
    results: str | Path | list[dict],
    skeleton: str | Path | Skeleton = "coco",
    image_ids: Sequence[int] | None = None,
    params: DiagnosisParams = DiagnosisParams(),
) -> Diagnosis:
    """The diagnosis of ``results`` (a COCO keypoint results file made by any tool, or its list of entries, with the
    annotation file's image ids) on ``ground_truth`` (a COCO person-keypoints file, or the ``coco`` of the ground
    truth ``evaluate.metrics.annotations.load_ground_truth`` read with ``skeleton``), with ``skeleton``'s sigmas and
    left-right pairs (a name, a skeleton file or a ``Skeleton``), on ``image_ids`` (default: every image of the
    ground truth).
    CrowdPose skeletons use CrowdPose's OKS scale (0.53 x the box area) and drop results without any found
    keypoint, as CrowdPose's evaluation does. The baseline AP is the evaluation's own."""
    skeleton = skeleton if isinstance(skeleton, Skeleton) else load_skeleton(skeleton)
    coco = ground_truth
    if isinstance(ground_truth, (str, Path)):
        coco = own_ground_truth(load_coco_keypoints(Path(ground_truth), skeleton, purpose="this diagnosis"))
    category = keypoint_category(coco.dataset, skeleton, getattr(coco, "file", "the ground truth"))
    if isinstance(results, (str, Path)):
        results = read_results(results, coco, skeleton, category)
    image_ids = sorted(coco.imgs) if image_ids is None else image_ids
    crowdpose = skeleton.scored_as_crowdpose
    given = list(range(len(results)))  # the index in the list given of each result scored
    if crowdpose:
        given = [i for i in given if any(v > 0 for v in results[i]["keypoints"][2::3])]
        results = [results[i] for i in given]
    # own ids (evaluate/metrics/own_ids.py): results numbered 1..R in list order, as pycocotools' loadRes numbers them
    gt, dts, ids = renumbered(with_box_areas(coco), results, list(image_ids))
    file_image_id = {new: old for old, new in zip(sorted(coco.imgs), range(1, len(coco.imgs) + 1))}
    if crowdpose:
        for ann in gt.dataset["annotations"]:  # the index holds the same dicts
            ann["area"] = BOX_AREA_FACTOR * ann["bbox"][2] * ann["bbox"][3]  # CrowdPose's OKS scale
    areas = ("all",) if crowdpose else tuple(AREA_RANGES)
    scorer = _Scorer(gt, ids, np.asarray(skeleton.sigmas, np.float64), areas, params.max_dets)
    kps = _KeypointAnalysis(gt, dts, scorer, skeleton, params)

    ap: dict[str, float] = {}
    curves: dict[str, np.ndarray] = {}
    base = scorer.run(dts, fast_oks=False, keep_ious=True)  # the evaluator's own figures
    ap["baseline"], curves["baseline"] = scorer.ap(base), scorer.curves(base)
    lost = _LostPeople(base, scorer, LOST_OKS)
    base.ious = {}
    lost_cost = {c: _ap_without(scorer, dts, lost.of(c), len(kps.people)) - ap["baseline"] for c in LOST_CAUSES}
    corrected = dts
    for kind in CORRECTED:
        corrected = kps.corrected(corrected, (kind,))
        last = kind == CORRECTED[-1]  # its OKS matrices rescore the detections
        ev = scorer.run(corrected, keep_ious=True) if last else scorer.run_ap(corrected)
        ap[f"+{kind}"], curves[f"+{kind}"] = scorer.ap(ev), scorer.curves(ev)
    alone = {kind: scorer.ap(scorer.run_ap(kps.corrected(dts, (kind,)))) for kind in CORRECTED}
    ev = scorer.run(_rescored(corrected, ev, skeleton.sigmas))
    ap["+score"], curves["+score"] = scorer.ap(ev), scorer.curves(ev)
    background = scorer.without_false_positives(ev)
    ap["+background"], curves["+background"] = scorer.ap(background), scorer.curves(background)
    complete = scorer.without_false_negatives(background)
    ap["+false_negatives"], curves["+false_negatives"] = scorer.ap(complete), scorer.curves(complete)
    stages = list(ap)
    gains = {stages[i].lstrip("+"): ap[stages[i]] - ap[stages[i - 1]] for i in range(1, len(stages))}

    loc = kps.matches
    labels = {d: lab.tolist() for d, lab in kps.labels.items()}  # dt id -> class index per keypoint, -1: unlabelled
    names = skeleton.dataset_keypoints
    counts = np.zeros((len(names), len(ERROR_TYPES)), np.int64)
    for lab in kps.labels.values():
        for c in range(len(ERROR_TYPES)):
            counts[:, c] += lab == c
    unmatched_gt = [g for g in kps.people if g not in loc.gt_to_dt]
    breakdown = _Breakdown(gt, kps, scorer, dts, params)
    return Diagnosis(
        skeleton=skeleton.name,
        keypoint_names=tuple(names),
        images=len(ids),
        detections=len(dts),
        people=len(kps.people),
        keypoint_errors={t: int(counts[:, i].sum()) for i, t in enumerate(ERROR_TYPES)},
        per_keypoint={n: {t: int(counts[k, i]) for i, t in enumerate(ERROR_TYPES)} for k, n in enumerate(names)},
        ap=ap,
        ap_alone=alone,
        ap_gains=gains,
        background={
            "detections_matching_no_person": int(len(dts) - len(loc.dt_to_gt) - loc.ignored),
            "detections_on_ignored_regions": int(loc.ignored),
            "false_positives_at_oks_0.5": int(scorer.unmatched_detections(ev, 0.5)),
            "people_no_detection_reaches": int(len(unmatched_gt)),
            "false_negatives_at_oks_0.5": int(scorer.unmatched_people(ev, 0.5)),
        },
        by_size=breakdown.by_size(),
        by_overlap=breakdown.by_overlap(),
        pr_curves=_pr_curves(curves, scorer),
        worst=kps.worst(file_image_id, params.worst),
        lost_people={c: len(lost.of(c)) for c in LOST_CAUSES},
        lost_ap_cost=lost_cost,
        lost=lost.listed(gt, file_image_id),
        params=params,
        detection_classes={given[d - 1]: [CLASS_NAMES[c] for c in lab] for d, lab in labels.items()},
    )


class _Scorer:
    """COCO's keypoint evaluation of result lists on one renumbered ground truth.

    ``run`` is pycocotools, the evaluator's own (the baseline; with ``fast_oks`` its OKS vectorised over detections,
    the same sums in the same order): it keeps what the diagnosis reads (per-image matches, OKS matrices).
    ``run_ap`` is faster-coco-eval (C++ matching and accumulation, its documented equal of pycocotools; here its
    precision differed by at most 2e-16) for the many evaluations that only need the AP and the curves."""

    def __init__(self, gt, image_ids: list[int], sigmas: np.ndarray, areas: tuple[str, ...], max_dets: int):
        self.gt, self.image_ids, self.sigmas, self.areas, self.max_dets = gt, image_ids, sigmas, areas, max_dets
        self._fast_gt = None

    def _configure(self, ev, thresholds: Sequence[float] | None = None):
        ev.params.imgIds = list(self.image_ids)
        ev.params.kpt_oks_sigmas = self.sigmas
        ev.params.maxDets = [self.max_dets]
        ev.params.areaRng = [list(AREA_RANGES[a]) for a in self.areas]
        ev.params.areaRngLbl = list(self.areas)
        if thresholds is not None:
            ev.params.iouThrs = np.array(thresholds, np.float64)
        return ev

    def run(
        self,
        results: list[dict],
        thresholds: Sequence[float] | None = None,
        keep_ious: bool = False,
        fast_oks: bool = True,
    ):
        """A pycocotools COCOeval after ``evaluate`` and ``accumulate`` (accumulate skipped with custom
        ``thresholds``); its OKS matrices kept with ``keep_ious``."""
        with contextlib.redirect_stdout(io.StringIO()):
            # loadRes adds fields to each entry: copies of the dicts (their lists are only read)
            detections = self.gt.loadRes([dict(r) for r in results]) if results else empty_results(self.gt)
            ev = self._configure(_cocoeval_class(fast_oks)(self.gt, detections, "keypoints"), thresholds)
            ev.evaluate()
            if thresholds is None:
                ev.accumulate()
        if not keep_ious:
            ev.ious = {}
        return ev

    def run_ap(self, results: list[dict], dataset: dict | None = None):
        """faster-coco-eval's evaluation of ``results`` (on ``dataset``, a changed copy of the ground truth's, when
        given): only its ``eval["precision"]`` is read."""
        from faster_coco_eval import COCO, COCOeval_faster

        if dataset is not None:
            gt = COCO(dataset)
        else:
            self._fast_gt = self._fast_gt or COCO(self.gt.dataset)
            gt = self._fast_gt
        if not results:
            return self.run(results)
        with contextlib.redirect_stdout(io.StringIO()):
            detections = gt.loadRes([dict(r) for r in results])
            ev = self._configure(COCOeval_faster(gt, detections, "keypoints", print_function=lambda *a: None))
            ev.evaluate()
            ev.accumulate()
        return ev

    def without(self, people: set[int]) -> dict | None:
        """A copy of the ground truth's dataset with ``people`` (annotation ids) left out: their keypoint counts set to
        0, which COCO's evaluation ignores as it ignores crowds (a detection on them is neither right nor wrong); None
        (the ground truth itself) when ``people`` is empty."""
        if not people:
            return None
        dataset = dict(self.gt.dataset)
        dataset["annotations"] = [
            {**a, "num_keypoints": 0} if a["id"] in people else a for a in self.gt.dataset["annotations"]
        ]
        return dataset

    def ap(self, ev, area: str = "all") -> float:
        p = ev.eval["precision"][:, :, 0, self.areas.index(area), 0]
        return float(p[p > -1].mean()) if (p > -1).any() else -1.0

    def curves(self, ev) -> np.ndarray:
        """(T, R) precision at each OKS threshold and recall threshold, area all."""
        return ev.eval["precision"][:, :, 0, 0, 0].copy()

    def _all_area(self, ev) -> list[dict]:
        rng = list(AREA_RANGES["all"])
        return [e for e in ev.evalImgs if e is not None and e["aRng"] == rng]

    def without_false_positives(self, ev):
        """``ev`` with every detection that matches no person at an OKS threshold ignored at that threshold, then
        accumulated again (a copy)."""
        ev = copy.copy(ev)
        ev.evalImgs = [None if e is None else dict(e) for e in ev.evalImgs]
        for e in ev.evalImgs:
            if e is not None:
                e["dtIgnore"] = np.logical_or(e["dtIgnore"], e["dtMatches"] == 0)
        with contextlib.redirect_stdout(io.StringIO()):
            ev.accumulate()
        return ev

    def without_false_negatives(self, ev):
        """``ev`` with every person no detection matches at a threshold ignored there: each threshold's precision
        from its own accumulation (a copy)."""
        out = copy.copy(ev)
        precision = ev.eval["precision"].copy()
        for t in range(len(ev.params.iouThrs)):
            trial = copy.copy(ev)
            trial.evalImgs = [None if e is None else dict(e) for e in ev.evalImgs]
            for e in trial.evalImgs:
                if e is not None and len(e["gtIds"]):
                    e["gtIgnore"] = np.logical_or(e["gtIgnore"], e["gtMatches"][t] == 0).astype(int)
            with contextlib.redirect_stdout(io.StringIO()):
                trial.accumulate()
            precision[t] = trial.eval["precision"][t]
        out.eval = {**ev.eval, "precision": precision}
        return out

    def unmatched_detections(self, ev, oks: float) -> int:
        t = int(np.argmin(np.abs(ev.params.iouThrs - oks)))
        return int(sum(((e["dtMatches"][t] == 0) & ~e["dtIgnore"][t]).sum() for e in self._all_area(ev)))

    def unmatched_people(self, ev, oks: float) -> int:
        t = int(np.argmin(np.abs(ev.params.iouThrs - oks)))
        return int(sum(((e["gtMatches"][t] == 0) & (np.asarray(e["gtIgnore"]) == 0)).sum() for e in self._all_area(ev)))


@functools.cache
def _cocoeval_class(fast_oks: bool):
    """pycocotools' COCOeval, or a subclass whose ``computeOks`` handles all detections of a person at once."""
    from pycocotools.cocoeval import COCOeval

    if not fast_oks:
        return COCOeval

    class FastOks(COCOeval):
        def computeOks(self, imgId, catId):  # noqa: N802, N803 (pycocotools' names)
            p = self.params
            gts, dts = self._gts[imgId, catId], self._dts[imgId, catId]
            order = np.argsort([-d["score"] for d in dts], kind="mergesort")[: p.maxDets[-1]]
            if len(gts) == 0 or len(order) == 0:
                return []
            k2 = (p.kpt_oks_sigmas * 2) ** 2
            d = np.asarray([dts[i]["keypoints"] for i in order], np.float64).reshape(len(order), -1, 3)
            xd, yd = d[..., 0], d[..., 1]
            ious = np.zeros((len(order), len(gts)))
            for j, gt in enumerate(gts):
                g = np.asarray(gt["keypoints"], np.float64).reshape(-1, 3)
                visible = g[:, 2] > 0
                if visible.any():
                    dx, dy = xd - g[:, 0], yd - g[:, 1]
                else:  # distance to the ground truth's box doubled, as pycocotools measures it
                    x, y, w, h = gt["bbox"]
                    dx = np.maximum(0, x - w - xd) + np.maximum(0, xd - (x + 2 * w))
                    dy = np.maximum(0, y - h - yd) + np.maximum(0, yd - (y + 2 * h))
                e = (dx**2 + dy**2) / k2 / (gt["area"] + np.spacing(1)) / 2
                if visible.any():
                    e = e[:, visible]
                ious[:, j] = [np.sum(row) / row.shape[0] for row in np.exp(-e)]  # pycocotools' sum, row by row
            return ious

    return FastOks


@dataclass
class _Matches:
    """Localisation matches (area all): detection id -> person id, person id -> detection id."""

    dt_to_gt: dict[int, int]
    gt_to_dt: dict[int, int]
    ignored: int  # detections matched to ignored ground truth (crowds, people without keypoints)


class _KeypointAnalysis:
    """Each matched detection's keypoint classes, and the corrected keypoints of each class."""

    def __init__(self, gt, dts: list[dict], scorer: _Scorer, skeleton: Skeleton, params: DiagnosisParams):
        self.params, self.sigmas = params, scorer.sigmas
        self.flip = np.asarray(skeleton.dataset_keypoint_flip, np.int64)
        self.dts = {d["id"]: d for d in dts}
        ev = scorer.run(dts, thresholds=[params.localisation_oks])
        self.matches = _localisation_matches(scorer._all_area(ev))
        evaluated = set(scorer.image_ids)
        self.people = [
            a["id"]
            for a in gt.dataset["annotations"]
            if not a.get("iscrowd") and a["num_keypoints"] > 0 and a["image_id"] in evaluated
        ]
        self.gt = gt
        self.labels: dict[int, np.ndarray] = {}  # dt id -> (K,) class index (ERROR_TYPES), -1: not labelled
        self.fixed: dict[int, np.ndarray] = {}  # dt id -> (K, 2) corrected positions
        self.best_ks: dict[int, np.ndarray] = {}
        for dt_id, gt_id in self.matches.dt_to_gt.items():
            self._classify(self.dts[dt_id], gt.anns[gt_id])

    def _classify(self, dt: dict, person: dict) -> None:
        others = [a for a in self.gt.imgToAnns[dt["image_id"]] if a["id"] != person["id"] and a["num_keypoints"] > 0]
        targets = [person, *others]
        xy = np.array([a["keypoints"] for a in targets], np.float64).reshape(len(targets), -1, 3)
        labelled = xy[..., 2] > 0
        area = np.array([a["area"] for a in targets], np.float64)[:, None]
        d = np.asarray(dt["keypoints"], np.float64).reshape(-1, 3)[:, :2]
        k2 = (2 * self.sigmas) ** 2
        straight = _ks(d, xy[..., :2], area, k2, labelled)  # (n, K): each target's same keypoint
        mirrored = _ks(d, xy[:, self.flip, :2], area, k2, labelled[:, self.flip])  # their counterparts
        table = np.concatenate([straight[:1], mirrored[:1], straight[1:], mirrored[1:]])  # own, own mirrored, others
        best, which = table.max(0), table.argmax(0)
        p = self.params
        own = labelled[0]
        label = np.full(len(own), -1, np.int64)
        label[own] = ERROR_TYPES.index("miss")
        close = own & (best >= p.jitter_ks)
        label[close & (which == 0) & (best >= p.good_ks)] = ERROR_TYPES.index("good")
        label[close & (which == 0) & (best < p.good_ks)] = ERROR_TYPES.index("jitter")
        label[close & (which == 1)] = ERROR_TYPES.index("inversion")
        label[close & (which >= 2)] = ERROR_TYPES.index("swap")
        # the corrected position: the own ground truth, moved along x to the KS of the next better class
        target_ks = np.select(
            [label == ERROR_TYPES.index("jitter"), label == ERROR_TYPES.index("miss")],
            [p.good_ks, p.jitter_ks],
            np.clip(best, 1e-12, 1.0),
        )
        shift = np.sqrt(-2.0 * np.log(target_ks) * area[0, 0] * k2)
        fixed = xy[0, :, :2].copy()
        fixed[:, 0] += shift
        self.labels[dt["id"]], self.fixed[dt["id"]], self.best_ks[dt["id"]] = label, fixed, best

    def corrected(self, results: list[dict], kinds: tuple[str, ...]) -> list[dict]:
        """``results`` with the keypoints of the classes ``kinds`` of every matched detection corrected."""
        codes = [ERROR_TYPES.index(k) for k in kinds]
        out = []
        for r in results:
            label = self.labels.get(r["id"])
            if label is None or not np.isin(label, codes).any():
                out.append(r)
                continue
            kp = np.asarray(r["keypoints"], np.float64).reshape(-1, 3).copy()
            move = np.isin(label, codes)
            kp[move, :2] = self.fixed[r["id"]][move]
            out.append({**r, "keypoints": kp.ravel().tolist()})
        return out

    def worst(self, file_image_id: dict[int, int], count: int) -> list[dict]:
        """The ``count`` matched detections with the most keypoints in error (not good), each as its image (the file's
        id), its person's box and every keypoint's class."""
        good = ERROR_TYPES.index("good")
        errors = {d: int(((lab >= 0) & (lab != good)).sum()) for d, lab in self.labels.items()}
        order = sorted(errors, key=lambda d: (-errors[d], -self.dts[d]["score"]))[:count]
        out = []
        for d in order:
            if errors[d] == 0:
                break
            person = self.gt.anns[self.matches.dt_to_gt[d]]
            out.append(
                {
                    "image_id": file_image_id[self.dts[d]["image_id"]],
                    "score": self.dts[d]["score"],
                    "person_box": person["bbox"],
                    "errors": errors[d],
                    "keypoints": self.dts[d]["keypoints"],
                    "ground_truth": person["keypoints"],
                    "classes": [CLASS_NAMES[c] for c in self.labels[d].tolist()],
                }
            )
        return out


LOST_OKS = 0.5  # the OKS at which people lost are counted by cause


def _ap_without(scorer: _Scorer, dts: list[dict], people: set[int], total: int) -> float:
    """The AP of ``dts`` with ``people`` left out of the ground truth (of ``total`` people); 1.0 where no one is left
    to score (nothing is wrong any more; pycocotools says -1)."""
    if len(people) >= total:
        return 1.0
    if not dts:
        return 0.0
    return scorer.ap(scorer.run_ap(dts, scorer.without(people)))


class _LostPeople:
    """The people no detection matches at OKS ``oks`` in a pycocotools evaluation ``ev`` (run with its OKS matrices
    kept), each with its cause: merged (a detection that is not ignored reaches ``oks`` with them: it was matched to
    another person, a person it reaches better or earlier in score order) or missed."""

    def __init__(self, ev, scorer: _Scorer, oks: float):
        t = int(np.argmin(np.abs(ev.params.iouThrs - oks)))
        self.people: dict[int, dict] = {}  # person id -> cause, best OKS, the detection's own match
        for e in scorer._all_area(ev):
            ious = ev.ious.get((e["image_id"], e["category_id"]), [])
            gt_order = [g["id"] for g in ev._gts[e["image_id"], e["category_id"]]]
            for g, gt_id in enumerate(e["gtIds"]):
                if e["gtIgnore"][g] or e["gtMatches"][t][g]:
                    continue
                best, holder = 0.0, 0
                if len(ious):
                    column = np.asarray(ious)[:, gt_order.index(gt_id)]
                    column = np.where(e["dtIgnore"][t][: len(column)], 0.0, column)
                    d = int(column.argmax())
                    best, holder = float(column[d]), int(e["dtMatches"][t][d])
                cause = "merged" if best >= oks else "missed"
                self.people[gt_id] = {"cause": cause, "oks": best, "held_by": holder if cause == "merged" else 0}

    def of(self, cause: str) -> set[int]:
        return {g for g, p in self.people.items() if p["cause"] == cause}

    def listed(self, gt, file_image_id: dict[int, int]) -> list[dict]:
        """Each lost person: its image (the file's id), its annotation (the file's id, where it has one), its labelled
        keypoints, the cause, the best OKS any detection reaches with it and, when merged, the file's id of the
        person that detection was matched to."""
        out = []
        for gt_id, p in sorted(self.people.items()):
            ann = gt.anns[gt_id]
            held = gt.anns[p["held_by"]].get("file_id") if p["held_by"] else None
            out.append(
                {
                    "image_id": file_image_id[ann["image_id"]],
                    "annotation_id": ann.get("file_id"),
                    "keypoints_labelled": int(ann["num_keypoints"]),
                    "cause": p["cause"],
                    "best_oks": round(p["oks"], 4),
                    "detection_matched_to": held,
                }
            )
        return out


def _ks(d: np.ndarray, targets: np.ndarray, area: np.ndarray, k2: np.ndarray, labelled: np.ndarray) -> np.ndarray:
    """(n, K) keypoint similarity of detection keypoints ``d`` (K, 2) with each target's (n, K, 2); -1 where the
    target keypoint is not labelled."""
    d2 = ((targets - d[None]) ** 2).sum(-1)
    ks = np.exp(-d2 / (2.0 * (area + np.spacing(1)) * k2))
    return np.where(labelled, ks, -1.0)


def _localisation_matches(evals: list[dict]) -> _Matches:
    dt_to_gt, gt_to_dt, ignored = {}, {}, 0
    for e in evals:
        for j, dt_id in enumerate(e["dtIds"]):
            gt_id = int(e["dtMatches"][0][j])
            if gt_id == 0:
                continue
            if e["dtIgnore"][0][j]:
                ignored += 1
                continue
            dt_to_gt[dt_id] = gt_id
            gt_to_dt[gt_id] = dt_id
    return _Matches(dt_to_gt, gt_to_dt, ignored)


def _rescored(results: list[dict], ev, sigmas) -> list[dict]:
    """Optimal rescoring: each detection's score its best OKS with any person of its image (pycocotools' OKS, from
    ``ev.ious``; 0 beyond an image's 20 best), then soft non-maximum suppression within the image so that a duplicate
    of a person already scored high ranks lower (the score times exp(-OKS^2 / 0.5) for each higher one, as
    coco-analyze does). The list keeps its order (and so its ids)."""
    best: dict[int, float] = {}
    for key, ious in ev.ious.items():
        if len(ious) == 0:
            continue
        dts = ev._dts[key]
        order = np.argsort([-d["score"] for d in dts], kind="mergesort")[: ious.shape[0]]
        for j, i in enumerate(order):
            best[dts[i]["id"]] = float(ious[j].max())
    score = {r["id"]: best.get(r["id"], 0.0) for r in results}
    by_image: dict[int, list[dict]] = {}
    for r in results:
        by_image.setdefault(r["image_id"], []).append(r)
    k2 = (2 * np.asarray(sigmas, np.float64)) ** 2
    for people in by_image.values():
        pending = sorted(people, key=lambda r: -score[r["id"]])
        while len(pending) > 1:
            top, pending = pending[0], pending[1:]
            a = np.asarray(top["keypoints"], np.float64).reshape(-1, 3)[:, :2]
            rest = np.array([r["keypoints"] for r in pending], np.float64).reshape(len(pending), -1, 3)[..., :2]
            scale = 0.5 * (_box_area(a[None]) + _box_area(rest)) + np.spacing(1)
            oks = np.exp(-((rest - a) ** 2).sum(-1) / (2 * scale[:, None] * k2)).mean(1)
            for r, o in zip(pending, oks):
                score[r["id"]] *= float(np.exp(-(o**2) / 0.5))
            pending.sort(key=lambda r: -score[r["id"]])
    return [{**r, "score": score[r["id"]]} for r in results]


def _box_area(xy: np.ndarray) -> np.ndarray:
    span = xy.max(1) - xy.min(1)
    return span[:, 0] * span[:, 1]


def _pr_curves(curves: dict[str, np.ndarray], scorer: _Scorer) -> dict[str, dict[str, list[float]]]:
    recall = np.linspace(0.0, 1.0, 101)
    out = {}
    for oks in (0.5, 0.75):
        t = int(round((oks - 0.5) / 0.05))
        out[f"oks_{oks:.2f}"] = {
            "recall": recall.round(2).tolist(),
            **{k: np.round(v[t], 4).tolist() for k, v in curves.items()},
        }
    return out


class _Breakdown:
    """The counts by person size and by the number of other people a person overlaps."""

    def __init__(self, gt, kps: _KeypointAnalysis, scorer: _Scorer, dts: list[dict], params: DiagnosisParams):
        from pycocotools import mask as mask_utils

        self.gt, self.kps, self.scorer, self.dts, self.params = gt, kps, scorer, dts, params
        self.overlaps: dict[int, int] = {}
        for image_id in scorer.image_ids:
            anns = [a for a in gt.imgToAnns[image_id] if not a.get("iscrowd")]
            if not anns:
                continue
            boxes = [a["bbox"] for a in anns]
            iou = np.asarray(mask_utils.iou(boxes, boxes, [0] * len(boxes)), np.float64).reshape(len(boxes), -1)
            for i, a in enumerate(anns):
                self.overlaps[a["id"]] = int((iou[i] > params.overlap_iou).sum() - 1)

    def _counts(self, people: list[int]) -> dict:
        chosen = set(people)
        counts = dict.fromkeys(ERROR_TYPES, 0)
        for dt_id, gt_id in self.kps.matches.dt_to_gt.items():
            if gt_id in chosen:
                lab = self.kps.labels[dt_id]
                for i, t in enumerate(ERROR_TYPES):
                    counts[t] += int((lab == i).sum())
        total = max(sum(counts.values()), 1)
        reached = sum(1 for g in people if g in self.kps.matches.gt_to_dt)
        return {
            "people": len(people),
            "people_no_detection_reaches": len(people) - reached,
            "keypoint_errors": counts,
            "keypoint_error_fractions": {k: v / total for k, v in counts.items()},
        }

    def by_size(self) -> dict:
        out = {}
        for name in ("medium", "large"):
            lo, hi = AREA_RANGES[name]
            people = [g for g in self.kps.people if lo <= self.gt.anns[g]["area"] < hi]
            out[name] = self._counts(people)
        return out

    def by_overlap(self) -> dict:
        """Counts per overlap group, and the AP with only that group's people scored (the others ignored, as
        crowds are: a detection on them is neither right nor wrong)."""
        out = {}
        for name, (lo, hi) in OVERLAP_GROUPS.items():
            people = [g for g in self.kps.people if lo <= self.overlaps.get(g, 0) <= hi]
            entry = self._counts(people)
            entry["ap"] = self._ap_of(set(people)) if people else -1.0
            out[name] = entry
        return out

    def _ap_of(self, people: set[int]) -> float:
        """The AP with only ``people`` scored (the others left out: ``_Scorer.without``)."""
        others = {a["id"] for a in self.gt.dataset["annotations"] if a["id"] not in people and a["num_keypoints"] > 0}
        return self.scorer.ap(self.scorer.run_ap(self.dts, self.scorer.without(others)))
