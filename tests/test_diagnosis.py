"""Error diagnosis (evaluate/metrics/diagnosis.py): errors of each type injected into results made from real annotations
are classified as that type, the counts equal an independent check written from the definitions, correcting a type gives
back the AP it cost, and a CrowdPose skeleton, the command and the report work."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from simplepose.config.config_file import load_config
from simplepose.config.schema import EvalConfig
from simplepose.config.skeleton_file import load_skeleton
from simplepose.evaluate import coco_eval
from simplepose.evaluate.metrics.annotations import load_ground_truth
from simplepose.evaluate.metrics.diagnosis import ERROR_TYPES, diagnose
from simplepose.evaluate.metrics.diagnosis_report import write_diagnosis
from simplepose.evaluate.metrics.keypoint_stats import keypoint_stats
from simplepose.evaluate.results_scoring import score_results
from tests.helpers import COCO, FAINT_MAPS, train_a_few_steps
from tests.paths import COCO_SAMPLE_ANNOTATIONS

KINDS = ("jitter", "inversion", "swap", "miss")


def people_of(data: dict, min_keypoints: int = 8) -> list[dict]:
    return [a for a in data["annotations"] if not a.get("iscrowd") and a.get("num_keypoints", 0) >= min_keypoints]


def labelled_by_image(data: dict) -> dict[int, list[dict]]:
    """Image id -> its annotations with labelled keypoints."""
    by_image: dict[int, list[dict]] = {}
    for a in data["annotations"]:
        if a.get("num_keypoints", 0) > 0:
            by_image.setdefault(a["image_id"], []).append(a)
    return by_image


def ks(d, g, area, sigma) -> float:
    """One keypoint's similarity, COCO's formula: exp(-d^2 / (2 area (2 sigma)^2))."""
    return math.exp(-((d[0] - g[0]) ** 2 + (d[1] - g[1]) ** 2) / (2 * (area + np.spacing(1)) * (2 * sigma) ** 2))


def oks_area(person: dict, skeleton) -> float:
    """The OKS scale: the annotation's area (COCO), 0.53 x its box area (CrowdPose's evaluation)."""
    if skeleton.evaluation == "crowdpose":
        return 0.53 * person["bbox"][2] * person["bbox"][3]
    return person["area"]


def classes_by_hand(det: list[float], person: dict, others: list[dict], skeleton) -> list[str | None]:
    """The definitions, keypoint by keypoint with plain loops: the best of the own ground truth, its left-right
    counterpart and every other person's same keypoint and counterpart decides."""
    flip, sigmas = skeleton.dataset_keypoint_flip, skeleton.sigmas
    out = []
    for k in range(skeleton.num_dataset_keypoints):
        if person["keypoints"][3 * k + 2] == 0:
            out.append(None)
            continue
        d = det[3 * k : 3 * k + 2]
        candidates = []  # (ks, what), in the order own, own mirrored, others (ties: the first)
        for who, target in [("own", person)] + [("other", o) for o in others]:
            for j, mirrored in ((k, False), (flip[k], True)):
                if target["keypoints"][3 * j + 2] > 0:
                    g = target["keypoints"][3 * j : 3 * j + 2]
                    what = "swap" if who == "other" else "inversion" if mirrored and j != k else "own"
                    candidates.append((ks(d, g, oks_area(target, skeleton), sigmas[k]), what))
        own = [c for c in candidates if c[1] == "own"]
        rest = [c for c in candidates if c[1] != "own"]
        best = max(own + rest, key=lambda c: c[0])
        if best[0] < 0.5:
            out.append("miss")
        elif best[1] == "own" or best[0] == own[0][0]:
            out.append("good" if best[0] >= 0.85 else "jitter")
        else:
            out.append(best[1])
    return out


def inject(data: dict, skeleton, seed: int = 0) -> tuple[list[dict], dict[int, tuple[int, str]]]:
    """Results of every person of 8+ labelled keypoints, at their ground truth, each of the first ones with one
    error of a type taken in turn: (results, {result index: (keypoint, type)})."""
    rng = np.random.default_rng(seed)
    people = people_of(data)
    by_image = labelled_by_image(data)
    flip, sigmas = skeleton.dataset_keypoint_flip, skeleton.sigmas
    results, injected = [], {}
    for i, person in enumerate(people):
        kp = np.array(person["keypoints"], np.float64).reshape(-1, 3)
        kp[:, 2] = (kp[:, 2] > 0).astype(float)
        kp[kp[:, 2] == 0, :2] = 0
        labelled = np.flatnonzero(kp[:, 2] > 0)
        kind = KINDS[i % len(KINDS)]
        others = [o for o in by_image[person["image_id"]] if o["id"] != person["id"]]
        choices = []
        if kind == "jitter":  # moved to a KS of 0.7 from its own ground truth
            choices = [(k, None) for k in labelled]
        elif kind == "inversion":  # onto its left-right counterpart's ground truth
            choices = [(k, None) for k in labelled if flip[k] != k and kp[flip[k], 2] > 0]
        elif kind == "swap":  # onto the same keypoint of another person
            choices = [(k, o) for o in others for k in labelled if o["keypoints"][3 * k + 2] > 0]
        else:  # moved far away
            choices = [(k, None) for k in labelled]
        if choices:
            k, other = choices[int(rng.integers(len(choices)))]
            if kind == "jitter":
                distance = math.sqrt(-2 * math.log(0.7) * oks_area(person, skeleton) * (2 * sigmas[k]) ** 2)
                angle = rng.uniform(0, 2 * math.pi)
                kp[k, :2] += distance * np.array([math.cos(angle), math.sin(angle)])
            elif kind == "inversion":
                kp[k, :2] = person["keypoints"][3 * flip[k] : 3 * flip[k] + 2]
            elif kind == "swap":
                kp[k, :2] = other["keypoints"][3 * k : 3 * k + 2]
            else:
                kp[k, :2] += 40 * math.sqrt(person["area"]) + 500
            injected[len(results)] = (int(k), kind)
        results.append(
            {
                "image_id": person["image_id"],
                "category_id": 1,
                "keypoints": kp.ravel().tolist(),
                "score": float(rng.uniform(0.5, 1.0)),
            }
        )
    return results, injected


def test_injected_errors_are_classified_by_the_definitions(sample_annotations, tmp_path):
    data = json.loads(sample_annotations.read_text())
    results, injected = inject(data, COCO)
    found = diagnose(sample_annotations, results, "coco")
    assert len(found.detection_classes) == len(results)  # every detection matched its own person
    people = people_of(data)
    by_image = labelled_by_image(data)
    counts = dict.fromkeys(ERROR_TYPES, 0)
    agree = 0
    for i, (r, person) in enumerate(zip(results, people)):
        others = [o for o in by_image[person["image_id"]] if o["id"] != person["id"]]
        expected = classes_by_hand(r["keypoints"], person, others, COCO)
        assert found.detection_classes[i] == expected, (i, person["id"])
        for c in expected:
            if c is not None:
                counts[c] += 1
        if i in injected:
            k, kind = injected[i]
            agree += expected[k] == kind
    assert found.keypoint_errors == counts
    kinds = [kind for _, kind in injected.values()]
    assert agree >= 0.9 * len(injected) and all(kinds.count(k) >= 2 for k in KINDS), (agree, len(injected))
    for kind in KINDS:
        assert found.keypoint_errors[kind] >= 1
    # the costs: each corrected type alone gives AP back; the baseline is the evaluation's own AP
    coco = load_ground_truth(sample_annotations, COCO, EvalConfig()).coco
    stats, _ = keypoint_stats(coco, results, sorted(coco.imgs), COCO)
    assert found.ap["baseline"] == pytest.approx(stats["AP"], abs=1e-12)
    assert found.ap["+jitter"] >= found.ap["baseline"]
    assert found.ap_alone["miss"] > found.ap["baseline"]
    assert found.background["detections_matching_no_person"] == 0
    assert found.background["people_no_detection_reaches"] == len(people_of(data, 1)) - len(people)


def test_a_crowdpose_skeleton_is_diagnosed_with_its_pairs_and_figures(synthetic_crowdpose):
    skeleton = load_skeleton("crowdpose")
    path = synthetic_crowdpose / "annotations" / "person_keypoints_train.json"
    data = json.loads(path.read_text())
    results, injected = inject(data, skeleton, seed=1)
    found = diagnose(path, results, skeleton)
    assert found.keypoint_names == skeleton.dataset_keypoints and len(found.per_keypoint) == 14
    people, by_image = people_of(data), labelled_by_image(data)
    for i, (r, person) in enumerate(zip(results, people)):
        others = [o for o in by_image[person["image_id"]] if o["id"] != person["id"]]
        assert found.detection_classes[i] == classes_by_hand(r["keypoints"], person, others, skeleton)
    hits = sum(found.detection_classes[i][k] == kind for i, (k, kind) in injected.items())
    assert hits >= 0.9 * len(injected) and found.keypoint_errors["inversion"] >= 1
    cfg = load_config(None, ["data.skeleton=crowdpose"])
    results_file = synthetic_crowdpose / "results_for_diagnosis.json"
    results_file.write_text(json.dumps(results))
    stats, _ = score_results(results_file, path, cfg)
    assert found.ap["baseline"] == pytest.approx(stats["AP"], abs=1e-9)  # CrowdPose's own AP


def test_the_command_writes_the_diagnosis_and_keeps_an_earlier_one(sample_annotations, sample_images, tmp_path, capsys):
    data = json.loads(sample_annotations.read_text())
    results, _ = inject(data, COCO, seed=2)
    results_file = tmp_path / "theirs.json"
    results_file.write_text(json.dumps(results))
    out = tmp_path / "diagnosis"
    args = ["--results", str(results_file), "--annotations", str(sample_annotations), "--diagnose", str(out)]
    assert coco_eval.main([*args, "--images", str(sample_images)]) == 0
    printed = capsys.readouterr().out
    assert "keypoints of matched detections" in printed and f"diagnosis written to {out}" in printed
    written = json.loads((out / "diagnosis.json").read_text())
    assert set(written["keypoint_errors"]) == set(ERROR_TYPES) and sum(written["keypoint_errors"].values()) > 100
    assert set(written["ap_gains"]) == {"miss", "swap", "inversion", "jitter", "score", "background", "false_negatives"}
    for name in ("errors_per_keypoint.png", "ap_gains.png", "pr_curves.png", "worst_examples.png"):
        assert (out / name).stat().st_size > 10_000, name
    before = (out / "diagnosis.json").read_bytes()
    assert coco_eval.main(args) == 2
    assert "--overwrite" in capsys.readouterr().err and (out / "diagnosis.json").read_bytes() == before
    assert coco_eval.main([*args, "--overwrite", "--images", str(sample_images)]) == 0


def test_the_report_without_images_has_no_pictures_of_examples(synthetic_sample_annotations, tmp_path):
    data = json.loads(synthetic_sample_annotations.read_text())
    results, _ = inject(data, COCO, seed=3)
    found = diagnose(synthetic_sample_annotations, results)
    written = write_diagnosis(found, tmp_path / "d")
    assert [p.name for p in written] == ["diagnosis.json", "errors_per_keypoint.png", "ap_gains.png", "pr_curves.png"]
    assert found.worst and all(set(w["classes"]) <= {*ERROR_TYPES, None} for w in found.worst)


def test_the_command_says_when_it_draws_no_worst_examples(synthetic_sample_annotations, tmp_path, capsys):
    """``--results --diagnose`` without ``--images``: no worst_examples.png, and the line that names the written
    files says so and what to give; with the pictures the line has no such words."""
    results, _ = inject(json.loads(synthetic_sample_annotations.read_text()), COCO, seed=3)
    results_file = tmp_path / "theirs.json"
    results_file.write_text(json.dumps(results))
    out = tmp_path / "diagnosis"
    args = ["--results", str(results_file), "--annotations", str(synthetic_sample_annotations), "--diagnose", str(out)]
    assert coco_eval.main(args) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("diagnosis written to")]
    assert "worst_examples.png not drawn: it needs the pictures, give --images DIR with --diagnose" in line
    assert not (out / "worst_examples.png").exists() and (out / "pr_curves.png").exists()
    images = synthetic_sample_annotations.parent.parent / "images"
    assert coco_eval.main([*args, "--overwrite", "--images", str(images)]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("diagnosis written to")]
    assert "not drawn" not in line and (out / "worst_examples.png").exists()


def test_in_training_validation_diagnoses_beside_the_checkpoints(synthetic_h5_64, synthetic_sample, tmp_path):
    run = tmp_path / "run"
    val = [
        f"data.val_images={synthetic_sample / 'images'}",
        f"data.val_annotations={synthetic_sample / COCO_SAMPLE_ANNOTATIONS}",
    ]
    extra = [
        *val,
        "train.val_every=1",
        "eval.max_images=3",
        "eval.scales=[1.0]",
        "eval.flip=false",
        "eval.diagnose=true",
    ]
    records = train_a_few_steps(synthetic_h5_64, run, *extra, *FAINT_MAPS)
    epochs = sorted(r["epoch"] for r in records if r["kind"] == "val")
    for epoch in epochs:
        written = json.loads((run / f"diagnosis_epoch{epoch}" / "diagnosis.json").read_text())
        assert written["images"] == 3 and set(written["keypoint_errors"]) == set(ERROR_TYPES)
    assert (run / "last.pt").is_file() and len(epochs) == 2
