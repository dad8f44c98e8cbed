"""Rebuild a model from a checkpoint for the test-time commands (coco_eval, demo, export_onnx).

The model section of the config saved in the checkpoint wins over the preset, so the network rebuilds as it
was trained, except for ``model.*`` keys given explicitly on the command line.
"""

from __future__ import annotations

import dataclasses

import torch

from config.loader import ConfigError, load_config
from config.schema import Config, ModelConfig
from utils.errors import UserError


def _saved_model_section(saved: dict | None) -> dict | None:
    if not saved:
        return None
    section = saved.get("model", saved)
    return section if isinstance(section, dict) else None


def load_model(
    ckpt: str, config_path: str | None, overrides: list[str] | None, device: torch.device
) -> tuple[torch.nn.Module, Config]:
    """(model in eval mode on ``device``, resolved config)."""
    from models import build_model, load_weights
    from models.weights import extract_weights, read_checkpoint

    overrides = list(overrides or [])
    cfg = load_config(config_path, overrides)
    obj = read_checkpoint(ckpt)
    weights = extract_weights(obj, str(ckpt))
    section = _saved_model_section(weights.config)
    explicit = {o.split("=", 1)[0].strip() for o in overrides}
    if section:
        names = {f.name for f in dataclasses.fields(ModelConfig)}
        kept = [f"model.{k}={_yaml(v)}" for k, v in section.items() if k in names and f"model.{k}" not in explicit]
        try:
            cfg = load_config(config_path, kept + overrides)
        except ConfigError as e:
            raise UserError(f"checkpoint {ckpt} holds a model config this version cannot use: {e}") from None
    model = build_model(cfg)
    load_weights(model, obj)
    return model.to(device).eval(), cfg


def _yaml(value) -> str:
    import yaml

    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()
