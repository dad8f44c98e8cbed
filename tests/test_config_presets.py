"""Presets built on another (``base:``): the modern COCO recipe is the paper preset with its train section changed.
Presets by name from any folder (``--config tiny``); an unknown one is refused listing them."""

from __future__ import annotations

from pathlib import Path

import pytest

from simplepose.config.config_file import ConfigError, load_config, preset_file, to_dict
from simplepose.config.presets import preset_names
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


SPELLINGS = [
    "tiny",
    "tiny.yaml",
    "config/tiny.yaml",
    "TINY_PATH",
    "simplepose_coco_modern",
    "simplepose_coco_modern.yml",
]


@pytest.mark.parametrize("given", SPELLINGS)
def test_a_preset_is_named_by_its_name_from_any_folder(given, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no config/ folder here: the package's presets are found
    name = "simplepose_coco_modern" if given.startswith("simplepose") else "tiny"
    given = str(REPO_ROOT / "config" / "tiny.yaml") if given == "TINY_PATH" else given
    assert to_dict(load_config(given)) == to_dict(load_config(REPO_ROOT / "config" / f"{name}.yaml"))
    assert preset_file(given).resolve() == (REPO_ROOT / "config" / f"{name}.yaml").resolve()


def test_a_file_of_the_users_own_wins_over_the_preset_of_its_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("tiny.yaml").write_text("train:\n  epochs: 3\n")
    assert load_config("tiny.yaml").train.epochs == 3
    assert load_config("tiny").train.epochs == load_config(REPO_ROOT / "config" / "tiny.yaml").train.epochs != 3


@pytest.mark.parametrize("given", ["tinny", "elsewhere/tiny.yaml", "a_folder"])
def test_an_unknown_preset_is_refused_listing_the_presets(given, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("a_folder").mkdir()
    with pytest.raises(ConfigError) as e:
        load_config(given)
    message = str(e.value)
    assert message.startswith(f"--config {given}: {'a folder' if given == 'a_folder' else 'no such file'}")
    assert set(preset_names()) == {p.stem for p in (REPO_ROOT / "config").glob("*.yaml")}
    assert all(name in message for name in preset_names()) and "tiny" in preset_names()
