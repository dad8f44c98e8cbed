"""BatchNorm running statistics put back when a training step is skipped.

A batch that makes the loss non-finite has already been through every BatchNorm's forward pass: its NaN (or inf)
is in their running means and variances before the step is found bad. A running mean, once NaN, stays NaN
(``(1 - momentum) x NaN + ...``) for the rest of the run: training goes on on batch statistics, while validation,
checkpoints and, through its copy of the buffers, the weight average hold a network that outputs NaN. The skip
leaves the parameters; this leaves the statistics.

    backup = StatisticsBackup(model)
    backup.save()                       # before the step's forward passes
    ...
    backup.keep_if(applied)             # 0-d bool on the device: no host read
    backup.restore()                    # or, where the skip is known on the host
"""

from __future__ import annotations

import torch
from torch import nn

from simplepose.utils.torch_compat import foreach_copy_


def running_statistics(model: nn.Module, training_only: bool = False) -> list[torch.Tensor]:
    """The running means and variances of ``model``'s BatchNorms that track them (``training_only``: of those in
    training mode, the ones a forward pass updates), in module order."""
    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.track_running_stats]
    return [
        stat
        for m in norms
        if m.training or not training_only
        for stat in (m.running_mean, m.running_var)
        if stat is not None
    ]


class StatisticsBackup:
    """A copy of ``model``'s BatchNorm running statistics (the same tensors every step: the copy is made once)."""

    def __init__(self, model: nn.Module) -> None:
        self.live = running_statistics(model)
        self.saved = [t.detach().clone() for t in self.live]

    def save(self) -> None:
        if self.live:
            foreach_copy_(self.saved, self.live)

    def restore(self) -> None:
        if self.live:
            foreach_copy_(self.live, self.saved)

    def keep_if(self, applied: torch.Tensor) -> None:
        """The statistics as the step left them where ``applied``, else as saved (a select: NaN x 0 is NaN)."""
        for live, saved in zip(self.live, self.saved):
            torch.where(applied, live, saved, out=live)
