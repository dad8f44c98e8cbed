"""A file that is not a checkpoint, given where one belongs, is refused with one message that says what the file is
and what to give instead (engine/checkpoint.py, utils/file_kind.py), through every entry point that reads a checkpoint:
evaluate --ckpt, PoseEstimator.from_checkpoint, train.resume, train.init_weights, checkpoint.original. No message
passes on PyTorch's advice to load it unsafely."""

from __future__ import annotations

import warnings

import pytest

from simplepose.checkpoint import original as convert_original
from simplepose.checkpoint.format import CheckpointError
from simplepose.engine.trainer import Trainer
from simplepose.evaluate import coco_eval
from simplepose.evaluate.estimator import PoseEstimator
from simplepose.utils.file_kind import file_kind, kind_of
from tests.harness.not_checkpoints import UNSAFE_ADVICE, make_not_checkpoints
from tests.helpers import tiny_cfg
from tests.paths import COCO_SAMPLE_ANNOTATIONS

KINDS = ("hdf5", "onnx", "jpeg", "png", "yaml", "json", "random_bytes", "empty", "truncated", "python_objects",
         "folder")  # fmt: skip
ENTRY_POINTS = ("--ckpt", "PoseEstimator.from_checkpoint", "train.resume", "train.init_weights",
                "checkpoint.original")  # fmt: skip


@pytest.fixture(scope="module")
def files(synthetic_sample, synthetic_h5_64, tiny_ckpt, tmp_path_factory):
    return make_not_checkpoints(tmp_path_factory.mktemp("not_checkpoints"), synthetic_sample, synthetic_h5_64,
                                tiny_ckpt)  # fmt: skip


def refusal(entry: str, path, synthetic_sample, synthetic_h5_64, tmp_path, capsys) -> str:
    """The message ``entry`` gives for ``path`` (a command: its one error line, exit status 2)."""
    if entry in ("--ckpt", "checkpoint.original"):
        if entry == "--ckpt":
            rc = coco_eval.main(["--ckpt", str(path), "--images", str(synthetic_sample / "images"), "--annotations",
                                 str(synthetic_sample / COCO_SAMPLE_ANNOTATIONS), "--device", "cpu"])  # fmt: skip
        else:
            rc = convert_original.main(["--weights", str(path), "--out", str(tmp_path / "converted.pt")])
            assert not (tmp_path / "converted.pt").exists()
        err = capsys.readouterr().err
        errors = [line for line in err.splitlines() if line.startswith("error: ")]
        assert rc == 2 and "Traceback" not in err and len(errors) == 1, err
        return errors[0]
    with pytest.raises(CheckpointError) as e:
        if entry == "PoseEstimator.from_checkpoint":
            PoseEstimator.from_checkpoint(path, device="cpu")
        else:
            Trainer(tiny_cfg(synthetic_h5_64, tmp_path / "run", f"{entry}={path}"))
    assert e.value.file == str(path)
    return str(e.value)


@pytest.mark.parametrize("entry", ENTRY_POINTS)
@pytest.mark.parametrize("kind", KINDS)
def test_a_file_that_is_no_checkpoint_is_refused_saying_what_it_is(files, kind, entry, synthetic_sample,
                                                                   synthetic_h5_64, tmp_path, capsys):  # fmt: skip
    given = files[kind]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        message = refusal(entry, given.path, synthetic_sample, synthetic_h5_64, tmp_path, capsys)
    assert str(given.path) in message
    for word in given.words:
        assert word in message, (word, message)
    for advice in UNSAFE_ADVICE:
        assert advice not in message
        assert not [w for w in caught if advice in str(w.message) or "weights_only" in str(w.message)]
    assert "\n" not in message  # one line


def test_the_kinds_are_told_by_their_bytes_not_their_names(files, tmp_path):
    for kind, given in files.items():
        if kind not in ("folder", "truncated", "python_objects", "random_bytes"):
            renamed = tmp_path / f"{kind}.pt"
            renamed.write_bytes(given.path.read_bytes())
            assert file_kind(renamed) == file_kind(given.path) and file_kind(renamed).name not in ("unknown", "zip")
    assert file_kind(files["truncated"].path).name == "zip"  # torch.save's form: read by torch, refused on failure
    assert kind_of(b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8").name == "pickle"  # an older torch.save
    assert kind_of(bytes(range(256))).name == "unknown"
