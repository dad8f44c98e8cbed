"""Several datasets at once: each source's keypoints mapped onto the training skeleton by name, what a source does
not annotate left out of the loss (no gradient), sources drawn by their weights, and AP per source."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from simplepose.codec.layout import ChannelLayout
from simplepose.config.config_file import ConfigError, load_config
from simplepose.config.schema import LossConfig
from simplepose.config.skeleton_file import load_skeleton
from simplepose.data.batching import collate, labelled_to_device
from simplepose.data.conversion import Source, convert
from simplepose.data.keypoint_mapping import KeypointMapping
from simplepose.data.sources import open_sources
from simplepose.engine.preflight import training_file
from simplepose.engine.sampler import EpochSampler
from simplepose.models.loss import MultiTaskLoss
from simplepose.utils.errors import DataFileError
from tests.helpers import FAINT_MAPS, SHORT_RUN, read_metrics, tiny_cfg
from tests.paths import REPO_ROOT

COCO, CROWDPOSE = load_skeleton("coco"), load_skeleton("crowdpose")
COCO_ONLY = ("nose", "left_eye", "right_eye", "left_ear", "right_ear")


@pytest.fixture(scope="module")
def sources(synthetic_coco: Path, synthetic_crowdpose: Path, tmp_path_factory) -> dict[str, Path]:
    """The synthetic COCO and CrowdPose sets' training splits, each converted with its own keypoints (input 64)."""
    out = tmp_path_factory.mktemp("sources")
    files = {}
    for name, root in (("coco", synthetic_coco), ("crowdpose", synthetic_crowdpose)):
        h5 = out / f"{name}64.h5"
        train = root / "annotations" / "person_keypoints_train.json"
        convert([Source(root / "images", train)], h5, 64, progress=False, skeleton=name)
        files[name] = h5
    return files


def test_crowdpose_keypoints_land_on_coco_names_and_the_rest_is_unlabelled():
    mapping = KeypointMapping.by_name(CROWDPOSE.dataset_keypoints, COCO, "crowd.h5")
    assert mapping.missing == COCO_ONLY and mapping.dropped == ("head", "neck")
    people = np.arange(2 * 14 * 3, dtype=np.float32).reshape(2, 14, 3) + 1
    mapped = mapping.apply(people)
    assert mapped.shape == (2, 17, 3)
    for j, name in enumerate(COCO.dataset_keypoints):
        if name in COCO_ONLY:
            assert (mapped[:, j] == 0).all()
        else:
            np.testing.assert_array_equal(mapped[:, j], people[:, CROWDPOSE.dataset_keypoints.index(name)])
    assert "12 of coco's 17 keypoints" in mapping.coverage() and "neck: coco derives its own" in mapping.coverage()


def test_the_channels_a_source_cannot_teach_are_its_missing_keypoints_their_limbs_and_the_max_map():
    mapping = KeypointMapping.by_name(COCO.dataset_keypoints, CROWDPOSE, "coco.h5")
    layout = ChannelLayout.of(CROWDPOSE)
    weight = mapping.labelled
    for k, name in enumerate(CROWDPOSE.keypoints):
        assert weight[layout.keypoints][k] == (name not in ("head", "neck"))
    for limb, (a, b) in enumerate(CROWDPOSE.limbs):
        touches = {CROWDPOSE.keypoints[a], CROWDPOSE.keypoints[b]} & {"head", "neck"}
        assert weight[limb] == (not touches)
    assert weight[layout.person_mask] == 1 and weight[layout.max_keypoint] == 0
    full = KeypointMapping.by_name(CROWDPOSE.dataset_keypoints, CROWDPOSE, "crowd.h5")
    assert full.identity and full.labelled.all()


def test_a_source_with_no_shared_name_is_refused_naming_the_file_and_the_names():
    with pytest.raises(DataFileError, match=r"dogs\.h5.*'snout'.*matched by name"):
        KeypointMapping.by_name(("snout", "tail"), COCO, "dogs.h5")


def test_unlabelled_channels_get_exactly_zero_gradient_and_leave_the_loss_unchanged():
    """The loss and its gradient with a channel left out: no gradient reaches that channel of that sample, whatever
    the prediction there; the other samples' and channels' terms are as without it."""
    torch.manual_seed(0)
    c, scales = CROWDPOSE.num_channels, 2
    loss = MultiTaskLoss(LossConfig(stack_weights=[1], scale_weights=[1, 1]), CROWDPOSE)
    outputs = [[torch.rand(2, c, 8 >> k, 8 >> k, requires_grad=True) for k in range(scales)]]
    targets = [torch.rand(2, c, 8 >> k, 8 >> k) for k in range(scales)]
    masks = [torch.ones(2, 1, 8 >> k, 8 >> k) for k in range(scales)]
    labelled = torch.ones(2, c)
    labelled[1] = torch.from_numpy(KeypointMapping.by_name(COCO.dataset_keypoints, CROWDPOSE, "coco.h5").labelled)
    total, _ = loss(outputs, targets, masks, labelled)
    total.backward()
    off = labelled[1] == 0
    for p in outputs[0]:
        assert (p.grad[1, off] == 0).all() and (p.grad[1, ~off] != 0).any() and (p.grad[0] != 0).any()
    # the same prediction with wild values in the left-out channels: the same loss
    wild = [[p.detach().clone() for p in outputs[0]]]
    for p in wild[0]:
        p[1, off] = 7.0
    again, _ = loss(wild, targets, masks, labelled)
    assert torch.equal(again, total.detach())
    # every channel labelled is the loss without ``labelled``
    plain, _ = loss(outputs, targets, masks)
    ones, _ = loss(outputs, targets, masks, torch.ones(2, c))
    torch.testing.assert_close(ones, plain)
    with pytest.raises(Exception, match="one weight per sample and output channel"):
        loss(outputs, targets, masks, torch.ones(3, c))


def test_the_mix_gives_each_sample_its_sources_channels_mirrored_with_it(sources, tmp_path):
    cfg = tiny_cfg(sources["coco"], tmp_path / "run", "data.skeleton=crowdpose")
    mix = open_sources([str(sources["coco"]), str(sources["crowdpose"])], cfg, train=True)
    coco_part = len(mix.sources[0])
    assert len(mix) == coco_part + len(mix.sources[1]) and mix.names == ["coco64", "crowdpose64"]
    mapping = mix.sources[0].mapping
    flips = set()
    for i in range(coco_part):
        sample = mix[i]
        want = mapping.labelled_mirrored if sample["meta"]["flip"] else mapping.labelled
        np.testing.assert_array_equal(sample["labelled"].numpy(), want)
        flips.add(sample["meta"]["flip"])
    assert mix[coco_part]["labelled"].numpy().all()  # CrowdPose's own samples teach every channel
    # a COCO person's head and neck are never drawn: their keypoint maps stay empty
    layout = ChannelLayout.of(CROWDPOSE)
    head = layout.keypoints.start + CROWDPOSE.index("head")
    assert all(float(mix[i]["targets"][0][head].max()) == 0 for i in range(coco_part))
    batch = collate([mix[0], mix[coco_part]])
    assert labelled_to_device(batch, torch.device("cpu")).shape == (2, CROWDPOSE.num_channels)


def test_weights_set_each_sources_share_of_an_epoch_reproducibly():
    weights = torch.cat([torch.full((10,), 0.25 / 10, dtype=torch.float64), torch.full((90,), 0.75 / 90)])
    sampler = EpochSampler(100, seed=3, weights=weights)
    draws = [i for e in range(40) for i in sampler._indices(e)]
    share = np.mean(np.array(draws) < 10)
    assert abs(share - 0.25) < 0.03  # 4000 draws: the standard error is 0.007
    assert sampler._indices(5) == EpochSampler(100, seed=3, weights=weights)._indices(5)
    assert sampler._indices(5) != sampler._indices(6)


@pytest.mark.parametrize(
    "overrides, key",
    [
        (["data.train_sources=[a.h5,b.h5]", "data.source_weights=[1]"], "data.source_weights"),
        (["data.train_sources=[a.h5]", "data.source_weights=[0]"], "data.source_weights"),
        (["data.train_sources=[a.h5]", "data.source_val_images=[img]"], "data.source_val_annotations"),
        (["data.train_sources=[a.h5,b.h5]", "data.source_val_images=[img,'']", "data.source_val_annotations=['',x]"],
         "data.source_val_annotations"),
    ],
)  # fmt: skip
def test_per_source_lists_out_of_step_are_refused_naming_the_key(overrides, key):
    with pytest.raises(ConfigError) as e:
        load_config(REPO_ROOT / "config" / "tiny.yaml", overrides)
    assert e.value.key == key


def test_two_skeletons_train_together_and_validation_reports_ap_per_source(
    sources, synthetic_coco, synthetic_crowdpose, tmp_path, one_thread
):
    """COCO and CrowdPose figures trained as one run on COCO's skeleton: the loss falls, each source's AP is
    measured on its own validation split (CrowdPose's mapped onto COCO's names), and AP is their mean."""
    from simplepose.data.annotation_mapping import map_annotation_file
    from simplepose.engine.trainer import Trainer

    crowd_val = json.loads((synthetic_crowdpose / "annotations" / "person_keypoints_val.json").read_text())
    mapped, _ = map_annotation_file(crowd_val, COCO, "crowdpose val")
    (tmp_path / "crowd_val_coco.json").write_text(json.dumps(mapped))
    run = tmp_path / "run"
    d = "data."
    Trainer(
        tiny_cfg(
            sources["coco"],
            run,
            *SHORT_RUN,
            *FAINT_MAPS,
            f"{d}train_sources=[{sources['coco']},{sources['crowdpose']}]",
            f"{d}source_weights=[1,1]",
            f"{d}source_val_images=[{synthetic_coco / 'images'},{synthetic_crowdpose / 'images'}]",
            f"{d}source_val_annotations=[{synthetic_coco / 'annotations/person_keypoints_val.json'},"
            f"{tmp_path / 'crowd_val_coco.json'}]",
            "eval.max_images=2",
            "train.val_every=2",
        )
    ).fit()
    records = read_metrics(run)
    val = [r for r in records if r["kind"] == "val"][-1]
    assert {"coco64/AP", "crowdpose64/AP", "AP"} <= set(val)
    assert val["AP"] == pytest.approx((val["coco64/AP"] + val["crowdpose64/AP"]) / 2)
    assert (run / f"val_results_epoch{val['epoch']}_crowdpose64.json").is_file()
    losses = [r["loss"] for r in records if r["kind"] == "train"]
    assert losses[-1] < losses[0]


def test_a_missing_source_is_named_with_the_command_that_makes_it(sources, tmp_path):
    cfg = tiny_cfg(sources["coco"], tmp_path / "run")
    with pytest.raises(DataFileError, match=r"data.train_sources: .*gone\.h5: no such file.*coco_to_hdf5") as e:
        open_sources([str(sources["coco"]), str(tmp_path / "gone.h5")], cfg, train=True)
    assert e.value.key == "data.train_sources"


def test_a_folder_given_as_a_training_file_is_named_as_a_folder(sources, tmp_path):
    cfg = tiny_cfg(sources["coco"], tmp_path / "run")
    (tmp_path / "images").mkdir()
    with pytest.raises(DataFileError, match=r"data.train_sources: .*images is a folder; .*--images .*images") as e:
        open_sources([str(sources["coco"]), str(tmp_path / "images")], cfg, train=True)
    assert e.value.key == "data.train_sources" and "no such file" not in str(e.value)
    cfg.data.train = str(tmp_path / "images")
    with pytest.raises(DataFileError, match=r"data.train=.*images is a folder; training reads one HDF5 file") as e:
        training_file(cfg, "data.train", train=True)
    assert e.value.key == "data.train"


def test_each_sources_coverage_is_logged_when_the_set_opens(sources, tmp_path, caplog):
    cfg = tiny_cfg(sources["coco"], tmp_path / "run")
    with caplog.at_level("INFO", logger="simplepose.data.sources"):
        open_sources([str(sources["coco"]), str(sources["crowdpose"])], cfg, train=True)
    lines = [r.getMessage() for r in caplog.records]
    assert any("coco64.h5: 17 of coco's 17 keypoints, 50 of 50 channels taught" in line for line in lines)
    assert any("crowdpose64.h5: 12 of coco's 17 keypoints" in line and "unlabelled: nose" in line for line in lines)


def test_closing_the_mix_closes_its_files_and_a_later_read_opens_them_again(sources, tmp_path):
    """``SourceMix.close`` (what the trainer calls when a run ends) closes every source's HDF5 file in this process
    (HDF5 would refuse to open a file still open with other locking settings), and a read after it reopens it."""
    import h5py

    def open_here() -> set[Path]:
        return {Path(f.name.decode()) for f in h5py.h5f.get_obj_ids(types=h5py.h5f.OBJ_FILE)} & set(map(Path, paths))

    paths = [str(sources["coco"]), str(sources["crowdpose"])]
    mix = open_sources(paths, tiny_cfg(sources["coco"], tmp_path / "run"), train=True)
    first = mix[len(mix.sources[0])]  # a sample of each source: both files opened
    mix[0]
    assert open_here() == set(map(Path, paths))
    mix.close()
    assert not open_here()
    for path in paths:
        with h5py.File(path, "r", locking=True) as f:  # the locking default
            assert len(f["people/bbox"])
    assert torch.equal(mix[len(mix.sources[0])]["image"], first["image"])


@pytest.fixture(scope="module")
def boxes_only(synthetic_crowdpose: Path, tmp_path_factory) -> Path:
    """The synthetic CrowdPose training split as CrowdPose and AI Challenger publish theirs: no segmentation (the
    box stands in for each person's region), converted with its own keypoints (input 64)."""
    out = tmp_path_factory.mktemp("boxes")
    data = json.loads((synthetic_crowdpose / "annotations" / "person_keypoints_train.json").read_text())
    for ann in data["annotations"]:
        del ann["segmentation"]
    annotations = out / "crowdpose_boxes.json"
    annotations.write_text(json.dumps(data))
    h5 = out / "crowdpose_boxes64.h5"
    convert([Source(synthetic_crowdpose / "images", annotations)], h5, 64, progress=False, skeleton="crowdpose")
    return h5


def person_weights(dataset) -> set[float]:
    """The person-mask channel's loss weight over every sample of ``dataset`` (a SourceMix's source), both ways."""
    person = ChannelLayout.of(dataset.skeleton).person_mask
    weights = [dataset.channel_weights(int(image), flip) for image in dataset.sample_image for flip in (False, True)]
    return {float(w[person]) if w is not None else 1.0 for w in weights}


def test_a_source_without_silhouettes_does_not_teach_the_person_channel(sources, boxes_only, tmp_path, caplog):
    """Its person regions are boxes (people/box_region): weight 0 on the person-mask channel of each of its samples,
    the other channels as its keypoints allow; a source with silhouettes keeps weight 1 there."""
    import h5py

    from simplepose.data.dataset import SimplePoseDataset

    with h5py.File(boxes_only) as f, h5py.File(sources["crowdpose"]) as g:
        assert f["people/box_region"][:].all() and not g["people/box_region"][:].any()
        assert json.loads(f.attrs["settings"])["counts"]["people_with_box_as_region"] == len(f["people/bbox"])
    cfg = tiny_cfg(sources["coco"], tmp_path / "run")
    with caplog.at_level("INFO", logger="simplepose.data.dataset"):
        mix = open_sources([str(sources["coco"]), str(boxes_only)], cfg, train=True)
    assert any("crowdpose_boxes64.h5: 12 of 12 images hold people without a silhouette" in r.getMessage()
               for r in caplog.records)  # fmt: skip
    coco, boxes = mix.sources
    assert person_weights(coco) == {1.0} and person_weights(boxes) == {0.0}
    person = ChannelLayout.of(COCO).person_mask
    sample = mix[len(coco)]  # one of the box source's, as training reads it
    expected = boxes.mapping.labelled_mirrored if sample["meta"]["flip"] else boxes.mapping.labelled
    others = np.arange(COCO.num_channels) != person
    np.testing.assert_array_equal(sample["labelled"].numpy()[others], expected[others])
    assert sample["labelled"][person] == 0 and float(sample["targets"][0][person].max()) > 0  # drawn, not taught
    # alone (data.train): the same rule; a file with silhouettes only carries no weights at all
    crowd = tiny_cfg(boxes_only, tmp_path / "run", "data.skeleton=crowdpose")
    assert person_weights(SimplePoseDataset(boxes_only, crowd, train=True)) == {0.0}
    assert "labelled" not in SimplePoseDataset(sources["crowdpose"], crowd, train=True)[0]


def test_a_file_made_before_people_box_region_falls_back_on_its_count(sources, boxes_only, tmp_path):
    """Without the dataset, a file whose settings count people with their box as region is all boxes; one that
    counts none is all silhouettes."""
    import shutil

    import h5py

    from simplepose.data.dataset import SimplePoseDataset

    cfg = tiny_cfg(sources["crowdpose"], tmp_path / "run", "data.skeleton=crowdpose")
    for h5, expected in ((boxes_only, {0.0}), (sources["crowdpose"], {1.0})):
        old = tmp_path / h5.name
        shutil.copy(h5, old)
        with h5py.File(old, "a") as f:
            del f["people/box_region"]
        assert person_weights(SimplePoseDataset(old, cfg, train=True)) == expected


def test_the_real_coco_sample_is_outlined_and_teaches_every_channel(coco_sample_h5, tmp_path):
    """COCO outlines every person: no box region in the converted sample, so its samples carry no channel weights."""
    import h5py

    from simplepose.data.dataset import SimplePoseDataset

    with h5py.File(coco_sample_h5) as f:
        assert len(f["people/box_region"]) == len(f["people/bbox"]) > 0 and not f["people/box_region"][:].any()
    dataset = SimplePoseDataset(coco_sample_h5, tiny_cfg(coco_sample_h5, tmp_path / "run", "data.input_size=256"), True)
    assert person_weights(dataset) == {1.0} and dataset.channel_weights(0, False) is None
