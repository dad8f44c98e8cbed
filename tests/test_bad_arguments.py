"""Slips at the command line, each answered by one line that names the setting or option and the fix, before
anything is written (issue 61): a malformed ``train.freeze``, a JPEG as ``data.train``, a skeleton file as
``--config``, ``--images`` and ``--annotations`` swapped, a list split by the shell, the demo's ``--min-score``
outside [0, 1], ``export --out`` without ``.onnx``, annotations in another skeleton's keypoints for an evaluation
(the fix: ``map-keypoints``), and ``~`` in a path wherever one is read."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from simplepose import train
from simplepose.config.config_file import load_config
from simplepose.config.skeleton_file import load_skeleton
from simplepose.data import coco_to_hdf5, map_keypoints
from simplepose.evaluate import coco_eval, demo, export_onnx
from simplepose.evaluate.metrics.annotations import load_ground_truth
from simplepose.utils.errors import UserError
from simplepose.utils.user_paths import expand_home
from tests.paths import REPO_ROOT


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: "), err
    return err


def train_refuses(tmp_path: Path, capsys, *argv: str) -> str:
    """``train``'s one line for ``argv``; nothing written in ``tmp_path`` (its out_dir's parent)."""
    out = tmp_path / "run"
    assert train.main([*argv, f"train.out_dir={out}"]) == 2
    assert not out.exists()
    return one_error_line(capsys)


def test_a_malformed_freeze_pattern_names_the_setting(tmp_path, capsys, synthetic_h5_64):
    err = train_refuses(tmp_path, capsys, "--config", "tiny", f"data.train={synthetic_h5_64}", "train.freeze=[(abc]")
    assert "train.freeze: '(abc' is not a regular expression" in err and "train.freeze=['^(?!" in err


def test_a_jpeg_as_the_training_file_is_named_as_an_image(tmp_path, capsys, synthetic_sample_images):
    image = sorted(synthetic_sample_images.iterdir())[0]
    err = train_refuses(tmp_path, capsys, "--config", "tiny", f"data.train={image}")
    assert f"{image} is a JPEG image, not an HDF5 training file" in err
    assert "--images DIR --annotations FILE.json --out FILE.h5" in err


def test_a_skeleton_file_as_config_is_pointed_to_data_skeleton(tmp_path, capsys):
    skeleton = REPO_ROOT / "config" / "skeletons" / "coco.yaml"
    err = train_refuses(tmp_path, capsys, "--config", str(skeleton))
    assert f"--config {skeleton} is a skeleton file, not a config: give it as data.skeleton={skeleton}" in err


@pytest.mark.parametrize("words", [["train.freeze=[a,", "b]"], ["eval.scales=[0.5,", "1.0,", "2.0]"]])
def test_a_list_the_shell_split_at_a_space_says_to_quote_it(words):
    with pytest.raises(UserError) as e:
        load_config("tiny", words)
    whole = f"{words[0]} {words[1]}"
    assert str(e.value).startswith(f"{whole}: the shell split this list at its space; quote it ('{whole}')")
    assert f"({whole.replace(' ', '')})" in str(e.value)


def test_images_and_annotations_swapped_are_named_as_such(tmp_path, capsys, synthetic_sample):
    images, annotations = synthetic_sample / "images", next((synthetic_sample / "annotations").glob("*.json"))
    out = tmp_path / "x.h5"
    assert coco_to_hdf5.main(["--images", str(annotations), "--annotations", str(images), "--out", str(out)]) == 2
    err = one_error_line(capsys)
    assert f"--images {annotations} is a JSON text file, not a folder of images (the annotations?" in err
    assert coco_to_hdf5.main(["--images", str(images), "--annotations", str(images), "--out", str(out)]) == 2
    assert f"--annotations {images} is a folder (the images?" in one_error_line(capsys)
    argv = ["--from-ground-truth", "--images", str(annotations), "--annotations", str(images)]
    assert coco_eval.main(argv) == 2
    assert "is a JSON text file, not a folder of images (the annotations?" in one_error_line(capsys)
    assert not out.exists()


@pytest.mark.parametrize("score", ["2", "-0.1", "nan"])
def test_the_demos_min_score_is_a_score(score, tmp_path, capsys, synthetic_sample_images):
    out = tmp_path / "demo"
    argv = ["--onnx", "x.onnx", "--input", str(synthetic_sample_images), "--out", str(out), "--min-score", score]
    assert demo.main(argv) == 2
    assert "--min-score is a person's score, in [0, 1]" in one_error_line(capsys) and not out.exists()


def test_export_writes_onnx_under_an_onnx_name_only(tmp_path, capsys, tiny_ckpt):
    out = tmp_path / "model.pt"
    assert export_onnx.main(["--ckpt", str(tiny_ckpt), "--out", str(out)]) == 2
    assert f"--out {out}: an ONNX file is named *.onnx: e.g. --out {tmp_path / 'model.onnx'}" in one_error_line(capsys)
    assert list(tmp_path.iterdir()) == []


def test_annotations_of_another_skeleton_point_to_map_keypoints(synthetic_crowdpose, tmp_path):
    """An evaluation's (and a run's validation) skeleton is the model's: the fix is the annotations mapped onto
    it, and the command the message gives does that."""
    source = tmp_path / "crowdpose_val.json"
    shutil.copyfile(synthetic_crowdpose / "annotations" / "person_keypoints_val.json", source)
    coco = load_skeleton("coco")
    with pytest.raises(UserError) as e:
        load_ground_truth(source, coco, load_config("tiny").eval)
    mapped = tmp_path / "crowdpose_val_coco.json"
    assert f"--annotations {source} --skeleton coco --out {mapped}" in str(e.value), str(e.value)
    assert map_keypoints.main(["--annotations", str(source), "--skeleton", "coco", "--out", str(mapped)]) == 0
    truth = load_ground_truth(mapped, coco, load_config("tiny").eval)
    assert len(truth.images) == len(json.loads(source.read_text())["images"])


# --------------------------------------------------------------------------------------------------- ~ in a path
def test_a_home_relative_word_is_expanded(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    for word, expected in (
        ("~/a.pt", f"{tmp_path}/a.pt"),
        ("~", str(tmp_path)),
        ("--ckpt=~/a.pt", f"--ckpt={tmp_path}/a.pt"),
        ("data.train=~/x.h5", f"data.train={tmp_path}/x.h5"),
        ("a~b", "a~b"),
        ("eval.scales=[1.0]", "eval.scales=[1.0]"),
        ("--input=0", "--input=0"),
    ):
        assert expand_home(word) == expected


def test_home_in_a_command_and_in_a_config_file_is_expanded(monkeypatch, tmp_path, capsys, synthetic_sample_images):
    monkeypatch.setenv("HOME", str(tmp_path))
    image = sorted(synthetic_sample_images.iterdir())[0]
    shutil.copyfile(image, tmp_path / "photo.jpg")
    err = train_refuses(tmp_path, capsys, "--config", "~/nope.yaml")
    assert f"--config {tmp_path}/nope.yaml: no such file" in err
    err = train_refuses(tmp_path, capsys, "--config", "tiny", "data.train=~/photo.jpg")
    assert f"{tmp_path}/photo.jpg is a JPEG image" in err
    (tmp_path / "mine.yaml").write_text("train:\n  out_dir: ~/runs/mine\ndata:\n  train_sources: [~/a.h5, b.h5]\n")
    cfg = load_config(tmp_path / "mine.yaml")
    assert cfg.train.out_dir == f"{tmp_path}/runs/mine" and cfg.data.train_sources == [f"{tmp_path}/a.h5", "b.h5"]
