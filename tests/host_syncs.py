"""Count the points where code reads a tensor's value back to the host (a device sync on a GPU).

On the CPU nothing waits, so syncs cannot be timed there; they can be caught. ``HostSyncCounter`` records, while
it is entered:

- aten ops that need a tensor's values on the host: ``_local_scalar_dense`` (``.item()``, ``float(t)``,
  ``bool(t)``, ``if t:``), ``is_nonzero``, ``equal``, ``nonzero`` and the data-dependent shapes (``masked_select``,
  ``unique``, indexing by a boolean mask), and copies from a non-CPU device to the CPU (caught by a
  ``TorchDispatchMode``);
- the tensor methods that hand values to Python without an aten op on CPU tensors: ``tolist``, ``numpy``,
  ``item``, ``__bool__``, ``__float__``, ``__int__`` (caught by a ``TorchFunctionMode``).

A read may appear in both lists (``.item()`` is also ``_local_scalar_dense``); ``count`` is the number of Python-
level reads plus the aten-level ones not inside a Python-level read already counted.
"""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten
READING_OPS = {
    aten._local_scalar_dense.default,
    aten.is_nonzero.default,
    aten.equal.default,
    aten.nonzero.default,
    aten.masked_select.default,
    aten._unique2.default,
    aten.unique_consecutive.default,
    aten.unique_dim.default,
}
READING_METHODS = {"tolist", "numpy", "item", "__bool__", "__float__", "__int__", "__index__"}


class _Ops(TorchDispatchMode):
    def __init__(self, counter: HostSyncCounter) -> None:
        super().__init__()
        self.counter = counter

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if (
            func in READING_OPS
            or _bool_index(func, args)
            or (func in (aten._to_copy.default, aten.copy_.default) and _to_host(args, kwargs, out))
        ):
            self.counter.ops.append(str(func))
            if not self.counter.inside_method:
                self.counter.count += 1
        return out


class _Methods(TorchFunctionMode):
    def __init__(self, counter: HostSyncCounter) -> None:
        super().__init__()
        self.counter = counter

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name not in READING_METHODS or self.counter.inside_method:
            return func(*args, **kwargs)
        self.counter.methods.append(name)
        self.counter.count += 1
        self.counter.inside_method = True
        try:
            return func(*args, **kwargs)
        finally:
            self.counter.inside_method = False


def _bool_index(func, args) -> bool:
    """``t[mask]`` with a boolean mask: the result's shape depends on the mask's values."""
    if func not in (aten.index.Tensor, aten.index_put_.default, aten.index_put.default) or len(args) < 2:
        return False
    return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in args[1] or ())


def _to_host(args, kwargs, out) -> bool:
    """A copy whose source is on a device other than the CPU and whose result is on the CPU."""
    src = args[1] if len(args) > 1 and isinstance(args[1], torch.Tensor) else args[0] if args else None
    dst = out if isinstance(out, torch.Tensor) else None
    return (
        isinstance(src, torch.Tensor)
        and src.device.type not in ("cpu", "meta")
        and dst is not None
        and dst.device.type == "cpu"
    )


class HostSyncCounter:
    """``with HostSyncCounter() as c: ...`` then ``c.count``, ``c.ops``, ``c.methods``; ``reset()`` starts again."""

    def __init__(self) -> None:
        self.reset()
        self.inside_method = False

    def reset(self) -> None:
        self.count, self.ops, self.methods = 0, [], []

    def __enter__(self) -> HostSyncCounter:
        self._modes = [_Methods(self), _Ops(self)]
        for m in self._modes:
            m.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        for m in reversed(self._modes):
            m.__exit__(*exc)
