"""Everything a training run will read, opened and checked before anything is written or trained.

    inputs = open_inputs(cfg, skeleton)      # a collective: rank 0 checks, every rank opens, one verdict

The training files (``data.train`` or each of ``data.train_sources``) and ``data.val``; each validation set that
validation will score (``data.val_images`` / ``data.val_annotations``, each source's ``data.source_val_images`` /
``data.source_val_annotations``): the annotations read and checked, the image folder and the files they list;
``train.init_weights``; the checkpoint ``train.resume`` continues from. A problem is one ``UserError`` naming the
setting and the path, raised on every rank (``utils.distributed.agreed``) within seconds of the start, before the
run folder is claimed: a long run never finds a missing validation file after its first epoch. What was opened is
handed on, so that nothing is read twice. The checks run once: rank 0 makes them (the images listed, the pairs of
settings, the checkpoints' entries) and resolves the checkpoint to resume from (``train.resume=auto``: the folder's
``last.pt`` or none); the other ranks open only what they use (the datasets, the annotations, the checkpoints at the
path rank 0 resolved), and every rank takes one verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from simplepose.checkpoint.format import Checkpoint
from simplepose.config.schema import Config
from simplepose.config.skeleton import Skeleton
from simplepose.config.skeleton_file import skeleton_of
from simplepose.data.dataset import SimplePoseDataset
from simplepose.data.image_files import image_path
from simplepose.data.sources import SourceMix, check_training_file, open_sources, source_names
from simplepose.engine.checkpointer import TrainState, check_same_model, resolve_resume
from simplepose.engine.validation import validation_sets
from simplepose.evaluate.evaluation import evaluated_ids
from simplepose.evaluate.metrics.annotations import GroundTruth, load_ground_truth
from simplepose.utils import distributed as du
from simplepose.utils.commands import command
from simplepose.utils.errors import DataFileError, UserError
from simplepose.utils.text import counted


@dataclass
class RunInputs:
    """What ``open_inputs`` opened: the datasets, each validation set's ground truth (by annotation file), the
    checkpoints of ``train.init_weights`` and ``train.resume`` (None when not given; ``resume``: also None for
    ``auto`` before the run's first checkpoint)."""

    train_set: SimplePoseDataset | SourceMix
    val_set: SimplePoseDataset | None
    ground_truth: dict[str, GroundTruth] = field(default_factory=dict)
    init_weights: Checkpoint | None = None
    resume: Checkpoint | None = None
    resolved: bool = False  # ``resume`` is train.resume resolved (by rank 0, for every rank): nothing to look up again


def open_inputs(cfg: Config, skeleton: Skeleton) -> RunInputs:
    """Open and check everything the run of ``cfg`` will read (the module docstring); a collective."""
    checks = du.get_rank() == 0
    resume = du.agreed(lambda: str(resolve_resume(cfg.train.resume, cfg.train.out_dir) or "") if checks else "")
    resume = du.broadcast_object(resume)
    return du.agreed(lambda: _open(cfg, skeleton, resume, checks))


def _open(cfg: Config, skeleton: Skeleton, resume: str, checks: bool = True) -> RunInputs:
    """What ``open_inputs`` opens (``resume``: the checkpoint train.resume resolved to, "" for none); ``checks``:
    also the checks that read more than the run uses (rank 0)."""
    d, t = cfg.data, cfg.train
    inputs = RunInputs(training_set(cfg), training_file(cfg, "data.val", train=False) if d.val else None)
    if t.val_every:
        if checks:
            check_pairs(cfg)
        for name, images, annotation_file in validation_sets(d):
            keys = ("data.val_images", "data.val_annotations") if not name else validation_keys(cfg, name)
            truth = ground_truth(annotation_file, keys[1], skeleton, cfg)
            if checks:
                check_images(images, keys[0], truth, cfg)
            inputs.ground_truth[annotation_file] = truth
    if t.init_weights:
        inputs.init_weights = checkpoint(t.init_weights, "train.init_weights")
    inputs.resolved = True
    if resume:
        inputs.resume = checkpoint(resume, "train.resume")
        check_same_model(inputs.resume, cfg)
        TrainState.of(inputs.resume)  # its training entries are all there
    return inputs


def training_set(cfg: Config) -> SimplePoseDataset | SourceMix:
    """The training samples: ``data.train_sources`` mixed (data.sources) when given, else ``data.train``."""
    d = cfg.data
    if d.train_sources:
        return open_sources(d.train_sources, cfg, train=True, weights=d.source_weights or None)
    return training_file(cfg, "data.train", train=True)


def training_file(cfg: Config, key: str, train: bool) -> SimplePoseDataset:
    """The dataset of the HDF5 file config key ``key`` (``data.train`` or ``data.val``) names."""
    path = cfg.data.train if key == "data.train" else cfg.data.val
    if not path:
        raise DataFileError(
            f"{key} is empty: give the HDF5 file made by `{command('data.coco_to_hdf5')}` ({key}=FILE)", key=key
        )
    check_training_file(path, key)
    return SimplePoseDataset(path, cfg, train=train, skeleton=skeleton_of(cfg))


def check_pairs(cfg: Config) -> None:
    """``data.val_images`` and ``data.val_annotations`` go together (one without the other scores nothing)."""
    d = cfg.data
    if bool(d.val_images) != bool(d.val_annotations):
        given, missing = ("val_images", "val_annotations") if d.val_images else ("val_annotations", "val_images")
        raise UserError(
            f"data.{given}={getattr(d, given)} is given without data.{missing}: validation AP needs both (the images "
            f"and their COCO person_keypoints JSON); give data.{missing}=..., or data.{given}='' for none",
            key=f"data.{missing}",
        )


def validation_keys(cfg: Config, name: str) -> tuple[str, str]:
    """The settings of source ``name``'s validation set: ``data.source_val_images[i]``, ``..._annotations[i]``."""
    i = source_names(cfg.data.train_sources).index(name)
    return f"data.source_val_images[{i}]", f"data.source_val_annotations[{i}]"


def ground_truth(annotation_file: str, key: str, skeleton: Skeleton, cfg: Config) -> GroundTruth:
    """The validation annotations of setting ``key``, read and checked as an evaluation reads them."""
    if not Path(annotation_file).is_file():
        raise UserError(
            f"{key}={annotation_file}: no such file; give the COCO person_keypoints JSON of the validation images",
            file=annotation_file,
            key=key,
        )
    try:
        return load_ground_truth(annotation_file, skeleton, cfg.eval)
    except UserError as e:
        raise naming(key, e) from None


def check_images(images: str, key: str, truth: GroundTruth, cfg: Config) -> None:
    """The image folder of setting ``key`` exists and holds every image ``truth`` lists (those an evaluation reads:
    ``eval.max_images``); with ``eval.skip_bad`` missing ones are left to the evaluation, which skips and counts
    them."""
    folder = Path(images)
    if not folder.is_dir():
        raise UserError(
            f"{key}={images}: no such folder; give the folder of the validation images", file=images, key=key
        )
    if cfg.eval.skip_bad:
        return
    listed = truth.images
    missing = [p for p in (image_path(folder, listed[i], truth.path) for i in evaluated_ids(listed, cfg.eval))
               if not p.is_file()]  # fmt: skip
    if missing:
        raise UserError(
            f"{key}={images}: {counted(len(missing), 'image')} listed in {truth.path} "
            f"{'is' if len(missing) == 1 else 'are'} not there (the first: {missing[0]}); give the folder of those "
            "images, or leave them out with eval.skip_bad=true",
            file=missing[0],
            key=key,
        )


def checkpoint(path: str, key: str) -> Checkpoint:
    """The checkpoint of setting ``key`` (``train.init_weights``, ``train.resume``), read; its errors name the key."""
    if not Path(path).exists():
        raise UserError(f"{key}={path}: no such checkpoint file", file=path, key=key)
    try:
        return Checkpoint.load(path)
    except UserError as e:
        raise naming(key, e) from None


def naming(key: str, e: UserError) -> UserError:
    """``e`` (its type and attributes kept) with its message led by the setting ``key`` that gave its file."""
    e.args = (f"{key}: {e}",)
    return e
