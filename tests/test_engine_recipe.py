"""The modern recipe beside the original one: weight averaging (engine/ema.py), AdamW without decay on norms and
biases, the cosine schedule; each alone on small tensors, then in the training engine (best.pt holds the validated
average, last.pt both, a resume continues the average bit for bit)."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from torch import nn

from simplepose.checkpoint.format import Checkpoint
from simplepose.config.schema import TrainConfig
from simplepose.engine.ema import WeightAverage
from simplepose.engine.hooks import ValidationHook
from simplepose.engine.optim import build_optimizer, fused_supported
from simplepose.engine.schedule import LRSchedule
from simplepose.engine.trainer import Trainer
from simplepose.models.weights import unwrap
from tests.harness.faulty_trainer import with_faults
from tests.helpers import tiny_cfg


def small_net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3), nn.ReLU())


# ---------------------------------------------------------------------------------------------- the schedule


def test_cosine_warms_up_then_falls_to_its_floor_at_the_last_step():
    t = TrainConfig(lr=1.0, lr_scale_world_size=False, warmup_epochs=1, epochs=5, lr_schedule="cosine", lr_floor=0.1)
    s = LRSchedule.from_config(t, steps_per_epoch=10)
    rates = [s.lr(e, i) for e in range(5) for i in range(10)]
    assert rates[:10] == pytest.approx([(i + 1) / 10 for i in range(10)])  # linear warm-up
    after = rates[10:]
    assert after[0] == pytest.approx(1.0) and after[-1] == pytest.approx(0.1)
    assert all(a > b for a, b in zip(after, after[1:]))  # falls at every optimiser step
    middle = 10 + (49 - 10) / 2  # half-way down the cosine: halfway between base and floor
    assert s.lr(0, 0) < 1 and LRSchedule.cosine_factor(s, middle) == pytest.approx(0.55)


def test_the_step_schedule_stays_the_original():
    t = TrainConfig(lr=1.0, lr_scale_world_size=False, warmup_epochs=0, epochs=40)
    s = LRSchedule.from_config(t, steps_per_epoch=10)
    assert [s.lr(e, 0) for e in (0, 14, 15, 30)] == pytest.approx([1.0, 1.0, 0.2, 0.04])


# ---------------------------------------------------------------------------------------------- AdamW


def test_adamw_decays_convolution_weights_and_leaves_norms_and_biases():
    net = small_net()
    before = {k: v.detach().clone() for k, v in net.named_parameters()}
    opt = build_optimizer(list(net.parameters()), TrainConfig(optimizer="adamw", lr=0.1, weight_decay=0.5))
    assert isinstance(opt, torch.optim.AdamW)
    for p in net.parameters():
        p.grad = torch.zeros_like(p)  # no gradient: only the decoupled decay moves a parameter
    opt.step()
    after = dict(net.named_parameters())
    assert torch.allclose(after["0.weight"], before["0.weight"] * (1 - 0.1 * 0.5))
    for name in ("0.bias", "1.weight", "1.bias"):
        assert torch.equal(after[name], before[name]), name


def test_sgd_and_adam_still_decay_every_parameter():
    for optimizer in ("sgd", "adam"):
        opt = build_optimizer(list(small_net().parameters()), TrainConfig(optimizer=optimizer, weight_decay=0.5))
        assert [g["weight_decay"] for g in opt.param_groups] == [0.5]


# ---------------------------------------------------------------------------------------------- the average


def test_the_average_follows_the_closed_form_with_its_warm_up():
    net = small_net()
    start = net[0].weight.detach().clone()
    ema = WeightAverage(net, decay=0.9, warmup_steps=3)
    target = torch.ones_like(start)
    expected = start.clone()
    for n in range(1, 6):
        with torch.no_grad():
            net[0].weight.copy_(target * n)
        ema.update(net, torch.tensor(True))
        d = 0.9 * (1 - math.exp(-n / 3))
        expected = d * expected + (1 - d) * target * n
    assert torch.allclose(ema.module[0].weight, expected, atol=1e-6)
    assert ema.updates.item() == 5


def test_a_skipped_step_leaves_the_average_and_its_count():
    net = small_net()
    ema = WeightAverage(net, decay=0.5, warmup_steps=1)
    before = {k: v.clone() for k, v in ema.module.state_dict().items()}
    with torch.no_grad():
        net[0].weight.add_(1.0)
        net[1].num_batches_tracked += 7
    ema.update(net, torch.tensor(False))
    assert ema.updates.item() == 0
    for k, v in ema.module.state_dict().items():
        assert torch.equal(v, before[k]), k


def bits(state: dict[str, torch.Tensor]) -> dict[str, bytes]:
    """Each tensor's bytes: equal only where bit-identical (NaN, -0.0 and +0.0 told apart)."""
    return {k: v.detach().cpu().contiguous().numpy().tobytes() for k, v in state.items()}


@pytest.mark.parametrize("flag", [torch.tensor(False), False], ids=["device flag", "host flag"])
@pytest.mark.parametrize("poison", ["nan", "inf"])
def test_a_skipped_step_leaves_the_average_bit_for_bit_whatever_the_network_holds(flag, poison):
    """A bad batch's forward pass leaves NaN (or inf) in the trained network's BatchNorm statistics and the step is
    skipped: the average keeps every bit (a difference scaled by 0 would be NaN), the next applied step moves it."""
    net = small_net()
    ema = WeightAverage(net, decay=0.5, warmup_steps=1)
    with torch.no_grad():
        net[0].weight.add_(1.0)
        ema.update(net, torch.tensor(True))  # an average that is not the initial weights
        ema.module[0].bias[0] = -0.0  # a negative zero must stay one
    before = bits(ema.module.state_dict())
    with torch.no_grad():
        net[1].running_mean[1] = float(poison)
        net[1].running_var.fill_(float(poison))
        net[0].weight[0, 0, 0, 0] = float("nan")
        net[1].num_batches_tracked += 3
    ema.update(net, flag)
    assert ema.updates.item() == 1
    assert bits(ema.module.state_dict()) == before
    with torch.no_grad():
        net[1].running_mean.zero_()
        net[1].running_var.fill_(2.0)
        net[0].weight[0, 0, 0, 0] = 1.0
    ema.update(net, torch.tensor(True))
    assert ema.updates.item() == 2 and all(torch.isfinite(v).all() for v in ema.module.state_dict().values())
    d = 0.5 * (1 - math.exp(-2))  # the decay at the second update
    assert torch.allclose(ema.module[1].running_var, torch.full((3,), d * 1.0 + (1 - d) * 2.0))


def test_batchnorm_statistics_are_averaged_and_the_batch_count_copied():
    net = small_net()
    ema = WeightAverage(net, decay=0.5, warmup_steps=1e-9)  # no warm-up: decay 0.5 from the first update
    net.train()
    net(torch.randn(4, 2, 6, 6) + 3.0)  # moves running_mean, counts one batch
    ema.update(net, torch.tensor(True))
    bn, averaged = net[1], ema.module[1]
    assert torch.allclose(averaged.running_mean, 0.5 * torch.zeros(3) + 0.5 * bn.running_mean)
    assert averaged.num_batches_tracked.item() == bn.num_batches_tracked.item() == 1
    assert not averaged.training and not any(p.requires_grad for p in ema.module.parameters())


def test_the_average_restores_exactly_from_its_state():
    net = small_net()
    ema = WeightAverage(net, decay=0.9, warmup_steps=2)
    with torch.no_grad():
        net[0].weight.mul_(3)
    ema.update(net)
    again = WeightAverage(small_net(), decay=0.9, warmup_steps=2)
    again.load_state_dict(ema.state_dict())
    for (k, a), b in zip(ema.module.state_dict().items(), again.module.state_dict().values()):
        assert torch.equal(a, b), k
    assert again.updates.item() == ema.updates.item() == 1


# ---------------------------------------------------------------------------------------------- in the engine

RECIPE = ["train.ema=0.8", "train.ema_warmup_steps=2", "train.optimizer=adamw", "train.weight_decay=0.05",
          "train.lr=5e-3", "train.lr_schedule=cosine", "train.max_steps_per_epoch=3"]  # fmt: skip


def ema_state(trainer: Trainer) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in trainer.ema.module.state_dict().items()}


@pytest.mark.parametrize("amp", ["off", "bf16"])
def test_a_resume_continues_the_average_bit_for_bit(synthetic_h5_64, tmp_path, amp):
    recipe = [*RECIPE, f"train.amp={amp}", "train.epochs=2"]
    full = Trainer(tiny_cfg(synthetic_h5_64, tmp_path / "full", *recipe))
    full.fit()
    # the cosine depends on the run's length: the first half is told the same train.epochs and stopped after one
    first = Trainer(tiny_cfg(synthetic_h5_64, tmp_path / "split", *recipe))
    first.train_epoch()
    first.checkpointer.save("last.pt", type(first.position)(epoch=1, step=0, global_step=3))
    resumed = Trainer(tiny_cfg(synthetic_h5_64, tmp_path / "split", *recipe, "train.resume=auto"))
    assert resumed.ema.updates.item() == 3
    resumed.fit()
    a, b = ema_state(full), ema_state(resumed)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    raw_a, raw_b = unwrap(full.model).state_dict(), unwrap(resumed.model).state_dict()
    assert all(torch.equal(raw_a[k], raw_b[k]) for k in raw_a)
    assert not all(torch.equal(a[k], raw_a[k]) for k in a)  # the average is not the trained weights


def test_under_bf16_autocast_the_average_stays_float32_and_a_nan_step_leaves_it(synthetic_h5_64, tmp_path):
    trainer = with_faults(Trainer(tiny_cfg(synthetic_h5_64, tmp_path, *RECIPE, "train.amp=bf16", "train.epochs=2")),
                          nan_steps={4})  # fmt: skip
    assert trainer.precision.dtype == torch.bfloat16
    before_nan: dict[str, torch.Tensor] = {}
    train_step = trainer.train_step

    def train_step_and_compare(*args):
        poisoned = trainer.position.global_step == 4  # the position moves on after the step returns
        if poisoned:
            before_nan.update(ema_state(trainer))
        result = train_step(*args)
        if poisoned:
            after = ema_state(trainer)
            assert all(torch.equal(after[k], v) for k, v in before_nan.items()), "the skipped step moved the average"
        return result

    trainer.train_step = train_step_and_compare
    trainer.fit()
    assert before_nan and trainer.position.counters["skipped_nonfinite"] == 1
    assert trainer.ema.updates.item() == trainer.position.global_step - 1 == 5
    state = trainer.ema.module.state_dict()
    floats = [v for v in state.values() if v.is_floating_point()]
    assert floats and all(v.dtype == torch.float32 and torch.isfinite(v).all() for v in floats)


@pytest.mark.parametrize("optimizer, skip_on", [("sgd", "host"), ("adamw", "device")])
def test_a_step_skipped_for_a_nan_picture_leaves_the_batchnorm_statistics(
    synthetic_h5_64, tmp_path, optimizer, skip_on
):
    """NaN pictures reach every BatchNorm's running statistics in the forward pass, before the step is found
    non-finite and skipped: the skip puts them back (they stayed NaN for the rest of the run: validation, last.pt
    and the weight average held a network that outputs NaN). Both ways a step learns of its skip: read on the host
    (an optimiser without a fused step, fp16 loss scaling) or as a device flag (a fused step)."""
    if skip_on == "device" and not fused_supported(optimizer, torch.device("cpu")):
        pytest.skip(f"this torch has no fused {optimizer} step on the CPU (torch 2.2 has none): no device flag")
    out = tmp_path / "run"
    trainer = Trainer(tiny_cfg(synthetic_h5_64, out, *RECIPE, f"train.optimizer={optimizer}", "train.epochs=1"))
    trainer.device_skip = skip_on == "device"
    net = unwrap(trainer.model)
    forward, train_step = trainer.step_forward, trainer.train_step
    before: dict[str, torch.Tensor] = {}

    def nan_pictures_at_step_2(images, *rest):
        if trainer.position.global_step == 2:
            images = torch.full_like(images, float("nan"))
        return forward(images, *rest)

    def train_step_and_compare(*args):
        bad = trainer.position.global_step == 2
        if bad:
            before.update({k: v.clone() for k, v in net.state_dict().items() if "running_" in k})
        result = train_step(*args)
        if bad:
            assert not bool(result.applied)
            after = net.state_dict()
            assert all(torch.equal(after[k], v) for k, v in before.items()), "the skipped step moved the statistics"
        return result

    trainer.step_forward, trainer.train_step = nan_pictures_at_step_2, train_step_and_compare
    trainer.fit()
    assert before and trainer.position.counters["skipped_nonfinite"] == 1
    last = Checkpoint.load(out / "last.pt")
    for state in (net.state_dict(), last.model, last.train_state["ema"]["model"]):
        stats = [v for k, v in state.items() if "running_" in k]
        assert stats and all(torch.isfinite(v).all() for v in stats)


def test_best_pt_holds_the_validated_average_and_last_pt_both(synthetic_h5_64, tmp_path):
    out = tmp_path / "run"
    trainer = Trainer(tiny_cfg(synthetic_h5_64, out, *RECIPE, "train.epochs=1", f"data.val={synthetic_h5_64}",
                               "train.val_every=1"))  # fmt: skip
    summary = trainer.fit()
    best, last = Checkpoint.load(out / "best.pt"), Checkpoint.load(out / "last.pt")
    assert best.averaged == "ema 0.8" and best.train_state is None
    assert all(torch.equal(best.model[k], v) for k, v in trainer.ema.module.state_dict().items())
    assert last.averaged == "" and "ema" in last.train_state
    raw = unwrap(trainer.model).state_dict()
    assert all(torch.equal(last.model[k], v) for k, v in raw.items())
    assert all(torch.equal(last.train_state["ema"]["model"][k], v) for k, v in best.model.items())
    # validation ran on the average: its loss is the average's, not the trained weights'
    (validator,) = [h.validator for h in trainer.hooks.hooks if isinstance(h, ValidationHook)]
    assert validator.model is trainer.ema.module
    assert summary["val_loss"] == pytest.approx(validator.val_loss(trainer.ema.module), rel=1e-6)
    assert summary["val_loss"] != pytest.approx(validator.val_loss(unwrap(trainer.model).eval()), rel=1e-6)


def test_the_recipe_bench_settings_are_what_their_names_say():
    from bench.recipes import RECIPES
    from simplepose.config.config_file import load_config
    from simplepose.engine.run import QUICKSTART_PRESET

    configs = {name: load_config(QUICKSTART_PRESET, settings) for name, settings in RECIPES.items()}
    t = {name: c.train for name, c in configs.items()}
    assert (t["original"].optimizer, t["original"].lr_schedule, t["original"].ema) == ("adam", "step", 0)
    assert t["ema"].ema > 0 and (t["ema"].optimizer, t["ema"].lr_schedule) == ("adam", "step")
    assert (t["adamw_cosine"].optimizer, t["adamw_cosine"].lr_schedule, t["adamw_cosine"].ema) == ("adamw", "cosine", 0)
    assert (t["all"].optimizer, t["all"].lr_schedule) == ("adamw", "cosine") and t["all"].ema > 0
    # the small batch changes the batch alone: the same samples in twice the optimiser steps
    batches = {n: x.batch_size for n, x in t.items()}
    assert batches == {"original": 8, "original_wide": 8, "ema": 8, "adamw_cosine": 8, "all": 8, "batch4": 4}
    assert t["batch4"] == dataclasses.replace(t["original"], batch_size=4)
    # the quick start's halved target widths, and the original's in original_wide and the rows measured with them
    widths = {n: (c.targets.sigma, c.targets.limb_sigma) for n, c in configs.items()}
    assert widths.pop("original") == (4.5, 3.5)
    assert set(widths.values()) == {(9.0, 7.0)}
    assert t["original_wide"] == t["original"]
