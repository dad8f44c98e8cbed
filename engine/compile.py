"""``train.compile``: the model and the loss traced by ``torch.compile`` as one function.

auto: on for CUDA, where a step is launch-bound (thousands of small kernels: docs/benchmarks.md#compiled-training);
off on the CPU, where 91 % of a step is oneDNN convolutions and compiling measured no gain. ``on`` compiles on any
device, ``off`` never. The decision and its reason are the run's first lines; the first step's compile time is
logged when it is done.

What is compiled is the launcher's ``forward_loss`` (model forward + loss), not the module: the checkpoint's
state_dict keeps its keys, and DDP's hooks see the same module. Shapes are static (training batches are), so
``dynamic=False``; on CUDA ``mode="max-autotune-no-cudagraphs"`` is not used (long compile), the default mode is.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

log = logging.getLogger(__name__)

BACKEND = "inductor"  # the tests trace with "aot_eager": inductor's C++ builds take minutes on a 2-core CPU


@dataclass(frozen=True)
class CompileChoice:
    enabled: bool
    reason: str


def choose_compile(setting: str, device: torch.device, launcher: str = "single") -> CompileChoice:
    """What ``train.compile=setting`` means on ``device`` for the launcher named ``launcher``."""
    if setting == "off":
        return CompileChoice(False, "train.compile=off")
    if setting == "on":
        return CompileChoice(True, f"train.compile=on, on {device.type}")
    if launcher == "data_parallel" and device.type == "cuda":
        return CompileChoice(False, "train.compile=auto: off under nn.DataParallel, whose replicas torch.compile does "
                                    "not trace (train_distributed.py compiles)")  # fmt: skip
    if device.type == "cuda":
        return CompileChoice(True, "train.compile=auto: on for CUDA, where a step is bound by kernel launches")
    return CompileChoice(False, f"train.compile=auto: off on {device.type}, where compiling measured no gain "
                                "(docs/benchmarks.md#compiled-training)")  # fmt: skip


class TimedFirstCall:
    """``fn`` whose first call (where ``torch.compile`` traces and compiles) is timed and logged once.

    With ``fallback`` (``train.compile=auto``), a compiler that cannot build the graph (``BackendCompilerFailed``: no
    C compiler or Triton in a slim container, an unsupported GPU) is said in a warning and ``fallback`` (the eager
    function) is used from then on; nothing ran before the failure (dynamo traces on fake tensors). Other errors
    (shapes, out of memory) are raised as they are. ``train.compile=on`` gives no fallback: the error is raised."""

    def __init__(self, fn: Callable, what: str, say: bool = True, fallback: Callable | None = None) -> None:
        self.fn, self.what, self.say, self.fallback = fn, what, say, fallback
        self.compile_s: float | None = None

    def __call__(self, *args, **kwargs):
        if self.compile_s is not None:
            return self.fn(*args, **kwargs)
        start = time.perf_counter()
        try:
            out = self.fn(*args, **kwargs)
        except torch._dynamo.exc.BackendCompilerFailed as err:
            if self.fallback is None:
                raise
            log.warning("%s: the compiler failed (%s: %s); training eagerly instead (train.compile=off silences "
                        "this, train.compile=on raises it)", self.what, type(err.inner_exception).__name__,
                        str(err.inner_exception).splitlines()[0] if str(err.inner_exception) else "")  # fmt: skip
            self.fn, self.compile_s = self.fallback, 0.0
            return self.fn(*args, **kwargs)
        self.compile_s = time.perf_counter() - start
        if self.say:
            log.info("%s: first call (trace + compile + run) took %.1f s", self.what, self.compile_s)
        return out


def compile_forward_loss(fn: Callable, backend=None, say: bool = True, fall_back: bool = False) -> TimedFirstCall:
    """``fn(images, targets, masks) -> (total, breakdown)`` compiled as one graph (model and loss); with
    ``fall_back``, ``fn`` itself where the compiler fails (``TimedFirstCall``)."""
    compiled = torch.compile(fn, backend=backend or BACKEND, dynamic=False)
    return TimedFirstCall(compiled, "compiled model + loss", say, fallback=fn if fall_back else None)
