"""Training on small devices: gradient accumulation equals the larger batch, resumes exactly when a step dies
half-way, and running out of device memory ends with one line that says what to change."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from simplepose.engine.batch_errors import OutOfMemory
from simplepose.engine.trainer import Trainer
from simplepose.models.weights import unwrap
from tests.harness.faulty_trainer import Crash, with_faults
from tests.helpers import saved_state, tiny_cfg, tiny_run_args
from tests.paths import REPO_ROOT

# BatchNorm in eval mode: the statistics of a micro-batch of 2 and of a batch of 4 differ otherwise
COMMON = ["train.epochs=1", "train.max_steps_per_epoch=3", "train.optimizer=sgd", "train.bn_eval=true",
          "train.momentum=0.9", "train.amp=off"]  # fmt: skip


def weights(trainer: Trainer) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in unwrap(trainer.model).state_dict().items()}


def test_two_micro_batches_of_two_give_the_weights_of_one_batch_of_four(synthetic_h5_64, tmp_path):
    big = Trainer(tiny_cfg(synthetic_h5_64, tmp_path / "b4", *COMMON, "train.batch_size=4", "train.lr=0.02"))
    # train.lr is per micro-batch and scales with accumulate_steps, as with the number of processes
    acc = Trainer(tiny_cfg(synthetic_h5_64, tmp_path / "b2x2", *COMMON, "train.batch_size=2",
                           "train.accumulate_steps=2", "train.lr=0.01"))  # fmt: skip
    assert acc.steps_per_epoch == big.steps_per_epoch == 3
    assert acc.schedule.base_lr == big.schedule.base_lr == 0.02
    before = weights(big)
    big.fit()
    acc.fit()
    a, b = weights(big), weights(acc)
    assert any(not torch.equal(before[k], a[k]) for k in a)  # it trained
    for k in a:
        assert torch.allclose(a[k], b[k], rtol=0, atol=1e-6), k
    # optimiser steps, not micro-batches
    assert saved_state(tmp_path / "b2x2" / "last.pt").position.global_step == 3


def test_a_run_that_dies_between_micro_batches_resumes_exactly(synthetic_h5_64, tmp_path):
    common = [*COMMON, "train.batch_size=2", "train.accumulate_steps=2", "train.max_steps_per_epoch=4",
              "train.checkpoint_every_steps=1", "train.lr=0.01"]  # fmt: skip
    full = Trainer(tiny_cfg(synthetic_h5_64, tmp_path / "full", *common))
    full.fit()
    # the 6th loss is the second micro-batch of step 2: the process dies with half a step's gradient
    dying = with_faults(Trainer(tiny_cfg(synthetic_h5_64, tmp_path / "part", *common)), crash_at_loss=5)
    with pytest.raises(Crash):
        dying.fit()
    assert saved_state(tmp_path / "part" / "last.pt").position.global_step == 2
    resumed = Trainer(tiny_cfg(synthetic_h5_64, tmp_path / "part", *common, "train.resume=auto"))
    assert (resumed.position.epoch, resumed.position.step) == (0, 2)
    resumed.fit()
    a, b = weights(full), weights(resumed)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_out_of_memory_is_one_line_naming_the_batch_and_the_checkpoint_stays(synthetic_h5_64, tmp_path):
    run = ["train.epochs=1", "train.max_steps_per_epoch=4", "train.checkpoint_every_steps=1", "train.batch_size=4"]
    with pytest.raises(OutOfMemory) as e:
        with_faults(Trainer(tiny_cfg(synthetic_h5_64, tmp_path / "in_process", *run)), oom_step=2).fit()
    m = e.value
    assert (m.device.type, m.where, m.shape) == ("cpu", "epoch 0, step 2 (global step 2)", (4, 3, 64, 64))
    assert m.savings[:2] == ["train.batch_size=2 train.accumulate_steps=2", "model.checkpoint_activations=true"]
    args = tiny_run_args(synthetic_h5_64, tmp_path, *run)
    r = subprocess.run([sys.executable, "-m", "tests.harness.faulty_trainer", "--oom-step", "2", "--", *args],
                       cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    error = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1
    assert saved_state(tmp_path / "last.pt").position.global_step == 2
    assert not list(tmp_path.glob(".*.tmp"))
