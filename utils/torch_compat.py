"""Every difference between the PyTorch releases the package supports, in one place.

The declared range is ``torch>=2.2`` (pyproject.toml); the floor job of ``.ci/run`` (``.ci/floors``) runs the
commands on torch 2.2.0 and the main suite runs on the newest release. Where a newer torch has a public API the
older one lacks, the name here probes for it (``hasattr``, a signature) and falls back to public operations that
give the same result, so callers never test versions themselves (each missing in 2.2.0, present in 2.14.1):

=====================================  =========  =============================================================
here                                   torch has  before that
=====================================  =========  =============================================================
``grad_scaler``                        2.3        ``torch.amp.GradScaler``: ``torch.cuda.amp.GradScaler``
``total_norm``                         2.6        ``torch.nn.utils.get_total_norm``: 2-norm of per-tensor norms
``is_compiling``                       2.3        ``torch.compiler.is_compiling``: ``torch._dynamo.is_compiling``
``process_group_kwargs``               2.3        ``init_process_group(device_id=)``: left out
``OutOfMemoryError``                   2.5        ``torch.OutOfMemoryError``: ``torch.cuda.OutOfMemoryError``
``torchscript_onnx_export``            2.5        ``torch.onnx.export(dynamo=)``: left out (TorchScript is all)
``buffers_left_alone``                 2.14 [*]_  ``DDP(forward_sync_buffers=)``: ``broadcast_buffers=``
=====================================  =========  =============================================================

.. [*] has it; the first release with it was not looked up (probed by its signature).

Private names torch offers no public form of, each used only through this module (checked on torch 2.2.0 and
2.14.1, the floor and the newest the project runs):

- ``torch._foreach_*`` (``foreach_copy_``, ``foreach_lerp``): one kernel launch for a list of tensors, as torch's own
  optimizers use them; a plain loop where one is missing;
- ``torch._dynamo.exc.BackendCompilerFailed``: the error ``torch.compile`` raises when its compiler fails
  (``compiler_failed``);
- ``torch._functorch.config.force_non_lazy_backward_lowering`` (newer releases; a no-op where missing): the backward
  graph compiled with the forward one (``backward_compiled_with_forward``).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed

if TYPE_CHECKING:
    from torch.amp import GradScaler
else:
    GradScaler = getattr(torch.amp, "GradScaler", torch.cuda.amp.GradScaler)

# torch.cuda.OutOfMemoryError is the same class as torch.OutOfMemoryError from torch 2.5 on
OutOfMemoryError: type[Exception] = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)


def grad_scaler(device_type: str, enabled: bool) -> GradScaler:
    """A ``GradScaler`` for ``device_type`` ("cuda", "cpu"); before torch 2.3 the CUDA one (loss scaling is only ever
    enabled on CUDA here: fp16 autocast, utils/precision.py; disabled, it does nothing on any device)."""
    if hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler(device_type, enabled=enabled)
    return torch.cuda.amp.GradScaler(enabled=enabled and device_type == "cuda")


def total_norm(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """The 2-norm of ``tensors`` taken together (0-d, float32 or wider, on the first one's device; 0 for none),
    as ``torch.nn.utils.get_total_norm`` (torch 2.6) gives it: the 2-norm of the per-tensor 2-norms."""
    get_total_norm = getattr(torch.nn.utils, "get_total_norm", None)
    if get_total_norm is not None:
        return get_total_norm(tensors)
    if not tensors:
        return torch.tensor(0.0)
    device = tensors[0].device
    norms = [torch.linalg.vector_norm(t.detach(), 2).to(device) for t in tensors]
    return torch.linalg.vector_norm(torch.stack(norms), 2)


def is_compiling() -> bool:
    """Whether the caller is being traced by ``torch.compile``."""
    compiler = getattr(torch, "compiler", None)
    if compiler is not None and hasattr(compiler, "is_compiling"):
        return bool(compiler.is_compiling())
    return bool(importlib.import_module("torch._dynamo").is_compiling())


def process_group_kwargs(device: torch.device) -> dict[str, Any]:
    """The keyword arguments of ``init_process_group`` that bind the group to ``device`` (``device_id``: NCCL
    connects eagerly, torch 2.3 on); none on the CPU or where this torch lacks them."""
    if device.type != "cuda":
        return {}
    if "device_id" not in inspect.signature(torch.distributed.init_process_group).parameters:
        return {}
    return {"device_id": device}


def torchscript_onnx_export(*args: Any, **kwargs: Any) -> None:
    """``torch.onnx.export`` by the TorchScript exporter (``dynamo=False``; before torch 2.5 it is the only one)."""
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kwargs["dynamo"] = False
    torch.onnx.export(*args, **kwargs)


def buffers_left_alone() -> dict[str, Any]:
    """``DistributedDataParallel``'s keyword that leaves the buffers alone before each forward pass (they are made
    rank 0's once, when it wraps the model): ``forward_sync_buffers=False`` where torch has it (it deprecates
    ``broadcast_buffers``), else ``broadcast_buffers=False``."""
    ddp = torch.nn.parallel.DistributedDataParallel
    name = (
        "forward_sync_buffers" if "forward_sync_buffers" in inspect.signature(ddp).parameters else "broadcast_buffers"
    )
    return {name: False}


def foreach_copy_(dst: Sequence[torch.Tensor], src: Sequence[torch.Tensor]) -> None:
    """``dst[i].copy_(src[i])`` for every i, one kernel where torch has ``_foreach_copy_``."""
    fn = getattr(torch, "_foreach_copy_", None)
    if fn is not None:
        fn(list(dst), list(src))
        return
    for d, s in zip(dst, src):
        d.copy_(s)


def foreach_lerp(dst: Sequence[torch.Tensor], end: Sequence[torch.Tensor], weight: torch.Tensor) -> list[torch.Tensor]:
    """``dst[i] + weight * (end[i] - dst[i])`` for every i, as new tensors (``dst`` is left as it is): ``weight`` a
    0-d tensor on their device (no host read)."""
    sub = getattr(torch, "_foreach_sub", None)
    if sub is None:
        return [d + weight * (e - d) for d, e in zip(dst, end)]
    moved = sub(list(end), list(dst))
    torch._foreach_mul_(moved, weight)
    torch._foreach_add_(moved, list(dst))
    return moved


def compiler_failed() -> type[Exception]:
    """The error ``torch.compile`` raises at a call where its backend compiler failed."""
    return importlib.import_module("torch._dynamo.exc").BackendCompilerFailed


def backward_compiled_with_forward() -> AbstractContextManager:
    """A context in which AOT autograd compiles the backward graph at the first forward call (not lazily at the first
    backward); a no-op where this torch has no such setting (then a failing backward graph fails in the backward)."""
    config = importlib.import_module("torch._functorch.config")
    if hasattr(config, "force_non_lazy_backward_lowering"):
        return config.patch(force_non_lazy_backward_lowering=True)
    return nullcontext()
