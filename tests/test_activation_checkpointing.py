"""model.checkpoint_activations: the same gradients, BatchNorm statistics and weights as the plain network, on two
synthetic samples; evaluation never recomputes; a run resumes with the setting toggled."""

from __future__ import annotations

import pytest
import torch

import simplepose.models.posenet as posenet
from simplepose.checkpoint.format import Checkpoint, CheckpointError
from simplepose.config.config_file import load_config
from simplepose.config.schema import Config
from simplepose.data.batching import collate, images_to_float
from simplepose.data.dataset import SimplePoseDataset
from simplepose.engine.checkpointer import check_same_model
from simplepose.engine.trainer import Trainer
from simplepose.evaluate.inference.checkpoint_model import load_model
from simplepose.models import MultiTaskLoss, build_model
from simplepose.models.weights import unwrap
from tests.helpers import COCO
from tests.paths import TINY_PRESET

pytestmark = pytest.mark.usefixtures("one_thread")  # fast on a busy 2-core machine
TWO_STACKS = ["model.stacks=2", "loss.stack_weights=[1,1]"]  # the tiny preset with a merge between two stacks


def two_stack_cfg(checkpoint: bool) -> Config:
    return load_config(TINY_PRESET, [*TWO_STACKS, f"model.checkpoint_activations={str(checkpoint).lower()}"])


@pytest.fixture(scope="module")
def two_samples(synthetic_h5_64):
    """Two samples of the synthetic sample at input 64, as the trainer gets them (uint8 images, targets, masks)."""
    dataset = SimplePoseDataset(synthetic_h5_64, two_stack_cfg(False), train=False)
    batch = collate([dataset[0], dataset[1]])
    assert batch["targets"][0][:, 30:48].amax() > 0.5  # people with keypoints
    return batch


def one_training_step(checkpoint: bool, batch: dict, channels_last: bool = False, autocast: bool = False):
    """(model after one forward+backward from seed-0 weights, stem forward calls, loss)."""
    cfg = two_stack_cfg(checkpoint)
    torch.manual_seed(0)
    model = build_model(cfg).train().to(memory_format=torch.channels_last if channels_last else torch.contiguous_format)
    stem_calls = []
    model.stem.register_forward_pre_hook(lambda *_: stem_calls.append(1))
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        total, _ = MultiTaskLoss(cfg, COCO)(model(images_to_float(batch["image"], channels_last)), batch["targets"],
                                      batch["masks"])  # fmt: skip
    total.backward()
    return model, len(stem_calls), total.detach()


@pytest.mark.parametrize("channels_last, autocast", [(False, False), (True, True)], ids=["fp32", "channels_last-bf16"])
def test_checkpointing_gives_the_plain_gradients_and_batchnorm_statistics(two_samples, channels_last, autocast):
    plain, plain_calls, plain_loss = one_training_step(False, two_samples, channels_last, autocast)
    ckpt, ckpt_calls, ckpt_loss = one_training_step(True, two_samples, channels_last, autocast)
    assert (plain_calls, ckpt_calls) == (1, 2)  # the stem really ran again in the backward pass
    assert torch.equal(plain_loss, ckpt_loss)
    grads = dict(ckpt.named_parameters())
    for name, p in plain.named_parameters():
        assert p.grad is not None and grads[name].grad is not None, name
        assert (p.grad - grads[name].grad).abs().max() <= 1e-6, name
    # A naive recomputation would apply the momentum twice and count two batches.
    ckpt_state = ckpt.state_dict()
    assert ckpt_state.keys() == plain.state_dict().keys()
    for name, buffer in plain.named_buffers():
        if name.endswith("num_batches_tracked"):
            assert buffer.item() == ckpt_state[name].item() == 1, name
        else:
            assert (buffer - ckpt_state[name]).abs().max() <= 1e-6, name


def test_evaluation_and_no_grad_run_the_plain_path(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("recomputed")

    monkeypatch.setattr(posenet, "checkpoint", refuse)
    model = build_model(two_stack_cfg(True))
    image = torch.rand(2, 3, 64, 64)
    with torch.no_grad():
        model.eval()(image)
        model.train()(image)
    with pytest.raises(AssertionError, match="recomputed"):
        model(image)  # training with grad: the only case that recomputes


def test_resume_may_toggle_checkpointing_but_not_the_architecture():
    saved = Checkpoint({}, config=two_stack_cfg(True), file="last.pt")
    check_same_model(saved, two_stack_cfg(False))
    other = load_config(TINY_PRESET, [*TWO_STACKS, "model.inp_dim=32"])
    with pytest.raises(CheckpointError) as e:
        check_same_model(saved, other)
    assert (e.value.file, e.value.key) == ("last.pt", "config")


def test_run_resumed_with_checkpointing_on_matches_one_without(synthetic_h5_64, tmp_path):
    common = [f"data.train={synthetic_h5_64}", "train.max_steps_per_epoch=1", "train.optimizer=sgd", "train.lr=0.01"]
    full = Trainer(load_config(TINY_PRESET, [*common, "train.epochs=2", f"train.out_dir={tmp_path / 'full'}"]))
    full.fit()
    split = [*common, f"train.out_dir={tmp_path / 'split'}"]
    Trainer(load_config(TINY_PRESET, [*split, "train.epochs=1"])).fit()
    resumed = Trainer(load_config(TINY_PRESET, [*split, "train.epochs=2", "train.resume=auto",
                                                "model.checkpoint_activations=true"]))  # fmt: skip
    assert resumed.position.epoch == 1 and unwrap(resumed.model).cfg.checkpoint_activations
    resumed.fit()
    expected = unwrap(full.model).state_dict()
    for name, value in unwrap(resumed.model).state_dict().items():
        assert (value.double() - expected[name].double()).abs().max() <= 1e-6, name

    # evaluation rebuilds the network from the checkpoint's settings: the same outputs either way
    image = torch.rand(1, 3, 64, 64)
    outputs = []
    for run in ("full", "split"):
        model, cfg = load_model(str(tmp_path / run / "last.pt"), None, [], torch.device("cpu"))
        assert cfg.model.checkpoint_activations == (run == "split")
        with torch.no_grad():
            outputs.append(model(image)[-1][0])
    assert (outputs[0] - outputs[1]).abs().max() <= 1e-6
