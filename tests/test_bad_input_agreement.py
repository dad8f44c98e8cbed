"""The converter and the evaluator agree on what is bad (data/image_files.py, data/coco_annotations.py): an
annotation of an unlisted image, a truncated image and a missing file give the same counted warnings in both with
--skip-bad, and the same refusal without it; --skip-bad that skips most images stops both, naming the images
folder. On the real COCO sample's annotations (and the synthetic sample's): ids of any size and string annotation
ids are kept by both, other ids, a file without labelled people and keypoint names that are not a list are refused
by both with the same message, and the converter takes the input sizes training takes."""

from __future__ import annotations

import copy
import json
import logging
import shutil
import subprocess
import sys

import h5py
import pytest

from simplepose.config.config_file import ConfigError, load_config
from simplepose.config.skeleton_file import load_skeleton
from simplepose.data.conversion import Source, convert
from simplepose.data.image_files import ImageFileError
from simplepose.data.main_person import main_person_indices
from simplepose.evaluate.evaluation import evaluate_oracle
from simplepose.utils.errors import AnnotationError, UserError
from tests.harness.bad_inputs import ids_past_int64, string_annotation_ids, without_labelled_people, without_main_people
from tests.paths import COCO_SAMPLE_ANNOTATIONS, REPO_ROOT, TINY_PRESET


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
        stats, summary = evaluate_oracle(images, path, cfg, progress=False)
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
        evaluate_oracle(images, path, load_config(None, ORACLE), progress=False)
    assert (c.value.key, c.value.image_id) == (e.value.key, e.value.image_id) == ("image_id", 424242)
    data = json.loads(path.read_text())
    data["annotations"].pop()
    path.write_text(json.dumps(data))
    with pytest.raises(UserError) as c:  # the converter lists missing files before any work
        convert([Source(images, path)], tmp_path / "out2.h5", 64, progress=False)
    with pytest.raises(ImageFileError) as e:
        evaluate_oracle(images, path, load_config(None, ORACLE), progress=False)
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
    from simplepose.evaluate import demo

    folder = tmp_path / "photos"
    folder.mkdir()
    for path in sorted((synthetic_coco / "images").glob("*.jpg"))[:2]:
        shutil.copy(path, folder / path.name)
    (folder / "broken.jpg").write_bytes(b"\xff\xd8 not really a JPEG")
    out = tmp_path / "demo.json"
    assert demo.main(["--ckpt", str(tiny_ckpt), "--input", str(folder), "--json", str(out), *ORACLE]) == 0
    printed = capsys.readouterr()
    assert "broken.jpg: skipped, not an image" in printed.err and "1 of 3 files skipped as unreadable" in printed.out
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
    from simplepose.evaluate.estimator import PoseEstimator

    estimator = PoseEstimator.from_checkpoint(tiny_ckpt, "cpu", scales=[1.0], flip=False)
    with pytest.raises(UserError) as e:
        estimator(given)
    assert named in str(e.value) and e.value.key == "image"


# ---- issue 27: the same decision on ids, files without labelled people, keypoint names and input sizes

COCO = load_skeleton("coco")


@pytest.fixture(scope="module")
def three(sample, tmp_path_factory):
    """(annotations dict, images folder) of the sample's first three images with a main person (real COCO photos and
    their real annotations, and the synthetic sample's)."""
    data = json.loads((sample / COCO_SAMPLE_ANNOTATIONS).read_text())
    by_image = {img["id"]: [a for a in data["annotations"] if a["image_id"] == img["id"]] for img in data["images"]}
    keep = [img for img in data["images"] if main_person_indices(by_image[img["id"]])][:3]
    data["images"] = keep
    data["annotations"] = [a for img in keep for a in by_image[img["id"]]]
    return data, sample / "images"


def convert_decision(data: dict, images, tmp_path, input_size: int = 64) -> tuple[UserError | None, object]:
    """(the converter's refusal or None, the written file's path or None)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "annotations.json"
    path.write_text(json.dumps(data))
    out = tmp_path / "out.h5"
    try:
        convert([Source(images, path)], out, input_size, progress=False)
    except UserError as e:
        assert not out.exists()
        return e, None
    return None, out


def evaluate_decision(data: dict, images, tmp_path) -> tuple[UserError | None, tuple | None]:
    """(the evaluator's refusal or None, (its oracle stats, its results JSON) when it accepts)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "annotations_eval.json"
    path.write_text(json.dumps(data))
    out = tmp_path / "results.json"
    try:
        stats, _ = evaluate_oracle(images, path, load_config(None, ORACLE), out, progress=False)
    except UserError as e:
        return e, None
    return None, (stats, json.loads(out.read_text()))


def _set(data: dict, where: str, **values) -> dict:
    (data["images"] if where == "image" else data["annotations"])[0].update(values)
    return data


def _string_image_id(data: dict) -> dict:
    old = data["images"][0]["id"]
    data["images"][0]["id"] = "img-0"
    for ann in data["annotations"]:
        ann["image_id"] = "img-0" if ann["image_id"] == old else ann["image_id"]
    return data


def _twice(data: dict) -> dict:
    data["annotations"][0]["id"] = data["annotations"][1]["id"] = "ann-a"
    return data


REFUSED = {  # edit -> (the field the refusal names, what the message says)
    "an annotation id 1.5": (lambda d: _set(d, "ann", id=1.5), "id", "'id' must be an integer or a string"),
    "an annotation id true": (lambda d: _set(d, "ann", id=True), "id", "got bool True"),
    "an annotation id that is a list": (lambda d: _set(d, "ann", id=[1]), "id", "got list [1]"),
    "a string image id": (_string_image_id, "id", "image 'id' must be an integer (of any size), got 'img-0'"),
    "one string annotation id twice": (_twice, "id", "annotation id 'ann-a' appears twice"),
    "no labelled person": (without_labelled_people, "keypoints", "has no labelled person: 0 of"),
    "keypoint names as one comma-separated string": (
        lambda d: d["categories"][0].update(keypoints=",".join(COCO.dataset_keypoints)) or d, "categories.keypoints",
        "categories[0].keypoints (category id 1) must be a list of keypoint names (strings), got a string 'nose,"),
    "keypoint names that are numbers": (
        lambda d: d["categories"][0].update(keypoints=list(range(17))) or d, "categories.keypoints",
        "categories[0].keypoints (category id 1) must be a list of keypoint names (strings), got list [0, 1"),
    "'categories' that is an object": (lambda d: d.update(categories={"id": 1}) or d, "categories",
                                       "'categories' must be a list of objects, got dict"),
}  # fmt: skip


@pytest.mark.parametrize("edit", REFUSED)
def test_both_refuse_the_same_files_with_the_same_message(edit, three, tmp_path):
    change, key, said = REFUSED[edit]
    data = change(copy.deepcopy(three[0]))
    converter, _ = convert_decision(data, three[1], tmp_path)
    evaluator, _ = evaluate_decision(data, three[1], tmp_path)
    assert isinstance(converter, AnnotationError) and isinstance(evaluator, AnnotationError), (converter, evaluator)
    assert (converter.key, converter.annotation_id, converter.image_id) == (
        evaluator.key, evaluator.annotation_id, evaluator.image_id) and converter.key == key  # fmt: skip
    # the same words up to the advice, which names each command's own way out
    what = [str(e).split(": ", 1)[1].split("; ")[0] for e in (converter, evaluator)]
    assert what[0] == what[1] and said in str(converter), what
    assert "annotations.json" in str(converter) and "annotations_eval.json" in str(evaluator)


def test_a_file_without_labelled_people_says_what_it_holds_and_each_way_out(three, tmp_path):
    data = without_labelled_people(copy.deepcopy(three[0]))
    converter, _ = convert_decision(data, three[1], tmp_path)
    evaluator, _ = evaluate_decision(data, three[1], tmp_path)
    n = len(data["annotations"])
    for e in (converter, evaluator):
        assert f"0 of {n} person annotations (category id 1) have labelled keypoints" in str(e), str(e)
    assert "person_keypoints_*.json" in str(converter)
    # scoring it would give -1 everywhere (pycocotools ignores people without keypoints): the evaluator says so
    assert "every figure would be -1" in str(evaluator) and "--image-info" in str(evaluator)


ACCEPTED = {"string annotation ids": string_annotation_ids, "ids past +-2**63": ids_past_int64}


@pytest.mark.parametrize("edit", ACCEPTED)
def test_both_keep_ids_the_file_gives_and_score_them_alike(edit, three, tmp_path):
    """String annotation ids and integers past int64 are accepted by both, kept as given in the HDF5 file (its
    file_id datasets), in the results JSON (image ids), and scored as the unedited file is."""
    from simplepose.data.h5_format import file_ids

    data = ACCEPTED[edit](copy.deepcopy(three[0]))
    converter, h5 = convert_decision(data, three[1], tmp_path / "edited")
    evaluator, (stats, results) = evaluate_decision(data, three[1], tmp_path / "edited")
    assert converter is None and evaluator is None
    with h5py.File(h5) as f:
        stored_images, stored_people = file_ids(f, "images/id"), file_ids(f, "people/annotation_id")
    assert stored_images == [img["id"] for img in data["images"]]
    assert stored_people == [a["id"] for a in data["annotations"]]  # images and their annotations in file order
    assert {r["image_id"] for r in results} == {img["id"] for img in data["images"]}
    _, (plain, _) = evaluate_decision(three[0], three[1], tmp_path / "plain")
    assert stats == pytest.approx(plain, abs=1e-9) and stats["AP"] > 0.5


def test_labelled_people_that_make_no_sample_stop_the_converter_but_are_scored(three, tmp_path):
    """People with 1-4 labelled keypoints: no training sample (a main person needs 5), but real ground truth for the
    evaluation, which scores them (not -1)."""
    data = without_main_people(copy.deepcopy(three[0]))
    converter, _ = convert_decision(data, three[1], tmp_path)
    evaluator, (stats, _) = evaluate_decision(data, three[1], tmp_path)
    labelled = sum(a["num_keypoints"] > 0 and not a["iscrowd"] for a in data["annotations"])
    assert isinstance(converter, UserError) and "would hold no training sample" in str(converter)
    assert f"{labelled} have labelled keypoints, 0 at least 5" in str(converter), str(converter)
    assert evaluator is None and stats["AP"] > 0.5


@pytest.mark.parametrize("size", [100, 0, 32, 200])
def test_the_converter_takes_the_input_sizes_training_takes(size, three, tmp_path):
    converter, _ = convert_decision(three[0], three[1], tmp_path, input_size=size)
    with pytest.raises(ConfigError) as trained:
        load_config(TINY_PRESET, [f"data.input_size={size}"])
    assert isinstance(converter, ConfigError) and converter.key == "--input-size"
    assert str(converter).replace("--input-size", "data.input_size") == str(trained.value)
    assert "valid sizes: 64, 128, 192, 256, 320, 384, 448, 512" in str(converter)


def test_an_input_size_of_192_converts_and_trains(three, tmp_path):
    from simplepose.data.dataset import SimplePoseDataset

    converter, h5 = convert_decision(three[0], three[1], tmp_path, input_size=192)
    assert converter is None
    item = SimplePoseDataset(h5, load_config(TINY_PRESET, ["data.input_size=192"]), train=True)[0]
    assert item["image"].shape == (3, 192, 192)
