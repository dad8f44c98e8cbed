"""Evaluating on a set of images: an estimator's people, a keypoint evaluator's figures, in one process or sharded
over torchrun ranks.

    stats, summary = evaluate_model(model, "coco/val2017", "person_keypoints_val2017.json", cfg, device)
    stats, summary = evaluate_oracle("coco/val2017", "person_keypoints_val2017.json", cfg)  # the decoder's ceiling
    truth = load_ground_truth("person_keypoints_val2017.json", model.skeleton, cfg.eval)  # once: then, each epoch
    stats, summary = evaluate_model(model, "coco/val2017", truth, cfg, device)          # scored against the same

Each rank takes a strided shard of the sorted image ids, reads and checks each file as the converter does, runs
the estimator (``evaluate.estimator.PoseEstimator``: a network, an ONNX file or the oracle) on batches of up to
``eval.batch_size`` images, and hands the people to the evaluator (``evaluate.metrics.evaluator.KeypointEvaluator``),
which gathers them on rank 0; there ``report`` writes the results JSON, scores it and diagnoses it when asked; every
rank receives the figures. A results file made by any tool is scored by evaluate/results_scoring.py (no
PyTorch needed there).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch

from simplepose.config.schema import Config, EvalConfig
from simplepose.config.skeleton_file import skeleton_of
from simplepose.data.image_files import BadImages, check_image_folder, image_path, read_decoded_checked
from simplepose.evaluate.estimator import PoseEstimator
from simplepose.evaluate.metrics.annotations import GroundTruth, load_ground_truth
from simplepose.evaluate.metrics.coco_results import write_results
from simplepose.evaluate.metrics.evaluator import KeypointEvaluator
from simplepose.evaluate.results_scoring import evaluated_ids
from simplepose.models.eval_mode import eval_mode
from simplepose.utils import distributed as dist
from simplepose.utils.progress_bar import progress_bar
from simplepose.utils.watchdog import beat

SKIP_OPTION = "--skip-bad (eval.skip_bad=true)"


def check_images_dir(images_dir: str | Path) -> None:
    check_image_folder(images_dir, "--images (or data.val_images)")


def predict_images(
    image_list: Mapping[int, dict],
    image_ids: list[int],
    images_dir: Path,
    estimator: PoseEstimator,
    evaluator: KeypointEvaluator,
    progress: bool = True,
    listed_in: Path | str = "the image list",
) -> list[dict]:
    """Run ``estimator`` on the images ``image_ids`` (this rank's) and give their people to ``evaluator``.

    ``image_list``: {image id: {"file_name"[, "height", "width"]}} (pycocotools' ``coco.imgs`` or
    evaluate/unannotated_images.py). Images are read in order of their listed size and handed to the estimator
    ``eval.batch_size`` at a time (it batches those of one size together); each is named by its image id for the map
    source (the oracle's annotations). Each
    file is checked as the converter checks it (``data.image_files.read_decoded_checked``: missing, truncated, not an
    image, another size than the list says; the list is only read); a bad one stops the
    evaluation, or with ``eval.skip_bad`` is skipped with a warning. Returns the skipped images ({"file",
    "image_id", "reason"}). ``listed_in``: the file the list comes from (an annotation or image-info file), named
    when a file_name leads outside ``images_dir``."""
    size = lambda i: (image_list[i].get("height") or 0, image_list[i].get("width") or 0)  # noqa: E731
    order = sorted(image_ids, key=size)
    bad = BadImages(Path(images_dir), estimator.cfg.skip_bad, option=SKIP_OPTION)
    pending: list[tuple[int, np.ndarray]] = []
    done = 0
    bar = progress_bar(total=len(order), desc="eval", unit="img", disable=not (progress and dist.is_main_process()))

    def flush() -> None:
        nonlocal done
        ids = [i for i, _ in pending]
        evaluator.process(ids, estimator.predict_batch([im for _, im in pending], keys=ids))
        done += len(pending)
        bar.update(len(pending))
        beat("validation", f"image {done} of {len(order)} of this process")
        pending.clear()

    for image_id in order:
        info = image_list[image_id]
        path = image_path(images_dir, info, listed_in)
        image, problem = read_decoded_checked(path, info)
        if image is None:
            bad.report(path, image_id, problem or "unreadable")
            bar.update(1)
            continue
        if len(pending) >= estimator.cfg.batch_size:
            flush()
        pending.append((image_id, image))
    if pending:
        flush()
    bar.close()
    return bad.skipped


def run_evaluation(
    images_dir: str | Path,
    image_list: Mapping[int, dict],
    estimator: PoseEstimator,
    evaluator: KeypointEvaluator,
    progress: bool = True,
    listed_in: Path | str = "the image list",
    bad_annotations: int = 0,
) -> tuple[list[int], str]:
    """Predict the images of ``image_list`` (``evaluated_ids``) sharded over the ranks, their people given to
    ``evaluator``: (the ids predicted, bad images skipped left out; the note saying how many images were left out as
    bad, "" when none), on every rank. More than half of the images skipped as bad stops every rank.
    ``bad_annotations``: images already left out of ``image_list`` for their annotations, which the note counts with
    the bad files."""
    evaluator.reset()
    ids = evaluated_ids(image_list, estimator.cfg)
    mine = [ids[i] for i in dist.shard(len(ids))]
    skipped = predict_images(image_list, mine, Path(images_dir), estimator, evaluator, progress, listed_in)
    skipped = [s for part in dist.all_gather_object(skipped) for s in part]
    BadImages(Path(images_dir), estimator.cfg.skip_bad, SKIP_OPTION, skipped).check_share(len(ids))
    left = {s["image_id"] for s in skipped}
    notes = ""
    if bad_annotations or left:
        notes = (
            f"{bad_annotations + len(left)} images left out of the evaluation as bad ({bad_annotations} "
            f"for their annotations, {len(left)} for their files; eval.skip_bad, warnings above)\n"
        )
    return [i for i in ids if i not in left], notes


def report(
    evaluator: KeypointEvaluator,
    image_ids: list[int],
    notes: str = "",
    out_json: str | Path | None = None,
    diagnose_dir: str | Path | None = None,
    images_dir: str | Path | None = None,
) -> tuple[dict[str, float] | None, str | None]:
    """The evaluator's results of ``image_ids`` gathered on rank 0, written to ``out_json`` (when given), scored
    (with annotations) and diagnosed into ``diagnose_dir`` (when given): (figures, pycocotools' table then ``notes``
    then the diagnosis' summary) on every rank, broadcast once; (None, None) without annotations."""
    results = evaluator.gather(image_ids)
    stats, summary = None, None
    if dist.is_main_process():
        if out_json:
            write_results(out_json, results)
        if evaluator.coco is not None:
            stats = evaluator.compute_metrics(results, image_ids)
            summary = evaluator.summary + notes
            if diagnose_dir is not None:
                summary += evaluator.diagnose(results, image_ids, diagnose_dir, images_dir)
    return dist.broadcast_object((stats, summary))


def figures_of(reported: tuple[dict[str, float] | None, str | None]) -> tuple[dict[str, float], str]:
    """``report``'s (figures, summary) where there are annotations to score on: never None."""
    stats, summary = reported
    if stats is None or summary is None:
        raise ValueError("report gave no figures: the evaluator holds no annotations")
    return stats, summary


def evaluate_images(
    images_dir: str | Path,
    annotations: str | Path | GroundTruth,
    estimator: PoseEstimator,
    out_json: str | Path | None = None,
    progress: bool = True,
    diagnose_dir: str | Path | None = None,
) -> tuple[dict[str, float], str]:
    """COCO keypoint AP/AR (or CrowdPose's figures, as the estimator's skeleton says) of ``estimator`` on the images
    of ``annotations`` (a file, read by ``load_ground_truth``, or a ``GroundTruth`` already loaded): (stats, summary
    text) on every rank. Images skipped as bad (``eval.skip_bad``) are left out of the evaluation, and the summary
    says how many. ``diagnose_dir``: also diagnose the results there (rank 0)."""
    check_images_dir(images_dir)
    truth = ground_truth_of(annotations, estimator.skeleton, estimator.cfg)
    evaluator = KeypointEvaluator(estimator.skeleton, truth.coco, truth.category_id)
    images = truth.images
    bad = len(truth.coco.imgs) - len(images)
    ids, notes = run_evaluation(images_dir, images, estimator, evaluator, progress, truth.path, bad)
    return figures_of(report(evaluator, ids, notes, out_json, diagnose_dir, images_dir))


def ground_truth_of(annotations: str | Path | GroundTruth, skeleton, cfg: EvalConfig) -> GroundTruth:
    """``annotations`` as a ``GroundTruth``: as given when one, else read from the file."""
    return annotations if isinstance(annotations, GroundTruth) else load_ground_truth(annotations, skeleton, cfg)


def evaluate_model(
    model: torch.nn.Module,
    images_dir: str | Path,
    annotations: str | Path | GroundTruth,
    cfg: Config,
    device: torch.device,
    out_json: str | Path | None = None,
    progress: bool = True,
    diagnose_dir: str | Path | None = None,
) -> tuple[dict[str, float], str]:
    """(stats, summary) of ``model`` (its skeleton: ``model.skeleton``), as ``evaluate_images`` (``annotations``: a
    file or a ``GroundTruth`` loaded once for many evaluations). The model is put in eval mode and restored after."""
    with eval_mode(model):
        estimator = PoseEstimator.from_model(model, cfg.eval, device)
        return evaluate_images(images_dir, annotations, estimator, out_json, progress, diagnose_dir=diagnose_dir)


def evaluate_oracle(
    images_dir: str | Path,
    annotations: str | Path,
    cfg: Config,
    out_json: str | Path | None = None,
    progress: bool = True,
    diagnose_dir: str | Path | None = None,
) -> tuple[dict[str, float], str]:
    """AP of decoding the ground-truth target maps (the decoder's upper bound), for the skeleton
    ``cfg.data.skeleton`` names: the oracle is the estimator's map source."""
    skeleton = skeleton_of(cfg)
    truth = load_ground_truth(annotations, skeleton, cfg.eval)
    estimator = PoseEstimator.from_ground_truth(truth.coco, cfg, skeleton)
    return evaluate_images(images_dir, truth, estimator, out_json, progress, diagnose_dir)


def predict_unannotated(
    images_dir: str | Path,
    image_list: Mapping[int, dict],
    estimator: PoseEstimator,
    out_json: str | Path,
    listed_in: Path | str = "the image list",
) -> tuple[list[int], int]:
    """Write the results JSON of images without annotations (for an evaluation server): (the ids predicted, the
    number of people found, on rank 0; 0 elsewhere)."""
    evaluator = KeypointEvaluator(estimator.skeleton)
    ids, _ = run_evaluation(images_dir, image_list, estimator, evaluator, listed_in=listed_in)
    results = evaluator.gather(ids)
    if dist.is_main_process():
        write_results(out_json, results)
    return ids, len(results)
