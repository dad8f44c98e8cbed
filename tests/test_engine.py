"""The training engine on the synthetic sample with a tiny model: resume, clipping, freezing, amp, NaN, errors."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
import torch

from simplepose.checkpoint.format import Checkpoint, CheckpointError
from simplepose.engine.trainer import Trainer
from simplepose.models.weights import WeightsMismatch, unwrap
from simplepose.utils.errors import DataFileError
from tests.harness.faulty_trainer import with_faults
from tests.helpers import flat_optimizer_state, saved_state, tiny_cfg
from tests.paths import REPO_ROOT


def model_state(trainer):
    return {k: v.clone() for k, v in unwrap(trainer.model).state_dict().items()}


def assert_same_state(a: dict, b: dict):
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


def test_exact_resume_is_bit_identical(synthetic_h5_64, tmp_path):
    common = ["train.epochs=2", "train.max_steps_per_epoch=3", "train.optimizer=sgd", "train.lr=0.01"]
    full = Trainer(tiny_cfg(synthetic_h5_64, tmp_path / "full", *common))
    full.fit()

    first = Trainer(tiny_cfg(synthetic_h5_64, tmp_path / "split", *common[1:], "train.epochs=1"))
    first.fit()
    resumed = Trainer(tiny_cfg(synthetic_h5_64, tmp_path / "split", *common, "train.resume=auto"))
    assert resumed.position.epoch == 1 and resumed.position.global_step == 3
    resumed.fit()

    assert_same_state(model_state(full), model_state(resumed))
    for a, b in zip(flat_optimizer_state(full.optimizer.state_dict()),
                    flat_optimizer_state(resumed.optimizer.state_dict())):  # fmt: skip
        assert torch.equal(a, b)
    ckpt = Checkpoint.load(tmp_path / "split" / "last.pt")
    state = saved_state(ckpt)
    assert state.position.epoch == 2 and state.position.global_step == 6 and ckpt.config.train.epochs == 2
    assert state.optimizer["state"] and state.rng and ckpt.code_version and ckpt.skeleton is not None
    assert state.position.best_metric == -math.inf and state.scaler == {}  # no validation here; no loss scaling
    assert (tmp_path / "split" / "config.yaml").is_file()


def test_mid_epoch_checkpoint_resumes_at_the_same_step(synthetic_h5_64, tmp_path):
    common = ["train.epochs=1", "train.max_steps_per_epoch=4", "train.checkpoint_every_steps=2"]
    full = Trainer(tiny_cfg(synthetic_h5_64, tmp_path / "full", *common))
    full.fit()
    partial = Trainer(tiny_cfg(synthetic_h5_64, tmp_path / "part", *common, "train.max_steps_per_epoch=2",
                               "train.epochs=1"))  # fmt: skip
    partial.train_epoch()  # writes last.pt at step 2 of epoch 0 and "dies"
    resumed = Trainer(tiny_cfg(synthetic_h5_64, tmp_path / "part", *common, "train.resume=auto"))
    assert (resumed.position.epoch, resumed.position.step) == (0, 2)
    resumed.fit()
    assert_same_state(model_state(full), model_state(resumed))


def test_clipping_bounds_the_update(synthetic_h5_64, tmp_path):
    # plain SGD with lr 1: the update is exactly the (clipped) gradient
    clip = 1e-3
    t = Trainer(tiny_cfg(synthetic_h5_64, tmp_path, "train.optimizer=sgd", "train.momentum=0", "train.weight_decay=0",
                         "train.lr=1", f"train.clip_grad_norm={clip}", "train.epochs=1",
                         "train.max_steps_per_epoch=1"))  # fmt: skip
    before = [p.detach().clone() for p in t.params]
    t.train_epoch()
    step = torch.sqrt(sum(((p.detach() - b) ** 2).sum() for p, b in zip(t.params, before)))
    assert 0 < step.item() <= clip * (1 + 1e-4)
    row = [r for r in (tmp_path / "metrics.jsonl").read_text().splitlines() if '"train"' in r][-1]
    assert float(row.split('"grad_norm": ')[1].split(",")[0]) > clip  # the raw gradient was larger


def test_freezing_keeps_parameters_and_keeps_them_out_of_the_optimizer(synthetic_h5_64, tmp_path):
    t = Trainer(tiny_cfg(synthetic_h5_64, tmp_path, "train.freeze=[^(?!.*heads)]", "train.epochs=1",
                         "train.max_steps_per_epoch=2", "train.optimizer=sgd", "train.lr=0.1"))  # fmt: skip
    model = unwrap(t.model)
    frozen = {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}
    trainable = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    assert frozen and trainable and set(frozen) == set(t.frozen)
    in_opt = {id(p) for g in t.optimizer.param_groups for p in g["params"]}
    assert all(id(p) not in in_opt for n, p in model.named_parameters() if n in frozen)
    t.fit()
    after = dict(model.named_parameters())
    assert all(torch.equal(after[n], v) for n, v in frozen.items())
    assert any(not torch.equal(after[n], v) for n, v in trainable.items())


def test_bf16_autocast_trains_and_nan_is_skipped_and_counted(synthetic_h5_64, tmp_path):
    cfg = tiny_cfg(synthetic_h5_64, tmp_path, "train.amp=bf16", "train.epochs=6", "train.max_steps_per_epoch=2",
                   "train.optimizer=adam", "train.lr=3e-3")  # fmt: skip
    t = with_faults(Trainer(cfg), nan_steps={5})
    assert t.precision.dtype == torch.bfloat16
    t.batches.sampler.shuffle = False  # the same 4 samples every epoch: the loss must fall
    t.batches.sampler.size = 4
    t.fit()
    rows = [r for r in (tmp_path / "metrics.jsonl").read_text().splitlines() if '"kind": "train"' in r]
    import json

    losses = [json.loads(r)["loss"] for r in rows]
    finite = [x for x in losses if isinstance(x, float)]
    assert t.position.counters["skipped_nonfinite"] == 1
    assert sum(finite[-3:]) < sum(finite[:3])
    for p in t.params:
        assert torch.isfinite(p).all()


def test_bad_inputs_give_clear_errors(synthetic_h5_64, tmp_path):
    with pytest.raises(DataFileError) as e:
        Trainer(tiny_cfg("/nonexistent/train.h5", tmp_path))
    assert (e.value.file, e.value.key) == ("/nonexistent/train.h5", "data.train")

    with pytest.raises(DataFileError) as e:
        Trainer(tiny_cfg(synthetic_h5_64, tmp_path, "data.input_size=128"))
    assert (e.value.file, e.value.key) == (str(synthetic_h5_64), "data.input_size")  # built for 64

    # a checkpoint of another architecture: two stacks saved, one stack asked
    t = Trainer(tiny_cfg(synthetic_h5_64, tmp_path / "two", "model.stacks=2", "loss.stack_weights=[1,1]",
                         "train.epochs=1", "train.max_steps_per_epoch=1"))  # fmt: skip
    t.fit()
    two = tmp_path / "two" / "last.pt"
    with pytest.raises(WeightsMismatch) as e:
        Trainer(tiny_cfg(synthetic_h5_64, tmp_path, f"train.init_weights={two}"))
    assert e.value.file == str(two) and not e.value.report.missing
    assert any(k.startswith("hourglasses.1.") for k in e.value.report.unexpected)

    data = two.read_bytes()
    cut = tmp_path / "cut.pt"
    cut.write_bytes(data[: len(data) // 3])
    with pytest.raises(CheckpointError) as e:
        Trainer(tiny_cfg(synthetic_h5_64, tmp_path, "model.stacks=2", "loss.stack_weights=[1,1]",
                         f"train.resume={cut}"))  # fmt: skip
    assert e.value.file == str(cut)


def test_a_bad_input_ends_train_py_with_one_error_line(tmp_path):
    r = subprocess.run([sys.executable, "train.py", "--config", "config/quickstart.yaml",
                        "data.train=/nonexistent/train.h5", f"train.out_dir={tmp_path}"],
                       cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 2 and "Traceback" not in r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "/nonexistent/train.h5" in errors[0]
