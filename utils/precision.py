"""Mixed precision for training and evaluation: which autocast dtype a setting means on this device, and why.

``train.amp`` and ``eval.amp`` take ``auto``, ``off``, ``fp16`` or ``bf16``. ``auto`` decides by what the hardware
computes natively, never by the device type alone:

| device | capability                          | auto gives                   |
|--------|-------------------------------------|------------------------------|
| CPU    | AVX512-BF16 or AMX (native bf16)    | bf16 autocast                |
| CPU    | neither (e.g. AVX2 only)            | float32 (emulated bf16 is far slower) |
| CPU    | either, held back (``cpu_isa_limit``) | float32                    |
| CUDA   | bf16 tensor cores (compute >= 8.0)  | bf16 autocast, no loss scaling needed (training); float32 (inference) |
| CUDA   | older GPUs                          | fp16 autocast + GradScaler (training); float32 (inference) |

At test time (``inference=True``: ``eval.amp``) auto gives bf16 on CPUs with native bf16 (measured faster there) and
float32 on every GPU: bf16 evaluation measured 0.9x float32's speed on an H200, and fp16's accuracy at test time is
unmeasured (docs/training.md#precision).
The loss is always computed in float32 (models/loss.py casts); only the network runs in the chosen dtype. How much
slower emulated bf16 ran: docs/benchmarks.md#cpu-threads.
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import torch

from simplepose.utils.errors import UserError


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
        if not found:
            return Capabilities(False, "CPU without AVX512-BF16 or AMX")
        held_back = cpu_isa_limit()
        what = f"CPU with {' and '.join(found)}"
        if held_back:
            return Capabilities(False, f"{what} held back by {held_back}")
        return Capabilities(True, what)
    return Capabilities(False, f"{device.type} device")


# oneDNN's ISA bit sets (dnnl_cpu_isa_t): a level holds every bit of the levels below it
_ONEDNN_ISA = {
    "SSE41": 0x1,
    "AVX": 0x3,
    "AVX2": 0x7,
    "AVX2_VNNI": 0xF,
    "AVX2_VNNI_2": 0x1F,
    "AVX512_CORE": 0x27,
    "AVX512_CORE_VNNI": 0x67,
    "AVX512_CORE_BF16": 0xE7,
    "AVX10_1_512": 0x1EF,
    "AVX512_CORE_FP16": 0x1EF,
    "AVX10_1_512_AMX": 0xFEF,
    "AVX512_CORE_AMX": 0xFEF,
    "AVX10_1_512_AMX_FP16": 0x1FEF,
    "AVX512_CORE_AMX_FP16": 0x1FEF,
}


def cpu_isa_limit() -> str | None:
    """What keeps oneDNN, which runs the convolutions, from the CPU's bf16 instructions though the CPU has them:
    ``ONEDNN_MAX_CPU_ISA`` (or its old name) below AVX512_CORE_BF16; None when nothing does. Then bf16 is emulated:
    4.8x slower than float32 for a quick-start training step on an AVX512-BF16 EPYC held back to AVX2, where it is
    0.7x unheld (ATen's own ``ATEN_CPU_CAPABILITY=avx2`` changed that 0.7x by nothing; docs/benchmarks.md#cpu-threads).
    """
    for name in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"):
        value = os.environ.get(name, "").strip().upper()
        bits = _ONEDNN_ISA.get(value)
        if bits is not None and bits & _ONEDNN_ISA["AVX512_CORE_BF16"] != _ONEDNN_ISA["AVX512_CORE_BF16"]:
            return f"{name}={value}"
    return None


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


def choose_precision(
    setting: str, device: torch.device, caps: Capabilities, key: str = "train.amp", inference: bool = False
) -> Precision:
    """The decision table for ``setting`` (auto, off, fp16, bf16) on ``device`` with capabilities ``caps``;
    ``inference``: for a forward at test time (auto: bf16 only on CPUs computing it natively, float32 elsewhere).

    Raises UserError for a choice the device cannot run (fp16 on a CPU)."""
    on = f"on the {caps.description}"
    if setting == "off":
        return Precision(None, False, f"{key}=off: float32")
    if setting == "auto":
        if device.type == "cuda":
            if inference:  # measured: docs/benchmarks.md#gpu-nvidia-h200
                return Precision(
                    None,
                    False,
                    f"{key}=auto: float32 {on} (bf16 measured no faster at test time on "
                    f"an H200; {key}=bf16 or fp16 when asked)",
                )
            if caps.native_bf16:
                return Precision(torch.bfloat16, False, f"{key}=auto: bf16 {on} (native bf16, no loss scaling)")
            return Precision(torch.float16, True, f"{key}=auto: fp16 with loss scaling {on} (no native bf16)")
        if caps.native_bf16:
            return Precision(torch.bfloat16, False, f"{key}=auto: bf16 {on} (native bf16)")
        return Precision(None, False, f"{key}=auto: float32 {on} (bf16 would be emulated, several times slower)")
    if setting == "fp16":
        if device.type != "cuda":
            raise UserError(f"{key}=fp16 needs a CUDA GPU; on the CPU use {key}=auto, {key}=bf16 or {key}=off", key=key)
        return Precision(torch.float16, True, f"{key}=fp16: fp16 with loss scaling {on}")
    if setting == "bf16":
        note = "" if caps.native_bf16 else " (warning: not native here, expect it to be slower than float32)"
        return Precision(torch.bfloat16, False, f"{key}=bf16: bf16 {on}{note}")
    raise UserError(f"{key}={setting!r} is not one of auto, off, fp16, bf16", key=key)


def precision_for(setting: str, device: torch.device, key: str = "train.amp", inference: bool = False) -> Precision:
    """``choose_precision`` with the capabilities of ``device`` probed."""
    return choose_precision(setting, device, probe_capabilities(device), key, inference)
