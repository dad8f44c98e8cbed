"""The network in its inference form: every BatchNorm folded into the convolution whose output it normalises.

In eval mode a BatchNorm is a per-channel affine map (running statistics fixed), so ``bn(conv(x))`` is one
convolution with scaled weights and a bias: one kernel (and one pass over the activations) less per pair, 288 in
the paper's network (75 in the quick-start model). Which BatchNorm takes which convolution's output is read from the
code, not from names: each module that holds both a convolution and a BatchNorm is traced with ``torch.fx`` (its
submodules kept whole, as calls), and a (convolution, BatchNorm) pair of its children is folded where the
BatchNorm's only input is the convolution's output, that output goes nowhere else, and each of the two is called
once and held once in the model. The convolution becomes the folded one, the BatchNorm an ``nn.Identity``. Any
other BatchNorm (after a ReLU, after a convolution whose output is also used elsewhere, in a module that
``torch.fx`` cannot trace) is left as it is, named in a log line: the copy still computes what the model computes.
A BatchNorm without running statistics (``track_running_stats=False``) normalises by each batch's own statistics
even in eval mode, which no convolution can hold: ``FoldError``.
"""

from __future__ import annotations

import copy
import logging
from collections import Counter

import torch
from torch import fx, nn
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn.modules.conv import _ConvNd, _ConvTransposeNd
from torch.nn.utils.fusion import fuse_conv_bn_eval

from simplepose.utils.errors import UserError

log = logging.getLogger(__name__)


class FoldError(UserError):
    """A BatchNorm that cannot be folded into its convolution (``key``: ``eval.fold_batchnorm``)."""


class _ChildrenWhole(fx.Tracer):
    """Traces one module's own forward: every submodule it calls stays one ``call_module`` node."""

    def is_leaf_module(self, m: nn.Module, module_qualified_name: str) -> bool:
        return True


def fold_batchnorm(model: nn.Module) -> nn.Module:
    """A copy of ``model`` in eval mode with each BatchNorm that directly normalises a convolution's output folded
    into it (module docstring); ``model`` is left as it is. ``.folded_batchnorms``: how many; ``.left_batchnorms``:
    the names of the BatchNorms left as they are.

    The copy computes what ``model.eval()`` computes, to float rounding (tests/test_eval_device.py: 1e-5)."""
    folded = copy.deepcopy(model).eval()
    held = Counter(id(m) for _, m in folded.named_modules(remove_duplicate=False))
    names = {id(m): name for name, m in folded.named_modules()}
    pairs = []
    for owner_name, owner in folded.named_modules():
        children = dict(owner.named_children())
        if not (
            any(isinstance(c, _ConvNd) for c in children.values())
            and any(isinstance(c, _BatchNorm) for c in children.values())
        ):
            continue
        try:
            graph = _ChildrenWhole().trace(owner)
        except Exception as err:  # noqa: BLE001 - any failure to trace leaves the module's BatchNorms as they are
            log.info(
                "fold: %s (%s) not traced, its BatchNorms left as they are: %s: %s",
                owner_name or "the model",
                type(owner).__name__,
                type(err).__name__,
                str(err).splitlines()[0] if str(err) else "",
            )
            continue
        pairs += _direct_pairs(owner, graph, held)
    done = set()
    for owner, conv_name, bn_name in pairs:
        conv, bn = getattr(owner, conv_name), getattr(owner, bn_name)
        if bn.running_mean is None or bn.running_var is None:
            raise FoldError(
                f"fold: BatchNorm '{names[id(bn)]}' has no running statistics (track_running_stats="
                f"False): in eval mode it normalises by each batch's own, which no convolution can hold; "
                f"set eval.fold_batchnorm=false to run the network as it is",
                key="eval.fold_batchnorm",
            )
        with torch.no_grad():
            setattr(owner, conv_name, fuse_conv_bn_eval(conv, bn, transpose=isinstance(conv, _ConvTransposeNd)))
        setattr(owner, bn_name, nn.Identity())
        done.add(id(bn))
    left = tuple(name for name, m in folded.named_modules() if isinstance(m, _BatchNorm))
    if left:
        log.info(
            "fold: %d BatchNorm(s) left as they are (not directly after a convolution whose output only they take): %s",
            len(left),
            ", ".join(left[:10]) + (", ..." if len(left) > 10 else ""),
        )
    vars(folded).update(folded_batchnorms=len(done), left_batchnorms=left)  # plain attributes, as setattr keeps them
    return folded


def _direct_pairs(owner: nn.Module, graph: fx.Graph, held: Counter) -> list[tuple[nn.Module, str, str]]:
    """(owner, convolution's name, BatchNorm's name) of the pairs of ``owner``'s children that its traced ``graph``
    shows folding can join: the BatchNorm's one input is the convolution's output, used by nothing else; both called
    once here, held once in the model, and neither read otherwise (parameters, attributes)."""
    children = dict(owner.named_children())
    calls = Counter(n.target for n in graph.nodes if n.op == "call_module")
    read = {str(n.target).split(".")[0] for n in graph.nodes if n.op == "get_attr"}
    pairs = []
    for node in graph.nodes:
        bn = children.get(str(node.target)) if node.op == "call_module" else None
        if not isinstance(bn, _BatchNorm) or node.kwargs or len(node.args) != 1:
            continue
        source = node.args[0]
        conv = children.get(str(source.target)) if isinstance(source, fx.Node) and source.op == "call_module" else None
        if (
            isinstance(conv, _ConvNd)
            and len(source.users) == 1
            and calls[source.target] == calls[node.target] == 1
            and held[id(conv)] == held[id(bn)] == 1
            and not {source.target, node.target} & read
            and conv.out_channels == bn.num_features
        ):
            pairs.append((owner, source.target, node.target))
    return pairs
