"""Weight averaging: an exponential moving average (EMA) of a network's weights, kept beside the trained ones.

    ema = WeightAverage(model, decay=0.999, warmup_steps=2000)
    ...optimizer.step()
    ema.update(model, applied)          # after every optimiser step; applied: 0-d bool tensor (a skipped step: no-op)
    evaluate(ema.module)                # validation and best.pt use the average

The average covers the whole state dict: parameters and the floating-point buffers (BatchNorm's running mean and
variance) are averaged, integer buffers (``num_batches_tracked``) copied, as the EMAs of ultralytics and timm do.
The decay ramps up with the number of applied updates ``n`` as ``decay x (1 - exp(-n / warmup_steps))``, so that the
first averages follow the fast-moving early weights instead of holding on to the random start. Everything stays on
the device: the update reads nothing back to the host (the step's ``applied`` flag scales the update there).

A skipped step leaves the average bit for bit, whatever the trained network holds (a bad batch may leave NaN in its
BatchNorm statistics): the moved average is computed and the old one selected, since NaN x 0 is NaN.

Under DDP every process keeps its own average of the same state (gradients are all-reduced; BatchNorm statistics are
SyncBN's or averaged over the processes after each step: ``engine.launch.Distributed.sync_statistics``), so the
averages agree, buffers included; checkpoints hold rank 0's. Why not ``torch.optim.swa_utils.AveragedModel``:
docs/libraries.md.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn

from simplepose.models.weights import unwrap
from simplepose.utils.torch_compat import foreach_lerp


class WeightAverage:
    """The EMA of ``model``'s state (``model`` possibly wrapped: DDP, DataParallel, channels_last kept)."""

    def __init__(self, model: nn.Module, decay: float, warmup_steps: int) -> None:
        self.decay, self.warmup_steps = decay, warmup_steps
        self.source = unwrap(model)
        self._source_state = _split(self.source)  # the trained tensors, found once: the same objects every step
        self.module = copy.deepcopy(self.source).eval()
        self.module.requires_grad_(False)
        device = next(self.module.parameters()).device
        self.updates = torch.zeros((), dtype=torch.float64, device=device)  # applied updates so far
        self._floats, self._ints = _split(self.module)

    def update(self, model: nn.Module, applied: torch.Tensor | bool = True) -> None:
        """Move the average towards ``model``'s current state (the trained network, same architecture)."""
        module = unwrap(model)
        floats, ints = self._source_state if module is self.source else _split(module)
        if isinstance(applied, bool) and not applied:
            return  # known on the host: nothing to do
        applied = torch.as_tensor(applied, device=self.updates.device)
        self.updates += applied.to(self.updates.dtype)
        decay = self.decay * (1.0 - torch.exp(-self.updates / self.warmup_steps))
        weight = (1.0 - decay).float()  # the weight of the new state: 1 - decay(n)
        with torch.no_grad():
            moved = foreach_lerp(self._floats, floats, weight)
            # a skipped step selects the old value, never scales a difference by 0: NaN x 0 is NaN, and a skipped
            # step's BatchNorm statistics may be NaN
            for mine, new in zip(self._floats, moved):
                torch.where(applied, new, mine, out=mine)
            for mine, theirs in zip(self._ints, ints):
                torch.where(applied, theirs, mine, out=mine)

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps to continue the average exactly: its state dict and the update count."""
        return {"model": self.module.state_dict(), "updates": self.updates.item()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.module.load_state_dict(state["model"])
        self.updates.fill_(float(state["updates"]))

    def reset_to(self, model: nn.Module) -> None:
        """Start the average at ``model``'s current state (a resume from a checkpoint that holds none)."""
        self.module.load_state_dict(unwrap(model).state_dict())
        self.updates.zero_()


def _split(module: nn.Module) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """The module's state tensors, floating-point ones and the others, in state-dict order."""
    state = module.state_dict(keep_vars=True)
    tensors = [t.data if isinstance(t, nn.Parameter) else t for t in state.values()]
    return [t for t in tensors if t.is_floating_point()], [t for t in tensors if not t.is_floating_point()]
