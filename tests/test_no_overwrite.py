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
from simplepose.utils.io import WriteError, check_writable
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


OUT_SUFFIX = {"export": ".onnx"}  # the name a command requires of its --out (export refuses any other)


@pytest.mark.parametrize("name", ["converter", "evaluator", "export", "conversion"])
def test_an_existing_out_file_is_kept_unless_overwrite(name, commands, tmp_path, capsys):
    main, args = commands[name]
    out = tmp_path / f"earlier_result{OUT_SUFFIX.get(name, '')}"
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


@pytest.mark.parametrize("name", ["converter", "evaluator", "export", "conversion"])
def test_a_failed_start_leaves_no_empty_out_folder(name, commands, tmp_path, capsys):
    main, args = commands[name]
    i = next(i for i, a in enumerate(args) if a in ("--images", "--ckpt", "--weights"))
    args = [*args[: i + 1], str(tmp_path / "missing"), *args[i + 2 :]]  # its input (images, checkpoint...) missing
    assert main([*args, "--out", str(tmp_path / "new" / "deeper" / f"result{OUT_SUFFIX.get(name, '')}")]) == 2
    assert "missing" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()


def test_the_writable_check_leaves_nothing_and_names_a_file_in_the_way(tmp_path):
    check_writable(tmp_path / "a" / "b", "--out")  # proved writable, then removed again: made when written
    assert sorted(tmp_path.iterdir()) == []
    (tmp_path / "results.json").write_text("[]")
    with pytest.raises(WriteError, match=r"^--out .*results\.json is a file, not a folder: name a folder"):
        check_writable(tmp_path / "results.json", "--out")
    with pytest.raises(WriteError, match=r"a part of the path is a file, not a folder"):
        check_writable(tmp_path / "results.json" / "below")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]
