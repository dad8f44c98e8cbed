"""How the network runs at test time on one device: its precision (``eval.amp``) and memory format
(``eval.channels_last``), decided once per estimator and logged once per process.

Float32 is the default (``eval.amp=off``: the same people on every CPU); ``auto`` is asked for (``evaluate.FAST``,
the demo's ``--fast``):

| device | ``eval.amp=auto``                                         | ``eval.channels_last=auto``          |
|--------|-----------------------------------------------------------|--------------------------------------|
| CPU    | bf16 with AVX512-BF16 or AMX (not held back), else float32 | channels_last in bf16, NCHW in float32 |
| CUDA   | float32 (bf16 measured no faster on an H200)              | NCHW (not measured on GPUs yet)      |

Capabilities are probed at run time (``utils.precision.probe_capabilities``), never read from the device type; the
measurements behind the table: docs/benchmarks.md#inference-on-the-cpu.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

from simplepose.config.schema import EvalConfig
from simplepose.utils.distributed import launch_rank
from simplepose.utils.precision import Capabilities, Precision, choose_precision, probe_capabilities

log = logging.getLogger(__name__)

_LOGGED: set[str] = set()  # lines already logged by this process


@dataclass(frozen=True)
class InferenceSetup:
    """What ``eval.amp`` and ``eval.channels_last`` mean on one device."""

    precision: Precision
    channels_last: bool
    memory_reason: str  # one line: why this memory format

    def describe(self) -> str:
        """``bf16, channels_last (eval.amp=auto: ...; eval.channels_last=auto: ...)``, for the log."""
        memory = "channels_last" if self.channels_last else "NCHW"
        return f"{self.precision.name}, {memory} ({self.precision.reason}; {self.memory_reason})"


def choose_channels_last(setting: str, device: torch.device, precision: Precision) -> tuple[bool, str]:
    """(whether ``eval.channels_last=setting`` runs channels_last on ``device`` in ``precision``, why)."""
    if setting in ("on", "off"):
        return setting == "on", f"eval.channels_last={setting}"
    if setting != "auto":
        raise ValueError(f"eval.channels_last={setting!r} is not one of auto, on, off")
    if device.type != "cpu":
        return False, f"eval.channels_last=auto: NCHW on {device.type} (channels_last not measured there)"
    if precision.dtype == torch.bfloat16:
        return True, "eval.channels_last=auto: channels_last on the CPU in bf16 (measured faster there)"
    return False, f"eval.channels_last=auto: NCHW on the CPU in {precision.name} (channels_last measured no faster)"


def choose_setup(cfg: EvalConfig, device: torch.device, caps: Capabilities) -> InferenceSetup:
    """The decision for ``cfg`` on ``device`` with capabilities ``caps`` (injected by tests)."""
    precision = choose_precision(cfg.amp, device, caps, "eval.amp", inference=True)
    channels_last, why = choose_channels_last(cfg.channels_last, device, precision)
    return InferenceSetup(precision, channels_last, why)


def inference_setup(cfg: EvalConfig, device: torch.device) -> InferenceSetup:
    """``choose_setup`` with ``device``'s capabilities probed; the choice is logged (INFO) the first time this
    process makes it, so that a command prints it once however many estimators it builds (under torchrun by rank 0
    only; the other ranks log it at DEBUG)."""
    caps = probe_capabilities(device)
    setup = choose_setup(cfg, device, caps)
    line = f"inference: {setup.describe()}"
    if setup.precision.dtype is None and cfg.amp == "off":
        auto = choose_precision("auto", device, caps, "eval.amp", inference=True)
        if auto.dtype is not None:  # say what the faster choice would be, since it is not the default
            line += f"; eval.amp=auto (or --fast, evaluate.FAST) would run {auto.name} here, faster"
    if line not in _LOGGED:
        _LOGGED.add(line)
        log.log(logging.INFO if launch_rank() == 0 else logging.DEBUG, "%s", line)  # rank 0 says it for all
    return setup
