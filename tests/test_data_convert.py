"""COCO -> HDF5 conversion on the synthetic and the real sample: counts, stored bytes, masks; clean errors on bad
input."""

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
from pycocotools.coco import COCO

from simplepose.data.conversion import Source, convert
from simplepose.data.h5_format import MASK_IGNORE_BIT, MASK_PERSON_BIT, decode_mask_runs
from simplepose.data.image_files import ImageFileError
from simplepose.utils.errors import AnnotationError, UserError

REPO = Path(__file__).resolve().parents[1]


def expected_main_persons(anns):
    """The main-person rule with the spacing fix (docs/data.md#main-persons-and-samples): >= 5 keypoints,
    area >= 32*32, centre >= 0.3 * max(own w, h) of earlier mains."""
    mains = []
    for a in anns:
        if a["num_keypoints"] < 5 or a["area"] < 1024:
            continue
        x, y, w, h = a["bbox"]
        c = (x + w / 2, y + h / 2)
        if all(math.dist(c, mc) >= 0.3 * ref for mc, ref in mains):
            mains.append((c, max(w, h)))
    return len(mains)


def test_counts_match_the_json(sample_h5, sample_annotations, sample_images):
    data = json.loads(sample_annotations.read_text())
    by_image = {}
    for a in data["annotations"]:
        by_image.setdefault(a["image_id"], []).append(a)
    kept = [img for img in data["images"] if expected_main_persons(by_image.get(img["id"], []))]
    with h5py.File(sample_h5) as f:
        settings = json.loads(f.attrs["settings"])
        ids = f["images/id"][:]
        assert list(ids) == [img["id"] for img in kept]
        assert len(f["samples/image"]) == sum(expected_main_persons(by_image[img["id"]]) for img in kept)
        assert len(f["people/area"]) == sum(len(by_image[img["id"]]) for img in kept)
        assert settings["input_size"] == 256 and settings["counts"]["samples"] == len(f["samples/image"])
        # The stored JPEG is the original file, byte for byte; bbox heights are raw pixels.
        offsets = f["images/jpeg_offsets"][:]
        for i in (0, len(ids) - 1):
            stored = f["images/jpeg"][offsets[i] : offsets[i + 1]].tobytes()
            assert stored == (sample_images / kept[i]["file_name"]).read_bytes()
        first = by_image[kept[0]["id"]]
        np.testing.assert_allclose(f["people/bbox"][: len(first)], [a["bbox"] for a in first], rtol=1e-6)
        # Every sample's main person belongs to the sample's image.
        po = f["images/person_offsets"][:]
        img, person = f["samples/image"][:], f["samples/person"][:]
        assert ((po[img] <= person) & (person < po[img + 1])).all()


def test_ignore_mask_covers_crowds_and_unlabelled_people(sample_h5, sample_annotations):
    """Crowd regions (RLE) and people without keypoints are ignored, the labelled people are not."""
    coco = COCO(str(sample_annotations))
    checked_crowd = checked_unlabelled = 0
    with h5py.File(sample_h5) as f:
        mo = f["images/mask_offsets"][:]
        for i, image_id in enumerate(f["images/id"][:]):
            runs = f["images/mask_values"][mo[i] : mo[i + 1]], f["images/mask_lengths"][mo[i] : mo[i + 1]]
            code = decode_mask_runs(*runs, int(f["images/height"][i]), int(f["images/width"][i]))
            ignored = (code & MASK_IGNORE_BIT) > 0
            person = (code & MASK_PERSON_BIT) > 0
            anns = coco.loadAnns(coco.getAnnIds(imgIds=[int(image_id)], iscrowd=None))
            masks = [coco.annToMask(a) > 0 for a in anns]
            labelled = np.zeros_like(ignored)
            for a, m in zip(anns, masks):
                if not a["iscrowd"] and a["num_keypoints"] > 0:
                    labelled |= m
            unlabelled = np.zeros_like(ignored)
            for a, m in zip(anns, masks):
                assert person[m].all()  # mask_all holds every person, crowds included
                if a["iscrowd"]:
                    assert ignored[m & ~labelled].all()
                    checked_crowd += 1
                elif a["num_keypoints"] == 0:
                    assert ignored[m].all()
                    unlabelled |= m
                    checked_unlabelled += 1
            crowd = np.zeros_like(ignored)
            for a, m in zip(anns, masks):
                if a["iscrowd"]:
                    crowd |= m
            assert not ignored[labelled & ~unlabelled].any()
            assert not ignored[~(unlabelled | crowd)].any()
    assert checked_crowd >= 1 and checked_unlabelled >= 10


# ---------------------------------------------------------------------------------------------- bad input


def run_convert(tmp_path, annotations, images, *extra):
    out = tmp_path / "out.h5"
    cmd = [sys.executable, "-m", "data.coco_to_hdf5", "--images", str(images), "--annotations", str(annotations)]
    proc = subprocess.run(
        [*cmd, "--out", str(out), "--no-progress", *extra], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    return proc, out


@pytest.fixture
def small_set(tmp_path, synthetic_sample_annotations, synthetic_sample_images):
    """Three images that all have main persons, with their annotations, in a private folder: (annotations, folder,
    their file names)."""
    data = json.loads(synthetic_sample_annotations.read_text())
    images = [img for img in data["images"] if expected_main_persons(
        [a for a in data["annotations"] if a["image_id"] == img["id"]])][:3]  # fmt: skip
    ids = {img["id"] for img in images}
    data["images"] = images
    data["annotations"] = [a for a in data["annotations"] if a["image_id"] in ids]
    folder = tmp_path / "images"
    folder.mkdir()
    names = [img["file_name"] for img in images]
    for name in names:
        shutil.copy(synthetic_sample_images / name, folder / name)
    return data, folder, names


def write_json(path, data):
    path.write_text(json.dumps(data))
    return path


def assert_clean_failure(proc):
    """The command ended with one error line, no traceback."""
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and proc.stderr.count("error: ") == 1, proc.stderr


def refused(annotations, images, out, error=AnnotationError):
    """The error (``error``) of converting ``annotations``; ``out`` not written."""
    with pytest.raises(error) as e:
        convert([Source(images, annotations)], out, progress=False)
    assert not out.exists() and not list(out.parent.glob(f".{out.name}.*"))
    return e.value


def test_malformed_annotations_fail_cleanly(tmp_path, small_set):
    data, images, _ = small_set
    out = tmp_path / "out.h5"
    bad = json.loads(json.dumps(data))
    bad["annotations"][1]["keypoints"] = bad["annotations"][1]["keypoints"][:50]
    path = write_json(tmp_path / "bad_keypoints.json", bad)
    e = refused(path, images, out)
    assert (e.file, e.key, e.annotation_id) == (str(path), "keypoints", bad["annotations"][1]["id"])
    proc, _ = run_convert(tmp_path, path, images)  # the command: one line
    assert_clean_failure(proc)

    bad = json.loads(json.dumps(data))
    del bad["annotations"][0]["bbox"]
    path = write_json(tmp_path / "no_bbox.json", bad)
    e = refused(path, images, out)
    assert (e.file, e.key, e.annotation_id) == (str(path), "bbox", bad["annotations"][0]["id"])

    truncated = tmp_path / "truncated.json"
    truncated.write_text(json.dumps(data)[:5000])
    e = refused(truncated, images, out)
    assert (e.file, e.key, e.annotation_id) == (str(truncated), None, None)  # the file itself is at fault


def test_missing_and_corrupt_images(tmp_path, small_set):
    data, images, (kept, missing, truncated) = small_set
    path = write_json(tmp_path / "ann.json", data)
    out = tmp_path / "out.h5"
    (images / missing).unlink()
    with pytest.raises(UserError) as e:
        convert([Source(images, path)], out, progress=False)
    assert e.value.file == str(images / missing)  # missing: listed before anything is converted
    assert not out.exists() and not list(tmp_path.glob(".out.h5.*"))

    jpeg = images / truncated
    jpeg.write_bytes(jpeg.read_bytes()[: jpeg.stat().st_size // 3])  # truncated download
    shutil.copy(images / kept, images / missing)  # present again, wrong size
    e = refused(path, images, out, ImageFileError)
    missing_id = next(img["id"] for img in data["images"] if img["file_name"] == missing)
    assert (e.file, e.image_id) == (str(images / missing), missing_id)
    assert "not the annotation's" in e.reason
    (images / missing).unlink()

    # --skip-bad skipping 2 of 3 images: more than half, so the conversion stops all the same, naming the folder
    proc, out = run_convert(tmp_path, path, images, "--skip-bad")
    assert_clean_failure(proc)
    assert "2 of 3 images were skipped" in proc.stderr and f"--images ({images})" in proc.stderr, proc.stderr
    assert not out.exists()
    kept_image = next(img for img in data["images"] if img["file_name"] == kept)
    copy_id = max(img["id"] for img in data["images"]) + 1
    data["images"].append({**kept_image, "id": copy_id, "file_name": "copy.jpg"})  # a 4th image: 2 of 4 skipped
    data["annotations"] += [{**a, "id": 10**9 + i, "image_id": copy_id} for i, a in enumerate(data["annotations"])
                            if a["image_id"] == kept_image["id"]]  # fmt: skip
    shutil.copy(images / kept, images / "copy.jpg")
    write_json(path, data)
    proc, out = run_convert(tmp_path, path, images, "--skip-bad")
    assert proc.returncode == 0, proc.stderr
    assert missing in proc.stderr and truncated in proc.stderr and "truncated" in proc.stderr
    assert "2 images skipped" in proc.stdout
    with h5py.File(out) as f:
        settings = json.loads(f.attrs["settings"])
        assert sorted(f["images/id"][:]) == [kept_image["id"], copy_id]
    assert len(settings["skipped"]) == 2


def test_file_names_cannot_escape_the_image_folder(tmp_path, small_set):
    data, images, _ = small_set
    data["images"][0]["file_name"] = "../../etc/passwd"
    path = write_json(tmp_path / "ann.json", data)
    e = refused(path, images, tmp_path / "out.h5")
    assert (e.file, e.key, e.image_id) == (str(path), "file_name", data["images"][0]["id"])


def test_main_person_spacing_uses_each_persons_own_box():
    from simplepose.data.main_person import main_person_indices

    def person(x, y, w, h):
        return {"bbox": [x, y, w, h], "num_keypoints": 10, "area": w * h / 2, "iscrowd": 0}

    # Two large people 60 px apart (0.3 * 300 = 90: too close), then a small last annotation.
    anns = [person(0, 0, 100, 300), person(60, 0, 100, 300), person(500, 0, 40, 60)]
    assert main_person_indices(anns) == [0, 2]
    # The original's stale bbox: the last annotation's box (max side 60 -> 18 px) is used for every spacing.
    assert main_person_indices(anns, stale_bbox_bug=True) == [0, 1, 2]


def test_second_source_starts_at_its_offset(tmp_path, synthetic_sample_images, synthetic_sample_annotations):
    """The paper split adds val2017 from position 100 on; here the sample plays val2017 from position 20 on."""
    from simplepose.data.conversion import Source, convert

    data = json.loads(synthetic_sample_annotations.read_text())
    with_mains = {
        img["id"]
        for img in data["images"][20:]
        if expected_main_persons([a for a in data["annotations"] if a["image_id"] == img["id"]])
    }
    one = Source(synthetic_sample_images, synthetic_sample_annotations)
    tail = Source(synthetic_sample_images, synthetic_sample_annotations, start=20)
    settings = convert([one, tail], tmp_path / "mix.h5", progress=False)
    alone = convert([one], tmp_path / "one.h5", progress=False)
    assert settings["counts"]["images"] == alone["counts"]["images"] + len(with_mains)
    with h5py.File(tmp_path / "mix.h5") as f:
        assert set(f["images/id"][alone["counts"]["images"] :]) == with_mains


def test_worker_processes_write_the_same_file(
    tmp_path, synthetic_sample_images, synthetic_sample_annotations, synthetic_sample_h5
):
    """Reading, checking and drawing the masks in 2 worker processes (their results taken in order) writes the file
    the one-process conversion wrote (the session's ``synthetic_sample_h5``), dataset for dataset, settings
    included."""
    source = Source(synthetic_sample_images, synthetic_sample_annotations)
    out = convert([source], tmp_path / "w2.h5", 256, progress=False, workers=2)
    with h5py.File(synthetic_sample_h5) as one, h5py.File(tmp_path / "w2.h5") as two:
        names: list[str] = []
        one.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None)
        assert len(names) >= 19 and all(name in two for name in names)
        for name in names:
            assert np.array_equal(one[name][:], two[name][:]), name
        assert json.loads(one.attrs["settings"]) == out == json.loads(two.attrs["settings"])


def test_image_masks_are_the_union_of_each_persons_region(sample_annotations):
    """The masks drawn group by group (each group's regions merged as RLEs, decoded once) equal those of every
    person's region decoded on its own and combined pixel by pixel (crowds: the synthetic sample's uncompressed RLEs,
    the real sample's polygons and RLEs)."""
    from pycocotools import mask as mask_utils

    from simplepose.data.person_masks import image_masks

    coco = COCO(str(sample_annotations))
    for image_id, img in coco.imgs.items():
        anns = coco.imgToAnns[image_id]
        h, w = img["height"], img["width"]
        region = {a["id"]: mask_utils.decode(coco.annToRLE(a)).astype(bool) for a in anns}
        none = np.zeros((h, w), bool)
        labelled = np.logical_or.reduce(
            [region[a["id"]] for a in anns if not a["iscrowd"] and a["num_keypoints"]] + [none]
        )
        unlabelled = np.logical_or.reduce(
            [region[a["id"]] for a in anns if not a["iscrowd"] and not a["num_keypoints"]] + [none]
        )
        crowd = np.logical_or.reduce([region[a["id"]] for a in anns if a["iscrowd"]] + [none])
        mask_miss, mask_all = image_masks(anns, h, w)
        assert mask_miss.flags.c_contiguous and mask_miss.dtype == mask_all.dtype == np.uint8
        assert np.array_equal(mask_miss == 0, unlabelled | (crowd & ~labelled)), image_id
        assert np.array_equal(mask_all == 255, labelled | unlabelled | crowd), image_id
        assert set(np.unique(mask_miss)) <= {0, 255} and set(np.unique(mask_all)) <= {0, 255}


@pytest.mark.parametrize("bad", [[1.0, 2.0, True, 4.0, 5.0, 6.0], [1.0, 2.0, float("nan"), 4.0, 5.0, 6.0], "0 0 5 5"])
def test_compact_reading_keeps_polygons_and_refuses_what_the_plain_one_refuses(tmp_path, small_set, bad):
    """The converter reads polygons into arrays (compact): the same values; a polygon of a boolean, a NaN or a
    string is refused the same way with or without it, naming the field."""
    from simplepose.config.skeleton_file import load_skeleton
    from simplepose.data.coco_annotations import load_coco_keypoints

    data = small_set[0]
    annotations = write_json(tmp_path / "good.json", data)
    coco = load_skeleton("coco")
    plain, compact = (load_coco_keypoints(annotations, coco, compact=c) for c in (False, True))
    for image_id, anns in plain.annotations_by_image.items():
        for a, b in zip(anns, compact.annotations_by_image[image_id]):
            if isinstance(a["segmentation"], list):
                assert all(isinstance(p, np.ndarray) for p in b["segmentation"])
                assert [list(p) for p in b["segmentation"]] == a["segmentation"]
    person = next(a for a in data["annotations"] if not a.get("iscrowd"))
    person["segmentation"] = [bad]
    write_json(tmp_path / "bad.json", data)
    messages = []
    for c in (False, True):
        with pytest.raises(AnnotationError, match="'segmentation' must be polygons") as e:
            load_coco_keypoints(tmp_path / "bad.json", coco, compact=c)
        messages.append(str(e.value))
    assert messages[0] == messages[1]
