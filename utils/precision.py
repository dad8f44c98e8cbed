"""Mixed precision for training and evaluation: which autocast dtype a setting means on this device, and why.

``train.amp`` and ``eval.amp`` take ``auto``, ``off``, ``fp16`` or ``bf16``. ``auto`` decides by what the hardware
computes natively, never by the device type alone:

| device | capability                          | auto gives                   |
|--------|-------------------------------------|------------------------------|
| CPU    | AVX512-BF16 or AMX (native bf16)    | bf16 autocast                |
| CPU    | neither (e.g. AVX2 only)            | float32 (emulated bf16 is far slower) |
| CUDA   | bf16 tensor cores (compute >= 8.0)  | bf16 autocast, no loss scaling needed |
| CUDA   | older GPUs                          | fp16 autocast + GradScaler   |

The loss is always computed in float32 (models/loss.py casts); only the network runs in the chosen dtype. How much
slower emulated bf16 ran: docs/benchmarks.md#cpu-threads.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import torch

from utils.errors import UserError


@dataclass(frozen=True)
class Capabilities:
    """What the hardware of one device computes natively."""

    native_bf16: bool
    description: str  # e.g. "CPU with AVX512-BF16", "NVIDIA H200 (compute 9.0)"


def probe_capabilities(device: torch.device) -> Capabilities:
    """Ask torch what ``device`` computes natively (bf16 on the CPU: AVX512-BF16 or AMX tiles)."""
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        major, minor = torch.cuda.get_device_capability(index)
        name = torch.cuda.get_device_name(index)
        return Capabilities(major >= 8, f"{name} (compute {major}.{minor})")
    if device.type == "cpu":
        avx512_bf16 = _cpu_flag("_is_avx512_bf16_supported")
        amx = _cpu_flag("_is_amx_tile_supported")
        found = [n for n, ok in (("AVX512-BF16", avx512_bf16), ("AMX", amx)) if ok]
        what = f"CPU with {' and '.join(found)}" if found else "CPU without AVX512-BF16 or AMX"
        return Capabilities(bool(found), what)
    return Capabilities(False, f"{device.type} device")


def _cpu_flag(name: str) -> bool:
    check = getattr(torch.cpu, name, None)  # private helpers of torch.cpu; absent in old releases: assume no
    try:
        return bool(check()) if check is not None else False
    except RuntimeError:
        return False


@dataclass(frozen=True)
class Precision:
    """The outcome of a precision setting on one device."""

    dtype: torch.dtype | None  # autocast dtype; None: float32, no autocast
    grad_scaler: bool  # fp16 training needs loss scaling
    reason: str  # one line for the run log

    @property
    def name(self) -> str:
        return {None: "float32", torch.float16: "fp16", torch.bfloat16: "bf16"}[self.dtype]

    def autocast(self, device: torch.device) -> AbstractContextManager:
        """``torch.autocast`` for this dtype on ``device``, or a no-op context for float32."""
        if self.dtype is None:
            return nullcontext()
        return torch.autocast(device.type, dtype=self.dtype)


def choose_precision(setting: str, device: torch.device, caps: Capabilities, key: str = "train.amp") -> Precision:
    """The decision table for ``setting`` (auto, off, fp16, bf16) on ``device`` with capabilities ``caps``.

    Raises UserError for a choice the device cannot run (fp16 on a CPU)."""
    on = f"on the {caps.description}"
    if setting == "off":
        return Precision(None, False, f"{key}=off: float32")
    if setting == "auto":
        if device.type == "cuda":
            if caps.native_bf16:
                return Precision(torch.bfloat16, False, f"{key}=auto: bf16 {on} (native bf16, no loss scaling)")
            return Precision(torch.float16, True, f"{key}=auto: fp16 with loss scaling {on} (no native bf16)")
        if caps.native_bf16:
            return Precision(torch.bfloat16, False, f"{key}=auto: bf16 {on} (native bf16)")
        return Precision(None, False, f"{key}=auto: float32 {on} (bf16 would be emulated, several times slower)")
    if setting == "fp16":
        if device.type != "cuda":
            raise UserError(f"{key}=fp16 needs a CUDA GPU; on the CPU use {key}=auto, {key}=bf16 or {key}=off")
        return Precision(torch.float16, True, f"{key}=fp16: fp16 with loss scaling {on}")
    if setting == "bf16":
        note = "" if caps.native_bf16 else " (warning: not native here, expect it to be slower than float32)"
        return Precision(torch.bfloat16, False, f"{key}=bf16: bf16 {on}{note}")
    raise UserError(f"{key}={setting!r} is not one of auto, off, fp16, bf16")


def precision_for(setting: str, device: torch.device, key: str = "train.amp") -> Precision:
    """``choose_precision`` with the capabilities of ``device`` probed."""
    return choose_precision(setting, device, probe_capabilities(device), key)
