"""Rebuild a model from a checkpoint for the test-time commands (coco_eval, demo, export_onnx).

The model settings come from the checkpoint (its saved config, or what a bare state dict's shapes tell), so
the network rebuilds as it was trained; ``model.*`` keys given on the command line still win.
"""

from __future__ import annotations

import torch

from config.loader import ConfigError, config_from_dict, load_config, parse_overrides, with_overrides
from config.schema import Config
from models import build_model, load_weights
from models.weights import extract_weights, infer_model_config, model_section_overrides, read_checkpoint
from utils.errors import UserError


def load_model(
    ckpt: str, config_path: str | None, overrides: list[str] | None, device: torch.device
) -> tuple[torch.nn.Module, Config]:
    """(model in eval mode on ``device``, resolved config). Errors are UserErrors naming the file.

    Without ``--config``, a checkpoint that carries its run's config is evaluated with that config (same input
    size, scales, thresholds as the run); with ``--config`` only the model section is taken from it.
    """
    weights = extract_weights(read_checkpoint(ckpt), str(ckpt))
    given = parse_overrides(overrides)
    if config_path is None and isinstance(weights.config, dict) and "eval" in weights.config:
        try:
            saved_cfg = config_from_dict(weights.config)
        except ConfigError as e:
            raise UserError(f"the config saved in {ckpt} is invalid ({e}); give one with --config FILE") from None
        cfg = with_overrides(saved_cfg, given, "command-line override")
    else:
        cfg = load_config(config_path, overrides)
    saved = weights.config.get("model") if weights.config else None
    section = saved if isinstance(saved, dict) else infer_model_config(weights.state)
    values = model_section_overrides(cfg, section, keep=set(given))
    cfg = with_overrides(cfg, values, f"model settings saved in {ckpt}")
    model = build_model(cfg)
    load_weights(model, weights.state, source=str(ckpt))
    return model.to(device).eval(), cfg
