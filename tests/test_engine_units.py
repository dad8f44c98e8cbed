"""Engine pieces that need no model: schedule, sampler, checkpoint files, metrics log."""

import math
import os
import subprocess
import sys

import pytest
import torch

from config.loader import load_config
from engine.checkpoint import load_checkpoint, rng_state, save_checkpoint, set_rng_state
from engine.logger import MetricsLogger, read_metrics
from engine.sampler import EpochSampler
from engine.schedule import LRSchedule
from utils.errors import UserError
from utils.paths import REPO_ROOT


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


def test_checkpoint_round_trip_with_rng(tmp_path):
    torch.manual_seed(1)
    state = {"model": {"w": torch.randn(3)}, "rng": rng_state(), "epoch": 2, "config": {"a": [1, 2]}}
    a = torch.rand(2)
    save_checkpoint(tmp_path / "c.pt", state)
    ckpt = load_checkpoint(tmp_path / "c.pt")
    set_rng_state(ckpt["rng"])
    assert torch.equal(torch.rand(2), a)
    assert torch.equal(ckpt["model"]["w"], state["model"]["w"]) and ckpt["epoch"] == 2


def test_truncated_and_foreign_checkpoints_are_clear_errors(tmp_path):
    save_checkpoint(tmp_path / "c.pt", {"model": {"w": torch.randn(100)}})
    data = (tmp_path / "c.pt").read_bytes()
    (tmp_path / "t.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(UserError, match=r"t\.pt.*truncated or corrupt"):
        load_checkpoint(tmp_path / "t.pt")
    torch.save({"weights": {}}, tmp_path / "o.pt")
    with pytest.raises(UserError, match="not a SimplePose training checkpoint"):
        load_checkpoint(tmp_path / "o.pt")
    with pytest.raises(UserError, match="not found"):
        load_checkpoint(tmp_path / "missing.pt")


def test_checkpoint_refuses_pickled_code(tmp_path):
    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned > " + str(tmp_path / "pwned"),))

    torch.save({"model": {}, "x": Evil()}, tmp_path / "evil.pt")
    with pytest.raises(UserError):
        load_checkpoint(tmp_path / "evil.pt")
    assert not (tmp_path / "pwned").exists()


def test_crash_between_temp_write_and_rename_keeps_previous_checkpoint(tmp_path):
    """Kill the writer after its temporary file is written but before the rename."""
    save_checkpoint(tmp_path / "last.pt", {"model": {"w": torch.zeros(4)}, "epoch": 1})
    code = f"""
import os, torch
import utils.io as uio
real_replace = os.replace
def die(src, dst):
    os._exit(9)  # the process dies right before the rename
uio.os.replace = die
from engine.checkpoint import save_checkpoint
save_checkpoint({str(tmp_path / "last.pt")!r}, {{"model": {{"w": torch.ones(4)}}, "epoch": 2}})
"""
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True)
    assert r.returncode == 9
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != "last.pt"]
    assert leftovers, "the temporary file should have been written before the crash"
    ckpt = load_checkpoint(tmp_path / "last.pt")
    assert ckpt["epoch"] == 1 and torch.equal(ckpt["model"]["w"], torch.zeros(4))


def test_metrics_log_truncates_records_past_a_resume(tmp_path):
    log = MetricsLogger(tmp_path, tensorboard=False)
    for step in range(1, 6):
        log.log("train", 0, step, loss=1.0 / step, bad=math.nan)
    log.truncate_after(3)
    records = read_metrics(tmp_path)
    assert [r["global_step"] for r in records] == [1, 2, 3]
    assert records[0]["bad"] == "nan"
