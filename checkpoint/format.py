"""The checkpoint: one type, its schema and format version, atomic save, safe load, and every older form it reads.

    Checkpoint.load("runs/x/last.pt")                 # ours (any format version), the original's, a bare state dict
    ckpt.load_into(model)                              # the skeleton check, then a strict load
    Checkpoint(model=state, config=to_dict(cfg), skeleton=skeleton, train_state=...).save(path)   # atomically

Every reader and writer of a checkpoint goes through this type (the trainer's checkpoints and resume through
``engine.checkpointer``, ``train.init_weights``, evaluation and ONNX export through
``evaluate.inference.checkpoint_model``, the converter of the original's weights), so the keys of the file are written
and read here only. The saved config is parsed once, here, into a typed ``Config``; the training state is opaque to this
module (a dict that ``engine.checkpointer.TrainState`` reads and writes). A file is a dict of tensors and plain Python
values, loaded with ``torch.load(weights_only=True)``: a checkpoint never runs code.

Format 2 (written now):

    format_version  2
    model           state dict in our parameter names (models/weights.py)
    config          the run's whole config (config.config_file.to_dict), if known
    skeleton        the network's skeleton definition (config.skeleton.Skeleton.to_dict), if known
    code_version    git commit of the code that wrote it ("" if unknown)
    origin          where the weights came from when not trained here (e.g. ``original:PoseNet_52_epoch.pth``)
    averaged        only when ``model`` holds a weight average instead of the trained weights: what kind
                    (``ema 0.999``: the exponential moving average of engine/ema.py, in best.pt of a run with
                    train.ema; such a file holds no train_state: a run resumes from last.pt, which keeps both)
    train_state     only in checkpoints a run resumes from: optimizer, scaler ({} without loss scaling), epoch, step,
                    global_step, best_metric, counters (engine.position.TrainingPosition), world_size, rng (every
                    global RNG state, one per rank), ranks_in_sync (every rank held the same parameters and buffers
                    when it was written), ema (under train.ema: the weight average's state dict and update count)

Also read: format 1 (the same entries flat at the top level, ``version`` for the code version, ``rng`` one state or a
list by rank, and a ``scheduler`` entry that nothing needs: the schedule is a function of the position and the
config), unversioned dicts of ours ({"model", "config", "epoch"}, the converter's {"model", "config", "skeleton",
"source"}), the original's ({"weights": ...}, names converted) and bare state dicts. A checkpoint written before
checkpoints carried their skeleton was trained for COCO's (``trained_skeleton``).

It stands below both training and evaluation (tests/test_import_layers.py): it imports config and models only.
"""

from __future__ import annotations

import io
import logging
import pickle
import re
import warnings
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from simplepose.config.config_file import ConfigError, config_from_dict, to_dict
from simplepose.config.schema import Config
from simplepose.config.skeleton import Skeleton
from simplepose.config.skeleton_check import KeypointSet, check_compatible, difference
from simplepose.config.skeleton_definition import skeleton_from_dict
from simplepose.config.skeleton_file import load_skeleton
from simplepose.models.weights import (
    ORIGINAL_PREFIX,
    SKELETON_DEPENDENT,
    LoadReport,
    convert_original_state_dict,
    load_state,
    predicted_channels,
    strip_wrappers,
    unwrap,
)
from simplepose.utils.commands import command
from simplepose.utils.errors import UserError
from simplepose.utils.file_kind import FileKind, existing_file_kind
from simplepose.utils.io import atomic_write_bytes

log = logging.getLogger(__name__)

CHECKPOINT_FORMAT_VERSION = 2
NO_SKELETON = "saved before checkpoints carried one: COCO's"


class CheckpointError(UserError):
    """A checkpoint file that cannot be used as asked: missing, unreadable, not a checkpoint, from a newer version, or
    without what the caller needs. ``file``: the file; ``key``: the entry at fault, if one is."""


# The entries of a format-1 (flat) file that are not its training state.
_FLAT_ENTRIES = ("format_version", "model", "config", "skeleton", "version", "source")
LOAD_FIX = (
    "build the model for the checkpoint's skeleton (data.skeleton=NAME or FILE), or rebuild it from the "
    "checkpoint alone with evaluate.inference.checkpoint_model.load_model"
)


@dataclass
class Checkpoint:
    """Weights in our naming, what they were trained with, and (to resume) the training state.

    ``config``: the run's whole config, typed (None when the file holds none, or only part of one as early files
    did); ``model_settings``: the model section as saved (it tells how to rebuild the network even where the whole
    config is partial or no longer valid); ``config_problem``: why a saved whole config could not be read ("" if it
    could), raised by the callers that need it. ``train_state``: opaque here (``engine.checkpointer.TrainState``).
    ``file`` and ``stored_as`` say where and in which form a loaded checkpoint was found ("simplepose", "original",
    "state_dict"); they are not saved."""

    model: dict[str, torch.Tensor]
    config: Config | None = None
    skeleton: Skeleton | None = None
    train_state: dict[str, Any] | None = None
    code_version: str = ""
    origin: str = ""
    averaged: str = ""
    model_settings: dict[str, Any] | None = None
    config_problem: str = field(default="", compare=False)
    file: str = field(default="", compare=False)
    stored_as: str = field(default="simplepose", compare=False)

    def __post_init__(self) -> None:
        if self.model_settings is None and self.config is not None:
            self.model_settings = to_dict(self.config.model)

    # ------------------------------------------------------------------ the file form
    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "format_version": CHECKPOINT_FORMAT_VERSION,
            "model": self.model,
            "code_version": self.code_version,
        }
        if self.config is not None:
            out["config"] = to_dict(self.config)
        if self.skeleton is not None:
            out["skeleton"] = self.skeleton.to_dict()
        if self.origin:
            out["origin"] = self.origin
        if self.averaged:
            out["averaged"] = self.averaged
        if self.train_state is not None:
            out["train_state"] = self.train_state
        return out

    @classmethod
    def from_dict(cls, obj: Any, file: str = "the given checkpoint") -> Checkpoint:
        """Recognise every form this code reads (see the module docstring); CheckpointError naming ``file`` when
        ``obj`` is none of them. The weights are renamed to ours once, here; the saved config is parsed once, here."""
        if not isinstance(obj, Mapping):
            raise CheckpointError(
                f"{file} holds a {type(obj).__name__}, not a checkpoint dict or a state dict", file=file
            )
        version = obj.get("format_version")
        if version is not None and (not isinstance(version, int) or version > CHECKPOINT_FORMAT_VERSION):
            raise CheckpointError(
                f"{file} has checkpoint format {version!r}, newer than this code reads (up to "
                f"{CHECKPOINT_FORMAT_VERSION}); update SimplePose to load it",
                file=file,
                key="format_version",
            )
        if isinstance(obj.get("model"), Mapping):
            state, stored_as = obj["model"], "simplepose"
        elif isinstance(obj.get("weights"), Mapping):
            state, stored_as = obj["weights"], "original"
        elif obj and all(isinstance(v, torch.Tensor) for v in obj.values()):
            state, stored_as = obj, "state_dict"
        else:
            raise CheckpointError(
                f"{file} holds no model weights: expected a dict with 'model' (SimplePose), 'weights' (the original "
                f"Simple Pose) or a state dict of tensors; found keys {sorted(map(str, obj))[:10]}",
                file=file,
                key="model",
            )
        state = {strip_wrappers(k): v for k, v in state.items()}
        if not state:
            raise CheckpointError(f"{file} holds an empty set of weights", file=file, key="model")
        if stored_as == "original" or any(k.startswith(ORIGINAL_PREFIX) for k in state):
            state, stored_as = convert_original_state_dict(state), "original"
        if stored_as != "simplepose":
            return cls(state, file=file, stored_as=stored_as)
        skeleton = obj.get("skeleton")
        if version == CHECKPOINT_FORMAT_VERSION:
            train = obj.get("train_state")
            code, origin = obj.get("code_version", ""), obj.get("origin", "")
        else:  # format 1 and unversioned: flat; 'version' was the code's commit (an int in the converter's files)
            train = {k: v for k, v in obj.items() if k not in _FLAT_ENTRIES} if "optimizer" in obj else None
            code, origin = obj.get("version", ""), obj.get("source", "")
        saved = obj.get("config") if isinstance(obj.get("config"), Mapping) else None
        config, problem = _saved_config(saved)
        section = saved.get("model") if saved is not None else None
        return cls(
            model=state,
            config=config,
            skeleton=skeleton_from_dict(skeleton, f"saved in {file}") if isinstance(skeleton, Mapping) else None,
            train_state=dict(train) if isinstance(train, Mapping) else None,
            code_version=code if isinstance(code, str) else "",
            origin=origin if isinstance(origin, str) else "",
            averaged=obj.get("averaged", "") if isinstance(obj.get("averaged", ""), str) else "",
            model_settings=dict(section) if isinstance(section, Mapping) else None,
            config_problem=problem,
            file=file,
        )

    def save(self, path: str | Path) -> None:
        """Serialise in memory, then write atomically: a crash leaves the previous file intact."""
        buf = io.BytesIO()
        torch.save(self.to_dict(), buf)
        atomic_write_bytes(path, buf.getvalue())

    @classmethod
    def load(cls, path: str | Path) -> Checkpoint:
        """Read ``path`` on the CPU without running any code from it; CheckpointError when it is missing, truncated,
        holds Python objects, or is not a checkpoint."""
        return cls.from_dict(_read(Path(path)), str(path))

    # ------------------------------------------------------------------ what it holds
    def run_config(self) -> Config | None:
        """The run's whole config (None when the file holds none or only part of one); CheckpointError naming the
        file when the saved config is invalid (e.g. written by a newer version with keys this code lacks)."""
        if self.config_problem:
            raise CheckpointError(
                f"the config saved in {self.file} is invalid ({self.config_problem}); give one with --config FILE",
                file=self.file,
                key="config",
            )
        return self.config

    def keypoints(self) -> KeypointSet:
        """The keypoints the weights were trained for: the skeleton the file carries; else COCO's for our files
        written before checkpoints carried one and for the original's weights; else (a bare state dict, which tells
        nothing more) the heads' channel count (limbs + keypoints + 2)."""
        if self.skeleton is not None:
            return KeypointSet.of(self.skeleton)
        if self.stored_as == "state_dict":
            return KeypointSet(num_channels=predicted_channels(self.model))
        return KeypointSet.of(load_skeleton("coco"), assumed=NO_SKELETON)

    def describe(self) -> str:
        """For log lines: the file, its form, whether it holds a training state, the code version or origin."""
        parts = [
            self.file or "checkpoint",
            {"original": "the original's weights", "state_dict": "a bare state dict"}.get(
                self.stored_as, "SimplePose weights"
            ),
        ]
        if self.train_state is not None:
            parts.append("with a training state")
        if self.averaged:
            parts.append(f"averaged weights ({self.averaged})")
        if self.origin:
            parts.append(f"from {self.origin}")
        if self.code_version:
            parts.append(f"code {self.code_version}")
        return ", ".join(parts)

    # ------------------------------------------------------------------ into a network
    def load_into(
        self,
        model: nn.Module,
        strict: bool = True,
        other_skeleton: bool = False,
        *,
        expected_by: str = "the model",
        fix: str = LOAD_FIX,
    ) -> LoadReport:
        """Load the weights into ``model`` (a PoseNet, possibly wrapped by DDP or torch.compile): the one skeleton
        check of a load, then the weights.

        The checkpoint's keypoints (``keypoints``) must fit the model's skeleton (``config.skeleton_check``; a
        refusal says ``expected_by`` and ``fix``) unless ``other_skeleton``: then a checkpoint of another skeleton
        loads every tensor but the skeleton-dependent ones (``models.weights.SKELETON_DEPENDENT``), which keep the
        model's initialisation (``report.reinitialised``). ``strict``: any other missing, unexpected or mismatched
        key is an error naming them and the config that fits (``models.weights.load_state``)."""
        skeleton = getattr(unwrap(model), "skeleton", None)
        where = self.file or "the given checkpoint"
        reinitialise = None
        if skeleton is not None and other_skeleton:
            if difference(skeleton, self.keypoints(), "layout") is not None:
                reinitialise = SKELETON_DEPENDENT
        elif skeleton is not None:
            check_compatible(
                skeleton,
                self.keypoints(),
                where=f"checkpoint {where}",
                need="layout",
                expected_by=expected_by,
                fix=fix,
                file=self.file or None,
            )
        return load_state(
            model,
            self.model,
            where,
            strict=strict,
            reinitialise=reinitialise,
            source=self.stored_as,
            saved_model_config=self.model_settings,
        )


def _saved_config(saved: Mapping[str, Any] | None) -> tuple[Config | None, str]:
    """(the typed config, "") of a saved whole config; (None, why) when it does not parse; (None, "") without one or
    for the partial configs of early files (a model section alone, no ``eval``), which only tell the model."""
    if saved is None or "eval" not in saved:
        return None, ""
    try:
        return config_from_dict(dict(saved)), ""
    except ConfigError as e:
        return None, str(e)


def _read(path: Path) -> Any:
    """``torch.load`` a file safely (CPU, weights only); CheckpointError if it is missing, is some other kind of file
    (told by its first bytes: ``not_a_checkpoint``), is truncated or holds Python objects. PyTorch's own messages
    are not passed on where they advise loading unsafely."""
    if path.is_dir():
        inside = sorted(p.name for p in path.glob("*.pt"))
        raise CheckpointError(
            f"{path} is a folder, not a checkpoint file: give a checkpoint in it"
            + (
                f", e.g. {path / ('best.pt' if 'best.pt' in inside else inside[0])}"
                if inside
                else " (a run folder holds best.pt and last.pt)"
            ),
            file=path,
        )
    kind = existing_file_kind(path, "checkpoint", CheckpointError)
    if kind.name == "unknown" and path.suffix.lower() == ".onnx":
        kind = FileKind("onnx", "named as an ONNX model")
    if kind.name not in ("zip", "pickle", "unknown"):
        raise CheckpointError(not_a_checkpoint(path, kind), file=path)
    try:
        with warnings.catch_warnings():  # "Detected pickle protocol N ...": said by the refusal below, if any
            warnings.filterwarnings("ignore", message="Detected pickle protocol", category=UserWarning)
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        raise CheckpointError(_unpickling_message(path, kind, e), file=path) from None
    except Exception as e:  # noqa: BLE001  the unpickler of a foreign file can fail in any way (IndexError, ...)
        raise CheckpointError(_unreadable_message(path, kind, e), file=path) from None


# What to give instead, by the kind of file given where a checkpoint was expected (utils.file_kind); {convert} and
# {demo}: the commands, spelled when the message is made.
_INSTEAD = {
    "hdf5": "a dataset converted by {convert} is given to training as data.train=FILE (or data.val=FILE)",
    "onnx": "an exported network runs with {demo} or PoseEstimator.from_onnx(FILE); "
    "training and COCO evaluation take the .pt checkpoint it was exported from",
    "json": "annotations are given as --annotations FILE, a config as --config FILE",
    "text": "a config is given as --config FILE (or key=value overrides)",
    "safetensors": "this code reads PyTorch checkpoints only: load its tensors with the safetensors package and "
    "save them with torch.save(state_dict, 'weights.pt')",
    "npy": "a NumPy array is no checkpoint; save the network's state dict with torch.save(model.state_dict(), PATH)",
}
for _image in ("png", "jpeg", "gif", "tiff", "webp", "bmp"):
    _INSTEAD[_image] = "images are given to the demo as --input FILE and to the evaluation as --images FOLDER"
for _video in ("mp4", "avi", "mkv"):
    _INSTEAD[_video] = "a video is given to the demo as --input FILE"
_EXPECTED = "give a checkpoint written by training (train.out_dir/best.pt or last.pt) or the original's .pth"


def not_a_checkpoint(path: str | Path, kind: FileKind) -> str:
    """The refusal of ``path``, a file of ``kind`` given where a checkpoint belongs: what it is, where such a file is
    given, and what to give here."""
    if kind.name == "empty":
        return (
            f"{path} is empty (0 bytes), not a checkpoint: a copy or download that did not finish? Re-download "
            f"or re-save it, or {_EXPECTED}"
        )
    what = f"{path} is {kind.description}, not a PyTorch checkpoint"
    instead = _INSTEAD.get(kind.name, "").format(
        convert=command("data.coco_to_hdf5"), demo=command("evaluate.demo", "--onnx FILE")
    )
    return f"{what}: {instead}; here {_EXPECTED}" if instead else f"{what}; {_EXPECTED}"


def _unpickling_message(path: Path, kind: FileKind, e: pickle.UnpicklingError) -> str:
    """Safe loading refused the file: either it holds Python objects (names the first), or it is no pickle that
    ``torch.save`` writes."""
    found = re.search(r"GLOBAL (\S+)", str(e))
    if found:
        return (
            f"{path} holds Python objects (the first: {found.group(1).rstrip(',.')}) that safe loading "
            f"(weights_only=True) refuses, so it is not a plain checkpoint of tensors and numbers, and loading it "
            f"could run code; if the file is your own, re-save the weights alone from the program that made it: "
            f"torch.save(model.state_dict(), 'weights.pt')"
        )
    if kind.name == "pickle":
        return f"{path} is a Python pickle, but not one torch.save writes, so not a PyTorch checkpoint; {_EXPECTED}"
    return _unreadable_message(path, kind, e)


def _unreadable_message(path: Path, kind: FileKind, e: Exception) -> str:
    if kind.name == "zip":
        members = _zip_members(path)
        if members is None:
            return (
                f"{path} is truncated or corrupt: a ZIP archive (the form torch.save writes) that cannot be read "
                f"({_plain_detail(e) or type(e).__name__}); re-download or re-save it"
            )
        if not any(m.endswith("data.pkl") for m in members):
            listed = ", ".join(members[:3]) + (", ..." if len(members) > 3 else "") if members else "nothing"
            return f"{path} is a ZIP archive that is not a PyTorch checkpoint (it holds {listed}); {_EXPECTED}"
        return (
            f"{path} is truncated or corrupt and cannot be read as a PyTorch checkpoint "
            f"({_plain_detail(e) or type(e).__name__}); re-download or re-save it"
        )
    if kind.name == "pickle":
        return (
            f"{path} is truncated or corrupt: a pickle that ends before its data does "
            f"({_plain_detail(e) or type(e).__name__}); re-download or re-save it"
        )
    head = path.read_bytes()[:8].hex(" ")
    return (
        f"{path} is not a PyTorch checkpoint: its first bytes ({head}) match no format it could be (torch.save "
        f"writes a ZIP archive, older PyTorch a pickle), nor a known other kind of file; {_EXPECTED}"
    )


def _zip_members(path: Path) -> list[str] | None:
    """The names in a readable ZIP archive; None when it cannot be read (cut short, damaged)."""
    try:
        with zipfile.ZipFile(path) as z:
            return z.namelist()
    except (zipfile.BadZipFile, OSError, EOFError):
        return None


def _plain_detail(e: Exception) -> str:
    """The first sentence of PyTorch's message, unless it speaks of weights_only (whose advice is to load unsafely,
    never given here)."""
    text = str(e).strip()
    if not text or "weights_only" in text or "weights only" in text.lower():
        return ""
    return text.splitlines()[0].split(". ")[0].rstrip(".")
