"""``python -m data.map_keypoints`` and ``data.annotation_mapping.map_annotation_file``: a person-keypoints file's
keypoints put onto another skeleton by name, on synthetic CrowdPose- and COCO-style files (no dataset's own file)."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from simplepose.config.schema import EvalConfig
from simplepose.config.skeleton_file import load_skeleton
from simplepose.data import coco_to_hdf5, map_keypoints
from simplepose.data.annotation_mapping import map_annotation_file
from simplepose.data.command_options import SKELETON_FORMS
from simplepose.evaluate.metrics.annotations import load_ground_truth
from simplepose.utils.errors import AnnotationError, UserError

COCO = load_skeleton("coco")
CROWDPOSE = load_skeleton("crowdpose")
SHARED = [n for n in CROWDPOSE.dataset_keypoints if n in COCO.dataset_keypoints]


def person(ann_id: int, image_id: int, names, seed: int, iscrowd: int = 0) -> dict:
    """An annotation whose keypoint k (of ``names``) is at (100 + 10 k + seed, 200 + k), visible or occluded by turn,
    with the last one unlabelled."""
    kp = []
    for k in range(len(names)):
        kp += [100 + 10 * k + seed, 200 + k, 2 - k % 2] if k < len(names) - 1 else [0, 0, 0]
    return {
        "id": ann_id,
        "image_id": image_id,
        "category_id": 1,
        "iscrowd": iscrowd,
        "bbox": [50.0, 60.0, 200.0, 300.0],
        "area": 31800.0,
        "segmentation": [[50, 60, 250, 60, 250, 360, 50, 360]],
        "keypoints": kp,
        "num_keypoints": len(names) - 1,
        "note": f"person {ann_id}",
    }


def dataset(names, skeleton_edges=None) -> dict:
    """A tiny file in CrowdPose's style: two images (each with a crowdIndex), three people, one crowd region."""
    crowd = person(4, 2, names, 0, iscrowd=1)
    crowd["keypoints"] = [0] * (3 * len(names))
    crowd["num_keypoints"] = 0
    crowd["segmentation"] = {"counts": [1000, 500, 305700], "size": [480, 640]}  # uncompressed RLE, as COCO's crowds
    return {
        "info": {"description": "synthetic"},
        "images": [
            {"id": 1, "file_name": "a.jpg", "width": 640, "height": 480, "crowdIndex": 0.25},
            {"id": 2, "file_name": "b.jpg", "width": 640, "height": 480, "crowdIndex": 0.75},
        ],
        "annotations": [person(1, 1, names, 0), person(2, 1, names, 3), person(3, 2, names, 5), crowd],
        "categories": [
            {
                "id": 1,
                "name": "person",
                "supercategory": "person",
                "keypoints": list(names),
                "skeleton": skeleton_edges if skeleton_edges is not None else [[1, 2]],
            }
        ],
        "extra": {"kept": True},
    }


def keypoints_of(ann: dict, n: int) -> np.ndarray:
    return np.asarray(ann["keypoints"]).reshape(n, 3)


def test_crowdpose_onto_coco_puts_each_shared_keypoint_at_its_coco_index():
    data = dataset(CROWDPOSE.dataset_keypoints)
    before = copy.deepcopy(data)
    mapped, mapping = map_annotation_file(data, COCO, "crowd.json")
    assert data == before  # the input is not changed
    assert len(SHARED) == 12
    assert mapped["categories"][0]["keypoints"] == list(COCO.dataset_keypoints)
    assert mapped["categories"][0]["skeleton"][:2] == [[16, 14], [14, 12]]  # COCO's own, 1-based
    assert mapping.missing == ("nose", "left_eye", "right_eye", "left_ear", "right_ear")
    assert mapping.dropped == ("head", "neck")
    for src, out in zip(data["annotations"], mapped["annotations"]):
        a, b = keypoints_of(src, 14), keypoints_of(out, 17)
        for name in SHARED:
            assert (b[COCO.dataset_keypoints.index(name)] == a[CROWDPOSE.dataset_keypoints.index(name)]).all(), name
        assert (b[:5] == 0).all()  # nose, eyes, ears: unlabelled at (0, 0)
        assert all(isinstance(v, int) for v in out["keypoints"])  # ints stay ints
        assert out["num_keypoints"] == sum(v > 0 for v in out["keypoints"][2::3])
        assert {k: v for k, v in out.items() if k not in ("keypoints", "num_keypoints")} == {
            k: v for k, v in src.items() if k not in ("keypoints", "num_keypoints")
        }
        assert np.array_equal(b, mapping.apply(a[None])[0])  # the mapping's own rule
    # the 12 shared keypoints were labelled (only the last, neck, was not); the crowd region has none
    assert [a["num_keypoints"] for a in mapped["annotations"]] == [12, 12, 12, 0]
    assert mapped["annotations"][3]["iscrowd"] == 1
    assert mapped["images"] == before["images"] and mapped["images"][1]["crowdIndex"] == 0.75
    assert mapped["extra"] == {"kept": True} and mapped["info"] == before["info"]


def test_coco_onto_crowdpose_leaves_head_and_neck_unlabelled_and_keeps_float_coordinates():
    data = dataset(COCO.dataset_keypoints)
    data["annotations"][0]["keypoints"][15:18] = [123.456, 78.9, 1]  # left_shoulder, not an integer
    mapped, mapping = map_annotation_file(data, CROWDPOSE, "coco.json")
    assert mapping.missing == ("head", "neck")
    assert mapping.dropped == ("nose", "left_eye", "right_eye", "left_ear", "right_ear")
    assert mapped["categories"][0]["keypoints"] == list(CROWDPOSE.dataset_keypoints)
    assert mapped["categories"][0]["skeleton"][0] == [14, 13]  # neck-head, 1-based
    out = keypoints_of(mapped["annotations"][0], 14)
    src = keypoints_of(data["annotations"][0], 17)
    assert mapped["annotations"][0]["keypoints"][:3] == [123.456, 78.9, 1]  # exactly as given
    for name in SHARED:
        assert (out[CROWDPOSE.dataset_keypoints.index(name)] == src[COCO.dataset_keypoints.index(name)]).all()
    assert (out[12:] == 0).all()
    # COCO's 17 - 1 labelled, minus nose..right_ear (5 labelled) = 11; the last (right_ankle) was unlabelled
    assert mapped["annotations"][0]["num_keypoints"] == 11


def test_rename_matches_a_keypoint_named_otherwise():
    names = ["crown" if n == "head" else n for n in CROWDPOSE.dataset_keypoints]  # no spelling of the head's top
    _, plain = map_annotation_file(dataset(names), CROWDPOSE, "x.json")
    assert plain.missing == ("head",) and plain.dropped == ("crown",)
    mapped, renamed = map_annotation_file(dataset(names), CROWDPOSE, "x.json", {"crown": "head"})
    assert renamed.missing == () and renamed.identity
    assert mapped["annotations"][0]["keypoints"] == dataset(names)["annotations"][0]["keypoints"]


def test_a_rename_of_an_unknown_name_is_refused_naming_file_and_name():
    with pytest.raises(AnnotationError, match=r"x\.json: cannot rename 'head_top'.*no keypoint of that name"):
        map_annotation_file(dataset(CROWDPOSE.dataset_keypoints), COCO, "x.json", {"head_top": "head"})


@pytest.mark.parametrize("names", [None, []])
def test_a_category_without_keypoint_names_is_refused(names):
    data = dataset(CROWDPOSE.dataset_keypoints)
    if names is None:
        del data["categories"][0]["keypoints"]
    else:
        data["categories"][0]["keypoints"] = names
    with pytest.raises(AnnotationError, match=r"x\.json: .*lists no keypoint names.*add them") as e:
        map_annotation_file(data, COCO, "x.json")
    assert e.value.file == "x.json"


def test_an_annotation_of_the_wrong_length_is_refused_naming_it():
    data = dataset(CROWDPOSE.dataset_keypoints)
    data["annotations"][2]["keypoints"] = data["annotations"][2]["keypoints"][:-3]
    with pytest.raises(AnnotationError, match=r"x\.json: annotation id 3: 'keypoints' must be 42 numbers.*got 39"):
        map_annotation_file(data, COCO, "x.json")


def write(path, data) -> str:
    path.write_text(json.dumps(data))
    return str(path)


def test_the_command_writes_a_file_the_evaluator_reads_for_the_target_skeleton(tmp_path, capsys):
    src = write(tmp_path / "crowd.json", dataset(CROWDPOSE.dataset_keypoints))
    out = tmp_path / "sub" / "crowd_coco.json"
    assert map_keypoints.main(["--annotations", src, "--skeleton", "coco", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "12 of coco's 17 keypoints" in printed
    assert "unlabelled: nose, left_eye, right_eye, left_ear, right_ear" in printed
    assert "head, neck" in printed and f"wrote {out}: 2 images, 4 annotations" in printed
    coco = load_ground_truth(out, COCO, EvalConfig()).coco
    assert len(coco.getAnnIds()) == 4
    assert json.loads(out.read_text())["images"][0]["crowdIndex"] == 0.25
    with pytest.raises(UserError):  # the source file itself is not COCO's 17
        load_ground_truth(src, COCO, EvalConfig())


def test_the_command_renames(tmp_path, capsys):
    names = ["head_top" if n == "head" else n for n in CROWDPOSE.dataset_keypoints]
    src = write(tmp_path / "a.json", dataset(names))
    out = tmp_path / "b.json"
    argv = ["--annotations", src, "--skeleton", "crowdpose", "--out", str(out), "--rename", "head_top=head"]
    assert map_keypoints.main(argv) == 0
    assert "14 of crowdpose's 14 keypoints" in capsys.readouterr().out
    load_ground_truth(out, CROWDPOSE, EvalConfig())


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--rename", "head"], "write it as OLD=NEW"),
        (["--rename", "nose=head"], "cannot rename 'nose'"),
    ],
)
def test_the_command_refuses_bad_renames_in_one_line(tmp_path, capsys, extra, words):
    src = write(tmp_path / "a.json", dataset(CROWDPOSE.dataset_keypoints))
    out = tmp_path / "b.json"
    assert map_keypoints.main(["--annotations", src, "--skeleton", "coco", "--out", str(out), *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and words in err and err.count("\n") == 1
    assert not out.exists()


def test_an_existing_out_file_is_left_untouched(tmp_path, capsys):
    src = write(tmp_path / "a.json", dataset(CROWDPOSE.dataset_keypoints))
    out = tmp_path / "b.json"
    out.write_text("earlier")
    assert map_keypoints.main(["--annotations", src, "--skeleton", "coco", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{out} exists" in err and "pick another --out path, or delete it" in err
    assert out.read_text() == "earlier"


def test_out_equal_to_annotations_is_refused(tmp_path, capsys, monkeypatch):
    src = write(tmp_path / "a.json", dataset(CROWDPOSE.dataset_keypoints))
    before = (tmp_path / "a.json").read_text()
    monkeypatch.chdir(tmp_path)
    assert map_keypoints.main(["--annotations", src, "--skeleton", "coco", "--out", "a.json"]) == 2
    assert "is the --annotations file" in capsys.readouterr().err
    assert (tmp_path / "a.json").read_text() == before


def test_a_missing_or_corrupt_annotation_file_is_one_line(tmp_path, capsys):
    out = tmp_path / "b.json"
    assert (
        map_keypoints.main(["--annotations", str(tmp_path / "no.json"), "--skeleton", "coco", "--out", str(out)]) == 2
    )
    assert "not found" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text('{"images": [')
    assert map_keypoints.main(["--annotations", str(bad), "--skeleton", "coco", "--out", str(out)]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    assert not out.exists()


def test_an_hdf5_file_given_as_annotations_is_named_as_one(tmp_path, capsys):
    h5py = pytest.importorskip("h5py")
    with h5py.File(tmp_path / "train.h5", "w") as f:
        f["x"] = np.arange(3)
    out = tmp_path / "b.json"
    argv = ["--annotations", str(tmp_path / "train.h5"), "--skeleton", "coco", "--out", str(out)]
    assert map_keypoints.main(argv) == 2
    err = capsys.readouterr().err
    assert "is an HDF5 file" in err and "not COCO-format JSON" in err and "utf-8" not in err
    assert err.count("\n") == 1 and not out.exists()


def test_the_converter_and_the_mapper_read_their_file_options_alike(tmp_path, capsys):
    """--annotations, --skeleton and --out are written once (data.command_options): the same parsing and words."""
    parsed = {
        "converter": coco_to_hdf5.build_parser().parse_args(["--images", "i", "--annotations", "a.json", "--out", "o"]),
        "mapper": map_keypoints.build_parser().parse_args(["--annotations", "a.json", "--skeleton", "x", "--out", "o"]),
    }
    assert {type(a.annotations) for a in parsed.values()} == {type(a.out) for a in parsed.values()} == {type(tmp_path)}
    assert parsed["converter"].skeleton == "coco"  # the converter's default
    with pytest.raises(SystemExit):
        map_keypoints.build_parser().parse_args(["--annotations", "a.json", "--out", "o"])  # the mapper's: required
    assert "--skeleton" in capsys.readouterr().err
    for command in (coco_to_hdf5, map_keypoints):
        text = " ".join(command.build_parser().format_help().split())
        assert SKELETON_FORMS in text and "COCO-format person_keypoints JSON" in text
