"""What a run trains with, said and kept: the recipe line at the start of every run, the weight decay an optimiser
gets when none is chosen, a resume that changes train.epochs, the schedule, the optimiser or the decay (each named;
a cosine never jumps back up), and the closing summary's validation figures (only those measured)."""

from __future__ import annotations

import dataclasses
import logging
import shutil
from pathlib import Path

import pytest
import torch

from simplepose.checkpoint.format import Checkpoint, CheckpointError
from simplepose.config.config_file import load_config
from simplepose.config.schema import TrainConfig
from simplepose.engine.optim import build_optimizer, weight_decay_of
from simplepose.engine.recipe import recipe_changes, recipe_line
from simplepose.engine.run import QUICKSTART_PRESET, finished_message, validation_lines
from simplepose.engine.schedule import LRSchedule
from simplepose.engine.trainer import Trainer
from tests.helpers import saved_state, tiny_cfg
from tests.paths import PAPER_PRESET, REPO_ROOT

COSINE = TrainConfig(lr=1.0, lr_scale_world_size=False, warmup_epochs=1, epochs=5, lr_schedule="cosine", lr_floor=0.1)


def rates(s: LRSchedule, epochs: range) -> list[float]:
    return [s.lr(e, i) for e in epochs for i in range(s.steps_per_epoch)]


# ---------------------------------------------------------------------------------------------- the cosine on resume


def test_a_finished_cosine_trained_on_stays_at_its_floor_and_says_so():
    finished = LRSchedule.from_config(COSINE, steps_per_epoch=10)
    longer = LRSchedule.from_config(dataclasses.replace(COSINE, epochs=8), steps_per_epoch=10)
    line = longer.resume(finished.state_dict(), epoch=5, step=0)
    assert rates(longer, range(5, 8)) == pytest.approx([0.1] * 30)  # what an unplanned cosine raised to ~0.26
    assert rates(LRSchedule.from_config(dataclasses.replace(COSINE, epochs=8), 10), range(5, 6))[0] > 0.2
    assert line.startswith("train.epochs 5 -> 8 on resume: the cosine decay had reached its floor (0.1 x base")
    assert "trains on at that rate" in line and "\n" not in line


def test_a_cosine_lengthened_mid_run_falls_on_from_where_it_was_to_the_new_end():
    planned = LRSchedule.from_config(COSINE, steps_per_epoch=10)
    longer = LRSchedule.from_config(dataclasses.replace(COSINE, epochs=8), steps_per_epoch=10)
    line = longer.resume(planned.state_dict(), epoch=3, step=4)
    after = rates(longer, range(3, 8))[4:]
    assert after[0] == pytest.approx(planned.lr(3, 4))  # no jump: the rate the run had reached
    assert all(a > b for a, b in zip(after, after[1:])) and after[-1] == pytest.approx(0.1)
    assert "re-planned from the rate reached at global step 34" in line and "at this run's last step (79" in line
    # the re-planned plan is what the next checkpoint keeps: resumed again with the same epochs, it goes on unchanged
    again = LRSchedule.from_config(dataclasses.replace(COSINE, epochs=8), steps_per_epoch=10)
    assert again.resume(longer.state_dict(), epoch=6, step=0) is None
    assert rates(again, range(6, 8)) == rates(longer, range(6, 8))


def test_the_same_epochs_resumed_is_the_uninterrupted_schedule():
    s = LRSchedule.from_config(COSINE, steps_per_epoch=10)
    resumed = LRSchedule.from_config(COSINE, steps_per_epoch=10)
    assert resumed.resume(s.state_dict(), epoch=2, step=3) is None
    assert rates(resumed, range(5)) == rates(s, range(5))


# ---------------------------------------------------------------------------------------------- decay and recipe line


def test_an_optimiser_without_a_chosen_decay_gets_its_documented_default():
    net = torch.nn.Conv2d(1, 2, 3)
    for optimizer, default in (("sgd", 5e-4), ("adam", 0.0), ("adamw", 0.05)):
        t = TrainConfig(optimizer=optimizer)
        assert t.weight_decay is None and weight_decay_of(t) == default
        assert build_optimizer(list(net.parameters()), t).param_groups[0]["weight_decay"] == default
    assert weight_decay_of(TrainConfig(optimizer="adamw", weight_decay=0.0)) == 0.0  # chosen: kept
    quick = load_config(QUICKSTART_PRESET, ["train.optimizer=adamw"]).train
    assert weight_decay_of(quick) == 0.05  # the quick start chose none: AdamW's default, not Adam's 0
    assert weight_decay_of(load_config(QUICKSTART_PRESET).train) == 0.0
    assert weight_decay_of(load_config(PAPER_PRESET).train) == 5e-4  # the original's, for SGD
    assert weight_decay_of(load_config(REPO_ROOT / "config" / "simplepose_coco_modern.yaml").train) == 0.05


def test_the_recipe_line_names_optimiser_decay_rate_schedule_average_batch_and_steps():
    paper = load_config(PAPER_PRESET).train
    assert recipe_line(paper, LRSchedule.from_config(paper, 117, world_size=4), world_size=4) == (
        "recipe: sgd (momentum 0.9, weight decay 0.0005: sgd's default), lr 0.0001 (train.lr 2.5e-05 x 4 processes), "
        "warm-up 3 epochs (351 steps), then step decay: x 0.2 every 15 epochs; no weight average; batch 16 (4 x 4 "
        "processes); 117 steps/epoch x 100 epochs = 11,700 steps"
    )
    modern = load_config(REPO_ROOT / "config" / "simplepose_coco_modern.yaml", ["train.accumulate_steps=2"]).train
    assert recipe_line(modern, LRSchedule.from_config(modern, 117, world_size=4), world_size=4) == (
        "recipe: adamw (weight decay 0.05: train.weight_decay; none on biases and norm weights), lr 0.002 (train.lr "
        "0.00025 x 4 processes x 2 micro-batches), warm-up 3 epochs (351 steps), then cosine down to 0.05 x base at "
        "global step 11,699; weight average ema 0.9998 (2,000 warm-up updates); batch 32 (4 x 4 processes x 2 "
        "micro-batches); 117 steps/epoch x 100 epochs = 11,700 steps"
    )


def test_each_change_of_the_recipe_is_named_for_what_it_is():
    adam = TrainConfig(optimizer="adam", lr_schedule="step")
    changes = recipe_changes(adam, dataclasses.replace(adam, optimizer="adamw", lr_schedule="cosine"), 1, 1)
    assert changes == [
        "train.optimizer adam -> adamw (a new adamw state: adam's moments and step counts are not carried over)",
        "train.weight_decay 0 -> 0.05 (adamw's default)",
        "train.lr_schedule step -> cosine",
    ]
    assert recipe_changes(adam, adam, 1, 1) == []
    assert recipe_changes(adam, dataclasses.replace(adam, weight_decay=1e-4, epochs=120), 1, 2) == [
        "train.weight_decay 0 -> 0.0001",
        "train.epochs 100 -> 120",
        "1 -> 2 processes (train.lr_scale_world_size: the rate with them)",
    ]


# ---------------------------------------------------------------------------------------------- in the engine

SHORT = ["train.max_steps_per_epoch=2", "train.epochs=1", "train.lr=5e-3"]


@pytest.fixture(scope="module")
def adam_run(synthetic_h5_64, tmp_path_factory) -> Path:
    """A finished run of one epoch with Adam (no weight decay, its default)."""
    out = tmp_path_factory.mktemp("adam") / "run"
    Trainer(tiny_cfg(synthetic_h5_64, out, *SHORT, "train.optimizer=adam")).fit()
    return out


def copy_of(run: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(run, tmp_path / "run"))


def lrs_of(trainer: Trainer) -> list[float]:
    """Trains ``trainer`` to its end; the learning rate of each step it took."""
    seen, step = [], trainer.train_step
    trainer.train_step = lambda batches, lr: seen.append(lr) or step(batches, lr)
    trainer.fit()
    return seen


def test_the_finished_run_message_says_what_a_cosine_does_when_trained_on():
    for schedule, said in (("cosine", True), ("step", False)):
        cfg = load_config(None, [f"train.lr_schedule={schedule}", "train.epochs=1"])
        message = finished_message(cfg, "runs/x/last.pt", 1, 3, ["python", "train.py"])
        floor = "raise train.epochs (above 1; its cosine schedule has ended and trains on at its floor)"
        assert (floor in message) is said
        assert message.endswith("e.g.: python train.py train.epochs=2")


def test_a_finished_cosine_run_trained_on_keeps_its_floor_and_the_log_says_so(synthetic_h5_64, tmp_path, caplog):
    recipe = [*SHORT, "train.optimizer=adamw", "train.lr_schedule=cosine", "train.lr_floor=0.1"]
    first = lrs_of(Trainer(tiny_cfg(synthetic_h5_64, tmp_path, *recipe)))
    assert first[-1] == pytest.approx(5e-4)  # the floor: 0.1 x 5e-3
    last = tmp_path / "last.pt"
    plan = {"kind": "cosine", "epochs": 1, "floor": 0.1, "decay_from": None, "decay_from_factor": 1.0}
    assert saved_state(last).schedule == plan
    ckpt = Checkpoint.load(last)
    del ckpt.train_state["schedule"]  # as checkpoints written before the plan was kept: read from their config
    ckpt.save(last)
    with caplog.at_level(logging.INFO, logger="simplepose.engine"):
        more = lrs_of(Trainer(tiny_cfg(synthetic_h5_64, tmp_path, *recipe, "train.epochs=2", "train.resume=auto")))
    assert more == pytest.approx([5e-4] * 2)
    replanned = {**plan, "epochs": 2, "decay_from": 1.0, "decay_from_factor": pytest.approx(0.1)}
    assert saved_state(last).schedule == replanned  # the next checkpoint keeps the plan it follows
    lines = caplog.messages
    assert any(m.startswith("train.epochs 1 -> 2 on resume: the cosine decay had reached its floor") for m in lines)
    assert "this resume changes the recipe: train.epochs 1 -> 2" in lines
    (recipe_line,) = [m for m in lines if m.startswith("recipe: ")]
    assert recipe_line.startswith("recipe: adamw (weight decay 0.05: adamw's default; none on biases and norm weights)")
    assert "cosine, ended: at its floor 0.1 x base from global step 2 on" in recipe_line
    assert "no weight average; batch 2; 2 steps/epoch x 2 epochs = 4 steps, resumed at global step 2" in recipe_line


def test_resuming_adam_as_adamw_names_the_change_and_starts_its_state_afresh(
    synthetic_h5_64, adam_run, tmp_path, caplog
):
    resume = [*SHORT, "train.epochs=2", "train.resume=auto"]
    with caplog.at_level(logging.INFO, logger="simplepose.engine"):
        trainer = Trainer(tiny_cfg(synthetic_h5_64, copy_of(adam_run, tmp_path), *resume, "train.optimizer=adamw"))
    assert isinstance(trainer.optimizer, torch.optim.AdamW) and not trainer.optimizer.state
    assert [g["weight_decay"] for g in trainer.optimizer.param_groups] == [0.05, 0.0]
    (line,) = [m for m in caplog.messages if m.startswith("this resume changes the recipe")]
    assert "train.optimizer adam -> adamw (a new adamw state" in line and "train.weight_decay 0 -> 0.05" in line
    assert "freeze" not in line


def test_a_changed_decay_on_resume_applies_with_the_saved_moments(synthetic_h5_64, adam_run, tmp_path, caplog):
    decay = ["train.optimizer=adam", "train.epochs=2", "train.weight_decay=0.01", "train.resume=auto"]
    with caplog.at_level(logging.INFO, logger="simplepose.engine"):
        trainer = Trainer(tiny_cfg(synthetic_h5_64, copy_of(adam_run, tmp_path), *SHORT, *decay))
    # load_state_dict alone would have kept the saved run's decay (0) in the groups
    assert [g["weight_decay"] for g in trainer.optimizer.param_groups] == [0.01]
    assert len(trainer.optimizer.state) == len(trainer.params)  # the moments carried over
    assert any("train.weight_decay 0 -> 0.01" in m for m in caplog.messages)


def test_a_changed_freeze_on_resume_is_blamed_on_the_freeze(synthetic_h5_64, adam_run, tmp_path):
    frozen = ["train.optimizer=adam", "train.freeze=['^(?!.*heads)']", "train.epochs=2", "train.resume=auto"]
    with pytest.raises(CheckpointError, match=r"train.freeze changed \(\[\] -> \['\^\(\?!\.\*heads\)'\]\)"):
        Trainer(tiny_cfg(synthetic_h5_64, copy_of(adam_run, tmp_path), *SHORT, *frozen))


# ---------------------------------------------------------------------------------------------- the closing summary


def test_the_summary_gives_each_sources_ap_and_names_the_mean(tmp_path):
    sources = [f"data.train_sources=['{tmp_path}/coco.h5','{tmp_path}/crowd.h5']", "data.source_val_images=['a','b']"]
    two = load_config(None, [*sources, "data.source_val_annotations=['a.json','b.json']"])
    result = {"AP": 0.212, "coco/AP": 0.3, "coco/AP50": 0.6, "coco/AR": 0.35, "crowd/AP": 0.124, "crowd/AR": 0.2}
    assert validation_lines(two, result) == [
        "validation AP 0.212: the mean of the 2 sources' AP",
        "  source coco: AP 0.300 (AP50 0.600, AR 0.350)",
        "  source crowd: AP 0.124 (AR 0.200)",  # no AP50 measured: none printed, never a 0
    ]
    one = load_config(None, ["data.val_images=v", "data.val_annotations=v.json"])
    assert validation_lines(one, {"AP": 0.5, "AP50": 0.8, "AR": 0.6}) == ["validation AP 0.500 (AP50 0.800, AR 0.600)"]
    assert validation_lines(one, {"AP": 0.5}) == ["validation AP 0.500"]
    assert validation_lines(one, {"val_loss": 1.0}) == []  # the last epoch was not validated
