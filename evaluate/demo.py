"""Find the people in images, a folder, a video or a camera: drawn pictures and/or COCO results JSON.

    simplepose demo --ckpt runs/x/best.pt --input photo.jpg           # runs/demo/1/: photo_pose.jpg, results.json
    simplepose demo --ckpt runs/x/best.pt --input images/ --json results.json
    simplepose demo --ckpt runs/x/best.pt --input 'shots/**/*.jpg' --out demo_out/ --min-score 0.5
    simplepose demo --ckpt runs/x/best.pt --input clip.mp4 --out demo_out/ --json clip.json eval.scales=[1.0]
    simplepose demo --ckpt runs/x/best.pt --input 0 --out demo_out/             # camera 0, until Ctrl-C
    simplepose demo --ckpt runs/x/best.pt --input clip.mp4 --track --smooth --out demo_out/ --json clip.json
    simplepose demo --onnx model.onnx --input photo.jpg --out demo_out/
    simplepose demo --from-ground-truth --annotations ann.json --input images/ --out demo_out/

A short command over the Python API (``evaluate.PoseEstimator.stream``: the same frames, tracking included; with
``--onnx``, ``evaluate.OnnxPoseEstimator``'s, which needs no PyTorch: the runtime install runs this command) and
evaluate/demo_output.py (where the drawings go), with the run's ``eval`` settings. ``--input``: an image, a folder (its
images, not recursive), a pattern in quotes that the demo expands (``'dir/*.jpg'``; ``**`` any depth), a video, or a
camera index. ``--out DIR`` gets ``<name>_pose.jpg`` per image (below the folder or the pattern's fixed start,
sub-folders kept; ``a.jpg`` and ``a.png`` become ``a_jpg_pose.jpg`` and ``a_png_pose.jpg``), ``<name>_pose.mp4`` per
video (``camera<N>_pose.mp4``); ``--json FILE`` the COCO keypoint results (image ids: the number each file name ends
with, else 1..N, as evaluate/unannotated_images.py; for a video or a camera, the frame index from 0). Without either,
both go to a new numbered folder ``runs/demo/<n>`` (``results.json``; the number after the highest there, so no earlier
run is touched), and the demo says which. A file of an earlier run in ``--out`` or at ``--json`` is never replaced
silently: the demo stops before any work, naming it, unless ``--overwrite``. Every file is written atomically. Each
picture shows the skeletons and each person's box with its score; ``--min-score S`` leaves people scored below S out of
the pictures and the JSON, and says how many (with ``--track`` it is the tracker's gate, ``track.min_score``); by
default everyone is kept. Prints the network time (resize, forward, flip fusion, scale averaging) and the decoding time
(peaks, limbs, assembly) apart, per image, and images/s at the end. A camera is read until its stream ends or Ctrl-C,
then what was read is written. Images are read in their stored pixel layout (EXIF orientation ignored), as evaluation
reads them. ``--from-ground-truth`` replaces the network by the annotations' own target maps (images must be listed in
the annotation file; a video's frame i is the image of id i), to check drawing, decoding and tracking without a trained
model. The skeleton is the checkpoint's (``data.skeleton`` for ``--from-ground-truth``). ``--device cuda`` without CUDA
stops with the hint ``--device cpu``.

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
from dataclasses import replace
from pathlib import Path
from types import ModuleType

from simplepose.codec.person import Person
from simplepose.config.config_file import add_config_arguments, config_from_args, load_config, parse_overrides
from simplepose.config.schema import Config, TrackConfig
from simplepose.config.skeleton_file import skeleton_of
from simplepose.data.image_files import ImageFileError
from simplepose.evaluate.demo_output import (
    DEFAULT_OUT,
    RESULTS_NAME,
    Drawing,
    PictureWriter,
    VideoWriter,
    describe_held_back,
    held_back_notes,
    new_run_folder,
    planned_outputs,
    video_name,
)
from simplepose.evaluate.estimator_base import EstimatorBase, coco_results_json
from simplepose.evaluate.fast_setting import fast_overrides
from simplepose.evaluate.frame_sources import Inputs, check_frames, open_inputs
from simplepose.evaluate.inference.onnx_session import providers_for
from simplepose.evaluate.onnx_estimator import OnnxPoseEstimator
from simplepose.evaluate.track import PoseTracker
from simplepose.evaluate.unannotated_images import file_image_ids
from simplepose.utils import stop_signals
from simplepose.utils.commands import command, commands_here, full_install
from simplepose.utils.errors import Stopped, UserError, cli_main
from simplepose.utils.folder_lock import check_not_held
from simplepose.utils.io import atomic_write_text, check_writable, no_empty_folders_on_failure, refuse_to_overwrite
from simplepose.utils.progress_bar import progress_bar
from simplepose.utils.text import counted


def torch_path(option: str) -> ModuleType:
    """``evaluate.estimator`` (PoseEstimator and PyTorch); UserError when PyTorch is not installed (the runtime
    install), saying how ``option`` (--ckpt, --from-ground-truth) is replaced there."""
    if not full_install():  # the runtime install has neither torch nor the modules on it
        raise UserError(
            f"{option} needs PyTorch, which is not installed (this install runs exported models only): export the "
            f"checkpoint where PyTorch is installed ({command('evaluate.export_onnx', '--ckpt CKPT --out model.onnx')})"
            " and give --onnx model.onnx",
            key=option,
        )
    from simplepose.evaluate import estimator

    return estimator


def ground_truth_estimator(args: argparse.Namespace, cfg: Config) -> EstimatorBase:
    """The oracle's estimator for ``--from-ground-truth``: an image file is found by its name in the annotations, a
    video's frame by its index (the image whose id is the frame index)."""
    estimator = torch_path("--from-ground-truth")
    from simplepose.evaluate.metrics.annotations import load_ground_truth

    skeleton = skeleton_of(cfg)
    truth = load_ground_truth(args.annotations, skeleton, cfg.eval)
    images = truth.images  # those with bad annotations (eval.skip_bad) left out, as an evaluation leaves them out
    by_name = {info["file_name"]: image_id for image_id, info in images.items()}

    def image_id_of(key: Path | int) -> int:
        if isinstance(key, int):
            if key not in images:
                raise UserError(
                    f"frame {key} has no image of id {key} in {args.annotations} (a video's frame i is image i)"
                )
            return key
        if key.name in by_name:
            return by_name[key.name]
        raise UserError(f"image {key.name} is not listed in {args.annotations}")

    return estimator.PoseEstimator.from_ground_truth(truth.coco, cfg, skeleton, image_id_of)


def onnx_overrides(overrides: list[str], config: str | None) -> tuple[dict, TrackConfig]:
    """The ``eval.*`` overrides as keyword arguments of ``OnnxPoseEstimator.from_onnx``, and the tracker's settings with
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


def build_estimator(args: argparse.Namespace) -> tuple[EstimatorBase, TrackConfig]:
    """(the estimator of a checkpoint, an ONNX file or the annotations' own maps; the tracker's settings). An ONNX
    file runs without PyTorch (``OnnxPoseEstimator``: the same people as ``PoseEstimator.from_onnx``)."""
    if args.from_ground_truth:
        cfg = config_from_args(args)
        return ground_truth_estimator(args, cfg), cfg.track
    if args.onnx:
        evals, track = onnx_overrides(args.overrides, args.config)
        providers = providers_for(args.device, cpu_hint="--device cpu")
        return OnnxPoseEstimator.from_onnx(args.onnx, providers, **evals), track
    estimator = torch_path("--ckpt")
    from simplepose.evaluate.inference.checkpoint_model import load_model
    from simplepose.utils.distributed import select_device

    device = select_device(args.device, cpu_hint="--device cpu")
    model, cfg = load_model(args.ckpt, args.config, args.overrides, device)
    return estimator.PoseEstimator.from_model(model, cfg.eval, device), cfg.track


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=command("evaluate.demo"), description=commands_here(__doc__.split("\n\n")[0]))
    p.add_argument("--ckpt", help="checkpoint")
    p.add_argument("--onnx", help=f"ONNX model written by {command('evaluate.export_onnx')} (run by ONNX Runtime)")
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
        help="leave people scored below this out of the pictures and the JSON (default: keep everyone; with "
        "--track: track.min_score)",
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
    return p


def check_arguments(args: argparse.Namespace, inputs: Inputs) -> None:
    """UserError for options that cannot run together, before the model loads."""
    if sum(map(bool, (args.ckpt, args.onnx, args.from_ground_truth))) != 1:
        raise UserError("give one of --ckpt CKPT, --onnx FILE or --from-ground-truth --annotations FILE")
    if args.from_ground_truth and (not args.annotations or inputs.camera is not None):
        raise UserError("--from-ground-truth needs --annotations FILE and image or video input")
    if not args.fps > 0:
        raise UserError(f"--fps must be > 0 frames per second, got {args.fps}")
    if args.min_score is not None and not 0 <= args.min_score <= 1:  # NaN too
        raise UserError(
            f"--min-score is a person's score, in [0, 1], got {args.min_score} (nothing could pass it); e.g. "
            "--min-score 0.3"
        )
    stray = [o for o in args.overrides if "=" not in o]
    if stray:
        raise UserError(
            f"{stray[0]!r} is not a key=value override; for several images give a folder, or a quoted pattern that "
            "the demo expands (--input 'dir/*.jpg', --input 'dir/**/*.jpg' for sub-folders too)",
            key="input",
        )
    for given, option in ((args.out, "--out"), (args.json, "--json")):
        if given:
            check_not_held(given, option)  # a training run's folder, while it runs
    for folder, option in ((args.out, "--out"), (args.json and Path(args.json).parent, "the folder of --json")):
        if folder:
            check_writable(folder, option)
    if (args.track or args.smooth) and not inputs.is_video:
        check_frames(inputs.images, args.input)


class Run:
    """One demo run: the frames of the estimator's stream, each drawn and written, its people kept for the JSON."""

    def __init__(self, args: argparse.Namespace, inputs: Inputs, estimator: EstimatorBase, tracker, out_dir):
        self.args, self.inputs, self.estimator, self.tracker, self.out_dir = args, inputs, estimator, tracker, out_dir
        self.gate = "--min-score" if args.min_score is not None else "track.min_score"
        self.drawing = Drawing(estimator.skeleton, tracker is not None)
        self.indices: list[int] = []  # of the images read
        self.results: list[list[Person]] = []
        self.seen = self.dropped = 0  # people, and people below --min-score (without tracking)
        self.stopped = 0  # the stop signal (SIGTERM, Ctrl-C) that ended a run over pictures early
        # pictures: the image id of each file and how they were made (evaluate/unannotated_images.py); a video: frame
        # indices
        self.file_ids, self.id_rule = file_image_ids(list(inputs.images)) if not inputs.is_video else ([], "")

    def kept(self, people: list[Person]) -> list[Person]:
        """--min-score without tracking (with it, the tracker's gate has applied)."""
        if self.tracker is not None or self.args.min_score is None:
            return people
        kept = [p for p in people if p.score >= self.args.min_score]
        self.seen += len(people)
        self.dropped += len(people) - len(kept)
        return kept

    def images(self) -> None:
        """Each picture: drawn into ``out_dir``, one line each; a file that cannot be read is skipped with a line
        and counted (the others go on); UserError when none could be read. SIGTERM or Ctrl-C ends it after the
        picture under way (``stopped``: the results of those done are still written; a second Ctrl-C at once)."""
        paths = self.inputs.images
        skipped: list[tuple[Path, ImageFileError]] = []
        writer = PictureWriter(self.out_dir, self.inputs) if self.out_dir is not None else None
        with stop_signals.stop_requests(say=False):
            self.stopped = self._pictures(writer, skipped)
        print(f"image ids: {self.id_rule}")
        if skipped:
            names = ", ".join(p.name for p, _ in skipped[:5])
            more = " ..." if len(skipped) > 5 else ""
            print(f"{len(skipped)} of {len(paths)} files skipped as unreadable: {names}{more}")
            if not self.results and not self.stopped:
                first, error = skipped[0]
                raise UserError(f"none of the {len(paths)} image files could be read; the first: {error}", file=first)

    def _pictures(self, writer: PictureWriter | None, skipped: list[tuple[Path, ImageFileError]]) -> int:
        """The pictures' loop (``images``); returns the stop signal that ended it early, 0 when it went through."""
        for frame in self.estimator.stream(self.inputs, self.tracker, self.args.fps):
            if stop_signals.requested():
                return stop_signals.requested()
            path = frame.path
            assert path is not None  # a picture's frame names its file
            if frame.error is not None:  # the stream has logged it: a warning naming the file and why
                skipped.append((path, frame.error))
                continue
            assert frame.image is not None  # read without an error
            people = self.kept(frame.people)
            notes = [f"{len(frame.people) - len(people)} below --min-score"] if len(people) < len(frame.people) else []
            if self.tracker is not None:
                notes += held_back_notes(self.tracker, self.gate)
            self.indices.append(frame.index)
            self.results.append(people)
            if writer is not None:
                writer.write(frame.index, self.drawing(frame.image, people), path)
            t = self.estimator.timing
            held = f" ({'; '.join(notes)})" if notes else ""
            print(
                f"{path.name}: {counted(len(people), 'person', 'people')}{held}, network "
                f"{t.network_s * 1000:.1f} ms, decoding {t.decoding_s * 1000:.1f} ms"
            )
        return stop_signals.requested()

    def video(self) -> None:
        """Every frame of a video or camera, drawn into ``out_dir/<name>_pose.mp4``, with a progress bar. Ctrl-C ends
        a camera's stream; what was read is still written."""
        reader = self.inputs.open_video()
        target = self.out_dir / video_name(self.inputs) if self.out_dir is not None else None
        with contextlib.ExitStack() as stack:
            stack.callback(reader.close)
            writer = VideoWriter(target, reader.fps, stack) if target is not None else None
            frames = self.estimator.stream(reader, self.tracker)
            bar = stack.enter_context(
                progress_bar(frames, total=reader.frame_count or None, desc=self.inputs.name, unit="frame")
            )
            try:
                for frame in bar:
                    people = self.kept(frame.people)
                    if writer is not None:
                        writer.write(frame.index, self.drawing(frame.image, people))
                    self.indices.append(frame.index)
                    self.results.append(people)
                    bar.set_postfix(people=len(people), refresh=False)
            except KeyboardInterrupt:
                if self.inputs.camera is None:
                    raise
                print("\ninterrupted: writing what was read")
            if not self.results:
                raise UserError(f"{reader.describe()} gave no readable frames")
        if target is not None:
            print(f"wrote {target}")

    def image_ids(self) -> list[int]:
        """The id of each image read (evaluate/unannotated_images.py: the number its name ends with, else 1..N); a
        video's frame index."""
        if self.inputs.is_video:
            return self.indices
        return [self.file_ids[i] for i in self.indices]

    def report(self, json_file: Path | None) -> None:
        """The JSON, then the closing lines."""
        if json_file is not None:
            atomic_write_text(json_file, coco_results_json(self.image_ids(), self.results))
            tracks = f", {len({p.track_id for f in self.results for p in f})} track ids" if self.tracker else ""
            people = counted(sum(map(len, self.results)), "person", "people")
            print(f"wrote {json_file}: {people} in COCO results format{tracks}")
        if self.out_dir is not None and not self.inputs.is_video:
            print(f"wrote {len(self.results)} image(s) to {self.out_dir}")
        if self.args.min_score is not None and self.tracker is None:
            print(
                f"--min-score {self.args.min_score:g}: {self.dropped} of {self.seen} people scored below it, left out "
                "of the pictures and the JSON"
            )
        if self.tracker is not None and describe_held_back(self.tracker, self.gate):
            print(describe_held_back(self.tracker, self.gate))
        unit = "frame" if self.inputs.is_video else "image"
        print(f"{self.inputs.name}: {self.estimator.total_timing.describe(unit)}")


@cli_main
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_intermixed_args(argv)  # a shell-expanded pattern's extra files reach check_arguments
    if args.fast:
        args.overrides = [*fast_overrides(), *args.overrides]
    inputs = open_inputs(args.input)
    check_arguments(args, inputs)
    default_out = not (args.out or args.json)
    out_dir = Path(args.out) if args.out else None
    json_file = Path(args.json) if args.json else None
    if not (default_out or args.overwrite):
        refuse_to_overwrite(planned_outputs(inputs, out_dir, json_file), "--out / --json")
    # a failed start (a missing checkpoint, no readable image) leaves no empty output folder, nor an empty runs/
    with no_empty_folders_on_failure(out_dir, json_file and json_file.parent, DEFAULT_OUT if default_out else None):
        estimator, track_cfg = build_estimator(args)
        tracker = None
        if args.track or args.smooth:
            if args.smooth and not args.track:
                print("--smooth smooths tracks: tracking too")
            gate = track_cfg.min_score if args.min_score is None else args.min_score
            tracker = PoseTracker(
                estimator.skeleton, replace(track_cfg, smooth=track_cfg.smooth or args.smooth, min_score=gate)
            )
        if default_out:
            out_dir = new_run_folder()
            json_file = out_dir / RESULTS_NAME
            print(f"writing to {out_dir} (pictures and {RESULTS_NAME}; --out DIR and --json FILE choose)")
        run = Run(args, inputs, estimator, tracker, out_dir)
        try:
            run.video() if inputs.is_video else run.images()
        except BaseException:
            if default_out and out_dir is not None:
                with contextlib.suppress(OSError):
                    out_dir.rmdir()  # only when empty: nothing was written
            raise
        run.report(json_file)
    if run.stopped:
        raise Stopped(stopped_line(run, json_file), stop_signals.exit_status(run.stopped))
    return 0


def stopped_line(run: Run, json_file: Path | None) -> str:
    """What a demo over pictures stopped by a signal says: how far it got and where its results are."""
    how = stop_signals.stop_reason(run.stopped)
    done = f"stopped after {len(run.indices)} of {len(run.inputs.images)} images"
    kept = f"; the results of those are in {json_file}" if json_file is not None else ""
    return f"{how}: {done}{kept}"


if __name__ == "__main__":
    raise SystemExit(main())
