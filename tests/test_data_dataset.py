"""The dataset on the converted samples: shapes, geometry, flips and masks on the synthetic and the real one;
workers and epochs, input-size check, errors on the synthetic one."""

import dataclasses

import cv2
import h5py
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from simplepose.codec.targets import mask_scales
from simplepose.config.config_file import load_config
from simplepose.data import augment
from simplepose.data.batching import collate, images_to_float
from simplepose.data.dataset import SimplePoseDataset
from simplepose.evaluate.inference.multiscale import prepare_input
from simplepose.utils.errors import DataFileError, UserError
from tests.helpers import COCO, COCO_LAYOUT


@pytest.fixture(scope="module")
def cfg():
    return load_config(None, ["data.input_size=256"])


@pytest.fixture(scope="module")
def train_set(sample_h5, cfg):
    return SimplePoseDataset(sample_h5, cfg, train=True)


def test_item_layout(train_set, cfg):
    item = train_set[0]
    assert item["image"].shape == (3, 256, 256) and item["image"].dtype == torch.uint8
    assert [tuple(t.shape) for t in item["targets"]] == [(50, 64 >> k, 64 >> k) for k in range(5)]
    assert [tuple(m.shape) for m in item["masks"]] == [(1, 64 >> k, 64 >> k) for k in range(5)]
    assert set(item["meta"]) == {"image_id", "index", "epoch", "flip"}
    t0 = item["targets"][0].numpy()
    np.testing.assert_allclose(item["targets"][2].numpy(), t0.reshape(50, 16, 4, 16, 4).mean((2, 4)), atol=1e-6)


def test_keypoints_land_on_their_peaks(train_set):
    hits = 0
    for index in range(0, len(train_set), 5):
        params = train_set.sample_params(index)
        keypoints, bbox = train_set.read_people(index)
        centre = (bbox[0] + bbox[2] / 2, bbox[1] + bbox[3] / 2)
        m = augment.affine_matrix(centre, float(bbox[3]), params, (256, 256), 0.6)
        moved = augment.transform_keypoints(keypoints, m, params.flip, COCO)
        maps = train_set[index]["targets"][0].numpy()
        for j in range(18):
            x, y, v = moved[0, j]  # the main person
            col, row = round((x - 1.5) / 4), round((y - 1.5) / 4)
            if v >= 2 or not (1 <= col < 63 and 1 <= row < 63):
                continue
            channel = maps[COCO_LAYOUT.keypoints.start + j]
            assert channel[row, col] > 0.94  # within half a cell of a sigma-9 peak
            others = moved[1:, j]
            if np.any((others[:, 2] < 2) & (np.abs(others[:, :2] - (x, y)).max(1) < 12)):
                continue  # another person's same keypoint within 3 cells: its peak may be the higher one there
            assert (
                channel[row - 1 : row + 2, col - 1 : col + 2].max()
                == channel[row - 2 : row + 3, col - 2 : col + 3].max()
            )
            hits += 1
    assert hits > 50


def test_flip_mirrors_everything_and_swaps_sides(sample_h5, cfg):
    # Fixed limb mode: the faithful limb box rounds asymmetrically (docs/data.md#limb-maps), so only fixed mode
    # mirrors exactly.
    fixed = dataclasses.replace(cfg, targets=dataclasses.replace(cfg.targets, limb_mode="fixed"))
    dataset = SimplePoseDataset(sample_h5, fixed, train=True)
    index = 3
    plain = dataset.build(index, augment.AugmentParams(degree=15, scale=1.1))
    flipped = dataset.build(index, augment.AugmentParams(degree=15, scale=1.1, flip=True))
    # The flip mirrors the rotated picture about the crop's vertical axis.
    np.testing.assert_allclose(flipped["image"].numpy(), plain["image"].numpy()[:, :, ::-1], atol=2)
    tp, tf = plain["targets"][0].numpy(), flipped["targets"][0].numpy()
    mirrored = tp[np.array(COCO_LAYOUT.flip)][:, :, ::-1]
    np.testing.assert_allclose(tf[COCO_LAYOUT.limbs], mirrored[COCO_LAYOUT.limbs], atol=1e-4)
    # Keypoint windows are rounded to cells, so their faint edges (< 0.03) may differ.
    np.testing.assert_allclose(tf[COCO_LAYOUT.keypoints.start :], mirrored[COCO_LAYOUT.keypoints.start :], atol=0.03)
    rsho = COCO.keypoints.index("right_shoulder")
    assert tp[COCO_LAYOUT.keypoints.start + rsho].max() > 0.5
    assert not np.allclose(
        tf[COCO_LAYOUT.keypoints.start + rsho], tp[COCO_LAYOUT.keypoints.start + rsho][:, ::-1], atol=1e-2
    )
    np.testing.assert_allclose(flipped["masks"][0].numpy(), plain["masks"][0].numpy()[:, :, ::-1], atol=1e-2)


def test_ignore_mask_is_warped_and_thresholded(train_set, sample_h5):
    # The first sample of an image with a crowd region: some cells are ignored, outside the picture is supervised.
    with h5py.File(sample_h5, "r", locking=False) as f:
        crowd, first_person = f["people/iscrowd"][:], f["images/person_offsets"][:]
    crowded = [i for i in range(len(first_person) - 1) if crowd[first_person[i] : first_person[i + 1]].any()]
    ignored = [i for i in range(len(train_set)) if train_set.sample_image[i] in crowded]
    assert ignored and all(train_set.has_ignore[train_set.sample_image[i]] for i in ignored)
    masks = train_set.build(ignored[0], augment.IDENTITY)["masks"]
    m0 = masks[0].numpy()[0]
    assert (m0 == 0).any() and (m0 == 1).any()
    assert ((m0 == 0) | (m0 >= 0.5)).all()
    for k in range(1, 5):
        mk = masks[k].numpy()[0]
        assert ((mk == 0) | (mk >= 0.5)).all()


def test_mask_scales_match_torch_bilinear():
    rng = np.random.default_rng(0)
    mask = (rng.random((64, 64)) > 0.3).astype(np.float32)
    ours = mask_scales(mask, 5, 0.5)
    for k, m in enumerate(ours):
        ref = torch.nn.functional.interpolate(torch.from_numpy(mask)[None, None], size=(64 >> k, 64 >> k),
                                              mode="bilinear", align_corners=False)[0, 0].numpy()  # fmt: skip
        ref[ref < 0.5] = 0
        np.testing.assert_allclose(m, ref, atol=1e-6)


def batches(dataset, workers, loader=None):
    loader = loader or DataLoader(dataset, batch_size=3, num_workers=workers, shuffle=False, collate_fn=collate)
    out = []
    for i, b in enumerate(loader):
        image = images_to_float(b["image"]).flatten(1)
        out.append(torch.cat([image, b["targets"][0].flatten(1), b["masks"][1].flatten(1)], 1))
        if i == 1:
            break
    return torch.cat(out)


def test_workers_and_epochs(synthetic_sample_h5, cfg):
    dataset = SimplePoseDataset(synthetic_sample_h5, cfg, train=True)
    dataset.set_epoch(2)
    single = batches(dataset, 0)
    parallel = batches(dataset, 2)
    assert torch.equal(single, parallel)
    dataset.set_epoch(3)
    other = batches(dataset, 2)
    assert not torch.equal(single, other)
    dataset.set_epoch(2)
    assert torch.equal(batches(dataset, 0), single)
    # Persistent workers see set_epoch too (the epoch lives in shared memory).
    loader = DataLoader(dataset, batch_size=3, num_workers=2, persistent_workers=True, collate_fn=collate)
    assert torch.equal(batches(dataset, 2, loader), single)
    dataset.set_epoch(3)
    assert torch.equal(batches(dataset, 2, loader), other)


def test_validation_items_are_deterministic(synthetic_sample_h5, cfg):
    val = SimplePoseDataset(synthetic_sample_h5, cfg, train=False)
    a, b = val[1], val[1]
    val.set_epoch(5)
    c = val[1]
    assert torch.equal(a["image"], b["image"]) and torch.equal(a["image"], c["image"])
    assert a["meta"]["flip"] is False


def test_refuses_a_file_for_another_input_size(synthetic_sample_h5, cfg):
    other = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, input_size=512))
    with pytest.raises(DataFileError) as e:
        SimplePoseDataset(synthetic_sample_h5, other, train=True)
    assert (e.value.file, e.value.key) == (str(synthetic_sample_h5), "data.input_size")
    assert "--input-size 512" in str(e.value)  # it quotes the converter's command for this size


def test_show_sample_writes_a_panel_picture(synthetic_sample_h5, tmp_path):
    from simplepose.data.show_sample import main

    out = tmp_path / "panel.png"
    assert main(["--h5", str(synthetic_sample_h5), "--index", "2", "--out", str(out), "--train"]) == 0
    panel = cv2.imread(str(out))
    assert panel.shape[1] == 4 * 256 and panel.shape[0] > 256
    assert main(["--h5", str(synthetic_sample_h5), "--index", "999", "--out", str(out)]) == 2


def test_reduced_jpeg_decode_stays_aligned(sample_h5, cfg):
    full_cfg = dataclasses.replace(cfg, augment=dataclasses.replace(cfg.augment, reduced_decode=False))
    reduced, full = SimplePoseDataset(sample_h5, cfg, True), SimplePoseDataset(sample_h5, full_cfg, True)
    params = augment.AugmentParams(scale=0.7)
    for index in range(len(reduced)):
        _, bbox = reduced.read_people(index)
        centre = (bbox[0] + bbox[2] / 2, bbox[1] + bbox[3] / 2)
        if augment.linear_scale(augment.affine_matrix(centre, float(bbox[3]), params, (256, 256), 0.6)) <= 0.5:
            break
    else:
        pytest.fail("no sample is shrunk enough for a reduced decode")
    a = reduced.build(index, params)["image"].numpy() / 255
    b = full.build(index, params)["image"].numpy() / 255
    diff = np.abs(a - b).mean()
    assert diff < 0.03
    assert diff < np.abs(a[:, :, 1:] - b[:, :, :-1]).mean() and diff < np.abs(a[:, 1:] - b[:, :-1]).mean()


def test_uint8_images_become_the_float_images_of_before(train_set):
    """images_to_float(sample) equals the former float path (the warped BGR pixels, plane by plane times
    float32(1/255)) bit for bit, and a collated batch is channels-last and gives the same values."""
    samples = [train_set[i] for i in (0, 5)]
    for s in samples:
        pixels = s["image"].permute(1, 2, 0).numpy()  # the warped (H, W, 3) picture the sample is a view of
        assert pixels.base is not None
        before = np.stack([p * np.float32(1 / 255) for p in cv2.split(pixels)])
        after = images_to_float(s["image"][None])[0].numpy()
        assert after.dtype == np.float32 and np.array_equal(after, before)
    batch = collate(samples)
    assert batch["image"].shape == (2, 3, 256, 256) and batch["image"].dtype == torch.uint8
    assert batch["image"].is_contiguous(memory_format=torch.channels_last)
    assert batch["targets"][0].shape == (2, 50, 64, 64) and batch["meta"]["index"].tolist() == [0, 5]
    as_float = images_to_float(batch["image"], channels_last=True)
    assert as_float.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(images_to_float(batch["image"]), as_float) and images_to_float(batch["image"]).is_contiguous()
    assert torch.equal(as_float[1], images_to_float(samples[1]["image"][None])[0])
    # Evaluation scales its own images (evaluate/inference/multiscale.py): bit for bit the same inputs.
    padded, _ = prepare_input(samples[1]["image"].permute(1, 2, 0).numpy(), 1.0, train_set.cfg.eval)
    np.testing.assert_array_equal(as_float[1].numpy(), padded.transpose(2, 0, 1))
    with pytest.raises(TypeError):
        images_to_float(as_float)


def test_blob_reader_reads_what_h5py_reads(synthetic_sample_h5, tmp_path):
    import h5py

    from simplepose.data.blob_reader import BlobReader, map_file

    rng = np.random.default_rng(0)
    compressed = tmp_path / "compressed.h5"
    with h5py.File(compressed, "w") as f:
        f.create_dataset("x", data=np.arange(5000, dtype=np.uint32), chunks=(512,), compression="gzip")
    for path, names in ((synthetic_sample_h5, ("images/jpeg", "images/mask_lengths", "images/jpeg_offsets")),
                        (compressed, ("x",))):  # fmt: skip
        with h5py.File(path, "r", locking=False) as f:
            buffer = map_file(str(path))
            for name in names:
                reader = BlobReader(f[name], buffer)
                assert reader.mapped == (name != "x")  # gzip: read through h5py
                n = len(f[name])
                for a, b in [(0, n), (n - 1, n), (3, 3)] + [sorted(rng.integers(0, n + 1, 2)) for _ in range(30)]:
                    got = reader.read(a, b)
                    assert got.dtype == f[name].dtype and np.array_equal(got, f[name][a:b])


def test_blob_reader_finds_every_chunk_in_one_pass(tmp_path, monkeypatch):
    """The chunk offsets read in one pass over the index (``chunk_table``) are those HDF5 gives chunk by chunk,
    never-written chunks included (-1: read through h5py, its fill value); reads are the same with the table and with
    the one-by-one look-ups of an h5py without ``chunk_iter``."""
    import h5py

    from simplepose.data import blob_reader
    from simplepose.data.blob_reader import BlobReader, chunk_table, map_file

    path = tmp_path / "holes.h5"
    with h5py.File(path, "w") as f:
        d = f.create_dataset("x", (5000,), np.uint32, chunks=(64,), maxshape=(None,))
        d[:1000] = np.arange(1000)
        d[3000:] = np.arange(3000, 5000)  # chunks 16 to 45 never written
    rng = np.random.default_rng(1)
    ranges = [(0, 5000), (990, 3010), (1500, 1600)] + [sorted(rng.integers(0, 5001, 2)) for _ in range(40)]
    with h5py.File(path, "r", locking=False) as f:
        d = f["x"]
        table = chunk_table(d)
        expected = [d.id.get_chunk_info_by_coord((c * 64,)).byte_offset for c in range(len(table))]
        assert len(table) == 79 and [None if t < 0 else t for t in table.tolist()] == expected
        assert (table[16:46] == -1).all() and (table[:16] >= 0).all() and (table[46:] >= 0).all()
        with_table = [BlobReader(d, map_file(str(path))).read(a, b) for a, b in ranges]
        monkeypatch.setattr(blob_reader, "chunk_table", lambda dataset: np.zeros(0, np.int64))
        one_by_one = [BlobReader(d, map_file(str(path))).read(a, b) for a, b in ranges]
        for (a, b), x, y in zip(ranges, with_table, one_by_one):
            assert np.array_equal(x, d[a:b]) and np.array_equal(y, d[a:b]), (a, b)


def test_a_code_error_keeps_its_type_and_names_the_sample(synthetic_sample_h5, cfg, monkeypatch):
    """A failure that is not the file's fault (here a bug in building) is not turned into "rebuild the file": it
    keeps its type and traceback, with a note naming the sample, which the trainer shows for a worker's failure."""
    from simplepose.engine.batch_errors import worker_error_message

    dataset = SimplePoseDataset(synthetic_sample_h5, cfg, train=True)
    image_id = int(dataset.image_id[dataset.sample_image[3]])

    def broken(index):
        raise ValueError("a bug in the pipeline")

    monkeypatch.setattr(dataset, "build", broken)
    with pytest.raises(ValueError, match="a bug in the pipeline") as e:
        dataset[3]
    assert not isinstance(e.value, UserError)
    if not hasattr(e.value, "add_note"):  # Python 3.10: no notes
        return
    assert f"while loading sample 3 (image id {image_id}) of {synthetic_sample_h5}" in e.value.__notes__[0]
    loader = DataLoader(torch.utils.data.Subset(dataset, [3]), num_workers=1, collate_fn=collate)
    with pytest.raises(ValueError) as e:
        next(iter(loader))
    message = worker_error_message(str(e.value))
    assert message.startswith("ValueError: a bug in the pipeline") and f"sample 3 (image id {image_id})" in message
    assert "Traceback" not in message and "num_workers=0" in message
