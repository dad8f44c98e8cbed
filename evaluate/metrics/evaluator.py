"""The keypoint evaluator: people of images in, COCO / CrowdPose figures out.

One metric for every evaluation of the repository (in-training validation,
``python -m simplepose.evaluate.coco_eval`` with a checkpoint, the oracle or a results file, the bench scripts),
used as detectron2's evaluators and mmpose's metrics are::

    evaluator = KeypointEvaluator(skeleton, coco)
    evaluator.reset()
    evaluator.process(image_ids, people)          # any number of times, on every rank, for that rank's images
    results = evaluator.gather(ids)               # every rank's results of ids, sorted, on rank 0 ([] elsewhere)
    figures = evaluator.compute_metrics(results, ids)   # rank 0: {"AP": ..., ...}; the printed table: .summary

Writing the results file (``evaluate.metrics.coco_results.write_results``) and diagnosing them (``diagnose``) are
steps of their own, which the caller asks for (evaluate/evaluation.py). Without annotations (``coco`` None) there
are no figures: the results are only gathered (an evaluation server scores them).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from simplepose.codec.person import Person
from simplepose.config.skeleton import Skeleton
from simplepose.data.coco_annotations import PERSON_CATEGORY
from simplepose.evaluate.metrics.coco_results import coco_results, sort_results
from simplepose.evaluate.metrics.diagnosis import diagnose
from simplepose.evaluate.metrics.diagnosis_report import summary_text, write_diagnosis
from simplepose.evaluate.metrics.keypoint_stats import keypoint_stats


class KeypointEvaluator:
    """Collects the COCO keypoint results of the images each rank processes; ``gather`` brings them to rank 0,
    sorted and rounded (so that they are the same for any number of processes); ``compute_metrics`` scores them
    against ``coco`` with ``skeleton``'s sigmas and figures.

    ``category_id``: the annotations' keypoint category, written in each result."""

    def __init__(self, skeleton: Skeleton, coco=None, category_id: int = PERSON_CATEGORY):
        self.skeleton = skeleton
        self.coco = coco
        self.category_id = category_id
        self.summary = ""  # pycocotools' printed table of the last compute_metrics
        self.reset()

    def reset(self) -> None:
        """Forget the results processed so far."""
        self._mine: list[dict] = []

    def process(self, image_ids: Sequence[int], people: Sequence[Sequence[Person]]) -> None:
        """The people found in each image (``people[i]`` of image ``image_ids[i]``)."""
        self._mine += coco_results(image_ids, people, self.category_id)

    def process_results(self, results: Sequence[dict]) -> None:
        """Results entries made elsewhere (a results file, checked by ``evaluate.metrics.results_file``)."""
        self._mine += list(results)

    def gather(self, image_ids: Sequence[int]) -> list[dict]:
        """Every rank's results of ``image_ids`` (results of other images are left out), sorted, on rank 0; [] on the
        other ranks. Every rank must call it."""
        from simplepose.utils import distributed as dist  # torch: scoring a results file (the runtime) needs none

        scored = set(image_ids)
        gathered = dist.all_gather_object(self._mine)
        if not dist.is_main_process():
            return []
        return sort_results(r for part in gathered for r in part if r["image_id"] in scored)

    def compute_metrics(self, results: list[dict], image_ids: Sequence[int]) -> dict[str, float]:
        """The figures of ``results`` on the images ``image_ids`` (``AP``, ``AP50``, ...: COCO's, or CrowdPose's
        as the skeleton says); pycocotools' printed table is kept in ``summary``."""
        stats, self.summary = keypoint_stats(self.coco, results, list(image_ids), self.skeleton)
        return stats

    def diagnose(
        self, results: list[dict], image_ids: list[int], out_dir: str | Path, images_dir: str | Path | None = None
    ) -> str:
        """Diagnose ``results`` (evaluate/metrics/diagnosis.py) and write ``out_dir/diagnosis.json`` and its plots
        (the worst examples drawn on the images of ``images_dir`` when given); returns the summary lines to print."""
        found = diagnose(self.coco, results, self.skeleton, image_ids)
        write_diagnosis(found, out_dir, self.coco, images_dir)
        if images_dir is None:
            worst = "; worst_examples.png not drawn: it needs the pictures, give --images DIR with --diagnose"
        elif not found.worst:
            worst = "; worst_examples.png not drawn: no matched person has a keypoint error to show"
        else:
            worst = ""
        return summary_text(found) + f"diagnosis written to {out_dir} (diagnosis.json and plots{worst})\n"
