"""Files a user may give where a checkpoint belongs (``--ckpt``, ``train.resume``, ``train.init_weights``,
``checkpoint.original --weights``, ``PoseEstimator.from_checkpoint``), each with what its refusal must say.

    files = make_not_checkpoints(folder, sample_dir, h5, checkpoint)   # {kind: NotACheckpoint(path, words)}

Used by tests/test_checkpoint_files.py (every kind through every entry point) and the bad-input corpus
(tests/harness/bad_inputs.py: a few of them through the real commands).
"""

from __future__ import annotations

import random
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch

from tests.paths import COCO_SAMPLE_ANNOTATIONS, TINY_PRESET

# What no refusal may say: PyTorch's advice to load the file unsafely.
UNSAFE_ADVICE = ("weights_only=False", "weights_only set to False", "`weights_only` set to `False`", "Re-running")


class InjectedObject:
    """A class instance inside a checkpoint: safe loading must refuse it (it could be any class)."""

    def __init__(self):
        self.note = "pickled class instance"


@dataclass
class NotACheckpoint:
    path: Path
    words: tuple[str, ...]  # what the refusal must contain besides the path


def _onnx_model(path: Path) -> None:
    """A real (tiny) ONNX model: one Identity node, as onnx writes it."""
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "identity", [x], [y])
    onnx.save(helper.make_model(graph, producer_name="simplepose-tests"), str(path))


def make_not_checkpoints(folder: Path, sample_dir: Path, h5: Path, checkpoint: Path) -> dict[str, NotACheckpoint]:
    """Every kind, made under ``folder`` from the COCO-format sample at ``sample_dir``, its converted ``h5`` and a
    real ``checkpoint`` (for the truncated copy and the run folder)."""
    import cv2

    folder.mkdir(parents=True, exist_ok=True)
    image = sorted((sample_dir / "images").glob("*.jpg"))[0]
    made: dict[str, NotACheckpoint] = {}

    def add(kind: str, name: str, data: bytes | None, *words: str) -> None:
        path = folder / name
        if data is not None:
            path.write_bytes(data)
        made[kind] = NotACheckpoint(path, words)

    shutil.copyfile(h5, folder / "train64.h5")
    add("hdf5", "train64.h5", None, "an HDF5 file", "data.train=")
    _onnx_model(folder / "model.onnx")
    add("onnx", "model.onnx", None, "an ONNX model", "--onnx", "PoseEstimator.from_onnx")
    add("jpeg", image.name, image.read_bytes(), "a JPEG image", "--input")
    add("png", "photo.png", cv2.imencode(".png", cv2.imread(str(image)))[1].tobytes(), "a PNG image", "--images")
    add("yaml", "tiny.yaml", Path(TINY_PRESET).read_bytes(), "a text file", "--config")
    add("json", "annotations.json", (sample_dir / COCO_SAMPLE_ANNOTATIONS).read_bytes(), "a JSON text file",
        "--annotations")  # fmt: skip
    add("random_bytes", "random.bin", random.Random(0).randbytes(4096), "first bytes")
    add("empty", "empty.pt", b"", "empty (0 bytes)")
    data = checkpoint.read_bytes()
    add("truncated", "truncated.pt", data[: len(data) // 2], "truncated or corrupt", "re-download or re-save")
    torch.save({"model": {"w": torch.zeros(2)}, "extra": InjectedObject()}, folder / "object.pt")
    add("python_objects", "object.pt", None, "Python objects", "InjectedObject")
    (folder / "run").mkdir(exist_ok=True)
    shutil.copyfile(checkpoint, folder / "run" / "best.pt")
    add("folder", "run", None, "is a folder", str(folder / "run" / "best.pt"))
    return made
