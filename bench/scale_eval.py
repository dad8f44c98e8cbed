"""The stages of an evaluation of many results, timed and their peak memory read (``bench.scale`` runs it in a fresh
process per path)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from bench.peak_memory import PeakSampler, max_resident_mb
from simplepose.codec.person import Person
from simplepose.config.config_file import load_config
from simplepose.config.skeleton_file import skeleton_of
from simplepose.evaluate.metrics.annotations import load_ground_truth
from simplepose.evaluate.metrics.coco_results import write_results
from simplepose.evaluate.metrics.evaluator import KeypointEvaluator
from simplepose.evaluate.metrics.results_file import read_results
from simplepose.evaluate.results_scoring import evaluated_ids


def evaluation_stages(
    path: str, truth_file: Path, results_file: Path, out_dir: Path
) -> list[tuple[str, float, float, float]]:
    """(stage, seconds, CPU seconds, peak resident MB) of one evaluation path ("results": ``evaluate.coco_eval
    --results``; "training": in-training validation), its stages made by the calls ``evaluate.evaluation`` makes. The
    peaks are the process's resident memory, what it held before included."""
    cfg = load_config(None, [])
    skeleton = skeleton_of(cfg)
    sampler = PeakSampler()

    def timed(name, fn):
        with sampler.stage():
            t0, c0 = time.perf_counter(), time.process_time()
            value = fn()
            stages.append((name, time.perf_counter() - t0, time.process_time() - c0, sampler.peak))
        return value

    if path == "training":  # the network's people, as the decoder hands them over
        people_of: dict[int, list] = {}
        for r in json.loads(results_file.read_text()):
            kp = np.asarray(r["keypoints"], float).reshape(-1, 3)
            people_of.setdefault(r["image_id"], []).append(Person.from_keypoints(kp, r["score"]))
    start = "start (imports" + ("; the people decoded)" if path == "training" else ")")
    stages = [(start, 0.0, 0.0, max_resident_mb())]
    truth = timed("ground truth read and checked", lambda: load_ground_truth(truth_file, skeleton, cfg.eval))
    ids = evaluated_ids(truth.images, cfg.eval)
    evaluator = KeypointEvaluator(skeleton, truth.coco, truth.category_id)
    if path == "results":
        results = timed("results file read and checked", lambda: read_results(results_file, truth.coco, skeleton, 1))
        gathered = timed("gathering", lambda: (evaluator.process_results(results), evaluator.gather(ids))[1])
    else:
        timed("people to results", lambda: [evaluator.process([i], [people_of.get(i, [])]) for i in ids])
        gathered = timed("gathering", lambda: evaluator.gather(ids))
        timed("results JSON written", lambda: write_results(out_dir / "val_results.json", gathered))
    stats = timed("COCO evaluation", lambda: evaluator.compute_metrics(gathered, ids))
    stages.append((f"AP {stats['AP']:.3f}; peak of the process", 0.0, 0.0, max_resident_mb()))
    return stages
