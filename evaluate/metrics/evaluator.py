"""The keypoint evaluator: people of images in, the results file and COCO / CrowdPose figures out.

One object for every evaluation of the repository (in-training validation, ``python -m evaluate.coco_eval`` with a
checkpoint, the oracle or a results file, the bench scripts), used as detectron2's evaluators are::

    evaluator = KeypointEvaluator(skeleton, coco, out_json="results.json")
    evaluator.reset()
    evaluator.process(image_ids, people)       # any number of times, on every rank, for that rank's images
    stats, summary = evaluator.evaluate(ids)   # every rank: gathered, written and scored on rank 0, then broadcast

Without annotations (``coco`` None) it only gathers and writes the results (an evaluation server scores them).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from simplepose.codec.person import Person
from simplepose.config.skeleton import Skeleton
from simplepose.data.coco_annotations import PERSON_CATEGORY
from simplepose.evaluate.metrics.coco_results import coco_results, results_text, sort_results
from simplepose.evaluate.metrics.diagnosis import diagnose
from simplepose.evaluate.metrics.diagnosis_report import summary_text, write_diagnosis
from simplepose.evaluate.metrics.keypoint_stats import keypoint_stats
from simplepose.utils import distributed as dist
from simplepose.utils.io import atomic_write_text


class KeypointEvaluator:
    """Collects the COCO keypoint results of the images each rank processes; ``evaluate`` gathers them on rank 0,
    writes them to ``out_json`` (when given; sorted and rounded, so the file is the same for any number of
    processes), scores them against ``coco`` with ``skeleton``'s sigmas and figures, and diagnoses them into
    ``diagnose_dir`` (worst examples drawn on the images of ``images_dir`` when given).

    ``category_id``: the annotations' keypoint category, written in each result."""

    def __init__(
        self,
        skeleton: Skeleton,
        coco=None,
        category_id: int = PERSON_CATEGORY,
        out_json: str | Path | None = None,
        diagnose_dir: str | Path | None = None,
        images_dir: str | Path | None = None,
    ):
        self.skeleton = skeleton
        self.coco = coco
        self.category_id = category_id
        self.out_json = out_json
        self.diagnose_dir = diagnose_dir
        self.images_dir = images_dir
        self.results: list[dict] = []  # after evaluate: every rank's results, sorted, on rank 0
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

    def evaluate(self, image_ids: Sequence[int], notes: str = "") -> tuple[dict[str, float] | None, str | None]:
        """(figures, pycocotools' printed table, then ``notes``, then the diagnosis' summary) of the results of
        ``image_ids`` (the images evaluated; results of other images are left out), on every rank; (None, None)
        without annotations. Rank 0 writes ``out_json`` first."""
        scored = set(image_ids)
        gathered = dist.all_gather_object(self._mine)
        stats, summary = None, None
        if dist.is_main_process():
            self.results = sort_results(r for part in gathered for r in part if r["image_id"] in scored)
            if self.out_json:
                atomic_write_text(self.out_json, results_text(self.results))
            if self.coco is not None:
                stats, summary = keypoint_stats(self.coco, self.results, list(image_ids), self.skeleton)
                summary += notes
                if self.diagnose_dir is not None:
                    summary += self.diagnose(list(image_ids))
        return dist.broadcast_object((stats, summary))

    def diagnose(self, image_ids: list[int]) -> str:
        """Diagnose the results (evaluate/metrics/diagnosis.py) and write ``diagnose_dir/diagnosis.json`` and its
        plots; returns the summary lines to print."""
        found = diagnose(self.coco, self.results, self.skeleton, image_ids)
        write_diagnosis(found, self.diagnose_dir, self.coco, self.images_dir)
        if self.images_dir is None:
            worst = "; worst_examples.png not drawn: it needs the pictures, give --images DIR with --diagnose"
        elif not found.worst:
            worst = "; worst_examples.png not drawn: no matched person has a keypoint error to show"
        else:
            worst = ""
        return summary_text(found) + f"diagnosis written to {self.diagnose_dir} (diagnosis.json and plots{worst})\n"
