"""Where a run stands: what the training loop advances, what hooks read, what a checkpoint stores."""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass
class Progress:
    """The position of a run and what it has counted.

    ``epoch`` is the current epoch (0-based) and ``step`` the optimiser steps done in it; a checkpoint written at
    an epoch end holds (epoch + 1, 0), one written after step s of epoch e holds (e, s). ``best_metric``: the best
    validation metric so far (COCO AP, or minus the validation loss without AP). ``counters``: e.g.
    ``skipped_nonfinite``, the steps skipped for a non-finite loss or gradient."""

    epoch: int = 0
    step: int = 0
    global_step: int = 0
    best_metric: float = -math.inf
    counters: dict[str, int] = field(default_factory=lambda: {"skipped_nonfinite": 0})

    def where(self) -> str:
        """``epoch E, step S (global step G)``, for messages."""
        return f"epoch {self.epoch}, step {self.step} (global step {self.global_step})"
