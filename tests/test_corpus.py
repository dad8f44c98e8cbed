"""The corpus: annotation files in the layouts of nine public keypoint datasets, each through convert -> oracle ->
pycocotools cross-check (tests/data/corpus/README.md says where each comes from and what may be shipped).

COCO is real: 4 val2017 images' annotations (CC BY 4.0) and real predictions on them (xtcocotools' example results);
its pictures are generated here at the listed sizes. The others are replicas of their layout as each project's own
sample file has it (fields present and absent, id scheme, keypoint names as spelt, extra fields), with synthetic
figures for the values, since their terms do not clearly allow redistributing their annotations.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from simplepose.config.config_file import load_config
from simplepose.config.schema import EvalConfig
from simplepose.config.skeleton_check import SkeletonMismatch
from simplepose.config.skeleton_file import load_skeleton
from simplepose.data.conversion import Source, convert
from simplepose.data.synthetic_images import generate
from simplepose.evaluate.evaluation import evaluate_oracle
from simplepose.evaluate.metrics.annotations import load_ground_truth
from simplepose.evaluate.metrics.keypoint_stats import coco_keypoint_stats
from tests.helpers import imperfect_results, pycocotools_stats

CORPUS = Path(__file__).resolve().parent / "data" / "corpus"
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """{skeleton name: synthetic set (4 images, one train split)}, made on first use."""
    made: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in made:
            made[name] = tmp_path_factory.mktemp(f"corpus_{name}")
            generate(made[name], num_images=4, seed=7, val_fraction=0, skeleton=load_skeleton(name))
        return made[name]

    return get


def synthetic(root: Path) -> dict:
    return json.loads((root / "annotations" / "person_keypoints_train.json").read_text())


def renumber(data: dict, image_start: int, ann_start: int, step: int = 1) -> dict:
    new = {img["id"]: image_start + i * step for i, img in enumerate(data["images"])}
    for img in data["images"]:
        img["id"] = new[img["id"]]
    for j, ann in enumerate(data["annotations"]):
        ann["id"], ann["image_id"] = ann_start + j * step, new[ann["image_id"]]
    return data


def spelt(names, how) -> list[str]:
    return [how(n) for n in names]


# Each layout: (skeleton, the file as the dataset's sample has it, converter options, the images folder's darkening)
def crowdpose_layout(data: dict) -> dict:
    """CrowdPose: no area, no segmentation, no info or licenses, images with crowdIndex, 14 keypoints."""
    for ann in data["annotations"]:
        del ann["area"], ann["segmentation"]
    return {k: data[k] for k in ("images", "annotations", "categories")}


def exlpose_layout(data: dict) -> dict:
    """ExLPose (low-light): CrowdPose's layout, images and annotations numbered from 0."""
    return renumber(crowdpose_layout(data), 0, 0)


def aic_layout(data: dict) -> dict:
    """AI Challenger: no iscrowd, area or segmentation, an image 'url', names spelt "Right Shoulder", "Head top"."""
    for ann in data["annotations"]:
        if ann["iscrowd"]:
            continue
        del ann["area"], ann["segmentation"], ann["iscrowd"]
    data["annotations"] = [a for a in data["annotations"] if "iscrowd" not in a]  # AIC has no crowd regions
    for img in data["images"]:
        img["url"] = f"http://example.invalid/{img['file_name']}"
    names = data["categories"][0]["keypoints"]
    data["categories"] = [{"supercategory": "person", "id": 1, "name": "person",
                           "keypoints": spelt(names, lambda n: n.replace("_", " ").capitalize().title()
                                              if n != "head_top" else "Head top")}]  # fmt: skip
    return renumber(data, 1, 4)


def ochuman_layout(data: dict) -> dict:
    """OCHuman: ids from 1, a category whose keys come in another order, no info."""
    cat = data["categories"][0]
    data["categories"] = [{"keypoints": cat["keypoints"], "skeleton": cat["skeleton"], "id": 1,
                           "supercategory": "person", "name": "person"}]  # fmt: skip
    return renumber({k: data[k] for k in ("images", "annotations", "categories")}, 1, 1)


def posetrack_layout(data: dict) -> dict:
    """PoseTrack18: video ids of 10+ digits, frame fields, ignore regions, head boxes, track ids, per-keypoint
    scores; COCO's 17 keypoints renamed by the user to COCO's names (the file's own: head_bottom, head_top)."""
    data = renumber(data, 10034180000, 1003418000000)
    for img in data["images"]:
        img.update(vid_id="003418", frame_id=img["id"], nframes=len(data["images"]), is_labeled=True,
                   has_no_densepose=True, mask_file="", ignore_regions_x=[], ignore_regions_y=[])  # fmt: skip
    for ann in data["annotations"]:
        ann.update(track_id=ann["id"] % 7, bbox_head=ann["bbox"], scores=[])
        del ann["area"], ann["segmentation"]
    return data


def humanart_layout(data: dict) -> dict:
    """Human-Art: a category of 21 names (17 + fingers and toes) for annotations of 17, a 'keypoints_21' field,
    image fields of an art collection."""
    names = data["categories"][0]["keypoints"] + ["left_finger", "right_finger", "left_toe", "right_toe"]
    data["categories"][0]["keypoints"] = names
    for img in data["images"]:
        img.update(author="", category="oil painting", description="", image_url="", page_url="",
                   picture_name=img["file_name"])  # fmt: skip
    for ann in data["annotations"]:
        ann.update(keypoints_21=ann["keypoints"] + [0] * 12, num_keypoints_21=ann["num_keypoints"], annotator=0,
                   self_contact=[])  # fmt: skip
    return renumber(data, 2000000001648, 2000000006746, step=1000)


def mhp_layout(data: dict) -> dict:
    """MHP (MPII's 16 keypoints): names spelt "Right-ankle", "Upper-neck", a face box, a licence per image."""
    data["categories"][0]["keypoints"] = spelt(data["categories"][0]["keypoints"],
                                               lambda n: n.replace("_", "-").capitalize())  # fmt: skip
    for ann in data["annotations"]:
        ann["face_box"] = ann["bbox"]
    for img in data["images"]:
        img["license"] = 0
    return data


def wholebody_layout(data: dict) -> dict:
    """COCO-WholeBody: COCO's 17 body keypoints in 'keypoints' (the category names those 17), the feet, face and
    hands in their own fields with a box and a validity flag each, num_keypoints counting the body's."""
    data["categories"][0]["keypoints"] = data["categories"][0]["keypoints"][:17]
    for ann in data["annotations"]:
        kp = ann["keypoints"]
        ann["keypoints"] = kp[: 3 * 17]
        ann["num_keypoints"] = sum(v > 0 for v in ann["keypoints"][2::3])
        start = 3 * 17
        for part, n in (("foot", 6), ("face", 68), ("lefthand", 21), ("righthand", 21)):
            ann[f"{part}_kpts"] = [float(v) for v in kp[start : start + 3 * n]]
            ann[f"{part}_valid"] = any(v > 0 for v in kp[start + 2 : start + 3 * n : 3])
            if part != "foot":
                ann[f"{part}_box"] = [0, 0, 0, 0]
            start += 3 * n
    return data


LAYOUTS = {  # name: (skeleton, layout, converter's keypoint_names)
    "coco_wholebody": ("coco_wholebody", wholebody_layout, "exact"),
    "crowdpose": ("crowdpose", crowdpose_layout, "exact"),
    "exlpose": ("crowdpose", exlpose_layout, "exact"),
    "aic": ("aic", aic_layout, "spelling"),
    "ochuman": ("coco", ochuman_layout, "exact"),
    "posetrack18": ("coco", posetrack_layout, "exact"),
    "humanart": ("coco", humanart_layout, "exact"),
    "mhp": ("mpii", mhp_layout, "spelling"),
}


def real_coco(tmp_path) -> tuple[Path, Path, list[dict]]:
    """The real COCO file, its pictures generated (grey noise of the listed sizes), and the real results."""
    images = tmp_path / "images"
    images.mkdir()
    data = json.loads((CORPUS / "coco_val2017_4images.json").read_text())
    rng = np.random.default_rng(0)
    for img in data["images"]:
        picture = rng.integers(90, 160, (img["height"], img["width"], 3), dtype=np.uint8)
        cv2.imwrite(str(images / img["file_name"]), picture)
    return (
        CORPUS / "coco_val2017_4images.json",
        images,
        json.loads((CORPUS / "coco_val2017_4images_results.json").read_text()),
    )


def pycocotools_filled(data: dict, results: list[dict], sigmas) -> list[float]:
    """pycocotools' own keypoint figures of ``results`` on the file ``data``, its ids made positive and its optional
    fields filled as the file's project documents them (iscrowd 0, area 0.53 x the box)."""
    data = copy.deepcopy(data)
    shift = 1 if min(a["id"] for a in data["annotations"]) <= 0 else 0
    for ann in data["annotations"]:
        ann["id"] += shift
        ann.setdefault("iscrowd", 0)
        ann.setdefault("area", ann["bbox"][2] * ann["bbox"][3] * 0.53)
        ann.setdefault("num_keypoints", sum(v > 0 for v in ann["keypoints"][2::3]))
    return pycocotools_stats(data, results, sigmas)


def through_the_pipeline(annotations: Path, images: Path, skeleton_name: str, names: str, tmp_path,
                         reference: dict | None = None) -> dict:  # fmt: skip
    """Convert (train HDF5 of input size 64), then the oracle (written results), then the cross-check of those
    results between this project's evaluator and pycocotools (on ``reference``, the same file in COCO's one-list
    layout, when the file's is another); returns the figures."""
    skeleton = load_skeleton(skeleton_name)
    settings = convert([Source(images, annotations)], tmp_path / "train.h5", 64, progress=False,
                       skeleton=skeleton_name, keypoint_names=names)  # fmt: skip
    assert settings["counts"]["samples"] > 0
    cfg = load_config(None, ["eval.scales=[1.0]", "eval.flip=false", f"data.skeleton={skeleton_name}",
                             f"eval.keypoint_names={names}"])  # fmt: skip
    out = tmp_path / "oracle.json"
    oracle, _ = evaluate_oracle(images, annotations, cfg, out, progress=False)
    data = json.loads(annotations.read_text())
    oracle_results = json.loads(out.read_text())
    assert {r["image_id"] for r in oracle_results} <= {img["id"] for img in data["images"]}  # the file's own ids
    coco = load_ground_truth(annotations, skeleton, EvalConfig(keypoint_names=names)).coco
    figures = {"oracle AP": oracle["AP"]}
    # the oracle's results and imperfect ones (figures inside (0, 1), sensitive to any matching difference)
    for kind, results in (("oracle", oracle_results), ("imperfect", imperfect_results(reference or data))):
        ours, _ = coco_keypoint_stats(coco, results, sorted(coco.imgs), skeleton.sigmas)
        theirs = pycocotools_filled(reference or data, results, skeleton.sigmas)
        np.testing.assert_allclose(list(ours.values()), theirs, atol=1e-12, err_msg=kind)
        figures[f"{kind} results AP (ours = pycocotools')"] = round(ours["AP"], 4)
    return figures


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_a_layout_converts_scores_and_agrees_with_pycocotools(layout, generated, tmp_path):
    skeleton_name, make, names = LAYOUTS[layout]
    root = generated(skeleton_name)
    annotations = tmp_path / f"{layout}.json"
    annotations.write_text(json.dumps(make(synthetic(root))))
    reference = synthetic(root) if layout == "coco_wholebody" else None  # the same people, one keypoint list
    images = root / "images"
    if layout == "exlpose":  # low light: the same pictures at a tenth of their brightness
        images = tmp_path / "dark"
        images.mkdir()
        for path in (root / "images").glob("*.jpg"):
            cv2.imwrite(str(images / path.name), (cv2.imread(str(path)) * 0.1).astype(np.uint8))
    figures = through_the_pipeline(annotations, images, skeleton_name, names, tmp_path, reference)
    print(layout, figures)
    assert figures["oracle AP"] > 0.8


def test_the_real_coco_file_and_results(tmp_path):
    annotations, images, results = real_coco(tmp_path)
    figures = through_the_pipeline(annotations, images, "coco", "exact", tmp_path)
    coco = load_ground_truth(annotations, load_skeleton("coco"), EvalConfig()).coco
    ours, _ = coco_keypoint_stats(coco, results, sorted(coco.imgs), load_skeleton("coco").sigmas)
    data = json.loads(annotations.read_text())
    theirs = pycocotools_filled(data, results, load_skeleton("coco").sigmas)
    print("real COCO file:", figures, "real results AP", round(ours["AP"], 4))
    np.testing.assert_allclose(list(ours.values()), theirs, atol=1e-12)
    assert 0.5 < ours["AP"] < 1 and figures["oracle AP"] > 0.9


def test_the_files_own_names_are_checked(generated, tmp_path):
    """PoseTrack's own names (head_bottom, head_top for COCO's eyes) with --skeleton coco, and AIC's 14 keypoints
    with --skeleton crowdpose (the same 14 in another order): refused, naming the first difference."""
    data = posetrack_layout(synthetic(generated("coco")))
    data["categories"][0]["keypoints"][1:3] = ["head_bottom", "head_top"]
    path = tmp_path / "posetrack.json"
    path.write_text(json.dumps(data))
    with pytest.raises(SkeletonMismatch) as e:
        convert([Source(generated("coco") / "images", path)], tmp_path / "x.h5", 64, progress=False)
    assert e.value.first_difference == (1, "head_bottom", "left_eye")
    data = aic_layout(synthetic(generated("aic")))
    path = tmp_path / "aic.json"
    path.write_text(json.dumps(data))
    with pytest.raises(SkeletonMismatch) as e:
        convert([Source(generated("aic") / "images", path)], tmp_path / "x.h5", 64, progress=False,
                skeleton="crowdpose", keypoint_names="spelling")  # fmt: skip
    assert e.value.first_difference == (0, "Right Shoulder", "left_shoulder")
