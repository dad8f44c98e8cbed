"""Building blocks of the Identity-Mapping Hourglass Network (docs/network.md#building-blocks).

Every activation is LeakyReLU(0.01), applied in place on tensors that no other op needs for its backward
pass. Shapes are NCHW; nothing here assumes a memory format, so channels_last inputs stay channels_last.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn

LEAKY_SLOPE = 0.01


def leaky_relu_(x: torch.Tensor) -> torch.Tensor:
    return F.leaky_relu(x, LEAKY_SLOPE, inplace=True)


class ConvBNAct(nn.Module):
    """k x k conv (stride 1, "same" padding, dilation d) + BatchNorm + optional LeakyReLU.

    With ``bn=False`` the conv gets a bias and there is no BatchNorm (the original's ``Conv(bn=False)``).
    (B, cin, H, W) -> (B, cout, H, W).
    """

    def __init__(self, cin: int, cout: int, kernel: int = 3, *, dilation: int = 1, bn: bool = True, act: bool = True):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel, padding=dilation * (kernel - 1) // 2, dilation=dilation, bias=not bn)
        self.bn = nn.BatchNorm2d(cout) if bn else None
        self.act = act

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        if self.bn is not None:
            x = self.bn(x)
        return leaky_relu_(x) if self.act else x


class Residual(nn.Module):
    """Bottleneck residual block R(cin -> cout) (the original's ``Residual``; docs/network.md#building-blocks).

    branch: 1x1 cin->cout/2, BN, LReLU; 3x3 cout/2->cout/2, BN, LReLU; 1x1 cout/2->cout, BN.
    skip: identity if cin == cout else 1x1 conv + BN. Output LReLU(branch + skip). BN is always present.
    (B, cin, H, W) -> (B, cout, H, W).
    """

    def __init__(self, cin: int, cout: int):
        super().__init__()
        mid = cout // 2
        self.conv1 = nn.Conv2d(cin, mid, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(mid)
        self.conv2 = nn.Conv2d(mid, mid, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(mid)
        self.conv3 = nn.Conv2d(mid, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.skip = None if cin == cout else ConvBNAct(cin, cout, 1, act=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = leaky_relu_(self.bn1(self.conv1(x)))
        y = leaky_relu_(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        # BatchNorm's backward does not need its output, so the sum may overwrite it.
        y += x if self.skip is None else self.skip(x)
        return leaky_relu_(y)


class SqueezeExcitation(nn.Module):
    """Channel attention (the original's ``SELayer``): x * sigmoid(fc2(LReLU(fc1(mean_hw(x))))).

    (B, C, H, W) -> (B, C, H, W); fc1: C -> C/reduction, fc2: C/reduction -> C, both with bias.
    """

    def __init__(self, channels: int, reduction: int = 16):
        super().__init__()
        self.fc1 = nn.Linear(channels, channels // reduction)
        self.fc2 = nn.Linear(channels // reduction, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = torch.sigmoid(self.fc2(leaky_relu_(self.fc1(x.mean((2, 3))))))
        return x * s[:, :, None, None]


def init_original(module: nn.Module) -> None:
    """The original's initialisation: conv N(0, 0.001^2), linear N(0, 0.01^2), biases 0, BN 1/0.

    See docs/network.md#initialisation.
    """
    for m in module.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.normal_(m.weight, 0.0, 0.001 if isinstance(m, nn.Conv2d) else 0.01)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


BATCHNORM_STATISTICS = ("running_mean", "running_var", "num_batches_tracked")


@contextmanager
def batchnorm_statistics_frozen(modules: Iterable[nn.Module]) -> Iterator[None]:
    """Within the block, the BatchNorms inside ``modules`` update throwaway copies of their running statistics
    (and ``num_batches_tracked``), so these stay as they were: for re-running a forward pass whose update
    already happened. Everything else is as before: the same normalisation, and the same tensors saved for
    backward (which a recomputation must match one for one, so the statistics cannot simply be left out)."""
    swapped = []
    for module in modules:
        for m in module.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                for name in BATCHNORM_STATISTICS:
                    if (buffer := getattr(m, name)) is not None:
                        swapped.append((m, name, buffer))
                        setattr(m, name, buffer.clone())
    try:
        yield
    finally:
        for m, name, buffer in swapped:
            setattr(m, name, buffer)
