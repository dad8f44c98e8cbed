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

from config.loader import ConfigError, config_from_dict, load_config, parse_overrides, with_overrides
from config.schema import Config
from config.skeleton import Skeleton, skeleton_of
from config.skeleton_check import check_compatible
from checkpoint.format import Checkpoint, CheckpointError
from models import build_model
from models.weights import infer_model_config, model_section_overrides

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
    saved_config = checkpoint.config or {}
    if config_path is None and "eval" in saved_config:
        try:
            saved_cfg = config_from_dict(saved_config)
        except ConfigError as e:
            raise CheckpointError(f"the config saved in {ckpt} is invalid ({e}); give one with --config FILE",
                                  file=ckpt, key="config") from None  # fmt: skip
        cfg = with_overrides(saved_cfg, given, "command-line override")
    else:
        cfg = load_config(config_path, overrides)
    saved = saved_config.get("model")
    section = saved if isinstance(saved, dict) else infer_model_config(checkpoint.model)
    values = model_section_overrides(cfg, section, keep=set(given))
    cfg = with_overrides(cfg, values, f"model settings saved in {ckpt}")
    named = config_path is not None or "data.skeleton" in given
    skeleton = checkpoint_skeleton(checkpoint, cfg, named)
    model = build_model(cfg, skeleton)
    checkpoint.load_into(model)
    log.info("loaded %s", checkpoint.describe())
    return model.to(device).eval(), cfg


def checkpoint_skeleton(checkpoint: Checkpoint, cfg: Config, named: bool) -> Skeleton:
    """The skeleton to rebuild a checkpoint's network with.

    The checkpoint's own when it carries one, unless the command names one (``named``: ``--config`` or
    ``data.skeleton=...``), which must then mean the same channels; else the one ``cfg.data.skeleton`` names, whose
    channel count must be the heads' (a checkpoint of another skeleton is refused, saying what to give)."""
    if checkpoint.skeleton is not None and not named:
        return checkpoint.skeleton
    skeleton = skeleton_of(cfg)
    carries = checkpoint.skeleton is not None
    check_compatible(
        skeleton, checkpoint.keypoint_set(), where=f"checkpoint {checkpoint.file}", need="layout",
        expected_by=f"data.skeleton={cfg.data.skeleton}",
        fix="leave data.skeleton out (and --config, or set data.skeleton to the training skeleton): the checkpoint "
        "carries its own" if carries else "it was trained for another skeleton and carries none: give that skeleton "
        "with data.skeleton=NAME (config/skeletons/) or data.skeleton=FILE.yaml",
        file=checkpoint.file,
    )  # fmt: skip
    return skeleton
