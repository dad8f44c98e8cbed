"""Find the people in an image, a folder of images, a video or a camera: drawn pictures and/or COCO results JSON.

    python -m evaluate.demo --ckpt runs/x/best.pt --input photo.jpg --out demo_out/
    python -m evaluate.demo --ckpt runs/x/best.pt --input images/ --json results.json
    python -m evaluate.demo --ckpt runs/x/best.pt --input clip.mp4 --out demo_out/ --json clip.json eval.scales=[1.0]
    python -m evaluate.demo --ckpt runs/x/best.pt --input 0 --out demo_out/     # camera 0, until Ctrl-C
    python -m evaluate.demo --ckpt runs/x/best.pt --input clip.mp4 --track --smooth --out demo_out/ --json clip.json
    python -m evaluate.demo --onnx model.onnx --input photo.jpg --out demo_out/
    python -m evaluate.demo --from-ground-truth --annotations ann.json --input images/ --out demo_out/

Runs the Python API (``evaluate.PoseEstimator``) with the run's ``eval`` settings. ``--out DIR`` gets
``<name>_pose.jpg`` per image, ``<name>_pose.mp4`` per video (``camera<N>_pose.mp4``); ``--json FILE`` the COCO
keypoint results (image ids: the number each file name ends with, else 1..N, as evaluate/image_list.py; for a video
or a camera, the frame index from 0). Every file is written atomically. Prints the network time (resize, forward,
flip fusion, scale averaging) and the decoding time (peaks, limbs, assembly) apart, per image, and images/s at the
end. A camera is read until its stream ends or Ctrl-C, then what was read is written. Images are read in their
stored pixel layout (EXIF orientation ignored), as evaluation reads them. ``--from-ground-truth`` replaces the
network by the annotations' own target maps (images must be listed in the annotation file; a video's frame i is
the image of id i), to check drawing, decoding and tracking without a trained model. The skeleton is the
checkpoint's (``data.skeleton`` for ``--from-ground-truth``).

``--track`` gives each person an id across the frames of a video, a camera or a folder of frames (in name order,
``--fps`` apart) with ``evaluate.PoseTracker`` (``track.*`` settings); ``--smooth`` also smooths the keypoints
(One-Euro filter). People then come as their track is confirmed (``track.min_hits``), each drawn in its id's colour
with its number and a short trail, and the JSON gives each its ``track_id``.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import cv2
import numpy as np
import torch

from config.loader import add_config_arguments, config_from_args, load_config, parse_overrides
from config.schema import OUTPUT_STRIDE, TrackConfig
from config.skeleton import skeleton_of
from data.image_files import ImageFileError, read_image
from evaluate.coco_eval import load_coco
from evaluate.draw import Trails, draw_people, draw_tracked
from evaluate.image_list import file_image_ids, image_files
from evaluate.inference import Predictor
from evaluate.model_loader import load_model
from evaluate.oracle import oracle_for
from evaluate.predictor import Person, PoseEstimator, coco_results_json
from evaluate.track import PoseTracker
from evaluate.video import VideoReader
from utils.distributed import select_device
from utils.errors import UserError, cli_main
from utils.io import atomic_path, atomic_write_bytes, atomic_write_text, check_writable
from utils.progress_bar import progress_bar

VIDEO_SUFFIXES = {".mp4", ".avi", ".mov", ".mkv", ".webm"}
VIDEO_CODEC = "mp4v"

NetworkFor = Callable[[Path | int], Predictor]  # the network of an image file or a video's frame index (the oracle's)


@dataclass(frozen=True)
class Source:
    """What ``--input`` names: image files, a video file, or a camera index."""

    images: list[Path] | None = None
    video: Path | None = None
    camera: int | None = None

    @property
    def name(self) -> str:
        return f"camera{self.camera}" if self.camera is not None else self.video.stem if self.video else "images"


def input_source(text: str) -> Source:
    """The ``--input`` argument as a Source; UserError when it does not exist (a camera is checked when opened)."""
    path = Path(text)
    if not path.exists():
        if text.isdigit():
            return Source(camera=int(text))
        raise UserError(f"input {path} not found (give an image, a folder of images, a video, or a camera index)")
    if path.is_dir():
        return Source(images=image_files(path))
    if path.suffix.lower() in VIDEO_SUFFIXES:
        return Source(video=path)
    return Source(images=[path])


class Drawing:
    """How each picture is drawn: plain skeletons, or tracked people in their ids' colours with trails."""

    def __init__(self, estimator: PoseEstimator, tracked: bool):
        self.skeleton = estimator.skeleton
        self.trails = Trails() if tracked else None

    def __call__(self, image: np.ndarray, people: list[Person]) -> np.ndarray:
        if self.trails is None:
            return draw_people(image, [p.keypoints for p in people], self.skeleton)
        self.trails.update(people)
        return draw_tracked(image, people, self.skeleton, self.trails)


def run_images(
    paths: list[Path],
    estimator: PoseEstimator,
    out_dir: Path | None,
    network_for: NetworkFor | None,
    tracker: PoseTracker | None = None,
    fps: float = 30.0,
) -> tuple[list[int], list[list[Person]]]:
    """Predict (and draw into ``out_dir``) each image, tracked as frames ``1 / fps`` apart when ``tracker``; (image
    ids, people of each image). A file that cannot be read or decoded is skipped with a line and counted (the others
    go on); UserError when none could be read."""
    all_ids, rule = file_image_ids(paths)
    ids, results, skipped = [], [], []
    first_error: ImageFileError | None = None
    drawing = Drawing(estimator, tracker is not None)
    for i, (path, image_id) in enumerate(zip(paths, all_ids)):
        try:
            image = read_image(path)
        except ImageFileError as e:
            first_error = first_error or e
            skipped.append(path)
            print(f"{path.name}: skipped, {e.reason} ({e})")
            continue
        ids.append(image_id)
        people = estimator.predict_batch([image], network_for(path) if network_for else None)[0]
        if tracker is not None:
            people = tracker.update(people, i / fps)
        results.append(people)
        if out_dir is not None:
            ok, data = cv2.imencode(".jpg", drawing(image, people))
            if not ok:
                raise UserError(f"could not encode the drawing of {path}")
            atomic_write_bytes(out_dir / f"{path.stem}_pose.jpg", data.tobytes())
        t = estimator.timing
        print(f"{path.name}: {len(people)} people, network {t.network_s * 1000:.1f} ms, "
              f"decoding {t.decoding_s * 1000:.1f} ms")  # fmt: skip
    print(f"image ids: {rule}")
    if skipped:
        print(f"{len(skipped)} of {len(paths)} files skipped as unreadable: {', '.join(p.name for p in skipped[:5])}"
              f"{' ...' if len(skipped) > 5 else ''}")  # fmt: skip
        if not results:
            raise UserError(f"none of the {len(paths)} image files could be read; the first: {first_error}",
                            file=skipped[0])  # fmt: skip
    return ids, results


def run_video(
    source: Source,
    estimator: PoseEstimator,
    out_dir: Path | None,
    tracker: PoseTracker | None = None,
    network_for: NetworkFor | None = None,
) -> tuple[list[int], list[list[Person]]]:
    """Predict every frame of a video or camera (drawn into ``out_dir/<name>_pose.mp4``; tracked with ``tracker``),
    with a progress bar; (frame indices, people of each frame). Ctrl-C ends a camera's stream; what was read is
    still written."""
    reader = VideoReader(source.camera if source.camera is not None else source.video)
    results: list[list[Person]] = []
    target = out_dir / f"{source.name}_pose.mp4" if out_dir is not None else None
    drawing = Drawing(estimator, tracker is not None)
    # exits run last-in first-out: the writer is released before atomic_path renames its file
    with contextlib.ExitStack() as stack:
        stack.callback(reader.close)
        tmp = stack.enter_context(atomic_path(target, suffix=".tmp.mp4")) if target else None
        frames = estimator.video(reader, tracker, network_for)
        bar = stack.enter_context(progress_bar(frames, total=reader.frame_count or None, desc=source.name,
                                               unit="frame"))
        writer = None
        try:
            for frame in bar:
                if tmp is not None:
                    if writer is None:
                        writer = open_writer(tmp, reader.fps, frame.image.shape[:2], target)
                        stack.callback(writer.release)
                    writer.write(drawing(frame.image, frame.people))
                results.append(frame.people)
                bar.set_postfix(people=len(frame.people), refresh=False)
        except KeyboardInterrupt:
            if source.camera is None:
                raise
            print("\ninterrupted: writing what was read")
        if not results:
            raise UserError(f"{reader.describe()} gave no readable frames")
    if target is not None:
        print(f"wrote {target}")
    return list(range(len(results))), results


def open_writer(path: Path, fps: float, size_hw: tuple[int, int], target: Path) -> cv2.VideoWriter:
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*VIDEO_CODEC), fps, (size_hw[1], size_hw[0]))
    if not writer.isOpened():
        raise UserError(f"cannot write video {target}: OpenCV has no {VIDEO_CODEC} encoder for .mp4 here")
    return writer


def ground_truth_networks(annotations: str, estimator: PoseEstimator, targets) -> NetworkFor:
    """The oracle of an image file (by its name in the annotations) or of a video's frame (the image whose id is the
    frame index)."""
    cfg = estimator.cfg
    coco = load_coco(annotations, estimator.skeleton, cfg.skip_bad, cfg.keypoint_names)
    by_name = {info["file_name"]: image_id for image_id, info in coco.imgs.items()}

    def network_for(key: Path | int) -> Predictor:
        if isinstance(key, int):
            if key not in coco.imgs:
                raise UserError(f"frame {key} has no image of id {key} in {annotations} (a video's frame i is image i)")
            image_id = key
        elif key.name in by_name:
            image_id = by_name[key.name]
        else:
            raise UserError(f"image {key.name} is not listed in {annotations}")
        return oracle_for(coco, [image_id], targets, estimator.skeleton, OUTPUT_STRIDE)

    return network_for


def onnx_overrides(overrides: list[str], config: str | None) -> tuple[dict, TrackConfig]:
    """The ``eval.*`` overrides as keyword arguments of ``PoseEstimator.from_onnx``, and the tracker's settings with
    the ``track.*`` ones; UserError for any other key (the file fixes the network and its skeleton)."""
    given = parse_overrides(overrides)
    others = [k for k in given if not k.startswith(("eval.", "track."))]
    if config or others:
        raise UserError(
            f"--onnx takes only eval.* and track.* overrides (the file fixes the network and its skeleton), not "
            f"{', '.join(others) or '--config'}"
        )
    evals = {k.removeprefix("eval."): v for k, v in given.items() if k.startswith("eval.")}
    return evals, load_config(None, [o for o in overrides if o.strip().startswith("track.")]).track


def build_estimator(args: argparse.Namespace) -> tuple[PoseEstimator, NetworkFor | None, TrackConfig]:
    """(the estimator, the oracle's networks for --from-ground-truth, the tracker's settings)."""
    if args.from_ground_truth:
        cfg = config_from_args(args)
        estimator = PoseEstimator(None, cfg.eval, skeleton_of(cfg), torch.device("cpu"))
        return estimator, ground_truth_networks(args.annotations, estimator, cfg.targets), cfg.track
    if args.onnx:
        evals, track = onnx_overrides(args.overrides, args.config)
        return PoseEstimator.from_onnx(args.onnx, args.device, **evals), None, track
    device = select_device(args.device)
    model, cfg = load_model(args.ckpt, args.config, args.overrides, device)
    return PoseEstimator.from_model(model, cfg.eval, device), None, cfg.track


def check_arguments(args: argparse.Namespace, source: Source) -> None:
    """UserError for options that cannot run together, before the model loads."""
    if sum(map(bool, (args.ckpt, args.onnx, args.from_ground_truth))) != 1:
        raise UserError("give one of --ckpt CKPT, --onnx FILE or --from-ground-truth --annotations FILE")
    if args.from_ground_truth and (not args.annotations or source.camera is not None):
        raise UserError("--from-ground-truth needs --annotations FILE and image or video input")
    if not (args.out or args.json):
        raise UserError("give --out DIR (drawn pictures or video) and/or --json FILE (COCO results)")
    if not args.fps > 0:
        raise UserError(f"--fps must be > 0 frames per second, got {args.fps}")
    for folder in (args.out, args.json and Path(args.json).parent):
        if folder:
            check_writable(folder)


@cli_main
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m evaluate.demo", description=__doc__.split("\n\n")[0])
    p.add_argument("--ckpt", help="checkpoint")
    p.add_argument("--onnx", help="ONNX model written by python -m evaluate.export_onnx (run by ONNX Runtime)")
    p.add_argument("--from-ground-truth", action="store_true", help="draw the annotations' decoded target maps")
    p.add_argument("--annotations", help="COCO annotations (with --from-ground-truth)")
    p.add_argument("--input", required=True, help="image, folder of images, video, or camera index (0)")
    p.add_argument("--out", help="output folder for the drawn pictures or video")
    p.add_argument("--json", help="COCO keypoint results file to write")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:1 ... (ONNX Runtime's provider too)")
    p.add_argument("--track", action="store_true",
                   help="an id per person across frames (video, camera, or a folder of frames); track.* settings")
    p.add_argument("--smooth", action="store_true", help="One-Euro smoothing of the tracked keypoints (with --track)")
    p.add_argument("--fps", type=float, default=30.0, help="frame rate of a folder of frames with --track")
    add_config_arguments(p)
    args = p.parse_args(argv)
    source = input_source(args.input)
    check_arguments(args, source)
    estimator, network_for, track_cfg = build_estimator(args)
    tracker = None
    if args.track or args.smooth:
        if args.smooth and not args.track:
            print("--smooth smooths tracks: tracking too")
        tracker = PoseTracker(estimator.skeleton, replace(track_cfg, smooth=track_cfg.smooth or args.smooth))
    out_dir = Path(args.out) if args.out else None
    if source.images is not None:
        ids, results = run_images(source.images, estimator, out_dir, network_for, tracker, args.fps)
        unit = "image"
    else:
        ids, results = run_video(source, estimator, out_dir, tracker, network_for)
        unit = "frame"
    if args.json:
        atomic_write_text(args.json, coco_results_json(ids, results))
        tracks = f", {len({p.track_id for found in results for p in found})} track ids" if tracker else ""
        print(f"wrote {args.json}: {sum(map(len, results))} people in COCO results format{tracks}")
    if out_dir is not None and source.images is not None:
        print(f"wrote {len(results)} image(s) to {out_dir}")
    print(f"{source.name}: {estimator.total_timing.describe(unit)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
