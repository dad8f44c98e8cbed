"""Bad skeleton files and input that does not fit the skeleton: each is a clean UserError that names the file, the
entry and what to do."""

import copy
import json
import subprocess
import sys

import pytest
import yaml

from simplepose.codec.layout import ChannelLayout
from simplepose.config.config_file import load_config
from simplepose.config.skeleton import SkeletonFileError
from simplepose.config.skeleton_check import SkeletonMismatch
from simplepose.config.skeleton_definition import skeleton_from_dict
from simplepose.config.skeleton_file import load_skeleton, resolve_skeleton_path
from simplepose.data.conversion import Source, convert
from tests.helpers import internal_to_dataset
from tests.paths import REPO_ROOT

# A small non-human chain of 6 keypoints: head - withers - hip - tail, with a left and a right paw at the withers.
CHAIN = {
    "name": "chain",
    "dataset_keypoints": ["head", "withers", "left_paw", "right_paw", "hip", "tail"],
    "limbs": [
        ["withers", "head"],
        ["withers", "left_paw"],
        ["withers", "right_paw"],
        ["withers", "hip"],
        ["hip", "tail"],
        ["left_paw", "right_paw"],
    ],  # fmt: skip
    "flip_pairs": [["left_paw", "right_paw"]],
    "sigmas": {"head": 0.05, "withers": 0.06, "left_paw": 0.04, "right_paw": 0.04, "hip": 0.07, "tail": 0.05},
}


def write(tmp_path, data, name="chain.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def changed(**entries):
    data = copy.deepcopy(CHAIN)
    for key, value in entries.items():
        if value is None:
            data.pop(key)
        else:
            data[key] = value
    return data


def test_the_chain_loads_with_its_layout(tmp_path):
    chain = load_skeleton(write(tmp_path, CHAIN))
    assert (chain.num_dataset_keypoints, chain.num_keypoints, chain.num_limbs, chain.num_channels) == (6, 6, 6, 14)
    assert chain.keypoints == chain.dataset_keypoints and internal_to_dataset(chain) == tuple(range(6))
    assert chain.keypoint_flip == (0, 1, 3, 2, 4, 5) and chain.limb_flip == (0, 2, 1, 3, 4, 5)
    assert ChannelLayout.of(chain).flip[6:] == (6, 7, 9, 8, 10, 11, 12, 13)
    assert chain.draw_edges == tuple(chain.limbs) and len(chain.colors_bgr) == 6  # defaults: every limb, hue circle
    assert skeleton_from_dict(chain.to_dict()) == chain


BAD_SKELETONS = {  # what is wrong: (the definition, the entry the error names)
    "limb naming an unknown keypoint": (changed(limbs=[*CHAIN["limbs"], ["hip", "hind_paw"]]), "limbs[6]"),
    "flip pair that is not symmetric": (changed(flip_pairs=[["left_paw", "right_paw"], ["head", "tail"]]), "limbs[0]"),
    "flip pair naming an unknown keypoint": (changed(flip_pairs=[["left_paw", "right_foot"]]), "flip_pairs[0]"),
    "keypoint in two flip pairs": (changed(flip_pairs=[["left_paw", "right_paw"], ["right_paw", "head"]]),
                                   "flip_pairs[1]"),
    "keypoint no limb reaches": (changed(limbs=CHAIN["limbs"][:4] + [CHAIN["limbs"][5]]), "limbs"),
    "keypoints split into two groups": (
        changed(limbs=[["withers", "head"], ["withers", "left_paw"], ["withers", "right_paw"], ["hip", "tail"]]),
        "limbs"),
    "derived keypoint naming an unknown keypoint": (changed(derived={"middle": {"midpoint": ["withers", "rump"]}}),
                                                    "derived.middle"),
    "duplicate keypoint name": (changed(dataset_keypoints=["head", "withers", "left_paw", "right_paw", "hip", "head"]),
                                "dataset_keypoints"),
    "sigma missing": (changed(sigmas={k: v for k, v in CHAIN["sigmas"].items() if k != "tail"}), "sigmas"),
    "sigma of an unknown keypoint": (changed(sigmas={**CHAIN["sigmas"], "mane": 0.05}), "sigmas"),
    "no sigmas": (changed(sigmas=None), "sigmas"),
    "misspelt entry": ({**CHAIN, "limb": []}, "limb"),
    "unknown evaluation": ({**CHAIN, "evaluation": "crowd"}, "evaluation"),
}  # fmt: skip


@pytest.mark.parametrize("case", BAD_SKELETONS, ids=list(BAD_SKELETONS))
def test_bad_skeleton_files_are_clean_errors(tmp_path, case):
    data, key = BAD_SKELETONS[case]
    path = write(tmp_path, data)
    with pytest.raises(SkeletonFileError) as e:
        load_skeleton(path)
    assert (e.value.file, e.value.key) == (str(path.resolve()), key)


def test_missing_or_broken_skeleton_files_are_clean_errors(tmp_path):
    with pytest.raises(SkeletonFileError) as e:
        resolve_skeleton_path("horse")
    assert e.value.file.endswith("horse.yaml") and e.value.key == "data.skeleton"
    (tmp_path / "broken.yaml").write_text("limbs: [[a, b]\n")
    with pytest.raises(SkeletonFileError) as e:
        load_skeleton(tmp_path / "broken.yaml")
    assert e.value.file == str((tmp_path / "broken.yaml").resolve())
    cfg = load_config(None, [f"data.skeleton={tmp_path / 'absent.yaml'}"])  # named, read only when used
    with pytest.raises(SkeletonFileError) as e:
        load_skeleton(cfg.data.skeleton)
    assert e.value.file == str(tmp_path / "absent.yaml")


def test_an_annotation_of_another_keypoint_count_names_the_file_and_the_annotation(
    tmp_path, synthetic_sample_annotations, synthetic_sample_images
):
    """The synthetic sample (17 keypoints each) converted for the 6-keypoint chain: refused, the file not written;
    through the command, one error line."""
    skeleton = write(tmp_path, CHAIN)
    annotations, images = synthetic_sample_annotations, synthetic_sample_images
    first = json.loads(annotations.read_text())["annotations"][0]["id"]
    with pytest.raises(SkeletonMismatch) as e:
        convert([Source(images, annotations)], tmp_path / "out.h5", 64, progress=False, skeleton=str(skeleton))
    m = e.value
    assert (m.file, m.key, m.differs, m.found.num_dataset_keypoints, m.expected.name) == (
        str(annotations), "keypoints", "keypoint count", 17, "chain")  # fmt: skip
    assert f"(annotation id {first})" in m.where and "--skeleton" in m.fix
    cmd = [sys.executable, "-m", "data.coco_to_hdf5", "--images", str(images), "--annotations", str(annotations),
           "--out", str(tmp_path / "out.h5"), "--skeleton", str(skeleton)]  # fmt: skip
    proc = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and proc.stderr.count("error: ") == 1, proc.stderr
    assert not (tmp_path / "out.h5").exists()
