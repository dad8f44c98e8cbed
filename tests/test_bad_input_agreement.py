"""The converter and the evaluator agree on what is bad (data/image_files.py, data/coco_annotations.py): an
annotation of an unlisted image, a truncated image and a missing file give the same counted warnings in both with
--skip-bad, and the same refusal without it; --skip-bad that skips most images stops both, naming the images
folder."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys

import pytest

from config.loader import load_config
from data.coco_to_hdf5 import Source, convert
from data.image_files import ImageFileError
from evaluate import coco_eval
from utils.errors import AnnotationError, UserError
from utils.paths import REPO_ROOT


@pytest.fixture
def flawed(synthetic_coco, tmp_path):
    """The synthetic train set (9 images) in a private folder, one image truncated, one missing, and one annotation
    of an image id the file does not list: (annotations, images, truncated name, missing name)."""
    data = json.loads((synthetic_coco / "annotations" / "person_keypoints_train.json").read_text())
    images = tmp_path / "images"
    shutil.copytree(synthetic_coco / "images", images)
    truncated, missing = data["images"][1]["file_name"], data["images"][2]["file_name"]
    (images / truncated).write_bytes((images / truncated).read_bytes()[:3000])
    (images / missing).unlink()
    stray = next(a for a in data["annotations"] if a["num_keypoints"] > 0)
    data["annotations"].append({**stray, "id": 10**8, "image_id": 424242})
    path = tmp_path / "train.json"
    path.write_text(json.dumps(data))
    return path, images, truncated, missing


def warnings(caplog) -> list[str]:
    return sorted(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)


ORACLE = ["eval.scales=[1.0]", "eval.flip=false"]


def test_the_same_checks_give_the_same_counted_warnings(flawed, tmp_path, caplog):
    path, images, truncated, missing = flawed
    with caplog.at_level(logging.WARNING):
        settings = convert([Source(images, path)], tmp_path / "out.h5", 64, skip_bad=True, progress=False)
    converter = warnings(caplog)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        cfg = load_config(None, [*ORACLE, "eval.skip_bad=true"])
        stats, summary = coco_eval.evaluate_oracle(images, path, cfg, progress=False)
    evaluator = warnings(caplog)
    assert converter == evaluator and len(converter) == 3, (converter, evaluator)
    text = "\n".join(converter)
    assert "424242" in text and truncated in text and missing in text and "truncated" in text
    assert len(settings["skipped"]) == 3
    assert "2 images left out of the evaluation as bad" in summary and stats["AP"] > 0.5

    # without --skip-bad: both refuse, for the annotation first (read before any image)
    with pytest.raises(AnnotationError) as c:
        convert([Source(images, path)], tmp_path / "out2.h5", 64, progress=False)
    with pytest.raises(AnnotationError) as e:
        coco_eval.evaluate_oracle(images, path, load_config(None, ORACLE), progress=False)
    assert (c.value.key, c.value.image_id) == (e.value.key, e.value.image_id) == ("image_id", 424242)
    data = json.loads(path.read_text())
    data["annotations"].pop()
    path.write_text(json.dumps(data))
    with pytest.raises(UserError) as c:  # the converter lists missing files before any work
        convert([Source(images, path)], tmp_path / "out2.h5", 64, progress=False)
    with pytest.raises(ImageFileError) as e:
        coco_eval.evaluate_oracle(images, path, load_config(None, ORACLE), progress=False)
    assert missing in str(c.value) and e.value.reason in ("missing", "truncated or corrupt JPEG (it does not decode to "
                                                          "its end)")  # fmt: skip


@pytest.mark.parametrize("command", ["convert", "evaluate"])
def test_skip_bad_with_the_wrong_folder_stops_naming_it(command, synthetic_coco, tmp_path):
    wrong = tmp_path / "not_the_images"
    wrong.mkdir()
    annotations = synthetic_coco / "annotations" / "person_keypoints_train.json"
    args = ["--images", str(wrong), "--annotations", str(annotations), "--skip-bad"]
    if command == "convert":
        cmd = ["-m", "data.coco_to_hdf5", *args, "--out", str(tmp_path / "out.h5"), "--no-progress"]
    else:
        cmd = ["-m", "evaluate.coco_eval", "--from-ground-truth", *args, *ORACLE]
    proc = subprocess.run([sys.executable, *cmd], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"--images ({wrong})" in proc.stderr and "of 9 images were skipped" in proc.stderr, proc.stderr
    assert not (tmp_path / "out.h5").exists()


def test_the_demo_counts_and_skips_an_unreadable_file(tiny_ckpt, synthetic_coco, tmp_path, capsys):
    from evaluate import demo

    folder = tmp_path / "photos"
    folder.mkdir()
    for path in sorted((synthetic_coco / "images").glob("*.jpg"))[:2]:
        shutil.copy(path, folder / path.name)
    (folder / "broken.jpg").write_bytes(b"\xff\xd8 not really a JPEG")
    out = tmp_path / "demo.json"
    assert demo.main(["--ckpt", str(tiny_ckpt), "--input", str(folder), "--json", str(out), *ORACLE]) == 0
    printed = capsys.readouterr().out
    assert "broken.jpg: skipped, not an image" in printed and "1 of 3 files skipped as unreadable" in printed
    assert isinstance(json.loads(out.read_text()), list)
    (folder / "broken.jpg").rename(folder / "only.jpg")
    for path in folder.glob("0*.jpg"):
        path.unlink()
    again = tmp_path / "again.json"  # a new name: the demo replaces no earlier result
    assert demo.main(["--ckpt", str(tiny_ckpt), "--input", str(folder), "--json", str(again), *ORACLE]) == 2
    assert "none of the 1 image files could be read" in capsys.readouterr().err


@pytest.mark.parametrize("given, named", [(None, "None, not an image (cv2.imread returns None"),
                                          (3.5, "is a float"), (b"\x00" * 3, "is a bytes")])  # fmt: skip
def test_the_api_names_what_it_was_given(given, named, tiny_ckpt):
    from evaluate.predictor import PoseEstimator

    estimator = PoseEstimator.from_checkpoint(tiny_ckpt, "cpu", scales=[1.0], flip=False)
    with pytest.raises(UserError) as e:
        estimator(given)
    assert named in str(e.value) and e.value.key == "image"
