"""The network in its inference form: every BatchNorm folded into the convolution before it.

In eval mode a BatchNorm is a per-channel affine map (running statistics fixed), so ``bn(conv(x))`` is one
convolution with scaled weights and a bias: one kernel (and one pass over the activations) less per layer, 272 in
the paper's network. The pairs are the modules' ``conv``/``bn`` and ``convN``/``bnN`` attributes
(models/layers.py, models/posenet.py); the BatchNorm becomes an ``nn.Identity``.
"""

from __future__ import annotations

import copy

import torch
from torch import nn
from torch.nn.utils.fusion import fuse_conv_bn_eval


def fold_batchnorm(model: nn.Module) -> nn.Module:
    """A copy of ``model`` in eval mode with each (conv, BatchNorm) pair folded; ``model`` is left as it is.

    The copy computes what ``model.eval()`` computes, to float rounding (tests/test_eval_device.py: 1e-5)."""
    folded = copy.deepcopy(model).eval()
    pairs = 0
    for module in folded.modules():
        for name, bn in list(module.named_children()):
            if not (name.startswith("bn") and isinstance(bn, nn.modules.batchnorm._BatchNorm)):
                continue
            conv = getattr(module, "conv" + name[2:], None)
            if not isinstance(conv, nn.Conv2d):
                continue
            with torch.no_grad():
                setattr(module, "conv" + name[2:], fuse_conv_bn_eval(conv, bn))
            setattr(module, name, nn.Identity())
            pairs += 1
    folded.folded_batchnorms = pairs
    return folded
