"""The bad-input corpus: every kind of broken or odd input, derived from a COCO-format sample (the synthetic one
of the tests, or the real COCO sample), each with the real command that would consume it and the outcome it must
end in (tests.harness.cases runs and classifies them).

Each case edits a copy of the sample's annotation JSON, images, a converted HDF5 file or a checkpoint, then runs
``python -m data.coco_to_hdf5``, ``python train.py`` (tiny config) or ``python -m evaluate.coco_eval --ckpt``.
``python -m tests.harness.bad_input_table`` prints one line per case; tests/test_bad_inputs.py and
tests/test_security.py assert them.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import os
import random
import shutil
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

import h5py
import torch

from simplepose.checkpoint.format import Checkpoint
from simplepose.config.config_file import load_config
from simplepose.config.skeleton_file import load_skeleton
from simplepose.data.conversion import Source, convert
from simplepose.data.main_person import main_person_indices
from simplepose.engine.checkpointer import TrainState, rng_state
from simplepose.engine.optim import build_optimizer
from simplepose.engine.position import TrainingPosition
from simplepose.models import build_model
from simplepose.utils.errors import UserError
from tests.harness.cases import Case, CaseResult, Outcome, run_cases
from tests.harness.not_checkpoints import InjectedObject, NotACheckpoint, make_not_checkpoints
from tests.paths import COCO_SAMPLE_ANNOTATIONS, TINY_PRESET, coco_sample_dir

PAYLOAD_MARKER = "payload_ran"  # a file a pickled payload would create if a checkpoint were unpickled unsafely

# on top of config/tiny.yaml: one training step, and an evaluation of one image without flip
SHORTEST = ["train.max_steps_per_epoch=1", "eval.flip=false", "eval.max_images=1"]


class _Corpus:
    """The shared pieces the cases are made from, all under ``out_dir``."""

    def __init__(self, sample_dir: Path, out_dir: Path):
        self.sample_dir, self.out = sample_dir, out_dir
        out_dir.mkdir(parents=True, exist_ok=True)
        full = json.loads((sample_dir / COCO_SAMPLE_ANNOTATIONS).read_text())
        # the first three images with a main person, and the next two, edited to have none (no_main_person_images)
        by_image = {img["id"]: [a for a in full["annotations"] if a["image_id"] == img["id"]] for img in full["images"]}
        names = [img["file_name"] for img in full["images"] if main_person_indices(by_image[img["id"]])]
        if len(names) < 5:
            raise ValueError(f"{sample_dir}: the corpus needs 5 images with a main person, it has {len(names)}")
        self.base_images, self.other_images = tuple(names[:3]), tuple(names[3:5])
        self.full = full
        self.base = _subset(full, self.base_images)
        self.images = self.image_folder(out_dir / "images", self.base_images + self.other_images)
        self._h5: dict[int, Path] = {}
        self._ckpt: dict[int, Path] = {}
        self._not_checkpoints: dict[str, NotACheckpoint] | None = None

    def image_folder(self, folder: Path, names=None) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        for name in names or self.base_images:
            shutil.copyfile(self.sample_dir / "images" / name, folder / name)
        return folder

    def no_main_person_images(self) -> dict:
        """The base images and two more without a main person: one without any annotation, one whose people keep
        4 labelled keypoints each (a main person needs 5)."""
        data = _subset(self.full, self.base_images + self.other_images)
        bare, few = (next(img["id"] for img in data["images"] if img["file_name"] == n) for n in self.other_images)
        data["annotations"] = [a for a in data["annotations"] if a["image_id"] != bare]
        for a in data["annotations"]:
            if a["image_id"] == few and a["num_keypoints"] > 4:
                labelled = [j for j in range(0, len(a["keypoints"]), 3) if a["keypoints"][j + 2] > 0]
                for j in labelled[4:]:
                    a["keypoints"][j : j + 3] = [0, 0, 0]
                a["num_keypoints"] = 4
        return data

    def case_dir(self, name: str) -> Path:
        d = self.out / name
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        return d

    def main_ann(self, data: dict) -> dict:
        """The first annotation that makes a main person (>= 5 keypoints)."""
        return next(a for a in data["annotations"] if a["num_keypoints"] >= 5 and not a["iscrowd"])

    def convert_case(self, name, what, expected, data=None, text=None, images=None, extra=(), names=()) -> Case:
        d = self.case_dir(name)
        ann = d / "annotations.json"
        ann.write_text(text if text is not None else json.dumps(data))
        out = d / "out.h5"
        argv = [sys.executable, "-m", "data.coco_to_hdf5", "--images", str(images or self.images)]
        argv += ["--annotations", str(ann), "--out", str(out), "--input-size", "64", "--no-progress", *extra]
        return Case(name, what, argv, expected, [out], names, d)

    def edited(self, edit: Callable[[dict], object]) -> dict:
        data = copy.deepcopy(self.base)
        edit(data)
        return data

    def h5(self, input_size: int = 64) -> Path:
        """The base images converted (in process) for ``input_size``."""
        if input_size not in self._h5:
            ann = self.out / "base.json"
            ann.write_text(json.dumps(self.base))
            self._h5[input_size] = self.out / f"base{input_size}.h5"
            convert([Source(self.images, ann)], self._h5[input_size], input_size=input_size, progress=False)
        return self._h5[input_size]

    def train_case(self, name, what, expected, h5: Path, extra=(), names=()) -> Case:
        d = self.case_dir(name)
        run = d / "run"
        argv = [sys.executable, "train.py", "--config", str(TINY_PRESET), *SHORTEST, f"data.train={h5}",
                f"train.out_dir={run}"]  # fmt: skip
        return Case(name, what, [*argv, *extra], expected, [run / "last.pt"], names, run)

    def checkpoint(self, stacks: int = 1) -> Path:
        """A real checkpoint of the tiny model (random weights) with its config, as the trainer writes them."""
        if stacks not in self._ckpt:
            cfg = load_config(TINY_PRESET, [*SHORTEST, f"model.stacks={stacks}", f"loss.stack_weights={[1] * stacks}"])
            torch.manual_seed(0)
            model = build_model(cfg)
            optimizer = build_optimizer(list(model.parameters()), cfg.train).state_dict()
            state = TrainState(optimizer, TrainingPosition(epoch=1, step=0, global_step=1), rng=[rng_state()])
            self._ckpt[stacks] = self.out / f"tiny_stacks{stacks}.pt"
            Checkpoint(model.state_dict(), cfg, load_skeleton("coco"), state.to_dict()).save(self._ckpt[stacks])
        return self._ckpt[stacks]

    def oracle_case(self, name, what, expected, data, images=None, extra=(), names=()) -> Case:
        """``python -m evaluate.coco_eval --from-ground-truth`` (the oracle: no network) of ``data``."""
        d = self.case_dir(name)
        ann = d / "annotations.json"
        ann.write_text(json.dumps(data))
        out = d / "results.json"
        argv = [sys.executable, "-m", "evaluate.coco_eval", "--from-ground-truth"]
        argv += ["--images", str(images or self.images), "--annotations", str(ann), "--out", str(out)]
        argv += ["eval.scales=[1.0]", "eval.flip=false", *extra]
        return Case(name, what, argv, expected, [out], names, d)

    def reencoded(self, name: str, encode: Callable[[Path], tuple[str, bytes]]) -> tuple[dict, Path]:
        """(the base annotations, a folder) with every base image re-written by ``encode`` (path -> (suffix, bytes))
        and its file_name changed to match."""
        folder = self.out / f"{name}_images"
        folder.mkdir(parents=True, exist_ok=True)
        data = copy.deepcopy(self.base)
        for img in data["images"]:
            suffix, encoded = encode(self.images / img["file_name"])
            img["file_name"] = Path(img["file_name"]).stem + suffix
            (folder / img["file_name"]).write_bytes(encoded)
        return data, folder

    def eval_case(self, name, what, expected, ckpt: Path, names=()) -> Case:
        d = self.case_dir(name)
        ann = d / "annotations.json"
        ann.write_text(json.dumps(self.base))
        out = d / "results.json"
        argv = [sys.executable, "-m", "evaluate.coco_eval", "--ckpt", str(ckpt), "--images", str(self.images)]
        argv += ["--annotations", str(ann), "--out", str(out), "--device", "cpu"]
        return Case(name, what, argv, expected, [out], names, d)


def _subset(data: dict, file_names) -> dict:
    out = copy.deepcopy(data)
    out["images"] = [img for img in data["images"] if img["file_name"] in file_names]
    ids = {img["id"] for img in out["images"]}
    out["annotations"] = [a for a in out["annotations"] if a["image_id"] in ids]
    return out


# ------------------------------------------------------------------------------------------------ the cases

_BUILDERS: dict[str, Callable[[_Corpus, str], Case]] = {}


def _case(fn: Callable[[_Corpus, str], Case]) -> Callable[[_Corpus, str], Case]:
    _BUILDERS[fn.__name__.removeprefix("_")] = fn
    return fn


@_case
def _control_convert(c: _Corpus, name: str) -> Case:
    return c.convert_case(name, "the unedited sample (control)", "accepted", c.base)


@_case
def _json_malformed(c: _Corpus, name: str) -> Case:
    text = json.dumps(c.base, indent=1)
    text = text.replace('"num_keypoints":', '"num_keypoints"', 1)  # a missing colon in the middle of the file
    return c.convert_case(
        name, "JSON with a syntax error", "clean_error", text=text, names=("annotations.json", "line")
    )


@_case
def _json_truncated(c: _Corpus, name: str) -> Case:
    text = json.dumps(c.base)
    return c.convert_case(
        name, "JSON cut short", "clean_error", text=text[: len(text) // 2], names=("annotations.json",)
    )


def _set_keypoints(c: _Corpus, values: Callable[[list], list]) -> tuple[dict, int]:
    def edit(data):
        ann = c.main_ann(data)
        ann["keypoints"] = values(ann["keypoints"])

    data = c.edited(edit)
    return data, c.main_ann(c.base)["id"]


@_case
def _keypoints_16_values(c: _Corpus, name: str) -> Case:
    data, ann_id = _set_keypoints(c, lambda kp: kp[:16])
    return c.convert_case(name, "16 keypoint values", "clean_error", data, names=(str(ann_id), "'keypoints'", "51"))


@_case
def _keypoints_52_values(c: _Corpus, name: str) -> Case:
    data, ann_id = _set_keypoints(c, lambda kp: [*kp, 0])
    return c.convert_case(name, "52 keypoint values", "clean_error", data, names=(str(ann_id), "'keypoints'", "52"))


@_case
def _keypoints_wrong_count_skip_bad(c: _Corpus, name: str) -> Case:
    data, ann_id = _set_keypoints(c, lambda kp: kp[:16])
    return c.convert_case(
        name, "16 keypoint values, --skip-bad", "counted_skip", data, extra=["--skip-bad"], names=(str(ann_id),)
    )


@_case
def _keypoint_nan(c: _Corpus, name: str) -> Case:
    data, ann_id = _set_keypoints(c, lambda kp: [math.nan, *kp[1:]])
    names = (str(ann_id), "'keypoints'[0]", "nan")
    return c.convert_case(name, "a NaN keypoint coordinate", "clean_error", data, names=names)


@_case
def _keypoint_visibility_invalid(c: _Corpus, name: str) -> Case:
    data, ann_id = _set_keypoints(c, lambda kp: [*kp[:2], 7, *kp[3:]])
    return c.convert_case(name, "a visibility flag of 7", "clean_error", data, names=(str(ann_id), "visibility"))


def _move_labelled_keypoint(kp: list, x: float) -> list:
    j = next(j for j in range(0, 51, 3) if kp[j + 2] > 0)
    return [*kp[:j], x, *kp[j + 1 :]]


@_case
def _keypoint_negative(c: _Corpus, name: str) -> Case:
    data, _ = _set_keypoints(c, lambda kp: _move_labelled_keypoint(kp, -25.0))
    return c.convert_case(name, "a labelled keypoint at x = -25 (kept: outside the image)", "accepted", data)


@_case
def _keypoint_outside_image(c: _Corpus, name: str) -> Case:
    data, _ = _set_keypoints(c, lambda kp: _move_labelled_keypoint(kp, 700.0))
    return c.convert_case(name, "a labelled keypoint past the right border (kept)", "accepted", data)


def _set_bbox(c: _Corpus, w: float, h: float) -> tuple[dict, int]:
    def edit(data):
        ann = c.main_ann(data)
        ann["bbox"] = [ann["bbox"][0], ann["bbox"][1], w, h]

    return c.edited(edit), c.main_ann(c.base)["id"]


@_case
def _bbox_zero_area(c: _Corpus, name: str) -> Case:
    data, _ = _set_bbox(c, 0.0, 0.0)
    return c.convert_case(name, "a main person's box of zero size (kept, not main)", "counted_skip", data)


@_case
def _bbox_negative(c: _Corpus, name: str) -> Case:
    data, ann_id = _set_bbox(c, -40.0, 120.0)
    return c.convert_case(name, "a box of negative width", "clean_error", data, names=(str(ann_id), "'bbox'"))


@_case
def _images_without_people(c: _Corpus, name: str) -> Case:
    return c.convert_case(name, "images without any (main) person", "counted_skip", c.no_main_person_images())


@_case
def _duplicate_image_ids(c: _Corpus, name: str) -> Case:
    data = c.edited(lambda d: d["images"][1].update(id=d["images"][0]["id"]))
    return c.convert_case(name, "two images with one id", "clean_error", data, names=(str(c.base["images"][0]["id"]),))


@_case
def _duplicate_annotation_ids(c: _Corpus, name: str) -> Case:
    data = c.edited(lambda d: d["annotations"][1].update(id=d["annotations"][0]["id"]))
    dup = str(c.base["annotations"][0]["id"])
    return c.convert_case(name, "two annotations with one id", "clean_error", data, names=(dup, "twice"))


@_case
def _annotation_of_missing_image(c: _Corpus, name: str) -> Case:
    data = c.edited(lambda d: d["annotations"][0].update(image_id=999999999))
    return c.convert_case(name, "an annotation of an unlisted image", "clean_error", data, names=("999999999",))


def _image_case(c: _Corpus, name: str, what: str, expected: Outcome, damage, extra=()) -> Case:
    images = c.image_folder(c.out / f"{name}_images")
    damage(images / c.base_images[1])
    return c.convert_case(name, what, expected, c.base, images=images, extra=extra, names=(c.base_images[1],))


@_case
def _jpeg_missing(c: _Corpus, name: str) -> Case:
    return _image_case(c, name, "a missing JPEG", "clean_error", Path.unlink)


@_case
def _jpeg_missing_skip_bad(c: _Corpus, name: str) -> Case:
    return _image_case(c, name, "a missing JPEG, --skip-bad", "counted_skip", Path.unlink, ["--skip-bad"])


@_case
def _jpeg_truncated(c: _Corpus, name: str) -> Case:
    def cut(p: Path):
        p.write_bytes(p.read_bytes()[: p.stat().st_size // 3])

    return _image_case(c, name, "a JPEG cut short", "clean_error", cut)


@_case
def _jpeg_garbage(c: _Corpus, name: str) -> Case:
    return _image_case(
        c, name, "a JPEG of random bytes", "clean_error", lambda p: p.write_bytes(random.Random(1).randbytes(5000))
    )


@_case
def _jpeg_garbage_after_header(c: _Corpus, name: str) -> Case:
    def scramble(p: Path):
        data = p.read_bytes()
        p.write_bytes(data[:600] + random.Random(2).randbytes(len(data) - 600))  # seeded: same case every run

    return _image_case(c, name, "a JPEG header followed by random bytes", "clean_error", scramble)


def _file_name_case(c: _Corpus, name: str, what: str, file_name: Callable[[Path], str], why="outside") -> Case:
    """Image 2's file_name replaced; a real JPEG waits outside the image folder, so an escape would succeed."""
    images = c.out / name / "images"
    bad = file_name(images)
    data = c.edited(lambda d: d["images"][1].update(file_name=bad))
    case = c.convert_case(name, what, "clean_error", data, images=images, names=(repr(bad), why))
    c.image_folder(images)
    shutil.copyfile(c.sample_dir / "images" / c.base_images[1], images.parent / "outside.jpg")
    return case


@_case
def _file_name_parent(c: _Corpus, name: str) -> Case:
    return _file_name_case(c, name, "file_name '../outside.jpg'", lambda images: "../outside.jpg")


@_case
def _file_name_absolute(c: _Corpus, name: str) -> Case:
    return _file_name_case(c, name, "an absolute file_name", lambda images: str(images.parent / "outside.jpg"))


@_case
def _file_name_nul_byte(c: _Corpus, name: str) -> Case:
    return _file_name_case(c, name, "a file_name with a NUL byte", lambda images: "a\x00.jpg", "NUL")


@_case
def _h5_other_input_size(c: _Corpus, name: str) -> Case:
    return c.train_case(name, "an HDF5 file made for input size 128", "clean_error", c.h5(128), names=("128", "64"))


@_case
def _h5_truncated(c: _Corpus, name: str) -> Case:
    d = c.out / f"{name}_data"
    d.mkdir(exist_ok=True)
    h5 = d / "cut.h5"
    data = c.h5().read_bytes()
    h5.write_bytes(data[: len(data) // 2])
    return c.train_case(name, "an HDF5 file cut in half", "clean_error", h5, names=("cut.h5",))


def _h5_with_settings(c: _Corpus, name: str, settings: str) -> Path:
    d = c.out / f"{name}_data"
    d.mkdir(exist_ok=True)
    h5 = d / "edited.h5"
    shutil.copyfile(c.h5(), h5)
    with h5py.File(h5, "r+") as f:
        f.attrs["settings"] = settings
    return h5


def settings_payload(marker: Path) -> str:
    """A Python expression that would create ``marker`` if it were ever evaluated."""
    return f"__import__('os').system('touch {marker}')"


@_case
def _h5_settings_python_code(c: _Corpus, name: str) -> Case:
    h5 = _h5_with_settings(c, name, settings_payload(c.out / name / PAYLOAD_MARKER))
    return c.train_case(name, "HDF5 settings holding a Python expression", "clean_error", h5, names=("edited.h5",))


@_case
def _h5_settings_not_a_dict(c: _Corpus, name: str) -> Case:
    h5 = _h5_with_settings(c, name, json.dumps([64, "train2017"]))
    return c.train_case(name, "HDF5 settings that are JSON but not an object", "clean_error", h5, names=("edited.h5",))


@_case
def _h5_dataset_missing(c: _Corpus, name: str) -> Case:
    d = c.out / f"{name}_data"
    d.mkdir(exist_ok=True)
    h5 = d / "no_boxes.h5"
    shutil.copyfile(c.h5(), h5)
    with h5py.File(h5, "r+") as f:
        del f["people/bbox"]
    return c.train_case(name, "an HDF5 file without its people/bbox dataset", "clean_error", h5, names=("people/bbox",))


class ReducePayload:
    """Unpickling this calls ``os.system`` (creates ``marker``): the classic malicious-checkpoint payload."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _edited_checkpoint(c: _Corpus, name: str, edit: Callable[[Checkpoint], object]) -> Path:
    """The tiny checkpoint, edited in place by ``edit`` and saved as ``<name>.pt``."""
    ckpt = Checkpoint.load(c.checkpoint())
    edit(ckpt)
    path = c.out / f"{name}.pt"
    ckpt.save(path)
    return path


def _checkpoint_with_object(c: _Corpus, name: str, obj: object) -> Path:
    """The tiny checkpoint's file with one more entry holding ``obj``, a Python object (what safe loading refuses),
    saved as ``<name>.pt``."""
    path = c.out / f"{name}.pt"
    torch.save({**Checkpoint.load(c.checkpoint()).to_dict(), "extra": obj}, path)
    return path


@_case
def _ckpt_pickled_class(c: _Corpus, name: str) -> Case:
    ckpt = _checkpoint_with_object(c, name, InjectedObject())
    return c.eval_case(name, "a checkpoint holding a class instance", "clean_error", ckpt, names=(ckpt.name,))


@_case
def _ckpt_reduce_payload(c: _Corpus, name: str) -> Case:
    case = c.train_case(name, "a checkpoint with a __reduce__ payload, resumed", "clean_error", c.h5())
    ckpt = _checkpoint_with_object(c, name, ReducePayload(c.out / name / PAYLOAD_MARKER))
    case.argv.append(f"train.resume={ckpt}")
    case.names = (ckpt.name, "weights_only")
    return case


@_case
def _ckpt_truncated(c: _Corpus, name: str) -> Case:
    ckpt = c.out / f"{name}.pt"
    data = c.checkpoint().read_bytes()
    ckpt.write_bytes(data[: len(data) // 2])
    return c.eval_case(name, "a checkpoint cut in half", "clean_error", ckpt, names=(ckpt.name, "truncated"))


@_case
def _ckpt_other_architecture(c: _Corpus, name: str) -> Case:
    case = c.train_case(name, "resuming a 1-stack run from a 2-stack checkpoint", "clean_error", c.h5())
    case.argv.append(f"train.resume={c.checkpoint(stacks=2)}")
    case.names = ("stacks",)
    return case


@_case
def _ckpt_nan_weights(c: _Corpus, name: str) -> Case:
    def poison(ckpt: Checkpoint) -> None:
        ckpt.model = {k: v * math.nan if v.is_floating_point() else v for k, v in ckpt.model.items()}

    ckpt = _edited_checkpoint(c, name, poison)
    what = "a checkpoint of a diverged run (NaN weights)"
    return c.eval_case(name, what, "clean_error", ckpt, names=(ckpt.name, "NaN"))


@_case
def _ckpt_invalid_config(c: _Corpus, name: str) -> Case:
    ckpt = c.out / f"{name}.pt"
    saved = Checkpoint.load(c.checkpoint()).to_dict()
    saved["config"]["eval"]["scales"] = "large"  # written as a newer or edited version might have
    torch.save(saved, ckpt)
    names = (ckpt.name, "eval.scales")
    return c.eval_case(name, "a checkpoint whose saved config is invalid", "clean_error", ckpt, names=names)


# ---- issue 27: files that are no checkpoint where one belongs; a second run into a run's folder


def _not_checkpoint(c: _Corpus, kind: str) -> NotACheckpoint:
    """One of tests.harness.not_checkpoints' files (all made once, under the corpus folder)."""
    if c._not_checkpoints is None:
        c._not_checkpoints = make_not_checkpoints(c.out / "not_checkpoints", c.sample_dir, c.h5(), c.checkpoint())
    return c._not_checkpoints[kind]


def _convert_original_case(c: _Corpus, name: str, what: str, weights: Path, names=()) -> Case:
    d = c.case_dir(name)
    out = d / "converted.pt"
    argv = [sys.executable, "-m", "checkpoint.original", "--weights", str(weights), "--out", str(out)]
    return Case(name, what, argv, "clean_error", [out], names, d)


@_case
def _ckpt_is_hdf5(c: _Corpus, name: str) -> Case:
    given = _not_checkpoint(c, "hdf5")
    return c.eval_case(name, "a converted dataset (HDF5) as --ckpt", "clean_error", given.path,
                       names=(given.path.name, *given.words))  # fmt: skip


@_case
def _ckpt_is_onnx(c: _Corpus, name: str) -> Case:
    given = _not_checkpoint(c, "onnx")
    return c.eval_case(name, "an ONNX model as --ckpt", "clean_error", given.path,
                       names=(given.path.name, *given.words))  # fmt: skip


@_case
def _ckpt_is_an_image(c: _Corpus, name: str) -> Case:
    given = _not_checkpoint(c, "jpeg")
    return c.train_case(name, "a JPEG image as train.init_weights", "clean_error", c.h5(),
                        extra=[f"train.init_weights={given.path}"], names=(given.path.name, *given.words))  # fmt: skip


@_case
def _ckpt_is_yaml(c: _Corpus, name: str) -> Case:
    given = _not_checkpoint(c, "yaml")
    return c.train_case(name, "a YAML config as train.resume", "clean_error", c.h5(),
                        extra=[f"train.resume={given.path}"], names=(given.path.name, *given.words))  # fmt: skip


@_case
def _ckpt_is_json(c: _Corpus, name: str) -> Case:
    given = _not_checkpoint(c, "json")
    return _convert_original_case(c, name, "an annotation JSON as checkpoint.original --weights", given.path,
                                  names=(given.path.name, *given.words))  # fmt: skip


@_case
def _ckpt_random_bytes(c: _Corpus, name: str) -> Case:
    given = _not_checkpoint(c, "random_bytes")
    return c.eval_case(name, "4 KiB of random bytes as --ckpt", "clean_error", given.path,
                       names=(given.path.name, *given.words))  # fmt: skip


@_case
def _ckpt_empty(c: _Corpus, name: str) -> Case:
    given = _not_checkpoint(c, "empty")
    return _convert_original_case(c, name, "an empty file as checkpoint.original --weights", given.path,
                                  names=(given.path.name, *given.words))  # fmt: skip


@_case
def _ckpt_is_a_folder(c: _Corpus, name: str) -> Case:
    given = _not_checkpoint(c, "folder")
    return c.eval_case(name, "a run folder as --ckpt", "clean_error", given.path, names=given.words)


def _earlier_run(c: _Corpus, case: Case) -> None:
    """Train the case's own command once (in this process), so that its folder holds a finished run; the case
    runs it again. Nothing is to be written by that second run (``outputs``: the folder it suggests)."""
    from simplepose.engine.trainer import Trainer

    overrides = [a for a in case.argv[case.argv.index(str(TINY_PRESET)) + 1 :] if not a.startswith("train.resume=")]
    # its lines are not the case's
    loggers = [logging.getLogger(name) for name in ("simplepose.engine", "simplepose.utils")]
    levels = [lg.level for lg in loggers]
    try:
        for lg in loggers:
            lg.setLevel(logging.WARNING)
        Trainer(load_config(TINY_PRESET, overrides)).fit()
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)
    case.outputs = [case.folder.with_name(case.folder.name + "-2")]


@_case
def _second_run_same_folder(c: _Corpus, name: str) -> Case:
    case = c.train_case(name, "the same training again into the folder of a finished run", "clean_error", c.h5())
    _earlier_run(c, case)
    case.names = (f"train.out_dir={case.folder} already holds a run", "train.resume=auto",
                  f"train.out_dir={case.folder}-2")  # fmt: skip
    return case


@_case
def _second_run_resume_from_elsewhere(c: _Corpus, name: str) -> Case:
    case = c.train_case(name, "train.resume=PATH of another folder into the folder of a run", "clean_error", c.h5(),
                        extra=[f"train.resume={c.checkpoint()}"])  # fmt: skip
    _earlier_run(c, case)
    case.names = (f"train.out_dir={case.folder} already holds a run", f"train.out_dir={case.folder}-2")
    return case


# ---- issue 21: files of other projects (ids, names, formats, optional fields), converter and evaluator alike


def _renumbered_from_zero(data: dict) -> dict:
    for i, ann in enumerate(data["annotations"]):
        ann["id"] = i
    return data


@_case
def _annotation_ids_from_zero(c: _Corpus, name: str) -> Case:
    data = c.edited(_renumbered_from_zero)
    return c.oracle_case(name, "annotation ids from 0 (pycocotools' 'unmatched'), evaluated", "accepted", data)


def _named(names: list[str]) -> Callable[[dict], object]:
    def edit(data):
        data["categories"][0]["keypoints"] = names

    return edit


_COCO_NAMES = list(load_skeleton("coco").dataset_keypoints)
_POSETRACK_NAMES = ["nose", "head_bottom", "head_top", *_COCO_NAMES[3:]]


@_case
def _keypoint_names_other(c: _Corpus, name: str) -> Case:
    data = c.edited(_named(_POSETRACK_NAMES))
    return c.convert_case(name, "17 keypoints of other names (head top, bottom)", "clean_error", data,
                          names=("head_bottom", "left_eye", "first difference"))  # fmt: skip


@_case
def _keypoint_names_other_eval(c: _Corpus, name: str) -> Case:
    data = c.edited(_named(_POSETRACK_NAMES))
    return c.oracle_case(name, "17 keypoints of other names, evaluated", "clean_error", data,
                         names=("head_bottom", "left_eye"))  # fmt: skip


@_case
def _keypoint_names_spelling(c: _Corpus, name: str) -> Case:
    data = c.edited(_named([n.replace("_", "-").title() for n in _COCO_NAMES]))
    return c.convert_case(name, "names differing in spelling, --keypoint-names spelling", "accepted", data,
                          extra=["--keypoint-names", "spelling"])  # fmt: skip


@_case
def _keypoint_names_absent(c: _Corpus, name: str) -> Case:
    data = c.edited(lambda d: d["categories"][0].pop("keypoints", None))
    return c.convert_case(name, "a category without keypoint names (order on trust)", "accepted", data)


@_case
def _oracle_133_keypoints(c: _Corpus, name: str) -> Case:
    from simplepose.data.synthetic_images import generate

    d = c.out / f"{name}_set"
    generate(d, num_images=2, seed=3, val_fraction=0, skeleton=load_skeleton("coco_wholebody"))
    data = json.loads((d / "annotations" / "person_keypoints_train.json").read_text())
    return c.oracle_case(name, "a 133-keypoint skeleton (291 channels) evaluated on the CPU", "accepted", data,
                         images=d / "images", extra=["data.skeleton=coco_wholebody"])  # fmt: skip


def _png(path: Path) -> tuple[str, bytes]:
    import cv2

    return ".png", cv2.imencode(".png", cv2.imread(str(path)))[1].tobytes()


def _other_formats(path: Path) -> tuple[str, bytes]:
    """Each image in another format, by its name: 16-bit PNG, progressive JPEG, CMYK JPEG, WebP, BMP."""
    import io

    import cv2
    import numpy as np
    from PIL import Image

    picture = cv2.imread(str(path))
    kind = sum(path.name.encode()) % 5
    if kind == 0:
        return ".png", cv2.imencode(".png", picture.astype(np.uint16) * 257)[1].tobytes()
    if kind == 1:
        return ".jpg", cv2.imencode(".jpg", picture, [cv2.IMWRITE_JPEG_PROGRESSIVE, 1])[1].tobytes()
    if kind == 2:
        buffer = io.BytesIO()
        Image.fromarray(picture[:, :, ::-1]).convert("CMYK").save(buffer, "JPEG")
        return ".jpg", buffer.getvalue()
    return (".webp", ".bmp")[kind - 3], cv2.imencode((".webp", ".bmp")[kind - 3], picture)[1].tobytes()


@_case
def _png_images(c: _Corpus, name: str) -> Case:
    data, images = c.reencoded(name, _png)
    return c.convert_case(name, "PNG images", "accepted", data, images=images)


@_case
def _other_image_formats(c: _Corpus, name: str) -> Case:
    data, images = c.reencoded(name, _other_formats)
    return c.convert_case(name, "16-bit PNG, progressive or CMYK JPEG, WebP, BMP", "accepted", data, images=images)


def _with_exif_rotation(path: Path) -> tuple[str, bytes]:
    import struct

    jpeg = path.read_bytes()
    ifd = struct.pack(">H", 1) + struct.pack(">HHIHH", 0x0112, 3, 1, 6, 0) + struct.pack(">I", 0)
    payload = b"Exif\0\0" + b"MM\0\x2a" + struct.pack(">I", 8) + ifd
    return ".jpg", jpeg[:2] + b"\xff\xe1" + struct.pack(">H", len(payload) + 2) + payload + jpeg[2:]


@_case
def _jpeg_exif_rotated(c: _Corpus, name: str) -> Case:
    data, images = c.reencoded(name, _with_exif_rotation)
    return c.convert_case(name, "JPEGs tagged EXIF orientation 6 (stored pixels kept)", "accepted", data,
                          images=images)  # fmt: skip


@_case
def _jpeg_exif_rotated_eval(c: _Corpus, name: str) -> Case:
    data, images = c.reencoded(name, _with_exif_rotation)
    return c.oracle_case(name, "JPEGs tagged EXIF orientation 6, evaluated", "accepted", data, images=images)


def _without_optional_fields(data: dict) -> dict:
    for img in data["images"]:
        img.pop("width"), img.pop("height")
    for ann in data["annotations"]:
        for key in ("area", "segmentation", "num_keypoints"):
            ann.pop(key, None)
        if not ann["iscrowd"]:
            del ann["iscrowd"]
    return data


@_case
def _no_iscrowd(c: _Corpus, name: str) -> Case:
    data = c.edited(lambda d: [a.pop("iscrowd") for a in d["annotations"] if not a["iscrowd"]])
    return c.oracle_case(name, "annotations without iscrowd, evaluated", "accepted", data)


@_case
def _optional_fields_missing(c: _Corpus, name: str) -> Case:
    data = c.edited(_without_optional_fields)
    return c.convert_case(name, "no iscrowd, area, segmentation, num_keypoints, image sizes", "accepted", data)


@_case
def _optional_fields_missing_eval(c: _Corpus, name: str) -> Case:
    data = c.edited(_without_optional_fields)
    return c.oracle_case(name, "no iscrowd, area, segmentation, num_keypoints, image sizes, evaluated", "accepted",
                         data)  # fmt: skip


def _empty_folder(c: _Corpus, name: str) -> Path:
    folder = c.out / f"{name}_images"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@_case
def _skip_bad_wrong_folder(c: _Corpus, name: str) -> Case:
    folder = _empty_folder(c, name)
    return c.convert_case(name, "--skip-bad with a wrong --images folder", "clean_error", c.base, images=folder,
                          extra=["--skip-bad"], names=(f"--images ({folder})",))  # fmt: skip


@_case
def _skip_bad_wrong_folder_eval(c: _Corpus, name: str) -> Case:
    folder = _empty_folder(c, name)
    return c.oracle_case(name, "--skip-bad with a wrong --images folder, evaluated", "clean_error", c.base,
                         images=folder, extra=["--skip-bad"], names=(f"--images ({folder})",))  # fmt: skip


@_case
def _annotation_of_missing_image_eval(c: _Corpus, name: str) -> Case:
    data = c.edited(lambda d: d["annotations"][0].update(image_id=999999999))
    return c.oracle_case(name, "an annotation of an unlisted image, evaluated", "clean_error", data,
                         names=("999999999",))  # fmt: skip


def _damaged_images(c: _Corpus, name: str, damage) -> Path:
    images = c.image_folder(c.out / f"{name}_images")
    damage(images / c.base_images[1])
    return images


def _cut(p: Path) -> None:
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 3])


@_case
def _jpeg_truncated_eval(c: _Corpus, name: str) -> Case:
    images = _damaged_images(c, name, _cut)
    return c.oracle_case(name, "a JPEG cut short, evaluated", "clean_error", c.base, images=images,
                         names=(c.base_images[1], "truncated"))  # fmt: skip


@_case
def _jpeg_missing_skip_bad_eval(c: _Corpus, name: str) -> Case:
    images = _damaged_images(c, name, Path.unlink)
    return c.oracle_case(name, "a missing JPEG, --skip-bad, evaluated", "counted_skip", c.base, images=images,
                         extra=["--skip-bad"])  # fmt: skip


@_case
def _demo_unreadable_file(c: _Corpus, name: str) -> Case:
    d = c.case_dir(name)
    images = c.image_folder(d / "images")
    (images / "broken.jpg").write_bytes(b"\xff\xd8 not a JPEG")
    out = d / "demo.json"
    argv = [sys.executable, "-m", "evaluate.demo", "--ckpt", str(c.checkpoint()), "--input", str(images), "--json",
            str(out), "--device", "cpu", "eval.scales=[1.0]", "eval.flip=false"]  # fmt: skip
    return Case(name, "an undecodable file in a demo folder (skipped, the rest goes on)", argv, "counted_skip", [out],
                ("broken.jpg",), d)  # fmt: skip


# ---- issue 27: the converter and the evaluator accept and refuse the same files; images read as stored


def string_annotation_ids(data: dict) -> dict:
    """Every annotation id written as a string, "ann-<id>" (home-made files do this)."""
    for ann in data["annotations"]:
        ann["id"] = f"ann-{ann['id']}"
    return data


def ids_past_int64(data: dict) -> dict:
    """Image ids from 2**64 on and annotation ids from 2**63 on (one below -2**63): JSON integers of any size."""
    new = {img["id"]: 2**64 + k for k, img in enumerate(data["images"])}
    for img in data["images"]:
        img["id"] = new[img["id"]]
    for k, ann in enumerate(data["annotations"]):
        ann["image_id"] = new[ann["image_id"]]
        ann["id"] = -(2**63) - 7 if k == 0 else 2**63 + ann["id"]
    return data


def without_labelled_people(data: dict) -> dict:
    """No annotation with a labelled keypoint (an instances file's people, in a person_keypoints file's layout)."""
    for ann in data["annotations"]:
        ann["keypoints"] = [0] * len(ann["keypoints"])
        ann["num_keypoints"] = 0
    return data


def without_main_people(data: dict) -> dict:
    """Every person keeps at most 4 labelled keypoints (a main person needs 5): labelled, but no training sample."""
    for ann in data["annotations"]:
        for j in [j for j in range(0, len(ann["keypoints"]), 3) if ann["keypoints"][j + 2] > 0][4:]:
            ann["keypoints"][j : j + 3] = [0, 0, 0]
        ann["num_keypoints"] = min(ann["num_keypoints"], 4)
    return data


def _both(c: _Corpus, name: str, what: str, expected: Outcome, data: dict, names=(), eval_names=None,
          images=None) -> Case:  # fmt: skip
    """The converter's case, or (a name ending in _eval) the evaluator's (the oracle) of the same file."""
    if name.endswith("_eval"):
        return c.oracle_case(name, f"{what}, evaluated", expected, data, images=images,
                             names=names if eval_names is None else eval_names)  # fmt: skip
    return c.convert_case(name, what, expected, data, names=names, images=images)


def _both_cases(fn: Callable[[_Corpus, str], Case]) -> Callable[[_Corpus, str], Case]:
    """Register ``fn`` (a ``_both`` case) twice: for the converter and, with "_eval", for the evaluator."""
    name = fn.__name__.removeprefix("_")
    _BUILDERS[name] = _BUILDERS[f"{name}_eval"] = fn
    return fn


@_both_cases
def _annotation_ids_string(c: _Corpus, name: str) -> Case:
    return _both(c, name, 'annotation ids that are strings ("ann-0"; kept as given)', "accepted",
                 c.edited(string_annotation_ids))  # fmt: skip


@_both_cases
def _ids_past_int64(c: _Corpus, name: str) -> Case:
    return _both(c, name, "image and annotation ids past +-2**63 (kept as given)", "accepted",
                 c.edited(ids_past_int64))  # fmt: skip


@_both_cases
def _annotation_id_float(c: _Corpus, name: str) -> Case:
    data = c.edited(lambda d: d["annotations"][0].update(id=1.5))
    return _both(c, name, "an annotation id 1.5 (neither an integer nor a string)", "clean_error", data,
                 names=("annotation id 1.5", "'id' must be an integer or a string"))  # fmt: skip


@_both_cases
def _image_id_string(c: _Corpus, name: str) -> Case:
    def edit(d):
        old = d["images"][0]["id"]
        d["images"][0]["id"] = "img-0"
        for ann in d["annotations"]:
            if ann["image_id"] == old:
                ann["image_id"] = "img-0"

    return _both(c, name, 'an image id that is a string ("img-0")', "clean_error", c.edited(edit),
                 names=("images[0]", "'img-0'", "image 'id' must be an integer"))  # fmt: skip


@_both_cases
def _no_labelled_person(c: _Corpus, name: str) -> Case:
    data = c.edited(without_labelled_people)
    n = len(data["annotations"])
    return _both(c, name, "no annotation with a labelled keypoint", "clean_error", data,
                 names=("annotations.json", "no labelled person", f"0 of {n} person annotations"))  # fmt: skip


@_both_cases
def _keypoint_names_string(c: _Corpus, name: str) -> Case:
    data = c.edited(lambda d: d["categories"][0].update(keypoints=",".join(_COCO_NAMES)))
    return _both(c, name, "category keypoint names as one comma-separated string", "clean_error", data,
                 names=("annotations.json", "categories[0].keypoints", "a string 'nose,left_eye"))  # fmt: skip


@_case
def _no_main_person_anywhere(c: _Corpus, name: str) -> Case:
    return c.convert_case(name, "labelled people, none a main person (<= 4 keypoints each)", "clean_error",
                          c.edited(without_main_people), names=("annotations.json", "no training sample",
                                                                 "at least 5"))  # fmt: skip


@_case
def _no_main_person_anywhere_eval(c: _Corpus, name: str) -> Case:
    return c.oracle_case(name, "labelled people, none a main person, evaluated (scored: they are ground truth)",
                         "accepted", c.edited(without_main_people))  # fmt: skip


@_case
def _input_size_100(c: _Corpus, name: str) -> Case:
    case = c.convert_case(name, "--input-size 100 (training takes multiples of 64)", "clean_error", c.base,
                          names=("--input-size", "got 100", "64, 128, 192, 256"))  # fmt: skip
    case.argv[case.argv.index("--input-size") + 1] = "100"
    return case


@_case
def _input_size_100_train(c: _Corpus, name: str) -> Case:
    return c.train_case(name, "data.input_size=100, trained", "clean_error", c.h5(), extra=["data.input_size=100"],
                        names=("data.input_size", "got 100", "64, 128, 192, 256"))  # fmt: skip


def rotated_tiff(path: Path, orientation: int = 6) -> tuple[str, bytes]:
    """The image as an LZW TIFF whose Orientation tag says ``orientation`` (6: "turn 90 degrees clockwise"), the
    stored pixels those of the file (Pillow writes the tag; OpenCV 5.0 turns such a TIFF whatever its flags)."""
    import io

    import cv2
    from PIL import Image

    exif = Image.Exif()
    exif[0x0112] = orientation
    buffer = io.BytesIO()
    Image.fromarray(cv2.imread(str(path))[:, :, ::-1]).save(buffer, "TIFF", exif=exif, compression="tiff_lzw")
    return ".tif", buffer.getvalue()


@_case
def _tiff_orientation(c: _Corpus, name: str) -> Case:
    data, images = c.reencoded(name, rotated_tiff)
    return c.convert_case(name, "TIFFs tagged orientation 6, sizes given (stored pixels kept)", "accepted", data,
                          images=images)  # fmt: skip


@_case
def _tiff_orientation_no_size(c: _Corpus, name: str) -> Case:
    data, images = c.reencoded(name, rotated_tiff)
    for img in data["images"]:
        img.pop("width"), img.pop("height")
    return c.convert_case(name, "TIFFs tagged orientation 6, no sizes (the stored size is used)", "accepted", data,
                          images=images)  # fmt: skip


@_case
def _tiff_orientation_eval(c: _Corpus, name: str) -> Case:
    data, images = c.reencoded(name, rotated_tiff)
    return c.oracle_case(name, "TIFFs tagged orientation 6, evaluated", "accepted", data, images=images)


@_case
def _demo_output_exists(c: _Corpus, name: str) -> Case:
    d = c.case_dir(name)
    out = d / "demo.json"
    out.write_text("[]\n")  # an earlier run's results: refused (named, with --overwrite), left as it is
    argv = [sys.executable, "-m", "evaluate.demo", "--ckpt", str(c.checkpoint()), "--input", str(c.images), "--json",
            str(out), "--device", "cpu", "eval.scales=[1.0]", "eval.flip=false"]  # fmt: skip
    return Case(name, "the demo's --json file exists from an earlier run (no --overwrite)", argv, "clean_error", [],
                ("demo.json", "--overwrite"), d)  # fmt: skip


@_case
def _demo_pattern_no_images(c: _Corpus, name: str) -> Case:
    d = c.case_dir(name)
    out = d / "demo.json"
    argv = [sys.executable, "-m", "evaluate.demo", "--ckpt", str(c.checkpoint()), "--input", str(c.images / "*.png"),
            "--json", str(out), "--device", "cpu"]  # fmt: skip
    return Case(name, "a demo --input pattern that matches no image", argv, "clean_error", [out], ("*.png",), d)


# ---- results files of other tools (python -m evaluate.coco_eval --results FILE): checked before pycocotools


def _results_case(c: _Corpus, name: str, what: str, expected: Outcome, edit: Callable[[list[dict]], object],
                  names=()) -> Case:  # fmt: skip
    """``--results`` of the sample's own people as results (the oracle's perfect file), edited by ``edit`` (which
    returns the JSON value to write)."""
    d = c.case_dir(name)
    ann = d / "annotations.json"
    ann.write_text(json.dumps(c.base))
    results = [{"image_id": a["image_id"], "category_id": a["category_id"], "keypoints": a["keypoints"], "score": 1.0}
               for a in c.base["annotations"] if a.get("num_keypoints", 0) > 0]  # fmt: skip
    path = d / "their_results.json"
    value = edit(results)
    path.write_text(value if isinstance(value, str) else json.dumps(value))
    argv = [sys.executable, "-m", "evaluate.coco_eval", "--results", str(path), "--annotations", str(ann)]
    return Case(name, what, argv, expected, [], names, d)


@_case
def _results_control(c: _Corpus, name: str) -> Case:
    return _results_case(c, name, "a results file of another tool (control)", "accepted", lambda r: r)


@_case
def _results_not_json(c: _Corpus, name: str) -> Case:
    return _results_case(c, name, "a results file that is not JSON", "clean_error", lambda r: json.dumps(r)[:-40],
                         names=("their_results.json", "not JSON"))  # fmt: skip


@_case
def _results_other_skeleton(c: _Corpus, name: str) -> Case:
    def crowdpose_like(results):  # 14 keypoints per person, as CrowdPose's tools write them
        return [{**r, "keypoints": r["keypoints"][: 3 * 14]} for r in results]

    return _results_case(c, name, "results of another skeleton (14 keypoints against COCO's 17)", "clean_error",
                         crowdpose_like, names=("entry 0", "'keypoints'", "--skeleton"))  # fmt: skip


@_case
def _results_unknown_images(c: _Corpus, name: str) -> Case:
    return _results_case(c, name, "results of images the annotation file does not list", "clean_error",
                         lambda r: [{**x, "image_id": x["image_id"] + 10**6} for x in r],
                         names=("image ids", "annotation file"))  # fmt: skip


@_case
def _results_nan_score(c: _Corpus, name: str) -> Case:
    return _results_case(c, name, "a result whose score is NaN", "clean_error",
                         lambda r: json.dumps([{**r[0], "score": float("nan")}, *r[1:]]),
                         names=("entry 0", "'score'"))  # fmt: skip


# ---- issue 37: linked image files are the user's own and are read


def linked_folder(folder: Path, store: Path) -> Path:
    """``folder`` holding an ``ln -s`` link (absolute) to each file of ``store`` (shared storage, a subset)."""
    folder.mkdir(parents=True, exist_ok=True)
    for f in sorted(store.iterdir()):
        (folder / f.name).symlink_to(f.resolve())
    return folder


@_both_cases
def _images_linked(c: _Corpus, name: str) -> Case:
    """An image folder of links to the files elsewhere (the user's own links: read, as the files)."""
    images = c.out / f"{name}_links"
    shutil.rmtree(images, ignore_errors=True)
    linked_folder(images, c.image_folder(c.out / "linked_store"))
    return _both(c, name, "an image folder of ln -s links to the files elsewhere", "accepted", c.base, images=images)


@_case
def _results_string_image_ids(c: _Corpus, name: str) -> Case:
    return _results_case(c, name, 'results whose image ids are strings of the annotations\' integers ("481")',
                         "clean_error", lambda r: [{**x, "image_id": str(x["image_id"])} for x in r],
                         names=("as strings", "integers", '"image_id" as a number'))  # fmt: skip


@_case
def _resume_finished_run(c: _Corpus, name: str) -> Case:
    case = c.train_case(name, "train.resume=auto on a finished run (nothing to train: said, no file changed)",
                        "accepted", c.h5(), extra=["train.resume=auto"])  # fmt: skip
    _earlier_run(c, case)
    case.names = ("holds a finished run", "nothing was trained and no file was changed", "train.epochs=2")
    return case


@_case
def _demo_track_unrelated_pictures(c: _Corpus, name: str) -> Case:
    """Two pictures of different sizes (not frames of one video) with --track."""
    import cv2

    d = c.case_dir(name)
    pictures = d / "pictures"
    pictures.mkdir()
    image = cv2.imread(str(c.images / c.base_images[0]))
    cv2.imwrite(str(pictures / "a.jpg"), image)
    cv2.imwrite(str(pictures / "b.jpg"), cv2.resize(image, (image.shape[1] // 2, image.shape[0] // 2)))
    out = d / "trk.json"
    argv = [sys.executable, "-m", "evaluate.demo", "--ckpt", str(c.checkpoint()), "--input", str(pictures), "--track",
            "--json", str(out)]  # fmt: skip
    return Case(name, "demo --track on pictures of two sizes (not frames of one video)", argv, "clean_error", [out],
                ("not frames of one sequence", "Drop --track"), d)  # fmt: skip


@_case
def _demo_onnx_is_a_checkpoint(c: _Corpus, name: str) -> Case:
    d = c.case_dir(name)
    out = d / "demo.json"
    argv = [sys.executable, "-m", "evaluate.demo", "--onnx", str(c.checkpoint()), "--input", str(c.images), "--json",
            str(out)]  # fmt: skip
    return Case(name, "a .pt checkpoint given to the demo's --onnx", argv, "clean_error", [out],
                ("not an ONNX model", "--ckpt", "python -m evaluate.export_onnx"), d)  # fmt: skip


# ---- issue 45: settings out of their range, the wrong tool, a failed start leaves no run folder


def _refused_start(c: _Corpus, name: str, what: str, extra: list[str], names: tuple[str, ...]) -> Case:
    """A training command refused before it trains: a clean error naming ``names``, and no run folder left."""
    case = c.train_case(name, what, "clean_error", c.h5(), extra=extra, names=names)
    case.outputs = [case.folder]
    return case


@_case
def _batch_size_zero(c: _Corpus, name: str) -> Case:
    return _refused_start(c, name, "train.batch_size=0", ["train.batch_size=0"], ("train.batch_size", ">= 1", "got 0"))


@_case
def _lr_negative(c: _Corpus, name: str) -> Case:
    return _refused_start(c, name, "train.lr=-1", ["train.lr=-1"], ("train.lr", ">= 0", "got -1.0"))


@_case
def _num_workers_negative(c: _Corpus, name: str) -> Case:
    return _refused_start(c, name, "data.num_workers=-1", ["data.num_workers=-1"], ("data.num_workers", ">= 0"))


@_case
def _epochs_zero(c: _Corpus, name: str) -> Case:
    return _refused_start(c, name, "train.epochs=0", ["train.epochs=0"], ("train.epochs", ">= 1", "got 0"))


@_case
def _warmup_negative(c: _Corpus, name: str) -> Case:
    return _refused_start(
        c, name, "train.warmup_epochs=-1", ["train.warmup_epochs=-1"], ("train.warmup_epochs", ">= 0")
    )


@_case
def _device_as_option(c: _Corpus, name: str) -> Case:
    return _refused_start(c, name, "--device cpu given to train.py", ["--device", "cpu"], ("train.device=cpu",))


@_case
def _checkpoint_as_config(c: _Corpus, name: str) -> Case:
    ckpt = str(c.checkpoint())
    case = _refused_start(c, name, "a checkpoint as --config", [], (ckpt, f"train.resume={ckpt}"))
    case.argv[case.argv.index("--config") + 1] = ckpt
    return case


@_case
def _data_smaller_than_a_step(c: _Corpus, name: str) -> Case:
    return _refused_start(c, name, "a batch larger than the data (fails after the run folder is made)",
                          ["train.batch_size=1000"], ("train.batch_size", str(c.h5())))  # fmt: skip


@_case
def _scales_zero_eval(c: _Corpus, name: str) -> Case:
    return c.oracle_case(name, "eval.scales=[0]", "clean_error", c.base, extra=["eval.scales=[0]"],
                         names=("eval.scales", "> 0", "got [0.0]"))  # fmt: skip


@_case
def _scales_option_zero_eval(c: _Corpus, name: str) -> Case:
    return c.oracle_case(name, "--scales 0", "clean_error", c.base, extra=["--scales", "0"],
                         names=("eval.scales", "> 0", "got [0.0]"))  # fmt: skip


# ---- issue 52: hints that name the real cause; presets by name; datasets' own keypoint spellings


@_case
def _train_source_is_a_folder(c: _Corpus, name: str) -> Case:
    return _refused_start(c, name, "a folder of images given as data.train", [f"data.train={c.images}"],
                          ("data.train=", "is a folder", "coco_to_hdf5"))  # fmt: skip


@_case
def _config_key_misspelt(c: _Corpus, name: str) -> Case:
    return _refused_start(c, name, "train.lerning_rate=1e-3", ["train.lerning_rate=1e-3"],
                          ("train.lerning_rate", "closest valid names: train.lr"))  # fmt: skip


@_case
def _config_preset_unknown(c: _Corpus, name: str) -> Case:
    case = _refused_start(c, name, "--config tinny (no such preset)", [], ("--config tinny", "no preset", "tiny"))
    case.argv[case.argv.index("--config") + 1] = "tinny"
    return case


def _map_keypoints_case(c: _Corpus, name: str, what: str, expected: Outcome, annotations: Path, names=()) -> Case:
    d = c.case_dir(name)
    out = d / "mapped.json"
    argv = [sys.executable, "-m", "data.map_keypoints", "--annotations", str(annotations), "--skeleton", "coco",
            "--out", str(out)]  # fmt: skip
    return Case(name, what, argv, expected, [out], names, d)


@_case
def _map_keypoints_hdf5(c: _Corpus, name: str) -> Case:
    return _map_keypoints_case(c, name, "an HDF5 file given to map_keypoints as annotations", "clean_error", c.h5(),
                               ("is an HDF5 file", "not COCO-format JSON"))  # fmt: skip


@_case
def _map_keypoints_aic_spelling(c: _Corpus, name: str) -> Case:
    """AI Challenger's 14 keypoints as its files spell them ("Right Shoulder"), onto COCO: no --rename needed."""
    aic = ["Right Shoulder", "Right Elbow", "Right Wrist", "Left Shoulder", "Left Elbow", "Left Wrist", "Right Hip",
           "Right Knee", "Right Ankle", "Left Hip", "Left Knee", "Left Ankle", "Head top", "Neck"]  # fmt: skip
    data = copy.deepcopy(c.base)
    data["categories"][0]["keypoints"] = aic
    for ann in data["annotations"]:
        ann["keypoints"] = ann["keypoints"][: 3 * len(aic)]
    path = c.out / f"{name}.json"
    path.write_text(json.dumps(data))
    return _map_keypoints_case(c, name, "AI Challenger's spelling ('Right Shoulder') onto COCO", "accepted", path)


def _demo_case(c: _Corpus, name: str, what: str, out: Path, extra: list[str], names: tuple[str, ...]) -> Case:
    argv = [sys.executable, "-m", "evaluate.demo", "--input", str(c.images), "--out", str(out), "--device", "cpu",
            *extra]  # fmt: skip
    return Case(name, what, argv, "clean_error", [out], names, out.parent)


@_case
def _demo_out_is_a_file(c: _Corpus, name: str) -> Case:
    d = c.case_dir(name)
    (d / "results.json").write_text("[]\n")  # an earlier file where the folder is asked for
    case = _demo_case(c, name, "demo --out naming an existing file", d / "results.json",
                      ["--ckpt", str(c.checkpoint())], ("--out", "is a file, not a folder"))  # fmt: skip
    case.outputs = []  # the file was there before (test_eval_demo.py checks that it stays as it was)
    return case


@_case
def _demo_missing_checkpoint(c: _Corpus, name: str) -> Case:
    d = c.case_dir(name)
    return _demo_case(c, name, "demo with a missing checkpoint: no empty --out folder left", d / "new" / "pictures",
                      ["--ckpt", str(d / "none.pt")], ("none.pt", "not found"))  # fmt: skip


CASE_NAMES: tuple[str, ...] = tuple(_BUILDERS)


# Cases about untrusted files (tests/test_security.py runs these; tests/test_bad_inputs.py the others).
SECURITY_CASES = ("file_name_parent", "file_name_absolute", "file_name_nul_byte",
                  "h5_settings_python_code", "ckpt_pickled_class", "ckpt_reduce_payload")  # fmt: skip


def build_corpus(sample_dir: Path, out_dir: Path, only: Iterable[str] | None = None) -> list[Case]:
    """Derive every bad input (or those named in ``only``) from the COCO-format sample at ``sample_dir`` (images/,
    annotations/person_keypoints_sample.json: the real COCO sample's layout) under ``out_dir``."""
    corpus = _Corpus(Path(sample_dir), Path(out_dir))
    names = list(_BUILDERS) if only is None else list(only)
    return [_BUILDERS[name](corpus, name) for name in names]


# ------------------------------------------------------------------------------------------------ running


def run_named(sample_dir: Path, out_dir: Path, names: Iterable[str], jobs: int = 2) -> dict[str, tuple]:
    """Build and run the named cases: {name: (Case, CaseResult)}."""
    cases = build_corpus(sample_dir, out_dir, only=names)
    return {c.name: (c, r) for c, r in zip(cases, run_cases(cases, jobs))}


def corpus_sample(work_dir: Path, say: Callable[[str], object] = print) -> Path:
    """The sample the corpus commands derive their cases from: the real COCO sample when it is found, else the
    tests' synthetic sample, generated under ``work_dir`` (``say`` tells which)."""
    from tests.helpers import make_synthetic_sample

    try:
        return coco_sample_dir()
    except UserError as e:
        say(f"note: {e}; the cases are derived from the synthetic sample instead")
        return make_synthetic_sample(Path(work_dir) / "synthetic_sample")


def run_corpus(work_dir: Path, jobs: int = 2) -> list[CaseResult]:
    """Build the corpus under ``work_dir`` (from ``corpus_sample``) and run every case (``jobs`` at a time)."""
    return run_cases(build_corpus(corpus_sample(work_dir), Path(work_dir) / "corpus"), jobs)
