"""Rebuild a model from a checkpoint for the test-time commands (coco_eval, demo, export_onnx).

The model settings come from the checkpoint (its saved config, or what a bare state dict's shapes tell), so
the network rebuilds as it was trained; ``model.*`` keys given on the command line still win. So does the skeleton:
a checkpoint carries its definition, so a model of a custom skeleton evaluates without its YAML file; checkpoints
without one (older ones, the original's weights, bare state dicts) use the skeleton ``data.skeleton`` names
(default COCO). The rebuilt model's skeleton is ``model.skeleton``.
"""

from __future__ import annotations

import logging

import torch

from simplepose.checkpoint.format import Checkpoint
from simplepose.config.config_file import load_config, parse_overrides, with_overrides
from simplepose.config.schema import Config
from simplepose.config.skeleton_file import skeleton_of
from simplepose.models import build_model
from simplepose.models.weights import infer_model_config, model_section_overrides

log = logging.getLogger(__name__)


def load_model(
    ckpt: str, config_path: str | None, overrides: list[str] | None, device: torch.device
) -> tuple[torch.nn.Module, Config]:
    """(model in eval mode on ``device``, resolved config). Errors are UserErrors naming the file.

    Without ``--config``, a checkpoint that carries its run's config is evaluated with that config (same input
    size, scales, thresholds as the run); with ``--config`` only the model section is taken from it.
    """
    checkpoint = Checkpoint.load(ckpt)
    given = parse_overrides(overrides)
    saved_cfg = checkpoint.run_config() if config_path is None else None
    if saved_cfg is not None:
        cfg = with_overrides(saved_cfg, given, "command-line override")
    else:
        cfg = load_config(config_path, overrides)
    section = checkpoint.model_settings
    if section is None:
        section = infer_model_config(checkpoint.model)
    values = model_section_overrides(cfg, section, keep=set(given))
    cfg = with_overrides(cfg, values, f"model settings saved in {ckpt}")
    named = config_path is not None or "data.skeleton" in given
    skeleton = checkpoint.skeleton if checkpoint.skeleton is not None and not named else skeleton_of(cfg)
    model = build_model(cfg, skeleton)
    checkpoint.load_into(model, expected_by=f"data.skeleton={cfg.data.skeleton}", fix=skeleton_fix(checkpoint))
    log.info("loaded %s", checkpoint.describe())
    return model.to(device).eval(), cfg


def skeleton_fix(checkpoint: Checkpoint) -> str:
    """What to do when the skeleton a command names does not fit the checkpoint's (the model is rebuilt with the
    checkpoint's own when it carries one and the command names none; else with the one ``data.skeleton`` names)."""
    if checkpoint.skeleton is not None:
        return (
            "leave data.skeleton out (and --config, or set data.skeleton to the training skeleton): the checkpoint "
            "carries its own"
        )
    return (
        "it was trained for another skeleton and carries none: give that skeleton with data.skeleton=NAME "
        "(config/skeletons/) or data.skeleton=FILE.yaml"
    )
