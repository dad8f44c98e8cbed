"""No command replaces an earlier result silently: an existing ``--out`` file stops the converter, the evaluator,
the ONNX export and the weight conversion before any work, naming the file and ``--overwrite``, and the file is
left byte for byte; with ``--overwrite`` it is replaced. The synthetic set and video generators do the same for the
files they would write in their ``--out`` folder. (Training: tests/test_run_folder.py; the demo:
tests/test_eval_demo.py.)"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

from simplepose.checkpoint import original as convert_original
from simplepose.data import coco_to_hdf5, synthetic, synthetic_video
from simplepose.evaluate import coco_eval, export_onnx
from tests.paths import COCO_SAMPLE_ANNOTATIONS
from tests.test_model_weights import tiny_original


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def commands(synthetic_sample, tiny_ckpt, tmp_path):
    """Each command's argument list writing ``--out OUT`` (placed by the test)."""
    images, annotations = synthetic_sample / "images", synthetic_sample / COCO_SAMPLE_ANNOTATIONS
    original = tmp_path / "PoseNet_original.pth"
    torch.save({"weights": tiny_original()}, original)
    return {
        "converter": (coco_to_hdf5.main, ["--images", str(images), "--annotations", str(annotations),
                                          "--input-size", "64", "--no-progress"]),
        "evaluator": (coco_eval.main, ["--from-ground-truth", "--images", str(images), "--annotations",
                                       str(annotations), "eval.scales=[1.0]", "eval.flip=false", "eval.max_images=2"]),
        "export": (export_onnx.main, ["--ckpt", str(tiny_ckpt), "--input-size", "64"]),
        "conversion": (convert_original.main, ["--weights", str(original)]),
    }  # fmt: skip


@pytest.mark.parametrize("name", ["converter", "evaluator", "export", "conversion"])
def test_an_existing_out_file_is_kept_unless_overwrite(name, commands, tmp_path, capsys):
    main, args = commands[name]
    out = tmp_path / "earlier_result"
    out.write_bytes(b"an earlier run's result")
    before = digest(out)
    assert main([*args, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{out} exists" in err and "--overwrite" in err and "Traceback" not in err
    assert digest(out) == before
    assert main([*args, "--out", str(out), "--overwrite"]) == 0
    assert digest(out) != before


@pytest.mark.parametrize(
    "main, args, earlier",
    [
        (synthetic.main, ["--num-images", "2"], "annotations/person_keypoints_val.json"),
        (synthetic.main, ["--num-images", "2"], "images/000000000001.jpg"),  # a folder of the user's pictures
        (synthetic_video.main, ["--frames", "2", "--people", "1"], "annotations.json"),
    ],
)
def test_the_synthetic_generators_keep_an_earlier_set_unless_overwrite(main, args, earlier, tmp_path, capsys):
    out = tmp_path / "set"
    (out / earlier).parent.mkdir(parents=True)
    (out / earlier).write_bytes(b"an earlier run's file")
    before = digest(out / earlier)
    assert main([*args, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "exists" in err and "--overwrite" in err and "Traceback" not in err
    assert digest(out / earlier) == before and sorted(p.name for p in out.rglob("*") if p.is_file()) == [
        Path(earlier).name
    ]  # nothing else written either
    assert main([*args, "--out", str(out), "--overwrite"]) == 0
    assert (out / "annotations.json").is_file() or (out / "annotations" / "person_keypoints_train.json").is_file()
