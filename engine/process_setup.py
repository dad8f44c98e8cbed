"""Process-wide settings of a run: seeding and CPU threads."""

from __future__ import annotations

import os
import random

import numpy as np
import torch


def seed_everything(seed: int, deterministic: bool) -> None:
    """Seed Python, NumPy and torch; ``deterministic`` also asks torch for deterministic kernels."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if deterministic:
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.benchmark = False
    else:
        torch.backends.cudnn.benchmark = True


def configure_cpu_threads(device: torch.device, num_workers: int) -> None:
    """On the CPU, leave one core per DataLoader worker: more busy threads than cores stalls every OpenMP
    barrier in the network (docs/benchmarks.md#cpu-threads). OMP_NUM_THREADS, when set, wins."""
    if device.type == "cpu" and "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) - num_workers))
