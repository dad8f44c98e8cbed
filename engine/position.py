"""Where a run stands: what the training loop advances, what hooks read, what a checkpoint stores."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch


@dataclass
class TrainingPosition:
    """The position of a run and what it has counted.

    ``epoch`` is the current epoch (0-based) and ``step`` the optimiser steps done in it; a checkpoint written at
    an epoch end holds (epoch + 1, 0), one written after step s of epoch e holds (e, s). ``best_metric``: the best
    validation metric so far (COCO AP, or minus the validation loss without AP). ``counters``: e.g.
    ``skipped_nonfinite``, the steps skipped for a non-finite loss or gradient. A checkpoint written at an epoch end
    before its validation holds ``validation_due``."""

    epoch: int = 0
    step: int = 0
    global_step: int = 0
    best_metric: float = -math.inf
    counters: dict[str, int] = field(default_factory=lambda: {"skipped_nonfinite": 0})
    # the epoch before ``epoch`` has ended and its validation is still to do (a checkpoint written at the epoch end,
    # before validation; a resume from it validates first)
    validation_due: bool = False
    # steps skipped since the last ``settle``, counted on the device so that a step needs no host read
    pending_skips: torch.Tensor | None = field(default=None, init=False, compare=False, repr=False)
    # this process's (loss x samples summed, samples) over the epoch's applied steps so far, float64 (2,), on the
    # device: the epoch's train_loss; saved in a mid-epoch checkpoint, so that a resumed epoch averages every step
    epoch_loss: torch.Tensor | None = field(default=None, init=False, compare=False, repr=False)

    def count_skip(self, skipped: torch.Tensor) -> None:
        """Add a step's 0-d skip flag (or count) without reading it."""
        self.pending_skips = skipped if self.pending_skips is None else self.pending_skips + skipped

    def settle(self) -> int:
        """Fold the device-side skip count into ``counters`` (one host read); returns how many it added."""
        if self.pending_skips is None:
            return 0
        n = int(self.pending_skips.item())
        self.pending_skips = None
        self.counters["skipped_nonfinite"] = self.counters.get("skipped_nonfinite", 0) + n
        return n

    def where(self) -> str:
        """``epoch E, step S (global step G)``, for messages."""
        return f"epoch {self.epoch}, step {self.step} (global step {self.global_step})"
