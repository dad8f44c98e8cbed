"""Presets built on another (``base:``): the modern COCO recipe is the paper preset with its train section changed."""

from __future__ import annotations

import pytest

from simplepose.config.config_file import ConfigError, load_config, to_dict
from tests.paths import PAPER_PRESET, REPO_ROOT

MODERN = REPO_ROOT / "config" / "simplepose_coco_modern.yaml"


def test_the_modern_preset_is_the_paper_preset_with_the_modern_recipe():
    paper, modern = to_dict(load_config(PAPER_PRESET)), to_dict(load_config(MODERN))
    assert {k: v for k, v in modern.items() if k != "train"} == {k: v for k, v in paper.items() if k != "train"}
    changed = {k for k in paper["train"] if paper["train"][k] != modern["train"][k]}
    assert changed == {"optimizer", "lr", "weight_decay", "lr_schedule", "ema"}
    assert (modern["train"]["optimizer"], modern["train"]["lr_schedule"]) == ("adamw", "cosine")
    assert paper["train"]["ema"] == 0 and paper["train"]["lr_schedule"] == "step"  # the paper stays the original


def test_a_command_line_override_wins_over_the_preset_and_its_base():
    cfg = load_config(MODERN, ["train.ema=0", "train.lr=1e-3"])
    assert (cfg.train.ema, cfg.train.lr, cfg.train.optimizer) == (0, 1e-3, "adamw")


def test_a_base_chain_applies_in_order_and_a_circle_or_missing_base_is_refused(tmp_path):
    (tmp_path / "a.yaml").write_text("train:\n  epochs: 5\n  lr: 0.1\n")
    (tmp_path / "b.yaml").write_text("base: a.yaml\ntrain:\n  lr: 0.2\n")
    (tmp_path / "c.yaml").write_text("base: b.yaml\ndata:\n  input_size: 256\n")
    cfg = load_config(tmp_path / "c.yaml")
    assert (cfg.train.epochs, cfg.train.lr, cfg.data.input_size) == (5, 0.2, 256)
    (tmp_path / "a.yaml").write_text("base: c.yaml\n")
    with pytest.raises(ConfigError, match="circle of presets"):
        load_config(tmp_path / "c.yaml")
    (tmp_path / "d.yaml").write_text("base: nowhere.yaml\n")
    with pytest.raises(ConfigError, match="nowhere.yaml not found"):
        load_config(tmp_path / "d.yaml")
    (tmp_path / "e.yaml").write_text("base: [a.yaml]\n")
    with pytest.raises(ConfigError, match="base must name a preset file"):
        load_config(tmp_path / "e.yaml")
