"""Checkpoints: written atomically, loaded with ``weights_only=True``, with messages that say what to do.

A checkpoint is a dict of tensors and plain Python values: ``model``, ``optimizer``, ``scheduler``, ``scaler``,
``epoch`` (epochs completed), ``step`` (steps done in the current epoch, 0 at an epoch end), ``global_step``,
``best_metric``, ``rng`` (a list by rank when several processes), ``config``, ``skeleton`` (the definition,
``config.skeleton.Skeleton.to_dict``), ``version``, ``counters``,
``world_size`` and ``ranks_in_sync`` (every rank held the same parameters when it was written).
"""

from __future__ import annotations

import functools
import io
import random
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import torch

from utils.errors import UserError
from utils.io import atomic_write_bytes

CHECKPOINT_FORMAT_VERSION = 1


@functools.cache
def code_version() -> str:
    """The git commit of the code (with ``-dirty`` when modified), or ``unknown``; asked once per process (two
    git commands at every checkpoint cost more than the write of a small model)."""
    root = Path(__file__).resolve().parents[1]
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5
        ).stdout.strip()
        status = ["git", "status", "--porcelain", "--untracked-files=no"]
        dirty = subprocess.run(status, cwd=root, capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (sha + ("-dirty" if dirty else "")) if sha else "unknown"


def rng_state() -> dict[str, Any]:
    """Every global RNG state, as tensors and plain values (loadable with weights_only=True)."""
    np_state = np.random.get_state()
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": (np_state[0], torch.from_numpy(np_state[1].astype(np.int64)), *np_state[2:]),
        "python": random.getstate(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    kind, key, *rest = state["numpy"]
    np.random.set_state((kind, key.numpy().astype(np.uint32), *rest))
    py = state["python"]
    random.setstate((py[0], tuple(py[1]), py[2]))
    if "cuda" in state and torch.cuda.is_available() and len(state["cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(path: str | Path, state: dict[str, Any]) -> None:
    """Serialise in memory, then write atomically: a crash leaves the previous file intact."""
    buf = io.BytesIO()
    torch.save({"format_version": CHECKPOINT_FORMAT_VERSION, **state}, buf)
    atomic_write_bytes(path, buf.getvalue())


def remove_stale_temporaries(out_dir: str | Path) -> list[Path]:
    """Delete the temporary files of checkpoint writes that never finished (their process was killed before the
    rename; the checkpoint itself is then the previous, complete file). Returns the removed paths."""
    stale = list(Path(out_dir).glob(".*.pt.*.tmp")) if Path(out_dir).is_dir() else []
    for p in stale:
        p.unlink(missing_ok=True)
    return stale


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Load a training checkpoint on the CPU without running any code from it (models.weights.read_checkpoint)."""
    from models.weights import read_checkpoint

    path = Path(path)
    if not path.is_file():
        raise UserError(f"checkpoint {path} not found (give an existing file, or train.resume=auto)")
    ckpt = read_checkpoint(path)
    if not isinstance(ckpt, dict) or "model" not in ckpt:
        raise UserError(
            f"checkpoint {path} is not a SimplePose training checkpoint (no 'model' entry); to start from weights "
            "only, use train.init_weights=PATH"
        )
    return ckpt


def resolve_resume(resume: str, out_dir: str | Path) -> Path | None:
    """``""`` -> None; ``auto`` -> out_dir/last.pt if it exists; otherwise the given path (must exist)."""
    if not resume:
        return None
    if resume == "auto":
        last = Path(out_dir) / "last.pt"
        return last if last.is_file() else None
    p = Path(resume)
    if not p.is_file():
        raise UserError(f"train.resume={resume}: no such checkpoint (use train.resume=auto to resume if possible)")
    return p
