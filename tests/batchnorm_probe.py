"""train_distributed.py, and after training one line with the BatchNorm layer types of the model it trained:
``batchnorm layers: {"SyncBatchNorm": 12}`` (JSON; rank 0 prints it). Read by tests/test_cuda.py.

    PYTHONPATH=. torchrun --nproc_per_node=1 tests/batchnorm_probe.py --config ... key=value ...
"""

from __future__ import annotations

import json
from collections import Counter

from torch import nn

from simplepose import train_distributed
from simplepose.engine.trainer import Trainer

fit = Trainer.fit


def fit_and_report(self: Trainer):
    """Trainer.fit, then the probe line."""
    result = fit(self)
    if self.is_main:
        norms = [m for m in self.model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
        kinds = Counter(type(m).__name__ for m in norms)
        print("batchnorm layers:", json.dumps(dict(kinds)), flush=True)
    return result


if __name__ == "__main__":
    Trainer.fit = fit_and_report
    raise SystemExit(train_distributed.main())
