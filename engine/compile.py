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
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from simplepose.utils.commands import command
from simplepose.utils.torch_compat import OutOfMemoryError, backward_compiled_with_forward, compiler_failed

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
        return CompileChoice(
            False,
            "train.compile=auto: off under nn.DataParallel, whose replicas torch.compile does not trace (DDP, "
            f"{command('train_distributed', torchrun='--nproc_per_node=N')}, compiles)",
        )
    if device.type == "cuda":
        return CompileChoice(True, "train.compile=auto: on for CUDA, where a step is bound by kernel launches")
    return CompileChoice(
        False,
        f"train.compile=auto: off on {device.type}, where compiling measured no gain "
        "(docs/benchmarks.md#compiled-training)",
    )


class TimedFirstCall:
    """``fn`` whose first call (where ``torch.compile`` traces and compiles) is timed and logged once.

    With ``fallback`` (``train.compile=auto``), the first call builds the backward graph with the forward one
    (``force_non_lazy_backward_lowering``: by default AOT autograd compiles it at the first backward pass, outside this
    call), so that a compiler that cannot build either graph fails here, as ``BackendCompilerFailed``: no C compiler
    or Triton in a slim container, an unsupported GPU, a lowering it lacks. That is said in a warning, the buffers of
    ``state`` (the modules the step runs: BatchNorm running statistics) are put back as they were before the call
    (a graph before a graph break may have run and updated them), and ``fallback`` (the eager function) runs the
    step, and every step from then on. No backward pass and no optimiser step has run by then. Raised as they are,
    also under ``auto``: out of memory (``torch.OutOfMemoryError``, ``MemoryError``) and internal assertions
    (``AssertionError``, "INTERNAL ASSERT FAILED") inside the compiler, and every error that is not the compiler's
    (shapes, the model's own). ``train.compile=on`` gives no fallback: the compiler's error is raised."""

    def __init__(
        self,
        fn: Callable,
        what: str,
        say: bool = True,
        fallback: Callable | None = None,
        state: Sequence[torch.nn.Module] = (),
    ) -> None:
        self.fn, self.what, self.say, self.fallback = fn, what, say, fallback
        self.state = tuple(state)
        self.compile_s: float | None = None

    def __call__(self, *args, **kwargs):
        if self.compile_s is not None:
            return self.fn(*args, **kwargs)
        start = time.perf_counter()
        if self.fallback is None:
            out = self.fn(*args, **kwargs)
        else:
            saved = _buffers(self.state)
            try:
                with backward_compiled_with_forward():
                    out = self.fn(*args, **kwargs)
            except compiler_failed() as err:
                cause = compiler_cause(err)
                if raised_as_is(cause):
                    raise cause from None
                log.warning(
                    "%s: the compiler failed (%s: %s); training eagerly instead (train.compile=off silences "
                    "this, train.compile=on raises it)",
                    self.what,
                    type(cause).__name__,
                    str(cause).splitlines()[0] if str(cause) else "",
                )
                _restore(saved)
                self.fn, self.compile_s = self.fallback, 0.0
                return self.fn(*args, **kwargs)
        self.compile_s = time.perf_counter() - start
        if self.say:
            log.info("%s: first call (trace + compile + run) took %.1f s", self.what, self.compile_s)
        return out


def compiler_cause(err: BaseException) -> BaseException:
    """The error inside a compiler's wrappers (``BackendCompilerFailed``, inductor's ``InductorError``)."""
    seen = set()
    inner = getattr(err, "inner_exception", None)
    while isinstance(inner, BaseException) and id(err) not in seen:
        seen.add(id(err))
        err, inner = inner, getattr(inner, "inner_exception", None)
    return err


def raised_as_is(cause: BaseException) -> bool:
    """Whether a compiler's error is raised even under ``train.compile=auto``: out of memory, an internal assertion."""
    return isinstance(cause, (OutOfMemoryError, MemoryError, AssertionError)) or (
        "INTERNAL ASSERT FAILED" in str(cause)
    )


def _buffers(modules: Sequence[torch.nn.Module]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(buffer, its copy) of every buffer of ``modules``, each once."""
    seen, saved = set(), []
    for module in modules:
        for b in module.buffers():
            if id(b) not in seen:
                seen.add(id(b))
                saved.append((b, b.detach().clone()))
    return saved


def _restore(saved: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
    with torch.no_grad():
        for b, copy in saved:
            b.copy_(copy)


def compile_forward_loss(
    fn: Callable, backend=None, say: bool = True, fall_back: bool = False, state: Sequence[torch.nn.Module] = ()
) -> TimedFirstCall:
    """``fn(images, targets, masks, labelled) -> (total, breakdown)`` compiled as one graph (model and loss); with
    ``fall_back``, ``fn`` itself where the compiler fails, the buffers of ``state`` (the model, the loss) as before
    the failed call (``TimedFirstCall``)."""
    compiled = torch.compile(fn, backend=backend or BACKEND, dynamic=False)
    return TimedFirstCall(compiled, "compiled model + loss", say, fallback=fn if fall_back else None, state=state)
