"""Fine-tuning across skeletons: train.init_weights from a COCO checkpoint into a CrowdPose run loads every tensor
that does not depend on the skeleton, re-initialises (and lists) the output heads and the merges that read
predictions, and the run trains and evaluates with CrowdPose's figures."""

from __future__ import annotations

import json
import logging

import pytest
import torch

from simplepose.checkpoint.format import Checkpoint
from simplepose.data.conversion import Source, convert
from simplepose.engine.logger import read_metrics
from simplepose.engine.trainer import Trainer
from simplepose.evaluate import coco_eval
from simplepose.models.weights import SKELETON_DEPENDENT, WeightsMismatch, unwrap
from tests.helpers import FAINT_MAPS, SHORT_RUN, assert_the_loss_fell, tiny_cfg

pytestmark = pytest.mark.usefixtures("one_thread")
TWO_STACKS = ("model.stacks=2", "loss.stack_weights=[1,1]")  # so that there are merges


@pytest.fixture(scope="module")
def coco_checkpoint(synthetic_h5_64, tmp_path_factory):
    """A checkpoint of a 2-stack tiny COCO run (one step on the synthetic sample), as the trainer writes it."""
    run = tmp_path_factory.mktemp("coco_run")
    Trainer(tiny_cfg(synthetic_h5_64, run, *TWO_STACKS, "train.max_steps_per_epoch=1")).fit()
    return run / "last.pt"


@pytest.fixture(scope="module")
def crowdpose_h5(synthetic_crowdpose, tmp_path_factory):
    out = tmp_path_factory.mktemp("crowdpose_h5") / "train64.h5"
    train = synthetic_crowdpose / "annotations" / "person_keypoints_train.json"
    convert([Source(synthetic_crowdpose / "images", train)], out, 64, progress=False, skeleton="crowdpose")
    return out


def test_from_coco_to_crowdpose_the_heads_start_afresh_the_rest_loads_and_it_trains(
    coco_checkpoint, crowdpose_h5, synthetic_crowdpose, tmp_path, capsys, caplog
):
    saved = Checkpoint.load(coco_checkpoint).model
    run = tmp_path / "run"
    with caplog.at_level(logging.INFO, logger="simplepose.engine"):
        trainer = Trainer(tiny_cfg(crowdpose_h5, run, *TWO_STACKS, *SHORT_RUN, "data.skeleton=crowdpose",
                                   f"train.init_weights={coco_checkpoint}"))  # fmt: skip
    state = unwrap(trainer.model).state_dict()
    reinitialised = [k for k in state if SKELETON_DEPENDENT.match(k)]
    # 2 stacks x 5 scales of heads (weight, bias) and 1 x 5 merges reading the predictions
    assert len(reinitialised) == 2 * 5 * 2 + 5 and "merges.0.3.from_predictions.conv.weight" in reinitialised
    assert trainer.initial_weights.reinitialised == reinitialised
    said = [r.getMessage() for r in caplog.records if "re-initialised" in r.getMessage()]
    assert len(said) == 1 and all(k in said[0] for k in reinitialised)  # the run's log lists them
    for k, v in state.items():
        if k in reinitialised:
            assert v.shape != saved[k].shape and v.shape[0 if "heads" in k else 1] == 36, k
        else:
            assert torch.equal(v, saved[k]), k
    trainer.fit()
    assert_the_loss_fell(read_metrics(run))
    out = tmp_path / "results.json"
    val = synthetic_crowdpose / "annotations" / "person_keypoints_val.json"
    args = ["--ckpt", str(run / "last.pt"), "--images", str(synthetic_crowdpose / "images"), "--annotations", str(val)]
    assert coco_eval.main([*args, "--out", str(out), "eval.max_images=2", *FAINT_MAPS]) == 0
    printed = capsys.readouterr().out
    assert "type=  easy" in printed and "AP_hard" in printed  # CrowdPose's figures: the checkpoint carries them
    results = json.loads(out.read_text())
    assert results and all(len(r["keypoints"]) == 42 for r in results)


def test_a_checkpoint_of_the_same_skeleton_loads_whole_and_another_network_size_is_still_refused(
    coco_checkpoint, synthetic_h5_64, crowdpose_h5, tmp_path
):
    same = tiny_cfg(synthetic_h5_64, tmp_path / "same", *TWO_STACKS, f"train.init_weights={coco_checkpoint}")
    trainer = Trainer(same)
    assert trainer.initial_weights.ok and trainer.initial_weights.reinitialised == []
    saved = Checkpoint.load(coco_checkpoint).model
    assert all(torch.equal(v, saved[k]) for k, v in unwrap(trainer.model).state_dict().items())
    with pytest.raises(WeightsMismatch) as e:
        Trainer(tiny_cfg(crowdpose_h5, tmp_path / "other", "data.skeleton=crowdpose",
                         "model.stacks=3", "loss.stack_weights=[1,1,1]",
                         f"train.init_weights={coco_checkpoint}"))  # fmt: skip
    assert e.value.file == str(coco_checkpoint) and any(k.startswith("hourglasses.2.") for k in e.value.report.missing)
