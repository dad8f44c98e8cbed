"""``eval_mode(model)``: a network in evaluation mode inside a block, its own mode back after (training's
validation and a COCO evaluation both borrow the network being trained)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from torch import nn


@contextmanager
def eval_mode(model: nn.Module) -> Iterator[nn.Module]:
    """``model`` switched to ``eval()`` for the block (yielded), then back to training mode if it was in it, also
    when the block raises."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)
