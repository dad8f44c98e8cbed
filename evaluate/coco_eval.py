"""COCO keypoint AP of a model (or of the oracle maps), in one process or sharded over torchrun ranks.

    simplepose eval --ckpt runs/x/best.pt --images coco/val2017 \
        --annotations coco/annotations/person_keypoints_val2017.json [--scales 1] [--no-flip] [--out res.json]
    torchrun --nproc_per_node=4 -m simplepose eval ...           # images split over ranks
    simplepose eval --from-ground-truth --images ... --annotations ...                # decoder upper bound
    simplepose eval --ckpt ... --images coco/test2017 \
        --image-info coco/annotations/image_info_test-dev2017.json --out results.json   # test-dev: not scored
    simplepose eval --results their_results.json --annotations ann.json [--skeleton crowdpose]
        # a results file made by any tool, scored as this project scores its own

A short command over the evaluation library (evaluate/evaluation.py): ranks take a strided shard of the (sorted)
image ids, predictions are all-gathered, rank 0 writes the results JSON and runs pycocotools, every rank receives the
numbers. The JSON is sorted and its floats rounded, so it
is byte-identical for any number of processes. The skeleton is the model's (the checkpoint's; ``data.skeleton`` for
``--from-ground-truth``): results are in its dataset keypoint order, OKS uses its sigmas, and its ``evaluation``
says which figures: COCO's, or CrowdPose's (evaluate/metrics/crowdpose_eval.py: AP, AR and AP easy/medium/hard). Without
``--annotations`` (a plain image folder, or an image-info JSON) the results JSON is written for an evaluation server
and nothing is scored (evaluate/unannotated_images.py: ids). Scoring a results file needs no PyTorch (the runtime
install runs it): the modules on torch are imported by the functions that run a network.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from simplepose.config.config_file import add_config_arguments, load_config
from simplepose.config.schema import Config
from simplepose.config.skeleton_check import NAME_MATCHES
from simplepose.config.skeleton_file import skeleton_of
from simplepose.evaluate.metrics.annotations import load_ground_truth
from simplepose.evaluate.metrics.keypoint_stats import format_stats
from simplepose.evaluate.results_scoring import score_results
from simplepose.evaluate.unannotated_images import folder_image_list, image_info_list
from simplepose.utils.commands import (
    FULL_INSTALL,
    command,
    commands_here,
    full_install,
    refuse_without_full_install,
)
from simplepose.utils.errors import UserError, cli_main
from simplepose.utils.folder_lock import check_not_held
from simplepose.utils.io import check_writable, refuse_to_overwrite
from simplepose.utils.text import counted

if TYPE_CHECKING:
    import torch

RUNTIME_LACKS = f"--ckpt and --from-ground-truth need the full install (PyTorch): {FULL_INSTALL}"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=command("evaluate.coco_eval"),
        description=commands_here(__doc__.split("\n\n")[0]),
        epilog=None if full_install() else f"this install scores results files (--results); {RUNTIME_LACKS}",
    )
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
        if not full_install():
            raise UserError(f"give --results FILE (this install scores results files; {RUNTIME_LACKS})")
        raise UserError("give exactly one of --ckpt CKPT, --from-ground-truth or --results FILE")
    if args.diagnose:
        if not args.annotations:
            raise UserError("--diagnose compares results with the ground truth: give --annotations FILE")
        if not args.overwrite:
            refuse_to_overwrite([Path(args.diagnose) / "diagnosis.json"], "--diagnose DIR")
    if args.results:
        if not args.annotations:
            raise UserError("--results FILE is scored on annotations: give --annotations FILE")
        if args.out or args.image_info or args.scales or args.flip is not None or (args.images and not args.diagnose):
            raise UserError(
                "--results scores a file as it is: --image-info, --out, --scales and --flip do not apply (--images: "
                "only with --diagnose, for its pictures)"
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
    for given, option in ((args.out, "--out"), (args.diagnose, "--diagnose")):
        if given:
            check_not_held(given, option)  # a training run's folder, while it runs


def unscored_image_list(args: argparse.Namespace) -> tuple[dict[int, dict], str]:
    """(image list, where its ids come from) of a run without annotations: the image-info file, or the folder."""
    from simplepose.evaluate.evaluation import check_images_dir

    if args.image_info:
        check_images_dir(args.images)
        return image_info_list(args.image_info), f"those of {args.image_info}"
    return folder_image_list(args.images)


def run_unscored(args: argparse.Namespace, image_list: dict[int, dict], ids_from: str, device: torch.device) -> None:
    """Write the results JSON of images without annotations, and say that nothing was scored."""
    from simplepose.evaluate.estimator import PoseEstimator
    from simplepose.evaluate.evaluation import predict_unannotated
    from simplepose.evaluate.inference.checkpoint_model import load_model
    from simplepose.utils import distributed as dist

    model, cfg = load_model(args.ckpt, args.config, eval_option_overrides(args), device)
    estimator = PoseEstimator.from_model(model, cfg.eval, device)
    listed_in = Path(args.image_info) if args.image_info else "the image folder"
    ids, found = predict_unannotated(args.images, image_list, estimator, args.out, listed_in=listed_in)
    if dist.is_main_process():
        print(
            f"no annotations: nothing was scored (no AP). Results of {len(ids)} images "
            f"({counted(found, 'person', 'people')}) "
            f"written to {args.out} in COCO results format, for an evaluation server; image ids: {ids_from}"
        )


def checked_outputs(args: argparse.Namespace) -> None:
    """Rank 0, which writes them, can write into the folders of ``--out`` and ``--diagnose``."""
    from simplepose.utils import distributed as dist

    if dist.is_main_process():
        for given, folder in ((args.out, Path(args.out or ".").parent), (args.diagnose, Path(args.diagnose or "."))):
            if given:
                check_writable(folder)


def opened_model(args: argparse.Namespace, overrides: list[str], device: torch.device) -> tuple:
    """(model, cfg, the annotations' ``GroundTruth``) of a scored evaluation: everything it reads opened and checked,
    and its outputs' folders, before its first image (the checkpoint, the image folder, the annotations for the
    model's skeleton)."""
    from simplepose.evaluate.evaluation import check_images_dir
    from simplepose.evaluate.inference.checkpoint_model import load_model
    from simplepose.models.weights import carried_skeleton

    model, cfg = load_model(args.ckpt, args.config, overrides, device)
    check_images_dir(args.images)
    truth = load_ground_truth(args.annotations, carried_skeleton(model), cfg.eval)
    checked_outputs(args)
    return model, cfg, truth


def checked_oracle(args: argparse.Namespace, overrides: list[str]) -> Config:
    """The config of a ``--from-ground-truth`` evaluation, its image folder, annotation file and outputs' folders
    checked before its first image."""
    from simplepose.evaluate.evaluation import check_images_dir

    cfg = load_config(args.config, overrides)
    check_images_dir(args.images)
    load_ground_truth(args.annotations, skeleton_of(cfg), cfg.eval)
    checked_outputs(args)
    return cfg


@cli_main
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not args.results and (args.ckpt or args.from_ground_truth):  # before the other checks: the runtime runs neither
        option = "--ckpt" if args.ckpt else "--from-ground-truth"
        refuse_without_full_install(f"{command('evaluate.coco_eval')} {option}")
    check_arguments(args)
    if args.results:  # no model, no images, no processes: the file alone
        cfg = load_config(args.config, eval_option_overrides(args))
        stats, summary = score_results(args.results, args.annotations, cfg, args.diagnose, args.images)
        print(summary, end="")
        print(format_stats(stats))
        return 0
    return run_network(args)


def run_network(args: argparse.Namespace) -> int:
    """A checkpoint's evaluation, or the oracle's (``--from-ground-truth``), scored or not: on PyTorch."""
    from simplepose.evaluate.evaluation import evaluate_model, evaluate_oracle
    from simplepose.utils import distributed as dist

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
            # every rank checks what it reads before the first image, and all stop together on a problem
            cfg = dist.agreed(lambda: checked_oracle(args, overrides))
            stats, summary = evaluate_oracle(args.images, args.annotations, cfg, args.out, diagnose_dir=args.diagnose)
        else:
            model, cfg, truth = dist.agreed(lambda: opened_model(args, overrides, device))
            stats, summary = evaluate_model(
                model, args.images, truth, cfg, device, args.out, diagnose_dir=args.diagnose
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
