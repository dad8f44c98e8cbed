"""Untrusted files: checkpoints never run code (weights_only=True everywhere), HDF5 metadata is JSON data, and
image paths from annotation files cannot leave the image folder."""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import h5py
import pytest
import torch

from simplepose.checkpoint import original as convert_original
from simplepose.data.conversion import Source, convert
from simplepose.data.h5_format import check_layout
from simplepose.utils.errors import AnnotationError, DataFileError
from tests.harness.bad_inputs import (
    PAYLOAD_MARKER,
    SECURITY_CASES,
    InjectedObject,
    ReducePayload,
    run_named,
    settings_payload,
)
from tests.harness.not_checkpoints import UNSAFE_ADVICE
from tests.helpers import assert_ends_as_expected
from tests.paths import REPO_ROOT

# ------------------------------------------------------------------------------------- the source tree


def unsafe_calls(source: str) -> list[str]:
    """Calls that can run code from a file: torch.load without weights_only=True, eval/exec, pickle/marshal
    loads, yaml.load/unsafe_load/full_load, np.load(allow_pickle=True), torch.jit.load. As 'line: call'."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = ast.unparse(node.func)
        keywords = {k.arg: k.value for k in node.keywords}
        flag = keywords.get("weights_only")
        if name == "torch.load" and not (isinstance(flag, ast.Constant) and flag.value is True):
            found.append(f"{node.lineno}: torch.load without weights_only=True")
        elif name in ("eval", "exec", "pickle.load", "pickle.loads", "marshal.loads", "torch.jit.load"):
            found.append(f"{node.lineno}: {name}")
        elif name in ("yaml.load", "yaml.unsafe_load", "yaml.full_load"):
            found.append(f"{node.lineno}: {name} (use yaml.safe_load)")
        elif name in ("np.load", "numpy.load") and "allow_pickle" in keywords:
            found.append(f"{node.lineno}: {name}(allow_pickle=...) (keep numpy's default, False)")
    return found


def test_the_scanner_finds_unsafe_loads():
    code = "import torch, pickle\ntorch.load(p)\ntorch.load(p, weights_only=False)\npickle.loads(b)\neval(s)\n"
    assert [f.split(":")[0] for f in unsafe_calls(code)] == ["2", "3", "4", "5"]
    assert unsafe_calls("torch.load(p, map_location='cpu', weights_only=True)\nmodel.eval()\nyaml.safe_load(t)") == []


def test_no_file_in_the_repo_loads_unsafely():
    files = [p for p in REPO_ROOT.rglob("*.py") if not any(part.startswith(".") for part in p.parts)]
    assert len(files) > 50
    found = [f"{p.relative_to(REPO_ROOT)}:{hit}" for p in files for hit in unsafe_calls(p.read_text())]
    assert found == []


# ------------------------------------------------------------------------------------- through the commands


@pytest.fixture(scope="module")
def security_corpus(synthetic_sample, tmp_path_factory):
    """{name: (case, result)} for the untrusted-file cases of tests.harness.bad_inputs, each run through its command."""
    return run_named(synthetic_sample, tmp_path_factory.mktemp("security"), SECURITY_CASES)


@pytest.mark.parametrize("name", SECURITY_CASES)
def test_untrusted_input_is_refused_cleanly(security_corpus, name):
    """file_name with '..', absolute or NUL: refused naming the file_name; a checkpoint with a
    class instance (evaluate --ckpt) or a __reduce__ payload (train.py train.resume=): refused; HDF5 settings
    holding a Python expression (train.py): refused. Nothing is written and no payload runs."""
    case, result = security_corpus[name]
    assert_ends_as_expected(case, result)
    assert not list(case.folder.parent.rglob(PAYLOAD_MARKER))


@pytest.mark.parametrize("payload", ["class_instance", "reduce"])
def test_convert_original_refuses_pickled_code(tmp_path, capsys, payload):
    marker = tmp_path / PAYLOAD_MARKER
    weights = {"posenet.pre.conv1.conv.weight": torch.zeros(1)}
    extra = InjectedObject() if payload == "class_instance" else ReducePayload(marker)
    torch.save({"weights": weights, "epoch": 52, "extra": extra}, tmp_path / "PoseNet_52_epoch.pth")
    out = tmp_path / "converted.pt"
    assert convert_original.main(["--weights", str(tmp_path / "PoseNet_52_epoch.pth"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "PoseNet_52_epoch.pth" in err and "weights_only=True" in err
    assert not [advice for advice in UNSAFE_ADVICE if advice in err]
    assert not marker.exists() and not out.exists()


def test_hdf5_settings_are_parsed_as_json_never_evaluated(synthetic_sample_h5, tmp_path):
    marker = tmp_path / PAYLOAD_MARKER
    path = tmp_path / "edited.h5"
    shutil.copyfile(synthetic_sample_h5, path)
    with h5py.File(path, "r") as f:
        assert check_layout(f, path)["input_size"] == 256  # the untouched file passes
    for settings in (settings_payload(marker), "{'input_size': 256}", json.dumps({"input_size": 256})):
        with h5py.File(path, "r+") as f:
            f.attrs["settings"] = settings
        with h5py.File(path, "r") as f, pytest.raises(DataFileError) as e:
            check_layout(f, path)
        assert e.value.file == str(path) and e.value.key.startswith("settings")
    assert not marker.exists()


# ------------------------------------------------------------------------------------- image paths


@pytest.fixture
def one_image(tmp_path, synthetic_sample_annotations, synthetic_sample_images) -> tuple[dict, Path]:
    """One image of the synthetic sample with its annotations, and a folder holding it."""
    data = json.loads(synthetic_sample_annotations.read_text())
    data["images"] = data["images"][:1]
    data["annotations"] = [a for a in data["annotations"] if a["image_id"] == data["images"][0]["id"]]
    name = data["images"][0]["file_name"]
    folder = tmp_path / "store" / "images"
    folder.mkdir(parents=True)
    shutil.copyfile(synthetic_sample_images / name, folder / name)
    return data, folder


def test_escaping_file_names_are_refused_even_with_skip_bad(tmp_path, one_image):
    data, folder = one_image
    shutil.copyfile(folder / data["images"][0]["file_name"], tmp_path / "secret.jpg")
    ann = tmp_path / "ann.json"
    for name in ("../../secret.jpg", str(tmp_path / "secret.jpg")):
        data["images"][0]["file_name"] = name
        ann.write_text(json.dumps(data))
        with pytest.raises(AnnotationError) as e:
            convert([Source(folder, ann)], tmp_path / "out.h5", skip_bad=True, progress=False)
        assert (e.value.file, e.value.key, e.value.image_id) == (str(ann), "file_name", data["images"][0]["id"])
        assert not (tmp_path / "out.h5").exists()


def test_a_symlinked_image_folder_is_fine(tmp_path, one_image):
    """Only links that lead out of the folder are refused: the folder itself may be a link (a common setup)."""
    data, folder = one_image
    (tmp_path / "coco").mkdir()
    (tmp_path / "coco" / "train2017").symlink_to(folder, target_is_directory=True)
    ann = tmp_path / "ann.json"
    ann.write_text(json.dumps(data))
    settings = convert([Source(tmp_path / "coco" / "train2017", ann)], tmp_path / "out.h5", progress=False)
    assert settings["counts"]["images"] == 1


def test_the_evaluator_reads_a_folder_of_links_and_refuses_names_that_climb_out(
    tmp_path, synthetic_sample_annotations, synthetic_sample_images, capsys
):
    """coco_eval --images DIR where DIR holds ``ln -s`` links to the pictures (shared storage, a subset): read as the
    files themselves, the same results byte for byte; a file_name with '..' or an absolute path is still refused, in
    one line naming the annotation file once."""
    from simplepose.evaluate import coco_eval

    data = json.loads(synthetic_sample_annotations.read_text())
    data["images"] = data["images"][:3]
    kept = {img["id"] for img in data["images"]}
    data["annotations"] = [a for a in data["annotations"] if a["image_id"] in kept]
    ann = tmp_path / "ann.json"
    ann.write_text(json.dumps(data))
    linked = tmp_path / "linked"
    linked.mkdir()
    for img in data["images"]:
        (linked / img["file_name"]).symlink_to(synthetic_sample_images / img["file_name"])
    oracle = ["--from-ground-truth", "--annotations", str(ann), "eval.scales=[1.0]", "eval.flip=false"]
    outs = {}
    for name, images in (("copies", synthetic_sample_images), ("links", linked)):
        outs[name] = tmp_path / f"{name}.json"
        assert coco_eval.main([*oracle, "--images", str(images), "--out", str(outs[name])]) == 0, capsys.readouterr()
    assert outs["links"].read_bytes() == outs["copies"].read_bytes() and json.loads(outs["links"].read_text())
    assert "error" not in capsys.readouterr().err

    shutil.copyfile(synthetic_sample_images / data["images"][0]["file_name"], tmp_path / "outside.jpg")
    for bad in ("../outside.jpg", str(tmp_path / "outside.jpg")):
        data["images"][0]["file_name"] = bad
        ann.write_text(json.dumps(data))
        out = tmp_path / "refused.json"
        assert coco_eval.main([*oracle, "--images", str(linked), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert not out.exists() and "Traceback" not in err
        line = err.strip().splitlines()[-1]
        assert line.startswith(f"error: annotation file {ann}: image file_name {bad!r}")
        assert "leads outside the image folder" in line and line.count("annotation file") == 1
