"""Find the people in images, a folder, a video or a camera: drawn pictures and/or COCO results JSON.

    python -m evaluate.demo --ckpt runs/x/best.pt --input photo.jpg   # runs/demo/1/: photo_pose.jpg, results.json
    python -m evaluate.demo --ckpt runs/x/best.pt --input images/ --json results.json
    python -m evaluate.demo --ckpt runs/x/best.pt --input 'shots/**/*.jpg' --out demo_out/ --min-score 0.5
    python -m evaluate.demo --ckpt runs/x/best.pt --input clip.mp4 --out demo_out/ --json clip.json eval.scales=[1.0]
    python -m evaluate.demo --ckpt runs/x/best.pt --input 0 --out demo_out/     # camera 0, until Ctrl-C
    python -m evaluate.demo --ckpt runs/x/best.pt --input clip.mp4 --track --smooth --out demo_out/ --json clip.json
    python -m evaluate.demo --onnx model.onnx --input photo.jpg --out demo_out/
    python -m evaluate.demo --from-ground-truth --annotations ann.json --input images/ --out demo_out/

Runs the Python API (``evaluate.PoseEstimator``) with the run's ``eval`` settings. ``--input``: an image, a folder
(its images, not recursive), a pattern in quotes that the demo expands (``'dir/*.jpg'``; ``**`` any depth), a
video, or a camera index. ``--out DIR`` gets ``<name>_pose.jpg`` per image (below the folder or the pattern's fixed
start, sub-folders kept; ``a.jpg`` and ``a.png`` become ``a_jpg_pose.jpg`` and ``a_png_pose.jpg``),
``<name>_pose.mp4`` per video (``camera<N>_pose.mp4``); ``--json FILE`` the COCO keypoint results (image ids: the
number each file name ends with, else 1..N, as evaluate/image_list.py; for a video or a camera, the frame index from
0). Without either, both go to a new numbered folder ``runs/demo/<n>`` (``results.json``; the number after the
highest there, so no earlier run is touched), and the demo says which. A file of an earlier run in ``--out`` or at
``--json`` is never replaced silently: the demo stops before any work, naming it, unless ``--overwrite``. Every file
is written atomically. Each picture shows the skeletons and each person's box with its score;
``--min-score S`` leaves people scored below S out of the pictures and the JSON (before tracking), and says how
many; by default everyone is kept. Prints the network time (resize, forward, flip fusion, scale averaging) and the
decoding time (peaks, limbs, assembly) apart, per image, and images/s at the end. A camera is read until its stream
ends or Ctrl-C, then what was read is written. Images are read in their stored pixel layout (EXIF orientation
ignored), as evaluation reads them. ``--from-ground-truth`` replaces the network by the annotations' own target
maps (images must be listed in the annotation file; a video's frame i is the image of id i), to check drawing,
decoding and tracking without a trained model. The skeleton is the checkpoint's (``data.skeleton`` for
``--from-ground-truth``). ``--device cuda`` without CUDA stops with the hint ``--device cpu``.

``--track`` gives each person an id across the frames of a video, a camera or a folder of frames (in name order,
``--fps`` apart; pictures of several sizes, or one picture, are refused: not frames of one video) with
``evaluate.PoseTracker`` (``track.*`` settings); ``--smooth`` also smooths the keypoints (One-Euro filter). People
then come as their track is confirmed (``track.min_hits``), each drawn in its id's colour with its number and a short
trail, and the JSON gives each its ``track_id``; each picture's line and a last line count the people tracking held
back (not yet confirmed, or below ``track.min_score``) apart from those ``--min-score`` left out.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import math
import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import cv2
import numpy as np
import torch
from PIL import Image

from config.config_file import add_config_arguments, config_from_args, load_config, parse_overrides
from config.schema import OUTPUT_STRIDE, TrackConfig
from config.skeleton_file import skeleton_of
from data.image_files import ImageFileError, read_image
from evaluate.coco_eval import load_coco
from evaluate.draw import Trails, draw_detections, draw_tracked
from evaluate.estimator import Person, PoseEstimator, coco_results_json
from evaluate.fast_setting import fast_overrides
from evaluate.image_list import IMAGE_SUFFIXES, file_image_ids, image_files
from evaluate.runtime.model_loader import load_model
from evaluate.runtime.multiscale import Predictor
from evaluate.runtime.onnx_runner import providers_for
from evaluate.runtime.oracle import oracle_for
from evaluate.track import PoseTracker
from evaluate.video import VideoReader
from utils.distributed import select_device
from utils.errors import UserError, cli_main
from utils.io import atomic_path, atomic_write_bytes, atomic_write_text, check_writable, refuse_to_overwrite
from utils.progress_bar import progress_bar
from utils.text import counted

VIDEO_SUFFIXES = {".mp4", ".avi", ".mov", ".mkv", ".webm"}
VIDEO_CODEC = "mp4v"
DEFAULT_OUT = Path("runs/demo")  # without --out and --json: runs/demo/1, runs/demo/2, ... (the next free number)
RESULTS_NAME = "results.json"  # the COCO results file of a default output folder

NetworkFor = Callable[[Path | int], Predictor]  # the network of an image file or a video's frame index (the oracle's)


@dataclass(frozen=True)
class Source:
    """What ``--input`` names: image files (with the names of their drawn pictures), a video file, or a camera
    index."""

    images: list[Path] | None = None
    video: Path | None = None
    camera: int | None = None
    pictures: list[Path] = field(default_factory=list)  # each image's drawn picture, relative to --out

    @property
    def name(self) -> str:
        return f"camera{self.camera}" if self.camera is not None else self.video.stem if self.video else "images"

    @staticmethod
    def of_images(images: list[Path], root: Path) -> Source:
        """Images whose pictures keep the sub-folders below ``root`` (the folder, or a pattern's fixed start)."""
        return Source(images=images, pictures=picture_names(images, root))


def input_source(text: str) -> Source:
    """The ``--input`` argument as a Source: an image, a folder of images (not recursive), a video, a camera index,
    or a pattern the demo expands itself (quoted, so that the shell leaves it: ``'dir/*.jpg'``, ``'dir/**/*.png'``
    recursively), whose image files are taken in name order. UserError when it does not exist or a pattern matches
    no image (a camera is checked when opened)."""
    path = Path(os.path.expanduser(text))
    if not path.exists():
        if text.isdigit():
            return Source(camera=int(text))
        if glob.has_magic(text):
            return pattern_source(str(path))
        raise UserError(
            f"input {path} not found (give an image, a folder of images, a quoted pattern such as "
            "'dir/*.jpg', a video, or a camera index)"
        )
    if path.is_dir():
        return Source.of_images(image_files(path), path)
    if path.suffix.lower() in VIDEO_SUFFIXES:
        return Source(video=path)
    return Source.of_images([path], path.parent)


def pattern_source(pattern: str) -> Source:
    """The image files a glob pattern matches (``**``: any depth), sorted; pictures keep the sub-folders below the
    pattern's fixed start."""
    matched = sorted(Path(p) for p in glob.glob(pattern, recursive=True) if Path(p).is_file())
    images = [p for p in matched if p.suffix.lower() in IMAGE_SUFFIXES]
    if not images:
        others = f" ({len(matched)} other files: a pattern selects images, give a video on its own)" if matched else ""
        raise UserError(
            f"input pattern {pattern!r} matches no image files ({', '.join(sorted(IMAGE_SUFFIXES))}){others}"
        )
    fixed = []
    for part in Path(pattern).parts[:-1]:
        if glob.has_magic(part):
            break
        fixed.append(part)
    return Source.of_images(images, Path(*fixed) if fixed else Path("."))


def picture_names(images: Sequence[Path], root: Path) -> list[Path]:
    """The drawn picture of each image, relative to the output folder: ``<sub-folders below root>/<stem>_pose.jpg``;
    images of one stem in one folder (``a.jpg``, ``a.png``) keep their suffix (``a_png_pose.jpg``), and any name
    still taken gets a number, so that no picture replaces another."""
    relative = [p.relative_to(root) if p.is_relative_to(root) else Path(p.name) for p in images]
    stems = Counter((r.parent, r.stem) for r in relative)
    taken: set[Path] = set()
    names = []
    for r in relative:
        base = r.stem if stems[(r.parent, r.stem)] == 1 else f"{r.stem}_{r.suffix[1:]}"
        name, n = r.parent / f"{base}_pose.jpg", 2
        while name in taken:
            name, n = r.parent / f"{base}_{n}_pose.jpg", n + 1
        taken.add(name)
        names.append(name)
    return names


class Drawing:
    """How each picture is drawn: skeletons with each person's box and score, or tracked people in their ids'
    colours with trails."""

    def __init__(self, estimator: PoseEstimator, tracked: bool):
        self.skeleton = estimator.skeleton
        self.trails = Trails() if tracked else None

    def __call__(self, image: np.ndarray, people: list[Person]) -> np.ndarray:
        if self.trails is None:
            return draw_detections(image, people, self.skeleton)
        self.trails.update(people)
        return draw_tracked(image, people, self.skeleton, self.trails)


@dataclass
class ScoreFilter:
    """``--min-score``: people scored below ``min_score`` are left out of the pictures and the JSON (before
    tracking, so that they start no track); None keeps everyone. Counts what it dropped."""

    min_score: float | None = None
    seen: int = 0
    dropped: int = 0

    def __call__(self, people: list[Person]) -> list[Person]:
        kept = people if self.min_score is None else [p for p in people if p.score >= self.min_score]
        self.seen += len(people)
        self.dropped += len(people) - len(kept)
        return kept

    def describe(self) -> str | None:
        if self.min_score is None:
            return None
        return (
            f"--min-score {self.min_score:g}: {self.dropped} of {self.seen} people scored below it, left out of "
            "the pictures and the JSON"
        )


def run_images(
    source: Source,
    estimator: PoseEstimator,
    out_dir: Path | None,
    network_for: NetworkFor | None,
    tracker: PoseTracker | None = None,
    fps: float = 30.0,
    score_filter: ScoreFilter | None = None,
) -> tuple[list[int], list[list[Person]]]:
    """Predict (and draw into ``out_dir``, at ``source.pictures``) each image, tracked as frames ``1 / fps`` apart
    when ``tracker``; (image ids, people of each image). A file that cannot be read or decoded is skipped with a
    line and counted (the others go on); UserError when none could be read."""
    paths = source.images
    score_filter = score_filter or ScoreFilter()
    all_ids, rule = file_image_ids(paths)
    ids, results, skipped = [], [], []
    first_error: ImageFileError | None = None
    drawing = Drawing(estimator, tracker is not None)
    for i, (path, image_id, picture) in enumerate(zip(paths, all_ids, source.pictures)):
        try:
            image = read_image(path)
        except ImageFileError as e:
            first_error = first_error or e
            skipped.append(path)
            print(f"{path.name}: skipped, {e.reason} ({e})")
            continue
        ids.append(image_id)
        found = estimator.predict_batch([image], network_for(path) if network_for else None)[0]
        people = score_filter(found)
        notes = [f"{len(found) - len(people)} below --min-score"] if len(people) < len(found) else []
        if tracker is not None:
            people = tracker.update(people, i / fps)
            notes += held_back_notes(tracker)
        results.append(people)
        if out_dir is not None:
            ok, data = cv2.imencode(".jpg", drawing(image, people))
            if not ok:
                raise UserError(f"could not encode the drawing of {path}")
            atomic_write_bytes(out_dir / picture, data.tobytes())
        t = estimator.timing
        held = f" ({'; '.join(notes)})" if notes else ""
        print(
            f"{path.name}: {counted(len(people), 'person', 'people')}{held}, network {t.network_s * 1000:.1f} ms, "
            f"decoding {t.decoding_s * 1000:.1f} ms"
        )
    print(f"image ids: {rule}")
    if skipped:
        print(
            f"{len(skipped)} of {len(paths)} files skipped as unreadable: {', '.join(p.name for p in skipped[:5])}"
            f"{' ...' if len(skipped) > 5 else ''}"
        )
        if not results:
            raise UserError(
                f"none of the {len(paths)} image files could be read; the first: {first_error}", file=skipped[0]
            )
    return ids, results


def held_back_notes(tracker: PoseTracker) -> list[str]:
    """What the tracker held back of the last frame, for the demo's line of that picture."""
    held = tracker.held_back
    notes = [f"{held.unconfirmed} held back by tracking (track.min_hits)"] if held.unconfirmed else []
    return notes + ([f"{held.untracked} below track.min_score"] if held.untracked else [])


def describe_held_back(tracker: PoseTracker) -> str | None:
    """One line on the people tracking held back over the whole input (None when it held back no one)."""
    held, cfg = tracker.held_back_total, tracker.cfg
    if not any(held):
        return None
    parts = []
    if held.unconfirmed:
        parts.append(
            f"{held.unconfirmed} in tracks not yet confirmed (a person is reported from the frame their track has "
            f"been matched in track.min_hits={cfg.min_hits} frames in a row; track.min_hits=1 reports everyone from "
            "their first frame)"
        )
    if held.untracked:
        parts.append(
            f"{held.untracked} scored below track.min_score={cfg.min_score:g} (fragments, not tracked; "
            "track.min_score=0 tracks everyone)"
        )
    return f"tracking held back {counted(sum(held), 'person', 'people')}: {', '.join(parts)}"


def check_sequence(images: Sequence[Path], given: str) -> None:
    """UserError unless ``images`` can be the frames of one video (``--track`` on pictures): more than one, all of
    one size (read from the file headers; a file that cannot be read is left to the run, which skips it)."""
    if len(images) == 1:
        raise UserError(
            f"--track follows people across the frames of a video, and --input {given} is one picture: drop --track "
            "(or give a video, or a folder of its frames)",
            key="input",
        )
    sizes: dict[tuple[int, int], Path] = {}
    for path in images:
        try:
            with Image.open(path) as im:
                sizes.setdefault(im.size, path)
        except (OSError, ValueError, Image.DecompressionBombError):
            continue
    if len(sizes) > 1:
        shown = ", ".join(f"{p.name} {w}x{h}" for (w, h), p in list(sizes.items())[:3])
        raise UserError(
            f"--track follows people across the frames of one video, but the {len(images)} pictures of --input "
            f"{given} have {len(sizes)} sizes ({shown}{', ...' if len(sizes) > 3 else ''}): they are not frames of "
            "one sequence. Drop --track to find the people in each picture, or give the frames of one video (in "
            "name order, --fps apart)",
            key="input",
        )


def run_video(
    source: Source,
    estimator: PoseEstimator,
    out_dir: Path | None,
    tracker: PoseTracker | None = None,
    network_for: NetworkFor | None = None,
    score_filter: ScoreFilter | None = None,
) -> tuple[list[int], list[list[Person]]]:
    """Predict every frame of a video or camera (drawn into ``out_dir/<name>_pose.mp4``; tracked with ``tracker``),
    with a progress bar; (frame indices, people of each frame). Ctrl-C ends a camera's stream; what was read is
    still written."""
    reader = VideoReader(source.camera if source.camera is not None else source.video)
    score_filter = score_filter or ScoreFilter()
    results: list[list[Person]] = []
    target = out_dir / video_name(source) if out_dir is not None else None
    drawing = Drawing(estimator, tracker is not None)
    if tracker is not None:
        tracker.reset()
    # exits run last-in first-out: the writer is released before atomic_path renames its file
    with contextlib.ExitStack() as stack:
        stack.callback(reader.close)
        tmp = stack.enter_context(atomic_path(target, suffix=".tmp.mp4")) if target else None
        frames = estimator.video(reader, None, network_for)  # tracked here, after --min-score
        bar = stack.enter_context(
            progress_bar(frames, total=reader.frame_count or None, desc=source.name, unit="frame")
        )
        writer = None
        try:
            for frame in bar:
                people = score_filter(frame.people)
                if tracker is not None:
                    people = tracker.update(people, frame.timestamp)
                if tmp is not None:
                    if writer is None:
                        writer = open_writer(tmp, reader.fps, frame.image.shape[:2], target)
                        stack.callback(writer.release)
                    writer.write(drawing(frame.image, people))
                results.append(people)
                bar.set_postfix(people=len(people), refresh=False)
        except KeyboardInterrupt:
            if source.camera is None:
                raise
            print("\ninterrupted: writing what was read")
        if not results:
            raise UserError(f"{reader.describe()} gave no readable frames")
    if target is not None:
        print(f"wrote {target}")
    return list(range(len(results))), results


def video_name(source: Source) -> str:
    return f"{source.name}_pose.mp4"


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
        providers = providers_for(args.device, cpu_hint="--device cpu")
        return PoseEstimator.from_onnx(args.onnx, providers, **evals), None, track
    device = select_device(args.device, cpu_hint="--device cpu")
    model, cfg = load_model(args.ckpt, args.config, args.overrides, device)
    return PoseEstimator.from_model(model, cfg.eval, device), None, cfg.track


def check_arguments(args: argparse.Namespace, source: Source) -> None:
    """UserError for options that cannot run together, before the model loads."""
    if sum(map(bool, (args.ckpt, args.onnx, args.from_ground_truth))) != 1:
        raise UserError("give one of --ckpt CKPT, --onnx FILE or --from-ground-truth --annotations FILE")
    if args.from_ground_truth and (not args.annotations or source.camera is not None):
        raise UserError("--from-ground-truth needs --annotations FILE and image or video input")
    if not args.fps > 0:
        raise UserError(f"--fps must be > 0 frames per second, got {args.fps}")
    if args.min_score is not None and not math.isfinite(args.min_score):
        raise UserError(f"--min-score must be a number, got {args.min_score}")
    stray = [o for o in args.overrides if "=" not in o]
    if stray:
        raise UserError(
            f"{stray[0]!r} is not a key=value override; for several images give a folder, or a quoted pattern that "
            "the demo expands (--input 'dir/*.jpg', --input 'dir/**/*.jpg' for sub-folders too)",
            key="input",
        )
    for folder in (args.out, args.json and Path(args.json).parent):
        if folder:
            check_writable(folder)


def planned_outputs(source: Source, out_dir: Path | None, json_file: Path | None) -> list[Path]:
    """Every file this run would write: the pictures (or the video) in ``out_dir``, the JSON file."""
    files = []
    if out_dir is not None:
        files += [out_dir / p for p in source.pictures] if source.images is not None else [out_dir / video_name(source)]
    return files + ([json_file] if json_file is not None else [])


def new_run_folder(base: Path | None = None) -> Path:
    """A new numbered folder ``base/<n>`` (``DEFAULT_OUT``, relative to the working directory: one more than the
    highest number there), made here so that two demos started together do not share it."""
    base = DEFAULT_OUT if base is None else base
    base.mkdir(parents=True, exist_ok=True)
    taken = [int(p.name) for p in base.iterdir() if p.name.isdigit()]
    n = max(taken, default=0) + 1
    while True:
        try:
            (base / str(n)).mkdir()
            return base / str(n)
        except FileExistsError:
            n += 1


@cli_main
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m evaluate.demo", description=__doc__.split("\n\n")[0])
    p.add_argument("--ckpt", help="checkpoint")
    p.add_argument("--onnx", help="ONNX model written by python -m evaluate.export_onnx (run by ONNX Runtime)")
    p.add_argument("--from-ground-truth", action="store_true", help="draw the annotations' decoded target maps")
    p.add_argument("--annotations", help="COCO annotations (with --from-ground-truth)")
    p.add_argument(
        "--input",
        required=True,
        help="image, folder of images, quoted pattern ('dir/*.jpg', 'dir/**/*.png'), video, or camera index (0)",
    )
    p.add_argument("--out", help="output folder for the drawn pictures or video")
    p.add_argument("--json", help="COCO keypoint results file to write")
    p.add_argument("--overwrite", action="store_true", help="replace files of an earlier run in --out / --json")
    p.add_argument(
        "--min-score",
        type=float,
        default=None,
        help="leave people scored below this out of the pictures and the JSON (default: keep everyone)",
    )
    p.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:1 ... (ONNX Runtime's provider too)")
    p.add_argument(
        "--track",
        action="store_true",
        help="an id per person across frames (video, camera, or a folder of frames); track.* settings",
    )
    p.add_argument("--smooth", action="store_true", help="One-Euro smoothing of the tracked keypoints (with --track)")
    p.add_argument("--fps", type=float, default=30.0, help="frame rate of a folder of frames with --track")
    p.add_argument(
        "--fast",
        action="store_true",
        help="one scale, no flip, eval.amp=auto (bf16 where native; evaluate/fast_setting.py); eval.* overrides "
        "given after it win",
    )
    add_config_arguments(p)
    args = p.parse_intermixed_args(argv)  # a shell-expanded pattern's extra files reach check_arguments
    if args.fast:
        args.overrides = [*fast_overrides(), *args.overrides]
    source = input_source(args.input)
    check_arguments(args, source)
    if (args.track or args.smooth) and source.images is not None:
        check_sequence(source.images, args.input)
    default_out = not (args.out or args.json)
    out_dir = Path(args.out) if args.out else None
    json_file = Path(args.json) if args.json else None
    if not (default_out or args.overwrite):
        refuse_to_overwrite(planned_outputs(source, out_dir, json_file), "--out / --json")
    estimator, network_for, track_cfg = build_estimator(args)
    tracker = None
    if args.track or args.smooth:
        if args.smooth and not args.track:
            print("--smooth smooths tracks: tracking too")
        tracker = PoseTracker(estimator.skeleton, replace(track_cfg, smooth=track_cfg.smooth or args.smooth))
    if default_out:
        fresh_base = not DEFAULT_OUT.exists()
        out_dir = new_run_folder()
        json_file = out_dir / RESULTS_NAME
        print(f"writing to {out_dir} (pictures and {RESULTS_NAME}; --out DIR and --json FILE choose)")
    score_filter = ScoreFilter(args.min_score)
    try:
        if source.images is not None:
            ids, results = run_images(source, estimator, out_dir, network_for, tracker, args.fps, score_filter)
            unit = "image"
        else:
            ids, results = run_video(source, estimator, out_dir, tracker, network_for, score_filter)
            unit = "frame"
    except BaseException:
        if default_out:
            with contextlib.suppress(OSError):
                out_dir.rmdir()  # only when empty: nothing was written
                if fresh_base:
                    DEFAULT_OUT.rmdir()
        raise
    if json_file is not None:
        atomic_write_text(json_file, coco_results_json(ids, results))
        tracks = f", {len({p.track_id for found in results for p in found})} track ids" if tracker else ""
        print(
            f"wrote {json_file}: {counted(sum(map(len, results)), 'person', 'people')} in COCO results format{tracks}"
        )
    if out_dir is not None and source.images is not None:
        print(f"wrote {len(results)} image(s) to {out_dir}")
    if score_filter.describe():
        print(score_filter.describe())
    if tracker is not None and describe_held_back(tracker):
        print(describe_held_back(tracker))
    print(f"{source.name}: {estimator.total_timing.describe(unit)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
