"""Loading weights: our checkpoints, the original's released checkpoint, or a bare state dict.

The original (jialee93/Improved-Body-Parts) names its parameters differently; ``original_to_ours`` is the
explicit key mapping (docs/design.md#weights-of-the-original), e.g.

    posenet.pre.res1.convBlock.3.weight                    -> stem.res1.conv2.weight
    posenet.hourglass.2.hg.3.4.skipConv.1.running_mean     -> hourglasses.2.levels.3.inner.skip.bn.running_mean
    posenet.features.0.before_regress.1.2.fc.0.weight      -> heads.0.1.se.fc1.weight
    posenet.outs.3.0.conv.bias                             -> heads.3.0.predict.bias
    posenet.merge_preds.1.4.conv.bn.weight                 -> merges.1.4.from_predictions.bn.weight

Files are always read with ``torch.load(map_location="cpu", weights_only=True)``: a checkpoint never runs code.

``load_initial_weights`` (``train.init_weights``) also starts from a checkpoint of another skeleton: every tensor
but the skeleton-dependent ones (``SKELETON_DEPENDENT``: the heads' last convolutions and the merges' first ones)
is loaded, those keep their fresh initialisation and are listed (docs/design.md#fine-tuning-across-skeletons).
"""

from __future__ import annotations

import dataclasses
import pickle
import re
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from config.schema import LossConfig
from config.skeleton import Skeleton, carried_skeleton
from utils.errors import UserError

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
    ),  # fmt: skip
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
    return {original_to_ours(_strip_wrappers(k)): v for k, v in state.items()}


def read_checkpoint(path: str | Path) -> Any:
    """``torch.load`` a file safely (CPU, weights only); UserError if missing, truncated or not a checkpoint."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"weights file {path} not found")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        raise UserError(
            f"{path} holds Python objects that safe loading (weights_only=True) refuses, so it is not a plain "
            f"checkpoint of tensors and numbers ({str(e).splitlines()[0]})"
        ) from None
    except (RuntimeError, EOFError, OSError, ValueError, zipfile.BadZipFile) as e:
        raise UserError(
            f"{path} is truncated or corrupt and cannot be read as a PyTorch checkpoint "
            f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else 'no detail'}); re-download or re-save it"
        ) from None


@dataclass
class Weights:
    """A state dict in our naming, where it came from, and the config and skeleton saved with it (if any)."""

    state: dict[str, torch.Tensor]
    source: str  # "simplepose", "original" or "state_dict"
    config: dict | None = None
    skeleton: dict | None = None  # config.skeleton.Skeleton.to_dict() of the network's skeleton

    @property
    def output_channels(self) -> int | None:
        """Channels the network's heads predict (the skeleton's limbs + keypoints + 2), if the state tells."""
        w = self.state.get("heads.0.0.predict.weight")
        return int(w.shape[0]) if w is not None else None


def extract_weights(obj: Any, where: str = "checkpoint") -> Weights:
    """Recognise our checkpoint ({"model": ...}), the original's ({"weights": ...}) or a bare state dict."""
    if not isinstance(obj, Mapping):
        raise UserError(f"{where} holds a {type(obj).__name__}, not a checkpoint dict or a state dict")
    config = obj.get("config") if isinstance(obj.get("config"), Mapping) else None
    skeleton = obj.get("skeleton") if isinstance(obj.get("skeleton"), Mapping) else None
    if isinstance(obj.get("model"), Mapping):
        state, source = obj["model"], "simplepose"
    elif isinstance(obj.get("weights"), Mapping):
        state, source = obj["weights"], "original"
    elif obj and all(isinstance(v, torch.Tensor) for v in obj.values()):
        state, source = obj, "state_dict"
    else:
        raise UserError(
            f"{where} holds no model weights: expected a dict with 'model' (SimplePose), 'weights' (the original "
            f"Simple Pose) or a state dict of tensors; found keys {sorted(map(str, obj))[:10]}"
        )
    state = {_strip_wrappers(k): v for k, v in state.items()}
    if source == "original" or any(k.startswith(ORIGINAL_PREFIX) for k in state):
        state, source = convert_original_state_dict(state), "original"
    return Weights(dict(state), source, dict(config) if config else None, dict(skeleton) if skeleton else None)


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


def load_weights(
    model: nn.Module,
    path_or_state: str | Path | Mapping,
    strict: bool = True,
    source: str | None = None,
    reinitialise: re.Pattern | None = None,
) -> LoadReport:
    """Load weights into ``model`` (a PoseNet, possibly wrapped by DDP or torch.compile).

    ``path_or_state``: a file path, or an already loaded checkpoint / state dict. With ``strict`` any missing,
    unexpected or shape-mismatched key raises UserError listing them and suggesting the fitting model config;
    without it the matching keys are loaded and the report lists the rest. ``source`` names where an
    already loaded dict came from, for messages. Keys matching ``reinitialise`` are neither loaded nor missed:
    the model keeps its own (``report.reinitialised``).
    """
    where = str(path_or_state) if isinstance(path_or_state, (str, Path)) else source or "the given state dict"
    obj = read_checkpoint(path_or_state) if isinstance(path_or_state, (str, Path)) else path_or_state
    weights = extract_weights(obj, where)
    diverged = [k for k, v in weights.state.items() if v.is_floating_point() and not torch.isfinite(v).all()]
    if diverged:
        raise UserError(
            f"{where} holds NaN or infinite values in {len(diverged)} tensors (e.g. {', '.join(diverged[:3])}): the "
            "run that wrote it diverged; use an earlier checkpoint"
        )
    model = unwrap(model)
    own = model.state_dict()
    report = LoadReport(source=weights.source)
    if reinitialise is not None:
        report.reinitialised = [k for k in own if reinitialise.match(k)]
        weights.state = {k: v for k, v in weights.state.items() if not reinitialise.match(k)}
        own = {k: v for k, v in own.items() if not reinitialise.match(k)}
    report.missing = [k for k in own if k not in weights.state]
    report.unexpected = [k for k in weights.state if k not in own]
    for k, v in weights.state.items():
        if k in own and tuple(v.shape) != tuple(own[k].shape):
            report.mismatched.append(f"{k}: checkpoint {tuple(v.shape)} vs model {tuple(own[k].shape)}")
    if strict and not report.ok:
        raise UserError(_mismatch_message(where, report, weights, model))
    bad = {m.split(":", 1)[0] for m in report.mismatched}
    model.load_state_dict({k: v for k, v in weights.state.items() if k in own and k not in bad}, strict=False)
    return report


def load_initial_weights(model: nn.Module, path: str | Path) -> tuple[LoadReport, Skeleton]:
    """``train.init_weights``: load a checkpoint into a fresh ``model`` (a PoseNet); (report, the checkpoint's
    skeleton: the one it carries, else COCO's, as for every checkpoint saved without one).

    Trained for a skeleton with the model's channel layout: every tensor, strictly. For another skeleton: every
    tensor but the skeleton-dependent ones (``SKELETON_DEPENDENT``), strictly (so a different network size is still
    an error); those keep the model's initialisation and are listed in ``report.reinitialised``.
    """
    weights = extract_weights(read_checkpoint(path), str(path))
    skeleton = unwrap(model).skeleton
    saved = carried_skeleton(weights.skeleton, f"saved in {path}")
    same = saved.same_layout(skeleton)
    state = {"model": weights.state}  # already in our naming
    return load_weights(model, state, source=str(path), reinitialise=None if same else SKELETON_DEPENDENT), saved


def reinitialised_note(report: LoadReport, saved: Skeleton, model: nn.Module, path: str | Path) -> str | None:
    """What ``train.init_weights`` says when the checkpoint was trained for another skeleton: how many tensors loaded
    and which ones were re-initialised (None when it loaded whole)."""
    if not report.reinitialised:
        return None
    loaded = len(unwrap(model).state_dict()) - len(report.reinitialised)
    return (
        f"train.init_weights={path} was trained for skeleton {saved.describe()}, this run uses "
        f"{unwrap(model).skeleton.describe()}: loaded the {loaded} tensors that do not depend on the skeleton; "
        f"re-initialised the {len(report.reinitialised)} that do:\n  " + "\n  ".join(report.reinitialised)
    )


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
    loss's own weights are kept when they already fit). Apply them with ``config.loader.with_overrides``."""
    values = {f"model.{f.name}": section[f.name] for f in dataclasses.fields(cfg.model)
              if f.name in section and f"model.{f.name}" not in keep}  # fmt: skip
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


def _mismatch_message(where: str, report: LoadReport, weights: Weights, model: nn.Module) -> str:
    cfg = getattr(model, "cfg", None)
    lines = [f"the weights in {where} do not fit the model ({weights.source} format):"]
    for name, keys in (("missing", report.missing), ("unexpected", report.unexpected),
                       ("shape-mismatched", report.mismatched)):  # fmt: skip
        if keys:
            lines.append(f"  {len(keys)} {name} keys" + (", the first 10:" if len(keys) > 10 else ":"))
            lines += [f"    {k}" for k in keys[:10]]
    found = infer_model_config(weights.state)
    current = {k: getattr(cfg, k) for k in found if hasattr(cfg, k)} if cfg is not None else {}
    differ = {k: v for k, v in found.items() if current.get(k) != v}
    if differ:
        hint = " ".join(f"model.{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in differ.items())
        stacks = f" loss.stack_weights=[{','.join(['1'] * found['stacks'])}]" if "stacks" in differ else ""
        lines.append(f"the checkpoint was made with: {hint}{stacks} (set these config overrides)")
    if weights.config and isinstance(weights.config.get("model"), Mapping):
        lines.append(f"its saved config has model: {dict(weights.config['model'])}")
    skeleton = getattr(model, "skeleton", None)
    channels = weights.output_channels
    if skeleton is not None and channels is not None and channels != skeleton.num_channels:
        saved = f" (it carries skeleton '{weights.skeleton.get('name')}')" if weights.skeleton else ""
        lines.append(
            f"its heads output {channels} channels, this model's {skeleton.num_channels} (skeleton "
            f"{skeleton.describe()}): it was trained for another skeleton{saved}; set data.skeleton to that one"
        )
    return "\n".join(lines)


def _strip_wrappers(key: str) -> str:
    changed = True
    while changed:
        changed = False
        for p in WRAPPER_PREFIXES:
            if key.startswith(p):
                key, changed = key[len(p) :], True
    return key
