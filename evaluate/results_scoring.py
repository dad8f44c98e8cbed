"""Scoring a COCO keypoint results file made by any tool, without PyTorch (the runtime install runs it too).

    stats, summary = score_results("their_results.json", "person_keypoints_val2017.json", cfg)

Read and scored exactly as an evaluation here scores its own results (evaluate/evaluation.py): the same ground truth
reader, the same evaluator, the same image ids (``evaluated_ids``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from simplepose.config.schema import Config, EvalConfig
from simplepose.config.skeleton_file import skeleton_of
from simplepose.evaluate.metrics.annotations import load_ground_truth
from simplepose.evaluate.metrics.coco_results import sort_results
from simplepose.evaluate.metrics.evaluator import KeypointEvaluator
from simplepose.evaluate.metrics.results_file import read_results
from simplepose.utils.optional import require


def evaluated_ids(image_list: Mapping[int, dict], cfg: EvalConfig) -> list[int]:
    """The images an evaluation predicts: the sorted ids, the first ``eval.max_images`` when set."""
    ids = sorted(image_list)
    return ids[: cfg.max_images] if cfg.max_images > 0 else ids


def score_results(
    results_file: str | Path,
    annotations: str | Path,
    cfg: Config,
    diagnose_dir: str | Path | None = None,
    images_dir: str | Path | None = None,
) -> tuple[dict[str, float], str]:
    """(stats, summary) of a results file made by any tool (``evaluate.metrics.results_file``: checked entry by entry)
    on ``annotations``: the skeleton ``cfg.data.skeleton`` names (its sigmas, its figures: COCO's or CrowdPose's),
    the evaluator's own ids, the annotation file's images (the first ``eval.max_images`` when set; images with bad
    annotations left out with ``eval.skip_bad``). Images without any result count as images where no one was found,
    and the summary says how many there are. ``diagnose_dir``: also diagnose the results there (its worst examples
    drawn on the images of ``images_dir`` when given). UserError naming the pip command when pycocotools (or, for
    CrowdPose's figures and the diagnosis, faster-coco-eval and matplotlib) is not installed."""
    skeleton = skeleton_of(cfg)
    require("pycocotools", "scoring a results file")
    if skeleton.scored_as_crowdpose:
        require("faster_coco_eval", "CrowdPose's figures")
    if diagnose_dir is not None:
        for module in ("faster_coco_eval", "matplotlib"):
            require(module, "the diagnosis (--diagnose)")
    truth = load_ground_truth(annotations, skeleton, cfg.eval)
    ids = evaluated_ids(truth.images, cfg.eval)
    results = read_results(results_file, truth.coco, skeleton, truth.category_id)
    scored = set(ids)
    kept = sort_results(r for r in results if r["image_id"] in scored)
    without = len(scored - {r["image_id"] for r in kept})
    notes = [f"scored {len(kept)} results of {len(ids) - without} images on {len(ids)} images of {annotations}"]
    if without:
        notes.append(f"{without} of the {len(ids)} images have no result: scored as images where no one was found")
    if len(results) > len(kept):
        notes.append(
            f"{len(results) - len(kept)} results of images outside the evaluated ones left out "
            "(eval.max_images, skip_bad)"
        )
    evaluator = KeypointEvaluator(skeleton, truth.coco, truth.category_id)
    stats = evaluator.compute_metrics(kept, ids)
    summary = evaluator.summary + "".join(f"{n}\n" for n in notes)
    if diagnose_dir is not None:
        summary += evaluator.diagnose(kept, ids, diagnose_dir, images_dir)
    return stats, summary
