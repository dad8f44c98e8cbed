"""Run logging: a JSON-lines metrics file, TensorBoard's event files as ``train.tensorboard`` says, timing meters.

Only the main process writes. Every record carries ``kind`` (``train``, ``epoch``, ``val``), ``epoch`` and
``global_step``; ``engine.curves`` draws the curves from the file. TensorBoard (``out_dir/tensorboard``) is an optional
package: ``train.tensorboard=auto`` mirrors the scalars there when it is installed and says once at the start when it
is not, ``on`` refuses to start without it (``check_tensorboard``, before the run writes anything), ``off`` never
uses it.
"""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from simplepose.utils.errors import UserError
from simplepose.utils.io import atomic_write_text
from simplepose.utils.optional import install_hint

log = logging.getLogger(__name__)
TENSORBOARD_INSTALL = install_hint("torch.utils.tensorboard")


def _plain(v: Any) -> Any:
    if hasattr(v, "item") and getattr(v, "ndim", 1) == 0:
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v


def summary_writer() -> tuple[type | None, str]:
    """(TensorBoard's SummaryWriter, "") when it can be imported, else (None, why not)."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as e:  # torch.utils.tensorboard needs the tensorboard package
        return None, str(e) or type(e).__name__
    return SummaryWriter, ""


def check_tensorboard(mode: str) -> None:
    """UserError when ``train.tensorboard=on`` and TensorBoard cannot be imported (before anything is written)."""
    if mode == "on":
        writer, why = summary_writer()
        if writer is None:
            raise UserError(
                f"train.tensorboard=on, but TensorBoard is not available ({why}): {TENSORBOARD_INSTALL}, "
                f"or train.tensorboard=auto to use it only when installed (off: never)",
                key="train.tensorboard",
            )


class MetricsLogger:
    """Appends records to ``out_dir/metrics.jsonl`` and mirrors the scalars to TensorBoard (``tensorboard``: auto,
    on, off: ``train.tensorboard``; True and False mean auto and off)."""

    def __init__(self, out_dir: str | Path, enabled: bool = True, tensorboard: str | bool = "auto") -> None:
        self.enabled = enabled
        self.path = Path(out_dir) / "metrics.jsonl"
        self.tb = None
        if not enabled:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        mode = ("auto" if tensorboard else "off") if isinstance(tensorboard, bool) else tensorboard
        if mode == "off":
            return
        check_tensorboard(mode)
        writer, why = summary_writer()
        if writer is None:
            log.info(
                "TensorBoard is not installed (%s): the scalars go to %s only; %s to have them in TensorBoard "
                "too (train.tensorboard=off: without this line)",
                why,
                self.path,
                TENSORBOARD_INSTALL,
            )
            return
        self.tb = writer(log_dir=str(Path(out_dir) / "tensorboard"))

    def truncate_after(self, global_step: int, drop_at_end: tuple[str, ...] = ()) -> None:
        """Drop records past ``global_step`` (written by a run that died after its last checkpoint), those of the
        kinds ``drop_at_end`` at ``global_step`` itself (work to be done again there), and a last line cut short by
        a process killed while writing it."""
        if not self.enabled or not self.path.is_file():
            return
        kept = []
        for line in self.path.read_text().splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            step = record.get("global_step", 0)
            if step < global_step or (step == global_step and record.get("kind") not in drop_at_end):
                kept.append(line)
        atomic_write_text(self.path, "".join(line + "\n" for line in kept))  # a kill here loses no line

    def log(self, kind: str, epoch: int, global_step: int, **values: Any) -> None:
        if not self.enabled:
            return
        record = {"kind": kind, "epoch": epoch, "global_step": global_step, "time": round(time.time(), 3)}
        record.update({k: _plain(v) for k, v in values.items()})
        with self.path.open("a") as f:
            f.write(json.dumps(record) + "\n")
        if kind == "train":  # the console shows each record train.log_every writes (through the progress bar)
            log.info(
                "epoch %d step %s: loss %.4g, lr %.3g, %.1f samples/s",
                epoch,
                values.get("step", global_step),
                values.get("loss", math.nan),
                values.get("lr", math.nan),
                values.get("samples_per_s", math.nan),
            )
        if self.tb is not None:
            for k, v in record.items():
                if isinstance(v, (int, float)) and k not in ("epoch", "global_step", "time"):
                    self.tb.add_scalar(f"{kind}/{k}", v, global_step)

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()


def read_metrics(path: str | Path) -> list[dict]:
    p = Path(path)
    if p.is_dir():
        p = p / "metrics.jsonl"
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]


def step_values(loss: torch.Tensor, breakdown: dict[str, torch.Tensor], lr: float, grad_norm: torch.Tensor) -> dict:
    """A training step's record: loss, lr, gradient norm and every entry of the loss breakdown, flattened
    (e.g. ``loss/stack_scale/1_4`` for stack 1, scale 4)."""
    values = {"loss": float(loss.item()), "lr": lr, "grad_norm": float(grad_norm.item())}
    for k, v in breakdown.items():
        v = v.detach().float().cpu()
        for idx in np.ndindex(*v.shape):
            values["/".join(["loss", k, *(["_".join(map(str, idx))] if idx else [])])] = float(v[idx])
    return values


class Meter:
    """Running sum and count of a scalar, e.g. the loss over an epoch."""

    def __init__(self) -> None:
        self.total, self.count = 0.0, 0

    def update(self, value: float, n: int = 1) -> None:
        self.total += value * n
        self.count += n

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else float("nan")
