"""The training engine on the synthetic sample with a tiny model: resume, clipping, freezing, amp, NaN, errors."""

from __future__ import annotations

import subprocess
import sys

import torch

from engine.checkpoint import load_checkpoint
from engine.trainer import Trainer
from models.weights import unwrap
from tests.harness.faulty_trainer import faulty_trainer
from tests.helpers import flat_optimizer_state, tiny_cfg, tiny_run_args
from utils.paths import REPO_ROOT


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
    assert resumed.epoch == 1 and resumed.global_step == 3
    resumed.fit()

    assert_same_state(model_state(full), model_state(resumed))
    for a, b in zip(flat_optimizer_state(full.optimizer.state_dict()),
                    flat_optimizer_state(resumed.optimizer.state_dict())):  # fmt: skip
        assert torch.equal(a, b)
    ckpt = load_checkpoint(tmp_path / "split" / "last.pt")
    assert ckpt["epoch"] == 2 and ckpt["global_step"] == 6 and ckpt["config"]["train"]["epochs"] == 2
    assert {"model", "optimizer", "scheduler", "scaler", "rng", "version", "best_metric"} <= ckpt.keys()
    assert (tmp_path / "split" / "config.yaml").is_file()


def test_mid_epoch_checkpoint_resumes_at_the_same_step(synthetic_h5_64, tmp_path):
    common = ["train.epochs=1", "train.max_steps_per_epoch=4", "train.checkpoint_every_steps=2"]
    full = Trainer(tiny_cfg(synthetic_h5_64, tmp_path / "full", *common))
    full.fit()
    partial = Trainer(tiny_cfg(synthetic_h5_64, tmp_path / "part", *common, "train.max_steps_per_epoch=2",
                               "train.epochs=1"))  # fmt: skip
    partial.train_epoch(0)  # writes last.pt at step 2 of epoch 0 and "dies"
    resumed = Trainer(tiny_cfg(synthetic_h5_64, tmp_path / "part", *common, "train.resume=auto"))
    assert (resumed.epoch, resumed.start_step) == (0, 2)
    resumed.fit()
    assert_same_state(model_state(full), model_state(resumed))


def test_clipping_bounds_the_update(synthetic_h5_64, tmp_path):
    # plain SGD with lr 1: the update is exactly the (clipped) gradient
    clip = 1e-3
    t = Trainer(tiny_cfg(synthetic_h5_64, tmp_path, "train.optimizer=sgd", "train.momentum=0", "train.weight_decay=0",
                         "train.lr=1", f"train.clip_grad_norm={clip}", "train.epochs=1",
                         "train.max_steps_per_epoch=1"))  # fmt: skip
    before = [p.detach().clone() for p in t.params]
    t.train_epoch(0)
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
    t = faulty_trainer(nan_steps={5})(cfg)
    assert t.precision.dtype == torch.bfloat16
    t.sampler.shuffle = False  # the same 4 samples every epoch: the loss must fall
    t.sampler.size = 4
    t.fit()
    rows = [r for r in (tmp_path / "metrics.jsonl").read_text().splitlines() if '"kind": "train"' in r]
    import json

    losses = [json.loads(r)["loss"] for r in rows]
    finite = [x for x in losses if isinstance(x, float)]
    assert t.counters["skipped_nonfinite"] == 1
    assert sum(finite[-3:]) < sum(finite[:3])
    for p in t.params:
        assert torch.isfinite(p).all()


def run_train(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "train.py", "--config", "config/quickstart.yaml", *args],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)  # fmt: skip


def test_bad_inputs_give_clear_errors(synthetic_h5_64, tmp_path):
    r = run_train("data.train=/nonexistent/train.h5", f"train.out_dir={tmp_path}")
    assert r.returncode == 2 and "Traceback" not in r.stderr and "/nonexistent/train.h5" in r.stderr

    r = run_train(f"data.train={synthetic_h5_64}", "data.input_size=128", f"train.out_dir={tmp_path}")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "64" in r.stderr and "128" in r.stderr and "coco_to_hdf5" in r.stderr

    # a checkpoint of another architecture: two stacks saved, one stack asked
    t = Trainer(tiny_cfg(synthetic_h5_64, tmp_path / "two", "model.stacks=2", "loss.stack_weights=[1,1]",
                         "train.epochs=1", "train.max_steps_per_epoch=1"))  # fmt: skip
    t.fit()
    two = tmp_path / "two" / "last.pt"
    r = subprocess.run([sys.executable, "train.py",
                        *tiny_run_args(synthetic_h5_64, tmp_path, f"train.init_weights={two}")],
                       cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "unexpected" in r.stderr and "hourglasses.1." in r.stderr and "model.stacks=2" in r.stderr

    data = (tmp_path / "two" / "last.pt").read_bytes()
    (tmp_path / "cut.pt").write_bytes(data[: len(data) // 3])
    cut = tmp_path / "cut.pt"
    r = subprocess.run([sys.executable, "train.py", *tiny_run_args(synthetic_h5_64, tmp_path, "model.stacks=2",
                                                                "loss.stack_weights=[1,1]", f"train.resume={cut}")],
                       cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 2 and "Traceback" not in r.stderr and "cut.pt" in r.stderr and "truncated" in r.stderr
