"""Identity-Mapping Hourglass Network (IMHN), docs/network.md#network.

    image (B, 3, H, W) BGR/255, H and W multiples of 64
      -> Stem -> (B, inp_dim, H/4, W/4)
      -> T stacks: Hourglass (5 feature scales) -> per-scale ScaleHead -> predictions
                   + Merge back into the next stack's input and its same-scale features
      -> outputs[t][k]: (B, C, H/4/2^k, W/4/2^k), t < stacks, k < num_scales

C = the skeleton's channels (limbs + keypoints + 2; COCO: 50); only the heads' last 1x1 convolutions and the
merges' first ones depend on it.

Only ``outputs[-1][0]`` is used at test time. Module names differ from the original's (clearer); the
explicit key mapping for the released checkpoint lives in ``models/weights.py``.

Deliberate differences from the original:
* the scale-0 merge is computed once per stack, not twice (the original updated those BN statistics twice;
  docs/differences.md#scale-0-merge-computed-once);
* the stem honours ``inp_dim`` by scaling its widths with it (docs/differences.md#stem-width); at 256 it is exactly
  the original;
* the input is NCHW (the original took NHWC and permuted inside; docs/differences.md#nchw-input).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from typing import TypeVar, cast

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from simplepose.codec.network_input import check_input_shape
from simplepose.config.config_file import ConfigError
from simplepose.config.schema import OUTPUT_STRIDE, Config, ModelConfig
from simplepose.config.skeleton import Skeleton
from simplepose.config.skeleton_file import skeleton_of
from simplepose.models.layers import (
    ConvBNAct,
    Residual,
    SqueezeExcitation,
    batchnorm_statistics_frozen,
    init_original,
    leaky_relu_,
)
from simplepose.utils.torch_compat import is_compiling

DEPTH = 4  # hourglass levels: four poolings
STEM_STRIDE = OUTPUT_STRIDE  # the stem: conv stride 2, then a max-pool
DILATIONS = (3, 3, 4, 4, 5, 5)
# model.* settings that change how the network runs, not its weights: a run may resume with them changed
WEIGHT_NEUTRAL_SETTINGS = frozenset({"checkpoint_activations"})
T = TypeVar("T")


class Stem(nn.Module):
    """(B, 3, H, W) -> (B, C, H/4, W/4), C = inp_dim (the original's ``Backbone``; docs/network.md#stem).

    conv 7x7/2 3->C/4, BN, LReLU; R(C/4->C/2); max-pool 2; R(C/2->C/2) = u; six dilated 3x3 CBRs on u
    (dilations 3,3,4,4,5,5) = v; output concat(u, v). At C = 256: 64, 128, u 128 + v 128 (the original).
    """

    def __init__(self, inp_dim: int = 256):
        super().__init__()
        half = inp_dim // 2
        self.conv1 = nn.Conv2d(3, inp_dim // 4, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(inp_dim // 4)
        self.res1 = Residual(inp_dim // 4, half)
        self.res2 = Residual(half, half)
        self.dilated = nn.Sequential(*(ConvBNAct(half, half, 3, dilation=d) for d in DILATIONS))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = leaky_relu_(self.bn1(self.conv1(x)))
        u = self.res2(F.max_pool2d(self.res1(x), 2))
        return torch.cat((u, self.dilated(u)), dim=1)


class HourglassLevel(nn.Module):
    """The modules one hourglass level d owns (channels c = c_d, c_next = c_{d+1}); ``inner`` only at the last."""

    def __init__(self, c: int, c_next: int, bn: bool, innermost: bool):
        super().__init__()
        self.skip = Residual(c, c)
        self.down = Residual(c, c_next)
        self.up = Residual(c_next, c)
        self.refine = ConvBNAct(c, c, 3, bn=bn)
        self.inner = Residual(c_next, c_next) if innermost else None


class Hourglass(nn.Module):
    """Depth-4 hourglass with widths c_d = inp_dim + increase * d (docs/network.md#hourglass).

    (B, c_0, h, w) -> [F_0 .. F_4], F_d: (B, c_d, h/2^d, w/2^d), finest first.
    """

    def __init__(self, inp_dim: int, increase: int, bn: bool):
        super().__init__()
        widths = [inp_dim + increase * d for d in range(DEPTH + 1)]
        self.levels = nn.ModuleList(
            HourglassLevel(widths[d], widths[d + 1], bn, innermost=d == DEPTH - 1) for d in range(DEPTH)
        )

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        features: list[torch.Tensor] = [x] * (DEPTH + 1)
        features[0] = self._level(0, x, features)
        return features

    def _level(self, d: int, x: torch.Tensor, features: list[torch.Tensor]) -> torch.Tensor:
        level = cast(HourglassLevel, self.levels[d])
        skip = level.skip(x)
        low = level.down(F.max_pool2d(x, 2))
        low = level.inner(low) if level.inner is not None else self._level(d + 1, low, features)
        features[d + 1] = low
        up = F.interpolate(level.up(low), scale_factor=2.0, mode="nearest")
        return skip + level.refine(up)  # no activation after the sum (as the original)


class ScaleHead(nn.Module):
    """Per-stack, per-scale head: features CBR3(c->h), CBR3(h->h), SE(h); predict 1x1 h->C (bias).

    See docs/network.md#heads.

    (B, c, r, r) -> (features (B, h, r, r), predictions (B, C, r, r)); predictions are raw (no sigmoid).
    """

    def __init__(self, c: int, head_channels: int, bn: bool, se_reduction: int, num_channels: int):
        super().__init__()
        self.conv1 = ConvBNAct(c, head_channels, 3, bn=bn)
        self.conv2 = ConvBNAct(head_channels, head_channels, 3, bn=bn)
        self.se = SqueezeExcitation(head_channels, se_reduction)
        self.predict = nn.Conv2d(head_channels, num_channels, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        g = self.se(self.conv2(self.conv1(x)))
        return g, self.predict(g)


class Merge(nn.Module):
    """Maps a stack's head features and predictions back to width c: CB1(h->c)(g) + CB1(C->c)(y)."""

    def __init__(self, c: int, head_channels: int, bn: bool, num_channels: int):
        super().__init__()
        self.from_features = ConvBNAct(head_channels, c, 1, bn=bn, act=False)
        self.from_predictions = ConvBNAct(num_channels, c, 1, bn=bn, act=False)

    def forward(self, g: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.from_predictions(y) + self.from_features(g)


class PoseNet(nn.Module):
    """The IMHN for ``skeleton``. ``forward(image)`` -> ``outputs[stack][scale]`` of shape (B, C, H/4/2^k, W/4/2^k),
    C = ``skeleton.num_channels``; ``model.skeleton`` says what each channel is.

    The last stack has no merge layers, so every parameter gets a gradient (DDP without unused parameters).
    """

    def __init__(self, cfg: ModelConfig, skeleton: Skeleton):
        super().__init__()
        check_model_config(cfg)
        self.cfg = cfg
        self.skeleton = skeleton
        c_out = skeleton.num_channels
        widths = [cfg.inp_dim + cfg.increase * d for d in range(cfg.num_scales)]
        h = cfg.head_channels
        self.stem = Stem(cfg.inp_dim)
        self.hourglasses = nn.ModuleList(Hourglass(cfg.inp_dim, cfg.increase, cfg.bn) for _ in range(cfg.stacks))
        self.heads = nn.ModuleList(
            nn.ModuleList(ScaleHead(c, h, cfg.bn, cfg.se_reduction, c_out) for c in widths) for _ in range(cfg.stacks)
        )
        self.merges = nn.ModuleList(
            nn.ModuleList(Merge(c, h, cfg.bn, c_out) for c in widths) for _ in range(cfg.stacks - 1)
        )
        init_original(self)

    def forward(self, image: torch.Tensor) -> list[list[torch.Tensor]]:
        check_input_shape(image.shape)
        unit = recomputed if self.recomputes_activations() else run_plainly
        x = unit([self.stem], self.stem, image)
        cache: list[torch.Tensor] = []
        outputs: list[list[torch.Tensor]] = []
        last = len(self.hourglasses) - 1
        for t, hourglass in enumerate(self.hourglasses):
            feats = unit([hourglass], self.stack_features, t, x)
            heads = run_plainly if t == last else unit  # see recomputes_activations
            ys, x, cache = heads(self.stack_head_modules(t), self.stack_outputs, t, x, feats, cache)
            outputs.append(ys)
        return outputs

    def finest_prediction(self, image: torch.Tensor) -> torch.Tensor:
        """``forward(image)[-1][0]``, the last stack's finest output (B, C, H/4, W/4), which is all that evaluation
        reads: the last stack's other heads are not computed."""
        check_input_shape(image.shape)
        x = self.stem(image)
        cache: list[torch.Tensor] = []
        last = len(self.hourglasses) - 1
        for t in range(last):
            _, x, cache = self.stack_outputs(t, x, self.stack_features(t, x), cache)
        finest = self.hourglasses[last](x)[0]
        if cache:
            finest = finest + cache[0]
        return self.stack_heads(last)[0](finest)[1]

    def recomputes_activations(self) -> bool:
        """Whether this forward keeps only the inputs of its units and recomputes their activations in the
        backward pass (``model.checkpoint_activations``, when training with grad enabled; evaluation and
        ``torch.no_grad`` run the plain path).

        The units are the stem, each stack's hourglass, and each stack's heads with its merges. The last stack's
        heads run plainly: backward needs them first, so recomputing them would free nothing. In the backward
        pass one unit's activations live at a time, beside the inputs and outputs of all units, so the largest
        unit (an hourglass) sets the peak. Whole stacks as units would recompute a little less (the last
        hourglass would run once) but keep a stack's activations at a time. Cost: every op but the last heads
        runs twice. Memory counted per unit, and measured: docs/benchmarks.md#activation-checkpointing.
        """
        return self.cfg.checkpoint_activations and self.training and torch.is_grad_enabled()

    def stack_heads(self, t: int) -> nn.ModuleList:
        """Stack t's heads, one per scale."""
        return cast(nn.ModuleList, self.heads[t])

    def stack_merges(self, t: int) -> nn.ModuleList:
        """Stack t's merges into stack t+1, one per scale (none after the last stack)."""
        return cast(nn.ModuleList, self.merges[t])

    def stack_features(self, t: int, x: torch.Tensor) -> list[torch.Tensor]:
        """Stack t's hourglass features F_0 .. F_{num_scales-1} of its input x."""
        return self.hourglasses[t](x)[: self.cfg.num_scales]

    def stack_outputs(
        self, t: int, x: torch.Tensor, feats: list[torch.Tensor], cache: list[torch.Tensor]
    ) -> tuple[list[torch.Tensor], torch.Tensor, list[torch.Tensor]]:
        """Stack t's heads and merges: (its predictions per scale, the input of stack t+1, its merged cache).

        ``cache`` (the previous stack's merges, empty for stack 0) is added to ``feats``; the last stack has no
        merges and returns ``x`` and ``cache`` as they came."""
        if cache:
            feats = [f + c for f, c in zip(feats, cache)]
        pairs = [head(f) for head, f in zip(self.stack_heads(t), feats)]
        if t < len(self.merges):
            cache = [merge(g, y) for merge, (g, y) in zip(self.stack_merges(t), pairs)]
            x = self.next_stack_input(x, cache)
        return [y for _, y in pairs], x, cache

    def stack_head_modules(self, t: int) -> list[nn.Module]:
        """The modules ``stack_outputs(t, ...)`` runs."""
        return [self.heads[t], *self.merges[t : t + 1]]

    def next_stack_input(self, x: torch.Tensor, cache: list[torch.Tensor]) -> torch.Tensor:
        """Input of stack t+1: x plus the scale-0 merge, reused from the cache (the original computed it twice)."""
        return x + cache[0]


def run_plainly(modules: list[nn.Module], fn: Callable[..., T], *args) -> T:
    """``fn(*args)``, its activations kept for backward as usual (``modules``: those ``fn`` runs, unused here)."""
    return fn(*args)


def recomputed(modules: list[nn.Module], fn: Callable[..., T], *args) -> T:
    """``fn(*args)`` keeping only its inputs for backward, which runs it again (``modules``: those ``fn`` runs).

    The rerun leaves the BatchNorm running statistics of ``modules`` alone (the first run updated them; a
    second update would apply the momentum twice) and skips saving the RNG state (the network draws no random
    numbers). Autocast is re-entered as it was; the gradients are those of the plain path.

    Under ``torch.compile`` the region is traced instead (dynamo takes no Python ``context_fn``): AOT autograd
    then recomputes from the functional graph, where the running-statistics update is applied once, after the
    forward, so the rerun cannot apply it twice (tests/test_compile.py checks the statistics)."""
    if is_compiling():
        return checkpoint(fn, *args, use_reentrant=False)
    return checkpoint(
        fn, *args, use_reentrant=False, preserve_rng_state=False, context_fn=partial(recompute_contexts, tuple(modules))
    )


def recompute_contexts(modules: tuple[nn.Module, ...]) -> tuple[AbstractContextManager, AbstractContextManager]:
    """``checkpoint``'s (forward, recomputation) contexts: the recomputation leaves the BatchNorm statistics of
    ``modules`` alone."""
    return nullcontext(), batchnorm_statistics_frozen(modules)


def check_model_config(cfg: ModelConfig) -> None:
    """ConfigError (``key``: the first setting at fault) for model settings the architecture cannot build."""
    problems = []
    if cfg.stacks < 1:
        problems.append(("model.stacks", f"model.stacks must be >= 1, got {cfg.stacks}"))
    if cfg.inp_dim < 4 or cfg.inp_dim % 4:
        problems.append(
            ("model.inp_dim", f"model.inp_dim must be a positive multiple of 4 (the stem splits it), got {cfg.inp_dim}")
        )
    if cfg.increase < 0 or cfg.increase % 2:
        problems.append(
            ("model.increase", f"model.increase must be even and >= 0 (bottlenecks halve widths), got {cfg.increase}")
        )
    if not 1 <= cfg.num_scales <= DEPTH + 1:
        problems.append(
            ("model.num_scales", f"model.num_scales must be between 1 and {DEPTH + 1}, got {cfg.num_scales}")
        )
    if cfg.se_reduction < 1 or cfg.head_channels < cfg.se_reduction:
        problems.append(
            (
                "model.head_channels",
                f"model.head_channels ({cfg.head_channels}) must be >= model.se_reduction ({cfg.se_reduction}) >= 1",
            )
        )
    if problems:
        raise ConfigError("; ".join(text for _, text in problems), key=problems[0][0])


def output_shapes(
    cfg: ModelConfig, batch: int, height: int, width: int, skeleton: Skeleton
) -> list[tuple[int, int, int, int]]:
    """Shape of ``outputs[t][k]`` for every scale k (the same for every stack)."""
    check_input_shape((batch, 3, height, width))
    r = STEM_STRIDE
    c = skeleton.num_channels
    return [(batch, c, height // (r * 2**k), width // (r * 2**k)) for k in range(cfg.num_scales)]


def build_model(cfg: Config | ModelConfig, skeleton: Skeleton | None = None) -> PoseNet:
    """Build the IMHN from a whole ``config.schema.Config`` for ``skeleton`` (default: the one ``cfg.data.skeleton``
    names), or from a ``ModelConfig`` and a skeleton."""
    if isinstance(cfg, ModelConfig):
        if skeleton is None:
            raise TypeError("build_model(ModelConfig) needs the skeleton: build_model(cfg.model, skeleton)")
        return PoseNet(cfg, skeleton)
    return PoseNet(cfg.model, skeleton or skeleton_of(cfg))
