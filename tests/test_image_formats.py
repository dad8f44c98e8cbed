"""Images as users have them (data/image_files.py): every format OpenCV reads converts, the HDF5 keeps each file's
original bytes, the dataset decodes them to the pixels OpenCV gives, and a PNG dataset trains; one EXIF-orientation
rule (the stored pixels, COCO's annotations refer to them) in the converter, the dataset, the evaluator, the demo and
the API."""

from __future__ import annotations

import io
import json
import shutil
import struct

import cv2
import h5py
import numpy as np
import pytest
from PIL import Image

from simplepose.data.conversion import Source, convert
from simplepose.data.dataset import SimplePoseDataset
from simplepose.data.image_files import IMREAD_FLAGS, read_image
from tests.helpers import SHORT_RUN, tiny_cfg

pytestmark = pytest.mark.usefixtures("one_thread")


def encode(picture: np.ndarray, kind: str) -> tuple[str, bytes]:
    """(file suffix, bytes) of a BGR uint8 picture as ``kind``."""
    if kind == "png8":
        return ".png", cv2.imencode(".png", picture)[1].tobytes()
    if kind == "png16":
        return ".png", cv2.imencode(".png", picture.astype(np.uint16) * 257)[1].tobytes()
    if kind == "progressive":
        return ".jpg", cv2.imencode(".jpg", picture, [cv2.IMWRITE_JPEG_PROGRESSIVE, 1])[1].tobytes()
    if kind == "cmyk":
        buffer = io.BytesIO()
        Image.fromarray(picture[:, :, ::-1]).convert("CMYK").save(buffer, "JPEG", quality=95)
        return ".jpg", buffer.getvalue()
    if kind == "grey_png":
        return ".png", cv2.imencode(".png", cv2.cvtColor(picture, cv2.COLOR_BGR2GRAY))[1].tobytes()
    return f".{kind}", cv2.imencode(f".{kind}", picture)[1].tobytes()  # bmp, webp


KINDS = ("png8", "png16", "progressive", "cmyk", "bmp", "webp", "grey_png")


def reencoded(root, tmp_path, kinds, split="train") -> tuple:
    """The synthetic set's ``split`` with its images re-encoded, image i as ``kinds[i % len(kinds)]``: (annotations,
    images folder, {file name: kind})."""
    data = json.loads((root / "annotations" / f"person_keypoints_{split}.json").read_text())
    folder = tmp_path / "images"
    folder.mkdir(exist_ok=True)
    kinds_of = {}
    for i, img in enumerate(data["images"]):
        kind = kinds[i % len(kinds)]
        suffix, data_bytes = encode(cv2.imread(str(root / "images" / img["file_name"])), kind)
        img["file_name"] = f"{img['id']}_{kind}{suffix}"
        (folder / img["file_name"]).write_bytes(data_bytes)
        kinds_of[img["file_name"]] = kind
    path = tmp_path / f"{split}.json"
    path.write_text(json.dumps(data))
    return path, folder, kinds_of


def test_every_format_opencv_reads_converts_keeping_the_original_bytes(synthetic_coco, tmp_path):
    annotations, images, kinds = reencoded(synthetic_coco, tmp_path, KINDS)
    h5 = tmp_path / "mixed.h5"
    settings = convert([Source(images, annotations)], h5, 64, progress=False)
    data = json.loads(annotations.read_text())
    names = {img["id"]: img["file_name"] for img in data["images"]}
    converted = set()
    with h5py.File(h5) as f:
        offsets, blob = f["images/jpeg_offsets"][:], f["images/jpeg"]
        for i, image_id in enumerate(f["images/id"][:]):
            stored = blob[offsets[i] : offsets[i + 1]].tobytes()
            assert stored == (images / names[image_id]).read_bytes()  # kept as the file is, not re-encoded
            converted.add(kinds[names[image_id]])
    assert (
        converted == set(KINDS)
        and settings["counts"]["images"] == len(names) - settings["counts"]["images_without_main_person"]
    )
    cfg = tiny_cfg(h5, tmp_path / "run")
    dataset = SimplePoseDataset(h5, cfg, train=False)
    for i in range(len(dataset.image_id)):
        file = images / names[int(dataset.image_id[i])]
        expected = cv2.imread(str(file), IMREAD_FLAGS)
        decoded, _ = dataset.decode_stored_image(i, np.eye(3)[:2] * 1.0)
        np.testing.assert_array_equal(decoded[..., :3], expected, err_msg=str(file))


def test_a_png_dataset_trains(synthetic_coco, tmp_path):
    from simplepose.engine.trainer import Trainer

    annotations, images, _ = reencoded(synthetic_coco, tmp_path, ("png8",))
    h5 = tmp_path / "png.h5"
    convert([Source(images, annotations)], h5, 64, progress=False)
    trainer = Trainer(tiny_cfg(h5, tmp_path / "run", *SHORT_RUN[2:], "train.epochs=1", "train.max_steps_per_epoch=1",
                               "train.val_every=0"))  # fmt: skip
    trainer.fit()
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in records if r.get("kind") == "train"]
    assert losses and all(np.isfinite(losses))


def with_exif_orientation(jpeg: bytes, orientation: int) -> bytes:
    """The same JPEG with an APP1 Exif segment holding only an Orientation tag (no re-encoding)."""
    ifd = struct.pack(">H", 1) + struct.pack(">HHIHH", 0x0112, 3, 1, orientation, 0) + struct.pack(">I", 0)
    payload = b"Exif\0\0" + b"MM\0\x2a" + struct.pack(">I", 8) + ifd
    return jpeg[:2] + b"\xff\xe1" + struct.pack(">H", len(payload) + 2) + payload + jpeg[2:]


def test_exif_orientation_is_ignored_everywhere_the_same(synthetic_coco, trained_tiny_ckpt, tmp_path):
    """A photo tagged "rotate 90" (orientation 6): cv2.imread turns it, the project reads the stored pixels, and the
    API, the demo and the evaluation find the same people in it as in the untagged file."""
    from simplepose.evaluate import coco_eval, demo
    from simplepose.evaluate.estimator import PoseEstimator

    data = json.loads((synthetic_coco / "annotations" / "person_keypoints_val.json").read_text())
    img = data["images"][0]
    data["images"], data["annotations"] = [img], [a for a in data["annotations"] if a["image_id"] == img["id"]]
    folder = tmp_path / "images"
    folder.mkdir()
    plain = (synthetic_coco / "images" / img["file_name"]).read_bytes()
    (folder / img["file_name"]).write_bytes(with_exif_orientation(plain, 6))
    annotations = tmp_path / "val.json"
    annotations.write_text(json.dumps(data))
    tagged = folder / img["file_name"]
    assert cv2.imread(str(tagged)).shape[:2] == (img["width"], img["height"])  # OpenCV's default turns it
    assert read_image(tagged).shape[:2] == (img["height"], img["width"])
    convert([Source(folder, annotations)], tmp_path / "tagged.h5", 64, progress=False)  # the converter: same size

    overrides = ["eval.scales=[1.0]", "eval.flip=false", "eval.peak_threshold=0.02", "eval.limb_threshold=0.02",
                 "eval.min_mean_score=0"]  # fmt: skip
    estimator = PoseEstimator.from_checkpoint(trained_tiny_ckpt, "cpu", scales=[1.0], flip=False, peak_threshold=0.02,
                                              limb_threshold=0.02, min_mean_score=0)  # fmt: skip
    reference = estimator(cv2.imdecode(np.frombuffer(plain, np.uint8), cv2.IMREAD_COLOR))
    api = estimator(read_image(tagged))
    assert len(reference) > 0 and len(api) == len(reference)
    np.testing.assert_array_equal([p.keypoints for p in api], [p.keypoints for p in reference])

    out = tmp_path / "results.json"
    assert coco_eval.main(["--ckpt", str(trained_tiny_ckpt), "--images", str(folder), "--annotations",
                           str(annotations), "--out", str(out), *overrides]) == 0  # fmt: skip
    evaluated = json.loads(out.read_text())
    assert len(evaluated) == len(reference)
    np.testing.assert_allclose(sorted(r["score"] for r in evaluated), sorted(p.score for p in reference), atol=1e-3)

    shown = tmp_path / "demo.json"
    assert demo.main(["--ckpt", str(trained_tiny_ckpt), "--input", str(tagged), "--out", str(tmp_path / "demo"),
                      "--json", str(shown), *overrides]) == 0  # fmt: skip
    assert len(json.loads(shown.read_text())) == len(reference)


def test_the_format_bench_prints_sizes_and_rates(capsys):
    from bench import image_formats

    assert image_formats.main(["--images", "4", "--input-size", "64", "--rounds", "1", "--items", "2"]) == 0
    out = capsys.readouterr().out
    assert "PNG / JPEG: HDF5 size x" in out and out.count("samples/s (best of 1") == 2, out


def with_orientation_tag(picture: np.ndarray, kind: str, orientation: int, **options) -> bytes:
    """A BGR uint8 picture written by Pillow as ``kind`` (TIFF, PNG, WEBP, JPEG, AVIF) whose EXIF / TIFF Orientation
    tag is ``orientation`` (PNG: an eXIf chunk; AVIF: Pillow writes it as an irot / imir transform)."""
    exif = Image.Exif()
    exif[0x0112] = orientation
    buffer = io.BytesIO()
    Image.fromarray(picture[:, :, ::-1]).save(buffer, kind, exif=exif, **options)
    return buffer.getvalue()


@pytest.mark.parametrize("compression", [None, "tiff_lzw", "tiff_deflate"])
@pytest.mark.parametrize("orientation", range(1, 9))
def test_a_tiff_is_read_as_stored_whatever_its_orientation_tag(orientation, compression):
    """OpenCV 5.0 turns a TIFF by its Orientation tag even with IMREAD_IGNORE_ORIENTATION: every reader of the
    project gets the stored pixels all the same, and the size check agrees with the stored size."""
    from simplepose.data.image_files import decode_image, inspect_image, stored_size
    from simplepose.data.jpeg import decode_bgra

    picture = np.random.default_rng(orientation).integers(0, 256, (5, 7, 3), dtype=np.uint8)  # 7 wide, 5 high
    data = with_orientation_tag(picture, "TIFF", orientation, compression=compression)
    with Image.open(io.BytesIO(data)) as im:
        assert im.getexif()[0x0112] == orientation  # the tag is there
    np.testing.assert_array_equal(decode_image(data), picture)
    np.testing.assert_array_equal(decode_bgra(np.frombuffer(data, np.uint8)), picture)  # the dataset's decode
    assert stored_size(data) == (7, 5) and inspect_image(data, 7, 5) == ((7, 5), None)
    assert inspect_image(data, 5, 7)[1] == "its pixels are 7x5, not the annotation's 5x7"


@pytest.mark.parametrize("kind", ["PNG", "WEBP", "JPEG", "AVIF"])
def test_orientation_tags_of_other_formats_are_ignored(kind, tmp_path):
    """PNG (eXIf), WebP and JPEG (EXIF) tagged 6 are read as stored by the flag; AVIF (irot) is never turned by
    OpenCV: the stored grid, as Pillow reports its size."""
    from PIL import features

    if kind == "AVIF" and not features.check("avif"):
        pytest.skip("Pillow was built without AVIF")
    picture = np.zeros((40, 64, 3), np.uint8)
    picture[:10, :20], picture[30:, 40:] = (255, 0, 0), (0, 0, 255)
    options = {"WEBP": {"lossless": True}, "JPEG": {"quality": 95}, "AVIF": {"quality": 100}}.get(kind, {})
    path = tmp_path / f"tagged.{kind.lower()}"
    path.write_bytes(with_orientation_tag(picture, kind, 6, **options))
    if cv2.imdecode(np.frombuffer(path.read_bytes(), np.uint8), IMREAD_FLAGS) is None:
        pytest.skip(f"this OpenCV does not read {kind}")
    with Image.open(path) as im:
        assert im.size == (64, 40)  # Pillow's stored size
    pixels = read_image(path)
    assert pixels.shape == (40, 64, 3)
    if kind in ("PNG", "WEBP"):
        np.testing.assert_array_equal(pixels, picture)
    else:  # lossy: the same picture, not turned
        assert np.abs(pixels.astype(int) - picture).mean() < 8


def test_a_rotated_tag_tiff_converts_and_evaluates_as_stored(sample, tmp_path):
    """The sample's first image as a TIFF tagged orientation 6, on its real annotations: with width/height it
    converts (the size check agrees), without them the stored size is recorded; the HDF5 keeps the bytes, the
    dataset and the evaluator read the stored pixels, and the oracle scores it as the JPEG."""
    from simplepose.config.config_file import load_config
    from simplepose.data.image_files import read_decoded_checked
    from simplepose.evaluate.evaluation import evaluate_oracle
    from tests.harness.bad_inputs import rotated_tiff

    data = json.loads((sample / "annotations" / "person_keypoints_sample.json").read_text())
    data["images"] = data["images"][:1]
    img = data["images"][0]
    data["annotations"] = [a for a in data["annotations"] if a["image_id"] == img["id"]]
    folder = tmp_path / "images"
    folder.mkdir()
    original = img["file_name"]
    shutil.copyfile(sample / "images" / original, folder / original)
    stored = cv2.imread(str(folder / original), IMREAD_FLAGS)
    suffix, tiff = rotated_tiff(folder / original)
    img["file_name"] = f"{img['id']}{suffix}"
    (folder / img["file_name"]).write_bytes(tiff)
    turned = cv2.imdecode(np.frombuffer(tiff, np.uint8), IMREAD_FLAGS)  # what OpenCV alone gives
    assert turned.shape[:2] == (img["width"], img["height"])
    np.testing.assert_array_equal(read_image(folder / img["file_name"]), stored)
    pixels, problem = read_decoded_checked(folder / img["file_name"], img)  # the evaluator's read
    assert problem is None
    np.testing.assert_array_equal(pixels, stored)

    unsized = json.loads(json.dumps(data))
    unsized["images"][0].pop("width"), unsized["images"][0].pop("height")
    figures = {}
    for name, given in (("sized", data), ("unsized", unsized)):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(given))
        h5 = tmp_path / f"{name}.h5"
        convert([Source(folder, path)], h5, 64, progress=False)
        with h5py.File(h5) as f:
            assert (f["images/width"][0], f["images/height"][0]) == (img["width"], img["height"])
            assert f["images/jpeg"][:].tobytes() == tiff
        dataset = SimplePoseDataset(h5, tiny_cfg(h5, tmp_path / "run"), train=False)
        np.testing.assert_array_equal(dataset.decode_stored_image(0, np.eye(3)[:2])[0][..., :3], stored)
        cfg = load_config(None, ["eval.scales=[1.0]", "eval.flip=false"])
        figures[name] = evaluate_oracle(folder, path, cfg, progress=False)[0]
    jpeg = tmp_path / "jpeg.json"
    data["images"][0]["file_name"] = original
    jpeg.write_text(json.dumps(data))
    reference = evaluate_oracle(folder, jpeg, load_config(None, ["eval.scales=[1.0]", "eval.flip=false"]),
                                          progress=False)[0]  # fmt: skip
    assert figures["sized"] == figures["unsized"] == reference and reference["AP"] > 0.5
