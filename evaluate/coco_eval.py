"""COCO keypoint AP of a model (or of the oracle maps), in one process or sharded over torchrun ranks.

    python -m evaluate.coco_eval --ckpt runs/x/best.pt --images coco/val2017 \
        --annotations coco/annotations/person_keypoints_val2017.json [--scales 1] [--no-flip] [--out res.json]
    torchrun --nproc_per_node=4 -m evaluate.coco_eval ...        # images split over ranks
    python -m evaluate.coco_eval --from-ground-truth --images ... --annotations ...   # decoder upper bound

Ranks take a strided shard of the (sorted) image ids, predictions are all-gathered, rank 0 writes the results
JSON and runs pycocotools, every rank receives the numbers. The JSON is sorted and its floats rounded, so it
is byte-identical for any number of processes. The skeleton is the model's (the checkpoint's; ``data.skeleton`` for
``--from-ground-truth``): results are in its dataset keypoint order, OKS uses its sigmas, and its ``evaluation``
says which figures: COCO's, or CrowdPose's (evaluate/crowdpose_eval.py: AP, AR and AP easy/medium/hard).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import cv2
import numpy as np
import torch
from tqdm import tqdm

from config.loader import add_config_arguments, load_config
from config.schema import OUTPUT_STRIDE, Config
from config.skeleton import Skeleton, skeleton_of
from data.coco_annotations import PERSON_CATEGORY, keypoint_category
from evaluate.crowdpose_eval import crowdpose_keypoint_stats, with_box_areas
from evaluate.decode import People, decode_people
from evaluate.inference import Predictor, model_predictor, multiscale_maps_batch
from evaluate.model_loader import load_model
from evaluate.oracle import oracle_for
from models.weights import unwrap
from utils import distributed as dist
from utils.errors import UserError, cli_main
from utils.io import atomic_write_text
from utils.precision import precision_for
from utils.safe_paths import safe_image_path
from utils.watchdog import beat

STAT_NAMES = ("AP", "AP50", "AP75", "APm", "APl", "AR", "AR50", "AR75", "ARm", "ARl")


def load_coco(annotations: str | Path, skeleton: Skeleton | None = None):
    """pycocotools COCO object of a person_keypoints JSON, quietly; UserError when missing or malformed, or (with
    ``skeleton``) when a person annotation does not hold the skeleton's dataset keypoints."""
    from pycocotools.coco import COCO

    path = Path(annotations)
    if not path.is_file():
        raise UserError(f"annotation file {path} not found (expected a COCO person_keypoints_*.json)")
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            coco = COCO(str(path))
    except (ValueError, KeyError, TypeError, AssertionError) as e:
        raise UserError(f"annotation file {path} is not a valid COCO annotation file: {e}") from None
    if skeleton is not None:
        check_keypoint_counts(coco, path, skeleton)
    return coco


def check_keypoint_counts(coco, path: Path, skeleton: Skeleton) -> None:
    """UserError naming the file and the first person annotation whose keypoints are not the skeleton's count."""
    want = 3 * skeleton.num_dataset_keypoints
    category = keypoint_category(coco.dataset, skeleton, path)
    for ann in coco.dataset.get("annotations", []):
        kp = ann.get("keypoints")
        if ann.get("category_id", category) == category and kp is not None and len(kp) != want:
            raise UserError(
                f"annotation file {path}, annotation id {ann.get('id', '?')}: 'keypoints' holds {len(kp)} numbers "
                f"but skeleton {skeleton.describe()} needs {want}; evaluate with the skeleton of this dataset "
                "(data.skeleton=NAME or FILE; a checkpoint carries its own)"
            )


def image_path(images_dir: Path, file_name: str) -> Path:
    """``images_dir / file_name``, refused when the annotation's file name leads outside the folder."""
    path = safe_image_path(Path(images_dir), file_name)
    if path is None:
        raise UserError(f"image file_name {file_name!r} leads outside {images_dir}; fix the annotation file")
    return path


def read_image(path: Path) -> np.ndarray:
    """BGR uint8 image in its stored pixel layout; UserError when missing or unreadable.

    EXIF orientation is ignored, as in training (data/jpeg.py): COCO's keypoints refer to the stored pixels, so a
    rotated read would put every prediction of such an image in the wrong place.
    """
    if not path.is_file():
        raise UserError(f"image {path} not found (check --images / data.val_images)")
    image = cv2.imread(str(path), cv2.IMREAD_COLOR | cv2.IMREAD_IGNORE_ORIENTATION)
    if image is None:
        raise UserError(f"image {path} could not be decoded (corrupt or not an image)")
    return image


def coco_results(image_ids: list[int], people: list[People], category_id: int = PERSON_CATEGORY) -> list[dict]:
    """The COCO keypoint results list: one entry per person (of category ``category_id``, the annotations'
    keypoint category), sorted by image id then descending score.

    Keypoint v is 1 where a keypoint was found and 0 otherwise (with x = y = 0). Floats are rounded
    (coordinates to 0.01 px, scores to 1e-6) so that the file is reproducible byte for byte.
    """
    out = []
    for image_id, p in zip(image_ids, people):
        for kp, score in zip(p.keypoints, p.scores):
            found = kp[:, 2] > 0
            flat = np.stack([kp[:, 0], kp[:, 1], found.astype(np.float64)], 1).ravel()
            entry = {
                "image_id": int(image_id),
                "category_id": category_id,
                "keypoints": [round(float(v), 2) for v in flat],
                "score": round(float(score), 6),
            }
            out.append(entry)
    return sort_results(out)


def sort_results(results) -> list[dict]:
    """The one result order: image id, then descending score (then keypoints, to break ties)."""
    return sorted(results, key=lambda r: (r["image_id"], -r["score"], r["keypoints"]))


def results_text(results: list[dict]) -> str:
    """The results list as JSON text, one person per line."""
    if not results:
        return "[]\n"
    return "[\n" + ",\n".join(json.dumps(r, separators=(",", ":")) for r in results) + "\n]\n"


def coco_keypoint_stats(
    coco, results: list[dict], image_ids: list[int], sigmas: Sequence[float] | None = None
) -> tuple[dict[str, float], str]:
    """pycocotools keypoint evaluation restricted to ``image_ids``; (stats, printed summary).

    ``sigmas``: the OKS sigma of each dataset keypoint (``Skeleton.sigmas``); None: pycocotools' own, COCO's.
    No detections at all gives zeros (pycocotools cannot load an empty result list). Annotations without an
    'area' are scored with 0.53 x their box area (CrowdPose's stand-in).
    """
    if not results:
        return {k: 0.0 for k in STAT_NAMES}, "no detections: every AP and AR is 0\n"
    from pycocotools.cocoeval import COCOeval

    coco = with_box_areas(coco, every=False)
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        detections = coco.loadRes(results)
        ev = COCOeval(coco, detections, "keypoints")
        ev.params.imgIds = list(image_ids)
        if sigmas is not None:
            ev.params.kpt_oks_sigmas = np.array(sigmas, np.float64)
        ev.evaluate()
        ev.accumulate()
    summary = io.StringIO()
    with contextlib.redirect_stdout(summary):
        ev.summarize()
    stats = {k: float(max(v, 0.0)) for k, v in zip(STAT_NAMES, ev.stats)}  # -1 means "no ground truth"
    return stats, summary.getvalue()


def keypoint_stats(coco, results: list[dict], image_ids: list[int], skeleton: Skeleton) -> tuple[dict[str, float], str]:
    """(stats, printed table) of ``results`` as ``skeleton.evaluation`` says: COCO's keypoint figures or
    CrowdPose's, OKS with the skeleton's sigmas."""
    if skeleton.evaluation == "crowdpose":
        return crowdpose_keypoint_stats(coco, results, image_ids, skeleton.sigmas)
    return coco_keypoint_stats(coco, results, image_ids, skeleton.sigmas)


def predict_people(
    coco,
    image_ids: list[int],
    images_dir: Path,
    cfg: Config,
    device: torch.device,
    predictor_for: Callable[[list[int]], Predictor],
    batch_size: int = 1,
    progress: bool = True,
    *,
    skeleton: Skeleton,
) -> dict[int, People]:
    """Run the test-time path on this rank's images, ``batch_size`` images of one size per forward.

    ``predictor_for(image_ids)`` supplies the predictor of a batch, whose maps are in ``skeleton``'s layout.
    Images are visited grouped by size (from the annotation file) so that batches fill up; returns
    {image id: people}.
    """
    size = lambda i: (coco.imgs[i].get("height", 0), coco.imgs[i].get("width", 0))  # noqa: E731
    order = sorted(image_ids, key=size)
    out: dict[int, People] = {}
    pending: list[tuple[int, np.ndarray]] = []

    def flush() -> None:
        ids, images = [i for i, _ in pending], [im for _, im in pending]
        predict = predictor_for(ids)
        results = multiscale_maps_batch(images, cfg.eval, predict, device, OUTPUT_STRIDE, skeleton=skeleton)
        for image_id, (maps, scale) in zip(ids, results):
            out[image_id] = decode_people(maps, cfg.eval, scale, skeleton=skeleton)
        bar.update(len(pending))
        beat("validation", f"image {len(out)} of {len(order)} of this process")
        pending.clear()

    bar = tqdm(total=len(order), desc="eval", unit="img", disable=not (progress and dist.is_main_process()))
    for image_id in order:
        image = read_image(image_path(images_dir, coco.imgs[image_id]["file_name"]))
        if pending and (image.shape != pending[0][1].shape or len(pending) >= batch_size):
            flush()
        pending.append((image_id, image))
    if pending:
        flush()
    bar.close()
    return out


def evaluate_images(
    images_dir: str | Path,
    annotations: str | Path,
    cfg: Config,
    device: torch.device,
    predictor_for: Callable[[list[int]], Predictor],
    out_json: str | Path | None = None,
    progress: bool = True,
    batch_size: int = 1,
    *,
    skeleton: Skeleton,
) -> tuple[dict[str, float], str]:
    """Shard, predict, gather, evaluate (OKS with ``skeleton``'s sigmas). Returns (stats, summary text) on every
    rank."""
    images_dir = Path(images_dir)
    if not images_dir.is_dir():
        raise UserError(f"image folder {images_dir} not found (check --images / data.val_images)")
    coco = load_coco(annotations, skeleton)
    ids = sorted(coco.getImgIds())
    if cfg.eval.max_images > 0:
        ids = ids[: cfg.eval.max_images]
    mine = [ids[i] for i in dist.shard(len(ids))]
    people = predict_people(coco, mine, images_dir, cfg, device, predictor_for, batch_size, progress, skeleton=skeleton)
    category = keypoint_category(coco.dataset, skeleton, annotations)
    gathered = dist.all_gather_object(coco_results(mine, [people[i] for i in mine], category))
    stats, summary = None, None
    if dist.is_main_process():
        results = sort_results(r for part in gathered for r in part)
        if out_json:
            atomic_write_text(out_json, results_text(results))
        stats, summary = keypoint_stats(coco, results, ids, skeleton)
    return dist.broadcast_object((stats, summary))


def evaluate_coco(
    model: torch.nn.Module,
    images_dir: str | Path,
    annotations: str | Path,
    cfg: Config,
    device: torch.device,
    out_json: str | Path | None = None,
    progress: bool = True,
    with_summary: bool = False,
) -> dict[str, float] | tuple[dict[str, float], str]:
    """COCO keypoint AP/AR of ``model`` (any rank count; its skeleton: ``model.skeleton``); with ``with_summary``
    also pycocotools' printed table. The model is put in eval mode and restored after."""
    was_training = model.training
    model.eval()
    try:
        predictor = model_predictor(model, precision_for(cfg.eval.amp, device, "eval.amp"))
        stats, summary = evaluate_images(
            images_dir, annotations, cfg, device, lambda ids: predictor, out_json, progress, cfg.eval.batch_size,
            skeleton=unwrap(model).skeleton,
        )
    finally:
        model.train(was_training)
    return (stats, summary) if with_summary else stats


def evaluate_oracle(
    images_dir: str | Path,
    annotations: str | Path,
    cfg: Config,
    out_json: str | Path | None = None,
    progress: bool = True,
) -> tuple[dict[str, float], str]:
    """AP of decoding the ground-truth target maps (the decoder's upper bound), for the skeleton
    ``cfg.data.skeleton`` names."""
    skeleton = skeleton_of(cfg)
    coco = load_coco(annotations, skeleton)

    def predictor_for(image_ids: list[int]) -> Predictor:  # one image per batch: the maps are per image
        return oracle_for(coco, image_ids, cfg.targets, skeleton, OUTPUT_STRIDE)

    return evaluate_images(
        images_dir, annotations, cfg, torch.device("cpu"), predictor_for, out_json, progress, 1, skeleton=skeleton
    )


def format_stats(stats: dict[str, float]) -> str:
    return "  ".join(f"{k} {v:.3f}" for k, v in stats.items())


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m evaluate.coco_eval", description=__doc__.split("\n\n")[0])
    p.add_argument("--ckpt", help="checkpoint (ours, the original's, or a bare state dict)")
    p.add_argument("--from-ground-truth", action="store_true", help="decode the annotations' own target maps")
    p.add_argument("--images", required=True, help="image folder, e.g. coco/val2017")
    p.add_argument("--annotations", required=True, help="COCO person_keypoints JSON")
    p.add_argument("--scales", type=float, nargs="+", help="test scales (default: eval.scales)")
    p.add_argument("--flip", action=argparse.BooleanOptionalAction, default=None, help="flip test (eval.flip)")
    p.add_argument("--out", help="results JSON to write")
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
    return out


@cli_main
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if bool(args.ckpt) == bool(args.from_ground_truth):
        raise UserError("give exactly one of --ckpt CKPT or --from-ground-truth")
    device = dist.select_device(args.device)
    dist.init_distributed(device)
    try:
        overrides = eval_option_overrides(args)
        if args.from_ground_truth:
            cfg = load_config(args.config, overrides)
            stats, summary = evaluate_oracle(args.images, args.annotations, cfg, args.out)
        else:
            model, cfg = load_model(args.ckpt, args.config, overrides, device)
            stats, summary = evaluate_coco(
                model, args.images, args.annotations, cfg, device, args.out, with_summary=True
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
