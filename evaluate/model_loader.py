"""Rebuild a model from a checkpoint for the test-time commands (coco_eval, demo, export_onnx).

The model settings come from the checkpoint (its saved config, or what a bare state dict's shapes tell), so
the network rebuilds as it was trained; ``model.*`` keys given on the command line still win. So does the skeleton:
a checkpoint carries its definition, so a model of a custom skeleton evaluates without its YAML file; checkpoints
without one (older ones, the original's weights, bare state dicts) use the skeleton ``data.skeleton`` names
(default COCO). The rebuilt model's skeleton is ``model.skeleton``.
"""

from __future__ import annotations

import torch

from config.loader import ConfigError, config_from_dict, load_config, parse_overrides, with_overrides
from config.schema import Config
from config.skeleton import Skeleton, skeleton_of
from models import build_model, load_weights
from models.weights import Weights, extract_weights, infer_model_config, model_section_overrides, read_checkpoint
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
    named = config_path is not None or "data.skeleton" in given
    skeleton = checkpoint_skeleton(weights, cfg, named, str(ckpt))
    model = build_model(cfg, skeleton)
    load_weights(model, weights.state, source=str(ckpt))
    return model.to(device).eval(), cfg


def checkpoint_skeleton(weights: Weights, cfg: Config, named: bool, where: str) -> Skeleton:
    """The skeleton to rebuild a checkpoint's network with.

    The checkpoint's own when it carries one, unless the command names one (``named``: ``--config`` or
    ``data.skeleton=...``), which must then mean the same channels; else the one ``cfg.data.skeleton`` names.
    Either way its channel count must be the heads' (a checkpoint of another skeleton is refused, saying what to
    give)."""
    carried = None
    if weights.skeleton is not None:
        carried = Skeleton.from_dict(weights.skeleton, f"saved in {where}")
    if carried is not None and not named:
        skeleton = carried
    else:
        skeleton = skeleton_of(cfg)
        if carried is not None and not skeleton.same_layout(carried):
            raise UserError(
                f"{where} was trained for skeleton {carried.describe()}, but the config names "
                f"data.skeleton={cfg.data.skeleton}, {skeleton.describe()}; leave data.skeleton out (and --config, or "
                "set data.skeleton to the training skeleton): the checkpoint carries its own"
            )
    channels = weights.output_channels
    if channels is not None and channels != skeleton.num_channels:
        raise UserError(
            f"{where} predicts {channels} channels, but skeleton {skeleton.describe()} needs {skeleton.num_channels} "
            f"({skeleton.num_limbs} limbs + {skeleton.num_keypoints} keypoints + 2): it was trained for another "
            "skeleton and carries none; give that skeleton with data.skeleton=NAME (config/skeletons/) or "
            "data.skeleton=FILE.yaml"
        )
    return skeleton
