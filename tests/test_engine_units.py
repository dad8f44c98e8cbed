"""Engine pieces that need no model: schedule, sampler, checkpoint files, metrics log."""

import math
import os
import subprocess
import sys

import pytest
import torch

from simplepose.checkpoint.format import Checkpoint, CheckpointError
from simplepose.config.config_file import load_config, to_dict
from simplepose.config.schema import Config
from simplepose.config.skeleton_file import load_skeleton
from simplepose.engine.checkpointer import TrainState, rng_state, set_rng_state
from simplepose.engine.hook_base import HookList
from simplepose.engine.hooks import CheckpointHook, ValidationHook
from simplepose.engine.logger import MetricsLogger, read_metrics
from simplepose.engine.position import TrainingPosition
from simplepose.engine.sampler import EpochSampler
from simplepose.engine.schedule import LRSchedule
from tests.helpers import saved_state
from tests.paths import REPO_ROOT

COCO = load_skeleton("coco")


def test_paper_schedule_matches_formula():
    cfg = load_config(REPO_ROOT / "config" / "simplepose_coco.yaml")
    n = 100  # iterations per epoch
    s = LRSchedule.from_config(cfg.train, n, world_size=4)
    base = 2.5e-5 * 4
    # original: lr = base * 0.2^(epoch // 15) * (1 + step + epoch * N) / (3 N) during the first 3 epochs
    for epoch, step in [(0, 0), (0, 57), (1, 10), (2, 99)]:
        assert s.lr(epoch, step) == pytest.approx(base * (1 + step + epoch * n) / (3 * n), rel=1e-12)
    assert s.lr(3, 0) == pytest.approx(base)
    assert s.lr(14, 99) == pytest.approx(base)
    assert s.lr(15, 0) == pytest.approx(base * 0.2)
    assert s.lr(47, 3) == pytest.approx(base * 0.2**3)
    assert s.lr(80, 0) == pytest.approx(base * 0.2**5)  # no restart unless asked


def test_original_restart_at_epoch_78_is_reachable():
    cfg = load_config(REPO_ROOT / "config" / "simplepose_coco.yaml", ["train.lr_restart_epoch=78"])
    s = LRSchedule.from_config(cfg.train, 10, world_size=1)
    assert s.lr(77, 0) == pytest.approx(2.5e-5 * 0.2**5)
    assert s.lr(78, 0) == pytest.approx(2.5e-5)
    assert s.lr(82, 9) == pytest.approx(2.5e-5)
    assert s.lr(83, 0) == pytest.approx(2.5e-5 * 0.2)


def test_no_world_size_scaling_when_disabled():
    cfg = load_config(None, ["train.lr_scale_world_size=false", "train.warmup_epochs=0"])
    assert LRSchedule.from_config(cfg.train, 10, world_size=8).lr(0, 0) == pytest.approx(cfg.train.lr)


def test_sampler_ranks_partition_the_global_batch():
    single = EpochSampler(23, seed=5, rank=0, world_size=1, batch_size=4)
    ranks = [EpochSampler(23, seed=5, rank=r, world_size=2, batch_size=2) for r in range(2)]
    for s in [single, *ranks]:
        s.set_epoch(3)
    one = list(single)
    two = [list(r) for r in ranks]
    assert len(one) == 20 and all(len(t) == 10 for t in two)
    for b in range(5):  # i-th batch of 4 == union of the i-th batches of 2 on each rank
        assert sorted(one[4 * b : 4 * b + 4]) == sorted(two[0][2 * b : 2 * b + 2] + two[1][2 * b : 2 * b + 2])
    single.set_epoch(4)
    assert list(single) != one
    single.set_epoch(3, skip_batches=2)
    assert list(single) == one[8:]


def training_checkpoint(**progress) -> Checkpoint:
    weights = {"w": torch.randn(3)}
    optimizer = {"state": {0: {"momentum_buffer": torch.randn(3)}}, "param_groups": [{"lr": 0.1, "params": [0]}]}
    state = TrainState(optimizer, TrainingPosition(**progress), world_size=1, rng=[rng_state()], scaler={"scale": 8.0})
    return Checkpoint(weights, config=Config(), skeleton=COCO, train_state=state.to_dict(), code_version="abc123")


def test_checkpoint_round_trip_with_rng(tmp_path):
    torch.manual_seed(1)
    ckpt = training_checkpoint(epoch=2, step=1, global_step=5, best_metric=0.25, counters={"skipped_nonfinite": 1})
    a = torch.rand(2)
    ckpt.save(tmp_path / "c.pt")
    loaded = Checkpoint.load(tmp_path / "c.pt")
    set_rng_state(saved_state(loaded).rng[0])
    assert torch.equal(torch.rand(2), a)
    assert torch.equal(loaded.model["w"], ckpt.model["w"])
    assert saved_state(loaded).position == saved_state(ckpt).position
    assert (loaded.config, loaded.skeleton, loaded.code_version) == (ckpt.config, COCO, "abc123")
    assert saved_state(loaded).scaler == {"scale": 8.0} and loaded.file == str(tmp_path / "c.pt")
    assert torch.equal(saved_state(loaded).optimizer["state"][0]["momentum_buffer"],
                       saved_state(ckpt).optimizer["state"][0]["momentum_buffer"])  # fmt: skip
    assert Checkpoint.from_dict(loaded.to_dict()).to_dict().keys() == ckpt.to_dict().keys()  # symmetric


def test_legacy_format_checkpoints_load(tmp_path):
    """The legacy forms, written by hand as older code wrote them: format 1 (the flat dict the trainer wrote before
    the Checkpoint type), the unversioned {model, config, epoch} dict of older tools (its config partial), and a
    format this code does not know yet."""
    torch.manual_seed(0)
    rng = rng_state()
    flat = {"model": {"module.w": torch.ones(2)}, "optimizer": {"state": {}, "param_groups": []}, "scheduler": {},
            "scaler": {}, "epoch": 2, "step": 0, "global_step": 6, "world_size": 1, "best_metric": 0.5,
            "counters": {"skipped_nonfinite": 1}, "rng": rng, "ranks_in_sync": True, "config": to_dict(Config()),
            "skeleton": COCO.to_dict(), "version": "abc", "format_version": 1}  # fmt: skip
    torch.save(flat, tmp_path / "v1.pt")
    v1 = Checkpoint.load(tmp_path / "v1.pt")
    assert saved_state(v1).position == TrainingPosition(2, 0, 6, 0.5, {"skipped_nonfinite": 1})
    assert list(v1.model) == ["w"] and v1.skeleton == COCO and v1.code_version == "abc" and v1.config == Config()
    assert "model" not in v1.train_state and "config" not in v1.train_state  # only the training entries
    assert len(saved_state(v1).rng) == 1 and torch.equal(saved_state(v1).rng[0]["torch"], rng["torch"])

    torch.save({"model": {"w": torch.ones(2)}, "config": {"model": {"stacks": 2}}, "epoch": 0}, tmp_path / "tiny.pt")
    tiny = Checkpoint.load(tmp_path / "tiny.pt")
    assert tiny.train_state is None and tiny.config is None and tiny.skeleton is None
    assert tiny.model_settings == {"stacks": 2}  # a partial config tells the model only
    assert tiny.keypoints().skeleton == COCO  # saved before checkpoints carried one: COCO's

    torch.save({**flat, "format_version": 99}, tmp_path / "future.pt")
    with pytest.raises(CheckpointError) as e:
        Checkpoint.load(tmp_path / "future.pt")
    assert (e.value.file, e.value.key) == (str(tmp_path / "future.pt"), "format_version")


def test_truncated_and_foreign_checkpoints_are_clear_errors(tmp_path):
    Checkpoint({"w": torch.randn(100)}).save(tmp_path / "c.pt")
    data = (tmp_path / "c.pt").read_bytes()
    (tmp_path / "t.pt").write_bytes(data[: len(data) // 2])
    for path in (tmp_path / "t.pt", tmp_path / "missing.pt"):
        with pytest.raises(CheckpointError) as e:
            Checkpoint.load(path)
        assert e.value.file == str(path)
    torch.save({"weights": {}}, tmp_path / "o.pt")
    with pytest.raises(CheckpointError) as e:
        Checkpoint.load(tmp_path / "o.pt")
    assert (e.value.file, e.value.key) == (str(tmp_path / "o.pt"), "model")


def test_checkpoint_refuses_pickled_code(tmp_path):
    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned > " + str(tmp_path / "pwned"),))

    torch.save({"model": {}, "x": Evil()}, tmp_path / "evil.pt")
    with pytest.raises(CheckpointError) as e:
        Checkpoint.load(tmp_path / "evil.pt")
    assert e.value.file == str(tmp_path / "evil.pt")
    assert not (tmp_path / "pwned").exists()


def test_crash_between_temp_write_and_rename_keeps_previous_checkpoint(tmp_path):
    """Kill the writer after its temporary file is written but before the rename."""
    Checkpoint({"w": torch.zeros(4)}, origin="run 1").save(tmp_path / "last.pt")
    code = f"""
import os, torch
import simplepose.utils.io as uio
real_replace = os.replace
def die(src, dst):
    os._exit(9)  # the process dies right before the rename
uio.os.replace = die
from simplepose.checkpoint.format import Checkpoint
Checkpoint({{"w": torch.ones(4)}}, origin="run 2").save({str(tmp_path / "last.pt")!r})
"""
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True)
    assert r.returncode == 9
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != "last.pt"]
    assert leftovers, "the temporary file should have been written before the crash"
    ckpt = Checkpoint.load(tmp_path / "last.pt")
    assert ckpt.origin == "run 1" and torch.equal(ckpt.model["w"], torch.zeros(4))


def test_metrics_log_truncates_records_past_a_resume(tmp_path):
    log = MetricsLogger(tmp_path, tensorboard=False)
    for step in range(1, 6):
        log.log("train", 0, step, loss=1.0 / step, bad=math.nan)
    log.truncate_after(3)
    records = read_metrics(tmp_path)
    assert [r["global_step"] for r in records] == [1, 2, 3]
    assert records[0]["bad"] == "nan"


def test_validation_does_not_autotune_cudnn_per_shape_and_gives_training_its_setting_back(monkeypatch, tmp_path):
    """In-training validation sees many padded shapes: cuDNN's autotuning (on for training) is off while it runs,
    and back afterwards, even when evaluation fails. The flag is read on the CPU too; only CUDA acts on it."""
    import simplepose.engine.validation as validation
    from simplepose.models import build_model

    cfg = load_config(
        REPO_ROOT / "config" / "tiny.yaml",
        [f"train.out_dir={tmp_path}", "data.val_images=IMAGES", "data.val_annotations=ANN.json"],
    )
    seen = []

    def evaluate(model, images, annotations, cfg, device, out_json=None, diagnose_dir=None):
        seen.append((torch.backends.cudnn.benchmark, model.training))
        if len(seen) == 2:
            raise RuntimeError("evaluation failed")
        return {"AP": 0.5}, "summary"

    monkeypatch.setattr(validation, "evaluate_model", evaluate)
    monkeypatch.setattr(validation, "load_ground_truth", lambda *args: "the annotations of ANN.json")
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", True)
    model = build_model(cfg).train()
    validator = validation.Validator(cfg, model, None, None, torch.device("cpu"), None, 0, 1)
    assert validator.validate(0) == {"AP": 0.5}
    assert seen == [(False, False)] and torch.backends.cudnn.benchmark is True and model.training
    with pytest.raises(RuntimeError, match="evaluation failed"):
        validator.validate(1)
    assert seen[1] == (False, False) and torch.backends.cudnn.benchmark is True and model.training


def test_hook_list_refuses_a_hook_placed_before_one_whose_figures_it_reads():
    validation = ValidationHook(validator=None, logger=None, data=None, is_main=True)
    checkpoint = CheckpointHook(checkpointer=None, every_steps=0)
    assert HookList([validation, checkpoint]).hooks == [validation, checkpoint]
    with pytest.raises(ValueError, match="CheckpointHook reads what ValidationHook writes"):
        HookList([checkpoint, validation])
    hooks = HookList([checkpoint])
    with pytest.raises(ValueError, match="must come after it"):
        hooks.extend([validation])  # registered later, it would run after the hook that reads its figures
