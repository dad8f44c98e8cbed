"""Draw the people found in an image, a folder of images or a video.

    python -m evaluate.demo --ckpt runs/x/best.pt --input photo.jpg --out demo_out/
    python -m evaluate.demo --ckpt runs/x/best.pt --input clip.mp4 --out demo_out/ eval.scales=[1.0]
    python -m evaluate.demo --from-ground-truth --annotations ann.json --input images/ --out demo_out/

Uses the same thresholds as evaluation (config ``eval``). Prints, per image, the network time (resize,
forward, flip fusion, scale averaging) and the decoding time (peaks, limbs, assembly) separately.
``--from-ground-truth`` replaces the network by the annotations' own target maps (images must be listed in
the annotation file), to check drawing and decoding without a trained model. The skeleton is the checkpoint's
(``data.skeleton`` for ``--from-ground-truth``).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Iterator
from pathlib import Path

import cv2
import numpy as np
import torch

from config.loader import add_config_arguments, config_from_args
from config.schema import OUTPUT_STRIDE, Config
from config.skeleton import Skeleton, skeleton_of
from evaluate.coco_eval import load_coco
from evaluate.decode import decode_people
from evaluate.draw import draw_people
from evaluate.image_list import image_files
from evaluate.inference import Predictor, model_predictor, multiscale_maps
from evaluate.model_loader import load_model
from evaluate.oracle import oracle_for
from utils.distributed import select_device
from utils.errors import UserError, cli_main
from utils.io import atomic_write_bytes
from utils.precision import precision_for

VIDEO_SUFFIXES = {".mp4", ".avi", ".mov", ".mkv", ".webm"}


def estimate(image: np.ndarray, cfg: Config, predict: Predictor, device: torch.device, skeleton: Skeleton):
    """(people, network seconds, decoding seconds) for one BGR image; ``skeleton``: the predictor's (a model's
    ``model.skeleton``)."""
    t0 = time.perf_counter()
    maps, scale = multiscale_maps(image, cfg.eval, predict, device, OUTPUT_STRIDE, skeleton=skeleton)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t1 = time.perf_counter()
    people = decode_people(maps, cfg.eval, scale, skeleton=skeleton)
    return people, t1 - t0, time.perf_counter() - t1


def image_paths(path: Path) -> list[Path]:
    return image_files(path) if path.is_dir() else [path]


def video_frames(cap: cv2.VideoCapture) -> Iterator[np.ndarray]:
    """The frames of an opened capture, released at the end."""
    try:
        while True:
            ok, frame = cap.read()
            if not ok:
                return
            yield frame
    finally:
        cap.release()


def run_images(paths, out_dir: Path, cfg: Config, predictor_for, device, skeleton: Skeleton) -> list[Path]:
    written = []
    for path in paths:
        image = cv2.imread(str(path), cv2.IMREAD_COLOR)
        if image is None:
            raise UserError(f"image {path} could not be read (missing, corrupt or not an image)")
        people, t_net, t_dec = estimate(image, cfg, predictor_for(path), device, skeleton)
        ok, data = cv2.imencode(".jpg", draw_people(image, people.keypoints, skeleton))
        if not ok:
            raise UserError(f"could not encode the drawing of {path}")
        target = out_dir / f"{path.stem}_pose.jpg"
        atomic_write_bytes(target, data.tobytes())
        written.append(target)
        print(f"{path.name}: {len(people)} people, network {t_net * 1000:.1f} ms, decoding {t_dec * 1000:.1f} ms")
    return written


def run_video(path: Path, out_dir: Path, cfg: Config, predict: Predictor, device, skeleton: Skeleton) -> Path:
    cap = cv2.VideoCapture(str(path))
    if not cap.isOpened():
        raise UserError(f"video {path} could not be opened (unsupported codec or corrupt file)")
    fps = cap.get(cv2.CAP_PROP_FPS) or 25.0
    target = out_dir / f"{path.stem}_pose.mp4"
    tmp = out_dir / f".{path.stem}_pose.tmp.mp4"
    writer = None
    n = 0
    try:
        for frame in video_frames(cap):
            people, t_net, t_dec = estimate(frame, cfg, predict, device, skeleton)
            if writer is None:
                h, w = frame.shape[:2]
                writer = cv2.VideoWriter(str(tmp), cv2.VideoWriter_fourcc(*"mp4v"), fps, (w, h))
            writer.write(draw_people(frame, people.keypoints, skeleton))
            n += 1
            print(f"frame {n}: {len(people)} people, network {t_net * 1000:.1f} ms, decoding {t_dec * 1000:.1f} ms")
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        if writer is not None:
            writer.release()
    if n == 0:
        raise UserError(f"video {path} has no readable frames")
    os.replace(tmp, target)
    return target


def ground_truth_predictors(annotations: str, cfg: Config, skeleton: Skeleton):
    coco = load_coco(annotations, skeleton)
    by_name = {info["file_name"]: image_id for image_id, info in coco.imgs.items()}

    def predictor_for(path: Path) -> Predictor:
        if path.name not in by_name:
            raise UserError(f"image {path.name} is not listed in {annotations}")
        return oracle_for(coco, [by_name[path.name]], cfg.targets, skeleton, OUTPUT_STRIDE)

    return predictor_for


@cli_main
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m evaluate.demo", description=__doc__.split("\n\n")[0])
    p.add_argument("--ckpt", help="checkpoint")
    p.add_argument("--from-ground-truth", action="store_true", help="draw the annotations' decoded target maps")
    p.add_argument("--annotations", help="COCO annotations (with --from-ground-truth)")
    p.add_argument("--input", required=True, help="image, folder of images, or video")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--device", default="auto")
    add_config_arguments(p)
    args = p.parse_args(argv)
    src, out_dir = Path(args.input), Path(args.out)
    if not src.exists():
        raise UserError(f"input {src} not found")
    device = select_device(args.device)
    if args.from_ground_truth:
        if not args.annotations or src.suffix.lower() in VIDEO_SUFFIXES:
            raise UserError("--from-ground-truth needs --annotations and image input")
        cfg = config_from_args(args)
        skeleton = skeleton_of(cfg)
        predictor_for = ground_truth_predictors(args.annotations, cfg, skeleton)
        device = torch.device("cpu")
    elif args.ckpt:
        model, cfg = load_model(args.ckpt, args.config, args.overrides, device)
        skeleton = model.skeleton
        predict = model_predictor(model, precision_for(cfg.eval.amp, device, "eval.amp"))

        def predictor_for(path: Path) -> Predictor:
            return predict
    else:
        raise UserError("give --ckpt CKPT (or --from-ground-truth --annotations FILE)")
    out_dir.mkdir(parents=True, exist_ok=True)
    if src.suffix.lower() in VIDEO_SUFFIXES:
        print(f"wrote {run_video(src, out_dir, cfg, predictor_for(src), device, skeleton)}")
    else:
        written = run_images(image_paths(src), out_dir, cfg, predictor_for, device, skeleton)
        print(f"wrote {len(written)} image(s) to {out_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
