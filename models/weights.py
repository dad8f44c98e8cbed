"""Weights in our parameter names: the original's names mapped to ours, loading a state dict into a PoseNet with
messages that name what does not fit, and what a state dict tells about the network that made it.

The original (jialee93/Improved-Body-Parts) names its parameters differently; ``original_to_ours`` is the
explicit key mapping (docs/network.md#weights-of-the-original), e.g.

    posenet.pre.res1.convBlock.3.weight                    -> stem.res1.conv2.weight
    posenet.hourglass.2.hg.3.4.skipConv.1.running_mean     -> hourglasses.2.levels.3.inner.skip.bn.running_mean
    posenet.features.0.before_regress.1.2.fc.0.weight      -> heads.0.1.se.fc1.weight
    posenet.outs.3.0.conv.bias                             -> heads.3.0.predict.bias
    posenet.merge_preds.1.4.conv.bn.weight                 -> merges.1.4.from_predictions.bn.weight

Files are read by ``checkpoint.format.Checkpoint`` (which recognises the original's form and renames it here);
``Checkpoint.load_into`` checks the skeleton, then calls ``load_state``. Fine-tuning across skeletons
(``train.init_weights``) loads every tensor but the skeleton-dependent ones (``SKELETON_DEPENDENT``: the heads'
last convolutions and the merges' first ones), which keep their fresh initialisation
(docs/keypoint_sets.md#fine-tuning-across-skeletons).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from simplepose.config.schema import LossConfig
from simplepose.config.skeleton import Skeleton
from simplepose.utils.errors import UserError

ORIGINAL_PREFIX = "posenet."
WRAPPER_PREFIXES = ("module.", "_orig_mod.")  # DDP / DataParallel, torch.compile

# Inside the original's Residual: Sequential indices of convBlock (2 and 5 are the activations) and skipConv.
_RESIDUAL_PARTS = {
    "convBlock.0": "conv1",
    "convBlock.1": "bn1",
    "convBlock.3": "conv2",
    "convBlock.4": "bn2",
    "convBlock.6": "conv3",
    "convBlock.7": "bn3",
    "skipConv.0": "skip.conv",
    "skipConv.1": "skip.bn",
}
_LEVEL_PARTS = ("skip", "down", "up", "refine", "inner")  # ModuleList indices 0..4 of one hourglass level

# (pattern on the original key without "posenet.", replacement), applied in order; first the prefix, then
# the residual internals.
_PREFIX_RULES: tuple[tuple[str, str], ...] = (
    (r"^pre\.conv1\.", "stem.conv1."),
    (r"^pre\.bn1\.", "stem.bn1."),
    (r"^pre\.(res[12])\.", r"stem.\1."),
    (r"^pre\.dilation\.(\d+)\.", r"stem.dilated.\1."),
    *(
        (rf"^hourglass\.(\d+)\.hg\.(\d+)\.{i}\.", rf"hourglasses.\1.levels.\2.{name}.")
        for i, name in enumerate(_LEVEL_PARTS)
    ),
    (r"^features\.(\d+)\.before_regress\.(\d+)\.0\.", r"heads.\1.\2.conv1."),
    (r"^features\.(\d+)\.before_regress\.(\d+)\.1\.", r"heads.\1.\2.conv2."),
    (r"^features\.(\d+)\.before_regress\.(\d+)\.2\.fc\.0\.", r"heads.\1.\2.se.fc1."),
    (r"^features\.(\d+)\.before_regress\.(\d+)\.2\.fc\.2\.", r"heads.\1.\2.se.fc2."),
    (r"^outs\.(\d+)\.(\d+)\.conv\.", r"heads.\1.\2.predict."),
    (r"^merge_features\.(\d+)\.(\d+)\.conv\.", r"merges.\1.\2.from_features."),
    (r"^merge_preds\.(\d+)\.(\d+)\.conv\.", r"merges.\1.\2.from_predictions."),
)
_RESIDUAL_RULE = re.compile(r"\.(" + "|".join(re.escape(k) for k in _RESIDUAL_PARTS) + r")\.")
# The parameters whose shape and meaning depend on the skeleton's channels (models/posenet.py: ScaleHead.predict
# outputs them, Merge.from_predictions reads them); everything else is the same network for any skeleton.
SKELETON_DEPENDENT = re.compile(
    r"^(heads\.\d+\.\d+\.predict\.(weight|bias)|merges\.\d+\.\d+\.from_predictions\.conv\.weight)$"
)


def original_to_ours(key: str) -> str:
    """Map one key of the original's state dict (with or without ``posenet.``) to our name.

    Keys that match no rule are returned unchanged (they then show up as unexpected keys).
    """
    key = key.removeprefix(ORIGINAL_PREFIX)
    for pattern, repl in _PREFIX_RULES:
        new, n = re.subn(pattern, repl, key)
        if n:
            return _RESIDUAL_RULE.sub(lambda m: f".{_RESIDUAL_PARTS[m.group(1)]}.", new)
    return key


def convert_original_state_dict(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The original's ``weights`` state dict renamed to our keys (values shared, not copied)."""
    return {original_to_ours(strip_wrappers(k)): v for k, v in state.items()}


def predicted_channels(state: Mapping[str, torch.Tensor]) -> int | None:
    """Channels the heads of a state dict in our naming predict (the skeleton's limbs + keypoints + 2), if it tells."""
    w = state.get("heads.0.0.predict.weight")
    return int(w.shape[0]) if w is not None else None


@dataclass
class LoadReport:
    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    mismatched: list[str] = field(default_factory=list)  # "key: checkpoint (a, b) vs model (c, d)"
    source: str = ""
    reinitialised: list[str] = field(default_factory=list)  # model keys left as initialised (another skeleton)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.unexpected or self.mismatched)


def load_state(
    model: nn.Module,
    state: Mapping[str, torch.Tensor],
    where: str,
    strict: bool = True,
    reinitialise: re.Pattern | None = None,
    source: str = "simplepose",
    saved_model_config: Mapping[str, Any] | None = None,
) -> LoadReport:
    """Load a state dict in our naming (``checkpoint.format.Checkpoint.model``) into ``model`` (a PoseNet, possibly
    wrapped by DDP or torch.compile). Checkpoints call this through ``Checkpoint.load_into``, after the skeleton check.

    With ``strict`` any missing, unexpected or shape-mismatched key raises UserError (naming ``where``) listing them
    and suggesting the fitting model config (``saved_model_config``: the model section the checkpoint was saved
    with, quoted too); without it the matching keys are loaded and the report lists the rest. Keys matching
    ``reinitialise`` are neither loaded nor missed: the model keeps its own (``report.reinitialised``). Weights
    holding NaN or infinities are refused. ``source``: the file's form, for the report and messages.
    """
    diverged = [k for k, v in state.items() if v.is_floating_point() and not torch.isfinite(v).all()]
    if diverged:
        raise UserError(
            f"{where} holds NaN or infinite values in {len(diverged)} tensors (e.g. {', '.join(diverged[:3])}): the "
            "run that wrote it diverged; use an earlier checkpoint",
            file=where,
            key=diverged[0],
        )
    model = unwrap(model)
    own = model.state_dict()
    report = LoadReport(source=source)
    if reinitialise is not None:
        report.reinitialised = [k for k in own if reinitialise.match(k)]
        state = {k: v for k, v in state.items() if not reinitialise.match(k)}
        own = {k: v for k, v in own.items() if not reinitialise.match(k)}
    report.missing = [k for k in own if k not in state]
    report.unexpected = [k for k in state if k not in own]
    for k, v in state.items():
        if k in own and tuple(v.shape) != tuple(own[k].shape):
            report.mismatched.append(f"{k}: checkpoint {tuple(v.shape)} vs model {tuple(own[k].shape)}")
    if strict and not report.ok:
        fits = fitting_overrides(state, model)
        raise WeightsMismatch(_mismatch_message(where, report, fits, saved_model_config), where, report, fits)
    bad = {m.split(":", 1)[0] for m in report.mismatched}
    model.load_state_dict({k: v for k, v in state.items() if k in own and k not in bad}, strict=False)
    return report


class WeightsMismatch(UserError):
    """Weights that do not fit the network: ``report`` (a ``LoadReport``) lists the missing, unexpected and
    shape-mismatched keys; ``fits``: the config overrides that build a network they fit, as far as their shapes
    tell (``fitting_overrides``); ``file``: where the weights came from."""

    def __init__(self, message: str, where: str, report: LoadReport, fits: dict[str, Any]) -> None:
        super().__init__(message, file=where)
        self.report, self.fits = report, fits


def fitting_overrides(state: Mapping[str, torch.Tensor], model: nn.Module) -> dict[str, Any]:
    """The ``key=value`` overrides (dotted key -> value) under which ``model``'s config builds the network ``state``
    was made with: its ``model.*`` settings that differ (``infer_model_config``), and one loss weight per stack."""
    cfg = getattr(model, "cfg", None)
    found = infer_model_config(state)
    current = {k: getattr(cfg, k) for k in found if hasattr(cfg, k)} if cfg is not None else {}
    fits: dict[str, Any] = {f"model.{k}": v for k, v in found.items() if current.get(k) != v}
    if "model.stacks" in fits:
        fits["loss.stack_weights"] = [1] * found["stacks"]
    return fits


def carried_skeleton(model: nn.Module) -> Skeleton:
    """The skeleton a network carries (``PoseNet.skeleton``), inside any wrapper (``unwrap``); UserError for a network
    without one."""
    skeleton = getattr(unwrap(model), "skeleton", None)
    if not isinstance(skeleton, Skeleton):
        raise UserError(
            f"the network ({type(unwrap(model)).__name__}) carries no skeleton: build it with "
            "simplepose.models.posenet.build_model, which sets model.skeleton"
        )
    return skeleton


def unwrap(model: nn.Module) -> nn.Module:
    """The bare model inside DDP / DataParallel / torch.compile wrappers."""
    while True:
        for attr in ("module", "_orig_mod"):
            inner = getattr(model, attr, None)
            if isinstance(inner, nn.Module):
                model = inner
                break
        else:
            return model


def model_section_overrides(cfg: Any, section: Mapping[str, Any], keep: set[str] | frozenset = frozenset()) -> dict:
    """The dotted settings that give ``cfg`` the model of a saved or inferred model section (fields named in
    ``keep`` stay as they are), with one loss weight per stack and per scale so the config stays valid (the
    loss's own weights are kept when they already fit). Apply them with ``config.config_file.with_overrides``."""
    values = {
        f"model.{f.name}": section[f.name]
        for f in dataclasses.fields(cfg.model)
        if f.name in section and f"model.{f.name}" not in keep
    }
    stacks = values.get("model.stacks", cfg.model.stacks)
    scales = values.get("model.num_scales", cfg.model.num_scales)
    if len(cfg.loss.stack_weights) != stacks and "loss.stack_weights" not in keep:
        values["loss.stack_weights"] = [1.0] * stacks
    if len(cfg.loss.scale_weights) != scales and "loss.scale_weights" not in keep:
        values["loss.scale_weights"] = LossConfig().scale_weights[:scales]
    return values


def infer_model_config(state: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """The ``model.*`` settings a state dict in our naming was built with (as far as its keys tell)."""
    out: dict[str, Any] = {}
    stacks = {int(m.group(1)) for k in state if (m := re.match(r"hourglasses\.(\d+)\.", k))}
    scales = {int(m.group(1)) for k in state if (m := re.match(r"heads\.0\.(\d+)\.", k))}
    if stacks:
        out["stacks"] = max(stacks) + 1
    if scales:
        out["num_scales"] = max(scales) + 1
    shapes = {k: tuple(v.shape) for k, v in state.items()}
    if (s := shapes.get("hourglasses.0.levels.0.skip.conv1.weight")) is not None:
        out["inp_dim"] = s[1]
        if (d := shapes.get("hourglasses.0.levels.0.down.conv3.weight")) is not None:
            out["increase"] = d[0] - s[1]
    if (h := shapes.get("heads.0.0.conv1.conv.weight")) is not None:
        out["head_channels"] = h[0]
        out["bn"] = "heads.0.0.conv1.bn.weight" in state
        if (f := shapes.get("heads.0.0.se.fc1.weight")) is not None and f[0]:
            out["se_reduction"] = h[0] // f[0]
    return out


def _mismatch_message(
    where: str, report: LoadReport, fits: dict[str, Any], saved_model_config: Mapping[str, Any] | None
) -> str:
    lines = [f"the weights in {where} do not fit the model ({report.source} format):"]
    for name, keys in (
        ("missing", report.missing),
        ("unexpected", report.unexpected),
        ("shape-mismatched", report.mismatched),
    ):
        if keys:
            lines.append(f"  {len(keys)} {name} keys" + (", the first 10:" if len(keys) > 10 else ":"))
            lines += [f"    {k}" for k in keys[:10]]
    if fits:
        hint = " ".join(f"{k}={_override_text(v)}" for k, v in fits.items())
        lines.append(f"the checkpoint was made with: {hint} (set these config overrides)")
    if saved_model_config:
        lines.append(f"its saved config has model: {dict(saved_model_config)}")
    return "\n".join(lines)


def _override_text(value: Any) -> str:
    """A value as a ``key=value`` override writes it: ``true``, ``[1,1]``, ``32``."""
    if isinstance(value, bool):
        return str(value).lower()
    return f"[{','.join(map(str, value))}]" if isinstance(value, list) else str(value)


def strip_wrappers(key: str) -> str:
    """A parameter name without the prefixes of DDP / DataParallel (``module.``) and torch.compile (``_orig_mod.``)."""
    changed = True
    while changed:
        changed = False
        for p in WRAPPER_PREFIXES:
            if key.startswith(p):
                key, changed = key[len(p) :], True
    return key
