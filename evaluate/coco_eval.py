"""COCO keypoint AP of a model (or of the oracle maps), in one process or sharded over torchrun ranks.

    python -m evaluate.coco_eval --ckpt runs/x/best.pt --images coco/val2017 \
        --annotations coco/annotations/person_keypoints_val2017.json [--scales 1] [--no-flip] [--out res.json]
    torchrun --nproc_per_node=4 -m evaluate.coco_eval ...        # images split over ranks
    python -m evaluate.coco_eval --from-ground-truth --images ... --annotations ...   # decoder upper bound
    python -m evaluate.coco_eval --ckpt ... --images coco/test2017 \
        --image-info coco/annotations/image_info_test-dev2017.json --out results.json   # test-dev: not scored
    python -m evaluate.coco_eval --results their_results.json --annotations ann.json [--skeleton crowdpose]
        # a results file made by any tool, scored as this project scores its own

Ranks take a strided shard of the (sorted) image ids, predictions are all-gathered, rank 0 writes the results
JSON and runs pycocotools, every rank receives the numbers. The JSON is sorted and its floats rounded, so it
is byte-identical for any number of processes. The skeleton is the model's (the checkpoint's; ``data.skeleton`` for
``--from-ground-truth``): results are in its dataset keypoint order, OKS uses its sigmas, and its ``evaluation``
says which figures: COCO's, or CrowdPose's (evaluate/metrics/crowdpose_eval.py: AP, AR and AP easy/medium/hard). Without
``--annotations`` (a plain image folder, or an image-info JSON) the results JSON is written for an evaluation server
and nothing is scored (evaluate/image_list.py: ids).
"""

from __future__ import annotations

import argparse
import contextlib
import io
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from codec.decoder.decode import People
from config.loader import add_config_arguments, load_config
from config.schema import OUTPUT_STRIDE, Config, EvalConfig, NameMatch
from config.skeleton import Skeleton, skeleton_of
from config.skeleton_check import NAME_MATCHES
from data.coco_annotations import PERSON_CATEGORY, keypoint_category, load_coco_keypoints
from data.image_files import BadImages, read_decoded_checked
from data.image_files import image_path as checked_image_path
from evaluate.estimator import PoseEstimator
from evaluate.image_list import folder_image_list, image_info_list
from evaluate.metrics.coco_results import coco_results, results_text, sort_results
from evaluate.metrics.crowdpose_eval import crowdpose_keypoint_stats, with_box_areas
from evaluate.metrics.diagnosis import diagnose
from evaluate.metrics.diagnosis_report import summary_text, write_diagnosis
from evaluate.metrics.own_ids import empty_results, ground_truth, renumbered
from evaluate.metrics.results_file import read_results
from evaluate.runtime.model_loader import load_model
from evaluate.runtime.multiscale import Predictor
from evaluate.runtime.oracle import oracle_for
from models.eval_mode import eval_mode
from utils import distributed as dist
from utils.errors import AnnotationError, UserError, cli_main
from utils.io import atomic_write_text, check_writable, refuse_to_overwrite
from utils.progress_bar import progress_bar
from utils.text import counted
from utils.watchdog import beat

if TYPE_CHECKING:
    from pycocotools.coco import COCO

STAT_NAMES = ("AP", "AP50", "AP75", "APm", "APl", "AR", "AR50", "AR75", "ARm", "ARl")


def load_coco(
    annotations: str | Path,
    skeleton: Skeleton | None = None,
    skip_bad: bool = False,
    keypoint_names: NameMatch = "exact",
):
    """pycocotools COCO of a person_keypoints JSON. With ``skeleton``: read and checked by the converter's own reader
    (``data.coco_annotations.load_coco_keypoints``: the same errors, the same defaults for missing fields, the keypoint
    names compared as ``keypoint_names`` says), its annotations with the evaluator's own ids
    (``evaluate.metrics.own_ids``);
    ``skip_bad``: images with bad annotations are listed in ``coco.bad_image_ids`` (and left out of the evaluation)
    instead of stopping it. Without ``skeleton``: the file as pycocotools reads it (for loading results against it);
    UserError when missing or malformed."""
    from pycocotools.coco import COCO

    path = Path(annotations)
    if skeleton is not None:
        checked = load_coco_keypoints(path, skeleton, skip_bad, keypoint_names, purpose="this evaluation")
        coco = ground_truth(checked)
        coco.bad_image_ids = checked.bad_image_ids
        return coco
    if not path.is_file():
        raise AnnotationError(f"annotation file {path} not found (expected a COCO person_keypoints_*.json)", file=path)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            coco = COCO(str(path))
    except (ValueError, KeyError, TypeError, AssertionError) as e:
        raise AnnotationError(f"annotation file {path} is not a valid COCO annotation file: {e}", file=path) from None
    coco.bad_image_ids = set()
    return coco


def image_path(images_dir: Path, file_name: str) -> Path:
    """``images_dir / file_name``, refused when the annotation's file name leads outside the folder."""
    return checked_image_path(Path(images_dir), {"file_name": file_name}, "the annotation file")


def coco_keypoint_stats(
    coco, results: list[dict], image_ids: list[int], sigmas: Sequence[float] | None = None
) -> tuple[dict[str, float], str]:
    """pycocotools keypoint evaluation restricted to ``image_ids``; (stats, printed summary).

    ``sigmas``: the OKS sigma of each dataset keypoint (``Skeleton.sigmas``); None: pycocotools' own, COCO's.
    Scored on a renumbered copy (``evaluate.metrics.own_ids.renumbered``), so the file's ids cannot change the figures.
    A figure whose group has no ground truth (no medium people, say) is -1, as pycocotools gives it; no detections give
    0 where there is ground truth. Annotations without an 'area' are scored with 0.53 x their box area (CrowdPose's
    stand-in; ``load_coco`` has already filled it)."""
    from pycocotools.cocoeval import COCOeval

    gt, results, image_ids = renumbered(with_box_areas(coco), results, image_ids)
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        detections = gt.loadRes(results) if results else empty_results(gt)
        ev = COCOeval(gt, detections, "keypoints")
        ev.params.imgIds = list(image_ids)
        if sigmas is not None:
            ev.params.kpt_oks_sigmas = np.array(sigmas, np.float64)
        ev.evaluate()
        ev.accumulate()
    summary = io.StringIO()
    with contextlib.redirect_stdout(summary):
        ev.summarize()
    stats = {k: float(v) for k, v in zip(STAT_NAMES, ev.stats)}  # -1: no ground truth in that group
    return stats, (
        "no detections: every AP and AR is 0 (-1: no ground truth)\n" if not results else ""
    ) + summary.getvalue()


def keypoint_stats(coco, results: list[dict], image_ids: list[int], skeleton: Skeleton) -> tuple[dict[str, float], str]:
    """(stats, printed table) of ``results`` as ``skeleton.evaluation`` says: COCO's keypoint figures or
    CrowdPose's, OKS with the skeleton's sigmas, on the evaluator's own ids (``evaluate.metrics.own_ids``)."""
    if skeleton.evaluation == "crowdpose":
        return crowdpose_keypoint_stats(*renumbered(coco, results, image_ids), skeleton.sigmas)
    return coco_keypoint_stats(coco, results, image_ids, skeleton.sigmas)


NetworkFor = Callable[[list[int]], Predictor]  # the network of a batch of image ids (the oracle's per image)


def predict_people(
    image_list: Mapping[int, dict],
    image_ids: list[int],
    images_dir: Path,
    estimator: PoseEstimator,
    progress: bool = True,
    network_for: NetworkFor | None = None,
    listed_in: Path | str = "the image list",
) -> tuple[dict[int, People], list[dict]]:
    """Run ``estimator`` on this rank's images, up to ``eval.batch_size`` images of one size per forward.

    ``image_list``: {image id: {"file_name"[, "height", "width"]}} (pycocotools' ``coco.imgs`` or
    evaluate/image_list.py). ``network_for(image_ids)``: a network per image (one per batch), used instead of the
    estimator's own (the oracle's maps). Images are visited grouped by size (when the list gives sizes) so that
    batches fill up. Each file is checked as the converter checks it (``data.image_files.read_decoded_checked``:
    missing, truncated, not an image, another size than the list says; an image without a size gets its file's); a
    bad one stops the evaluation, or with ``eval.skip_bad`` is skipped with a warning. Returns ({image id: people}, the
    skipped images: {"file", "image_id", "reason"}). ``listed_in``: the file the list comes from (an annotation or
    image-info file), named when a file_name leads outside ``images_dir``.
    """
    size = lambda i: (image_list[i].get("height") or 0, image_list[i].get("width") or 0)  # noqa: E731
    order = sorted(image_ids, key=size)
    batch_size = 1 if network_for is not None else estimator.cfg.batch_size
    bad = BadImages(Path(images_dir), estimator.cfg.skip_bad, option=SKIP_OPTION)
    out: dict[int, People] = {}
    pending: list[tuple[int, np.ndarray]] = []

    def flush() -> None:
        ids, images = [i for i, _ in pending], [im for _, im in pending]
        network = network_for(ids) if network_for is not None else None
        out.update(zip(ids, estimator.people(images, network)))
        bar.update(len(pending))
        beat("validation", f"image {len(out)} of {len(order)} of this process")
        pending.clear()

    bar = progress_bar(total=len(order), desc="eval", unit="img", disable=not (progress and dist.is_main_process()))
    for image_id in order:
        info = image_list[image_id]
        path = checked_image_path(images_dir, info, listed_in)
        image, problem = read_decoded_checked(path, info)
        if image is None:
            bad.report(path, image_id, problem)
            bar.update(1)
            continue
        if info.get("width") is None:  # as the converter: the file gives the size the annotations do not
            info["width"], info["height"] = image.shape[1], image.shape[0]
        if pending and (image.shape != pending[0][1].shape or len(pending) >= batch_size):
            flush()
        pending.append((image_id, image))
    if pending:
        flush()
    bar.close()
    return out, bad.skipped


SKIP_OPTION = "--skip-bad (eval.skip_bad=true)"


def evaluate_images(
    images_dir: str | Path,
    annotations: str | Path,
    estimator: PoseEstimator,
    out_json: str | Path | None = None,
    progress: bool = True,
    network_for: NetworkFor | None = None,
    coco=None,
    diagnose_dir: str | Path | None = None,
) -> tuple[dict[str, float], str]:
    """Shard, predict, gather, evaluate (OKS with the estimator's skeleton's sigmas). Returns (stats, summary text)
    on every rank. ``coco``: the annotations already loaded by ``load_coco`` (else read from ``annotations``). Images
    skipped as bad (``eval.skip_bad``) are left out of the evaluation, and the summary says how many.
    ``diagnose_dir``: also diagnose the results there (``diagnose_into``; rank 0)."""
    check_images_dir(images_dir)
    skeleton = estimator.skeleton
    cfg = estimator.cfg
    coco, image_list, category = annotated_images(annotations, skeleton, cfg, coco)
    ids, results = predict_results(
        images_dir, image_list, estimator, out_json, progress, network_for, category, Path(annotations)
    )
    stats, summary = None, None
    if dist.is_main_process():
        stats, summary = keypoint_stats(coco, results, ids, skeleton)
        if diagnose_dir is not None:
            summary += diagnose_into(diagnose_dir, coco, results, ids, skeleton, images_dir)
        bad_annotations = len(coco.imgs) - len(image_list)
        bad_files = len(_shard_ids(image_list, cfg)) - len(ids)
        if bad_annotations or bad_files:
            summary += (
                f"{bad_annotations + bad_files} images left out of the evaluation as bad ({bad_annotations} "
                f"for their annotations, {bad_files} for their files; eval.skip_bad, warnings above)\n"
            )
    return dist.broadcast_object((stats, summary))


def annotated_images(
    annotations: str | Path, skeleton: Skeleton, cfg: EvalConfig, coco=None
) -> tuple[COCO, dict[int, dict], int]:
    """What an evaluation scores against: (the annotations loaded by ``load_coco``, or ``coco`` when already loaded;
    their images but those with bad annotations, by id; the keypoint category's id)."""
    coco = coco if coco is not None else load_coco(annotations, skeleton, cfg.skip_bad, cfg.keypoint_names)
    image_list = {i: img for i, img in coco.imgs.items() if i not in coco.bad_image_ids}
    return coco, image_list, keypoint_category(coco.dataset, skeleton, annotations)


def check_images_dir(images_dir: str | Path) -> None:
    if not Path(images_dir).is_dir():
        raise UserError(f"image folder {images_dir} not found (check --images / data.val_images)", file=images_dir)


def _shard_ids(image_list: Mapping[int, dict], cfg: EvalConfig) -> list[int]:
    """The images an evaluation predicts: the sorted ids, the first ``eval.max_images`` when set."""
    ids = sorted(image_list)
    return ids[: cfg.max_images] if cfg.max_images > 0 else ids


def predict_results(
    images_dir: str | Path,
    image_list: Mapping[int, dict],
    estimator: PoseEstimator,
    out_json: str | Path | None = None,
    progress: bool = True,
    network_for: NetworkFor | None = None,
    category_id: int = PERSON_CATEGORY,
    listed_in: Path | str = "the image list",
) -> tuple[list[int], list[dict] | None]:
    """Predict the images of ``image_list`` (sorted ids, the first ``eval.max_images`` when set), sharded over
    the ranks, and gather the results. Returns (the ids predicted, bad images skipped left out; the sorted results on
    rank 0 and None elsewhere); rank 0 writes them to ``out_json`` when given. ``category_id``: the annotations'
    keypoint category, written in each result; ``listed_in``: as ``predict_people``. More than half of the images
    skipped as bad stops every rank."""
    ids = _shard_ids(image_list, estimator.cfg)
    mine = [ids[i] for i in dist.shard(len(ids))]
    people, skipped = predict_people(image_list, mine, Path(images_dir), estimator, progress, network_for, listed_in)
    done = [i for i in mine if i in people]
    gathered = dist.all_gather_object((coco_results(done, [people[i] for i in done], category_id), skipped))
    skipped = [s for _, part in gathered for s in part]
    bad = BadImages(Path(images_dir), estimator.cfg.skip_bad, SKIP_OPTION, skipped)
    bad.check_share(len(ids))
    left = {s["image_id"] for s in skipped}
    ids = [i for i in ids if i not in left]
    if not dist.is_main_process():
        return ids, None
    results = sort_results(r for part, _ in gathered for r in part)
    if out_json:
        atomic_write_text(out_json, results_text(results))
    return ids, results


def evaluate_coco(
    model: torch.nn.Module,
    images_dir: str | Path,
    annotations: str | Path,
    cfg: Config,
    device: torch.device,
    out_json: str | Path | None = None,
    progress: bool = True,
    diagnose_dir: str | Path | None = None,
) -> tuple[dict[str, float], str]:
    """(stats, summary) of ``model``: COCO keypoint AP/AR (any rank count; its skeleton: ``model.skeleton``) and
    pycocotools' printed table, as ``evaluate_images``. The model is put in eval mode and restored after."""
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
    ``cfg.data.skeleton`` names: the oracle of each image plugs in as the network."""
    skeleton = skeleton_of(cfg)
    coco = load_coco(annotations, skeleton, cfg.eval.skip_bad, cfg.eval.keypoint_names)

    def network_for(image_ids: list[int]) -> Predictor:
        return oracle_for(coco, image_ids, cfg.targets, skeleton, OUTPUT_STRIDE)

    estimator = PoseEstimator(None, cfg.eval, skeleton, torch.device("cpu"))
    return evaluate_images(images_dir, annotations, estimator, out_json, progress, network_for, coco, diagnose_dir)


def score_results(
    results_file: str | Path,
    annotations: str | Path,
    cfg: Config,
    diagnose_dir: str | Path | None = None,
    images_dir: str | Path | None = None,
) -> tuple[dict[str, float], str]:
    """(stats, summary) of a results file made by any tool (``evaluate.metrics.results_file``: checked entry by entry)
    on ``annotations``, read and scored exactly as an evaluation here scores its own results: the skeleton
    ``cfg.data.skeleton`` names (its sigmas, its figures: COCO's or CrowdPose's), the evaluator's own ids, the
    annotation file's images (the first ``eval.max_images`` when set; images with bad annotations left out with
    ``eval.skip_bad``). Images without any result count as images where no one was found, and the summary says how many
    there are. ``diagnose_dir``: also diagnose the results there (``diagnose_into``; its worst examples drawn on the
    images of ``images_dir`` when given)."""
    skeleton = skeleton_of(cfg)
    coco, image_list, category = annotated_images(annotations, skeleton, cfg.eval)
    ids = _shard_ids(image_list, cfg.eval)
    results = read_results(results_file, coco, skeleton, category)
    scored = set(ids)
    left_out = sum(r["image_id"] not in scored for r in results)
    results = sort_results(r for r in results if r["image_id"] in scored)
    stats, summary = keypoint_stats(coco, results, ids, skeleton)
    without = len(scored - {r["image_id"] for r in results})
    notes = [f"scored {len(results)} results of {len(ids) - without} images on {len(ids)} images of {annotations}"]
    if without:
        notes.append(f"{without} of the {len(ids)} images have no result: scored as images where no one was found")
    if left_out:
        notes.append(f"{left_out} results of images outside the evaluated ones left out (eval.max_images, skip_bad)")
    summary += "".join(f"{n}\n" for n in notes)
    if diagnose_dir is not None:
        summary += diagnose_into(diagnose_dir, coco, results, ids, skeleton, images_dir)
    return stats, summary


def diagnose_into(out_dir, coco, results: list[dict], image_ids: list[int], skeleton: Skeleton, images_dir=None) -> str:
    """Diagnose ``results`` (evaluate/metrics/diagnosis.py) and write ``out_dir/diagnosis.json`` and its plots (the
    worst examples drawn when ``images_dir`` is given); returns the summary lines to print."""
    found = diagnose(coco, results, skeleton, image_ids)
    write_diagnosis(found, out_dir, coco, images_dir)
    if images_dir is None:
        worst = "; worst_examples.png not drawn: it needs the pictures, give --images DIR with --diagnose"
    elif not found.worst:
        worst = "; worst_examples.png not drawn: no matched person has a keypoint error to show"
    else:
        worst = ""
    return summary_text(found) + f"diagnosis written to {out_dir} (diagnosis.json and plots{worst})\n"


def format_stats(stats: dict[str, float]) -> str:
    """``AP 0.512  AP50 0.800 ...``; a figure whose group has no ground truth is -1.000, as pycocotools prints it."""
    return "  ".join(f"{k} {v:.3f}" for k, v in stats.items())


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m evaluate.coco_eval", description=__doc__.split("\n\n")[0])
    p.add_argument("--ckpt", help="checkpoint (ours, the original's, or a bare state dict)")
    p.add_argument("--from-ground-truth", action="store_true", help="decode the annotations' own target maps")
    p.add_argument("--results", help="score this COCO keypoint results file (made by any tool) on --annotations")
    p.add_argument(
        "--skeleton",
        help="with --results or --from-ground-truth: the keypoint set, a name or a YAML file "
        "(data.skeleton; default coco)",
    )
    p.add_argument("--images", help="image folder, e.g. coco/val2017 (not with --results)")
    p.add_argument("--annotations", help="COCO person_keypoints JSON (without it: results written, not scored)")
    p.add_argument(
        "--image-info", help="without annotations: COCO image-info JSON naming the images and their ids (test-dev)"
    )
    p.add_argument("--scales", type=float, nargs="+", help="test scales (default: eval.scales)")
    p.add_argument("--flip", action=argparse.BooleanOptionalAction, default=None, help="flip test (eval.flip)")
    p.add_argument("--out", help="results JSON to write (an existing one: with --overwrite)")
    p.add_argument(
        "--diagnose",
        metavar="DIR",
        help="also diagnose where the AP goes (keypoint errors, scoring, background): DIR/diagnosis.json and plots",
    )
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out file or --diagnose folder")
    p.add_argument(
        "--skip-bad",
        action="store_true",
        help="leave bad images and the images of bad annotations out, with a warning each, as the "
        "converter's --skip-bad (eval.skip_bad=true)",
    )
    p.add_argument(
        "--keypoint-names",
        choices=NAME_MATCHES,
        help="how the annotation file's keypoint names are compared with the skeleton's: exact, spelling, "
        "position (eval.keypoint_names; the converter's --keypoint-names)",
    )
    p.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:1 ...")
    add_config_arguments(p)
    return p


def eval_option_overrides(args: argparse.Namespace) -> list[str]:
    """``--scales`` and ``--flip/--no-flip`` as ``eval.*`` overrides (after the trailing ``key=value`` ones)."""
    out = list(args.overrides)
    if args.scales:
        out.append(f"eval.scales=[{','.join(map(str, args.scales))}]")
    if args.flip is not None:
        out.append(f"eval.flip={str(args.flip).lower()}")
    if args.skip_bad:
        out.append("eval.skip_bad=true")
    if args.keypoint_names:
        out.append(f"eval.keypoint_names={args.keypoint_names}")
    if args.skeleton:
        out.append(f"data.skeleton={args.skeleton}")
    return out


def check_arguments(args: argparse.Namespace) -> None:
    """UserError for a combination of options that cannot run, before any work."""
    if sum(map(bool, (args.ckpt, args.from_ground_truth, args.results))) != 1:
        raise UserError("give exactly one of --ckpt CKPT, --from-ground-truth or --results FILE")
    if args.diagnose:
        if not args.annotations:
            raise UserError("--diagnose compares results with the ground truth: give --annotations FILE")
        if not args.overwrite:
            refuse_to_overwrite([Path(args.diagnose) / "diagnosis.json"], "--diagnose DIR")
    if args.results:
        if not args.annotations:
            raise UserError("--results FILE is scored on annotations: give --annotations FILE")
        if args.out or args.image_info or (args.images and not args.diagnose):
            raise UserError(
                "--results scores a file as it is: --image-info and --out do not apply (--images: only "
                "with --diagnose, for its pictures)"
            )
        return
    if args.skeleton and args.ckpt:
        raise UserError("--skeleton applies to --results and --from-ground-truth; a checkpoint carries its own")
    if not args.images:
        raise UserError("give --images DIR, the folder of the images to evaluate")
    if args.annotations and args.image_info:
        raise UserError("give --annotations FILE (scored) or --image-info FILE (results only, not scored), not both")
    if not args.annotations:
        if args.from_ground_truth:
            raise UserError("--from-ground-truth draws the maps of the annotations: give --annotations FILE")
        if not args.out:
            raise UserError("without --annotations nothing can be scored: give --out results.json to write the results")
    if args.out and not args.overwrite:
        refuse_to_overwrite([Path(args.out)])


def unscored_image_list(args: argparse.Namespace) -> tuple[dict[int, dict], str]:
    """(image list, where its ids come from) of a run without annotations: the image-info file, or the folder."""
    if args.image_info:
        check_images_dir(args.images)
        return image_info_list(args.image_info), f"those of {args.image_info}"
    return folder_image_list(args.images)


def run_unscored(args: argparse.Namespace, image_list: dict[int, dict], ids_from: str, device: torch.device) -> None:
    """Write the results JSON of images without annotations, and say that nothing was scored."""
    model, cfg = load_model(args.ckpt, args.config, eval_option_overrides(args), device)
    estimator = PoseEstimator.from_model(model, cfg.eval, device)
    listed_in = Path(args.image_info) if args.image_info else "the image folder"
    ids, results = predict_results(args.images, image_list, estimator, args.out, listed_in=listed_in)
    if dist.is_main_process():
        print(
            f"no annotations: nothing was scored (no AP). Results of {len(ids)} images "
            f"({counted(len(results), 'person', 'people')}) "
            f"written to {args.out} in COCO results format, for an evaluation server; image ids: {ids_from}"
        )


@cli_main
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    check_arguments(args)
    if args.results:  # no model, no images, no processes: the file alone
        cfg = load_config(args.config, eval_option_overrides(args))
        stats, summary = score_results(args.results, args.annotations, cfg, args.diagnose, args.images)
        print(summary, end="")
        print(format_stats(stats))
        return 0
    unscored = None
    if not args.annotations:  # bad input fails before the model loads and the images run
        check_writable(Path(args.out).parent)
        unscored = unscored_image_list(args)
    device = dist.select_device(args.device, cpu_hint="--device cpu")
    dist.init_distributed(device)
    try:
        if unscored is not None:
            run_unscored(args, *unscored, device)
            return 0
        overrides = eval_option_overrides(args)
        if args.from_ground_truth:
            cfg = load_config(args.config, overrides)
            stats, summary = evaluate_oracle(args.images, args.annotations, cfg, args.out, diagnose_dir=args.diagnose)
        else:
            model, cfg = load_model(args.ckpt, args.config, overrides, device)
            stats, summary = evaluate_coco(
                model, args.images, args.annotations, cfg, device, args.out, diagnose_dir=args.diagnose
            )
        if dist.is_main_process():
            print(summary, end="")
            print(format_stats(stats))
            if args.out:
                print(f"results written to {args.out}")
    finally:
        dist.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
