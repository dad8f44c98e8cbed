"""SimplePose: bottom-up multi-person pose estimation (Simple Pose, AAAI 2020) in PyTorch.

The checkout's root is this package: its folders ``config``, ``codec``, ``data``, ``models``, ``checkpoint``,
``evaluate``, ``engine`` and ``utils`` are the subpackages ``simplepose.config`` ... ``simplepose.utils``, and the
launchers ``train.py``, ``train_parallel.py``, ``train_distributed.py`` are ``simplepose.train`` ... (pyproject's
``package-dir``: the same in an editable install and in a wheel)::

    from simplepose import PoseEstimator
    people = PoseEstimator.from_checkpoint("runs/quickstart/best.pt")("photo.jpg")

    python -m simplepose.evaluate.demo --ckpt runs/quickstart/best.pt --input photos/   # any command, any folder
    python -m simplepose.train --config my.yaml                                          # a launcher, likewise

The API's names (``simplepose.evaluate``'s) are imported when first used, so ``import simplepose`` loads no torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simplepose import evaluate as _evaluate

__version__ = "0.2.0"
# the API: simplepose.evaluate's names, looked up there when first used
__all__ = list(_evaluate.__all__)

if TYPE_CHECKING:
    from simplepose.evaluate import *  # noqa: F403


def __getattr__(name: str):
    if name in __all__:
        value = getattr(_evaluate, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'simplepose' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
