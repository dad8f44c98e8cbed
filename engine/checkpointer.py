"""What a run saves and restores: the weights, the optimiser, the loss scaler, the position and every rank's RNG
states, as ``checkpoint.format.Checkpoint`` files in ``train.out_dir`` (rank 0 writes; every rank takes part).

    checkpointer = Checkpointer(cfg, skeleton, model, optimizer, scaler, rank, world_size)
    checkpointer.restore(position, steps_per_epoch)      # train.resume: the agreed file, checked, into everything
    checkpointer.save("last.pt", position)               # a collective

The file format is ``checkpoint.format``'s, which holds the training state as an opaque dict; this module owns what
only a training process needs: that state's schema (``TrainState``), the RNG states, the code version written with
it, which file ``train.resume`` means, and the temporary files of interrupted writes.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from simplepose.checkpoint.format import Checkpoint, CheckpointError
from simplepose.config.config_file import to_dict
from simplepose.config.schema import Config
from simplepose.config.skeleton import Skeleton
from simplepose.engine.ema import WeightAverage
from simplepose.engine.optim import load_optimizer_state
from simplepose.engine.position import TrainingPosition
from simplepose.engine.recipe import recipe_changes
from simplepose.engine.schedule import LRSchedule
from simplepose.models.posenet import WEIGHT_NEUTRAL_SETTINGS
from simplepose.models.weights import unwrap
from simplepose.utils import distributed as du
from simplepose.utils import stop_signals
from simplepose.utils.code_version import code_version
from simplepose.utils.errors import UserError
from simplepose.utils.io import WriteError
from simplepose.utils.torch_compat import GradScaler
from simplepose.utils.watchdog import beat

log = logging.getLogger(__name__)


@dataclass
class TrainState:
    """What a run needs beyond the weights to continue exactly where it stopped: the ``train_state`` entry of a
    checkpoint (``checkpoint.format`` keeps it as a dict; its keys are written and read here only)."""

    optimizer: dict[str, Any]
    position: TrainingPosition
    world_size: int = 1
    rng: list[dict[str, Any]] = field(default_factory=list)  # rng_state() of every rank, by rank
    scaler: dict[str, Any] = field(default_factory=dict)  # GradScaler state; {} without loss scaling
    ranks_in_sync: bool = True
    ema: dict[str, Any] = field(default_factory=dict)  # WeightAverage.state_dict(); {} without train.ema
    schedule: dict[str, Any] = field(default_factory=dict)  # LRSchedule.state_dict(); {} in earlier checkpoints
    # every rank's (loss x samples summed, samples) of the epoch's steps so far, by rank ([] at an epoch end)
    epoch_loss: list[list[float]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        p = self.position
        return {
            "optimizer": self.optimizer,
            "scaler": self.scaler,
            "epoch": p.epoch,
            "step": p.step,
            "global_step": p.global_step,
            "best_metric": p.best_metric,
            "counters": dict(p.counters),
            **({"validation_due": True} if p.validation_due else {}),
            **({"epoch_loss": self.epoch_loss} if self.epoch_loss else {}),
            "world_size": self.world_size,
            "rng": list(self.rng),
            "ranks_in_sync": self.ranks_in_sync,
            **({"ema": self.ema} if self.ema else {}),
            **({"schedule": self.schedule} if self.schedule else {}),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], file: str) -> TrainState:
        """The training state of a format-2 ``train_state`` entry or of a format-1 (flat) checkpoint."""
        rng = d.get("rng", [])
        position = TrainingPosition(
            epoch=int(_entry(d, "epoch", file)),
            step=int(_entry(d, "step", file)),
            global_step=int(_entry(d, "global_step", file)),
            best_metric=float(d.get("best_metric", -math.inf)),
            counters={"skipped_nonfinite": 0, **dict(d.get("counters") or {})},
            validation_due=bool(d.get("validation_due", False)),
        )
        return cls(
            optimizer=dict(_entry(d, "optimizer", file)),
            position=position,
            world_size=int(d.get("world_size", 1)),
            rng=list(rng) if isinstance(rng, (list, tuple)) else [rng],
            scaler=dict(d.get("scaler") or {}),
            ranks_in_sync=bool(d.get("ranks_in_sync", True)),
            ema=dict(d.get("ema") or {}),
            schedule=dict(d.get("schedule") or {}),
            epoch_loss=[[float(v) for v in sums] for sums in d.get("epoch_loss") or []],
        )

    @classmethod
    def of(cls, ckpt: Checkpoint) -> TrainState | None:
        """The training state ``ckpt`` holds (None: weights only); CheckpointError when an entry is missing."""
        return cls.from_dict(ckpt.train_state, ckpt.file) if ckpt.train_state is not None else None


def _entry(d: Mapping[str, Any], key: str, file: str) -> Any:
    if key not in d:
        raise CheckpointError(
            f"{file} lacks the training entry {key!r}: it is damaged, or weights only (start from "
            f"it with train.init_weights={file})",
            file=file,
            key=key,
        )
    return d[key]


class Checkpointer:
    """Saves and restores a run's state; ``model`` may be wrapped (DDP, DataParallel)."""

    def __init__(
        self,
        cfg: Config,
        skeleton: Skeleton,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        scaler: GradScaler,
        rank: int,
        world_size: int,
        ema: WeightAverage | None = None,
        schedule: LRSchedule | None = None,
    ) -> None:
        self.cfg, self.skeleton, self.model, self.optimizer, self.scaler = cfg, skeleton, model, optimizer, scaler
        self.rank, self.world_size, self.ema, self.schedule = rank, world_size, ema, schedule
        self.out_dir = Path(cfg.train.out_dir)
        self.last_saved_step: int | None = None  # the global step out_dir/last.pt holds (None: none of this run yet)

    def save(self, name: str, position: TrainingPosition) -> None:
        """Write ``out_dir/name`` holding ``position`` (the position a resumed run starts at).

        Every rank takes part (RNG states and a weight fingerprint are gathered); rank 0 writes; then all learn
        whether it could, so a full disk stops every process with the same message instead of leaving the others
        waiting."""
        with stop_signals.uninterrupted():  # a second Ctrl-C waits for the file (and every rank's part)
            self._save(name, position)

    def _save(self, name: str, position: TrainingPosition) -> None:
        beat("checkpoint", f"{name} at {position.where()}")
        position.settle()
        rngs = du.all_gather_object(rng_state())
        # mid-epoch: every rank's sums of the epoch's loss so far, which a resumed epoch continues
        mine = position.epoch_loss.tolist() if position.step and position.epoch_loss is not None else []
        sums = du.all_gather_object(mine) if mine or du.get_world_size() > 1 else []
        in_sync = ranks_in_sync(unwrap(self.model))
        if self.ema is not None:  # each rank keeps its own average of the same state: they must agree too
            in_sync = ranks_in_sync(self.ema.module) and in_sync
        error: tuple[str, int | None] = ("", None)
        if self.rank == 0:
            if not in_sync:
                log.warning(
                    "the weights or statistics of the %d processes differ at global step %d; the checkpoint holds "
                    "rank 0's",
                    self.world_size,
                    position.global_step,
                )
            state = TrainState(
                self.optimizer.state_dict(),
                dataclasses.replace(position),
                self.world_size,
                rngs,
                self.scaler.state_dict() if self.scaler.is_enabled() else {},
                in_sync,
                schedule=self.schedule.state_dict() if self.schedule is not None else {},
                epoch_loss=sums if all(sums) else [],
            )
            ckpt = self._checkpoint(name, state)
            try:
                ckpt.save(self.out_dir / name)
                log.info("wrote %s (%s)", self.out_dir / name, position.where())
            except WriteError as e:
                error = (str(e), e.errno)
        message, code = du.broadcast_object(error)
        if message:
            raise WriteError(
                f"{message}. Training stopped at {position.where()} without this checkpoint; once fixed, continue from "
                f"the previous one with train.resume=auto train.out_dir={self.out_dir}",
                self.out_dir / name,
                code,
            )
        if name == "last.pt":
            self.last_saved_step = position.global_step

    def _checkpoint(self, name: str, state: TrainState) -> Checkpoint:
        """What ``name`` holds: the trained weights and the training state (with the weight average's, under
        train.ema), except best.pt of a run with train.ema, which holds the average alone (what was validated)."""
        if self.ema is not None and name == "best.pt":
            averaged = f"ema {self.cfg.train.ema:g}"
            return Checkpoint(self.ema.module.state_dict(), self.cfg, self.skeleton, averaged=averaged,
                              code_version=code_version())  # fmt: skip
        state.ema = self.ema.state_dict() if self.ema is not None else {}
        return Checkpoint(unwrap(self.model).state_dict(), self.cfg, self.skeleton, state.to_dict(), code_version())

    def restore(
        self, position: TrainingPosition, steps_per_epoch: int, read: Checkpoint | None = None, resolved: bool = False
    ) -> Path | None:
        """Resume from ``train.resume`` (the file every rank agrees on; None: a fresh start): check that it fits this
        run, load the weights (strictly), the optimiser and scaler states, ``position`` and (same world size) this
        rank's RNG states; the learning-rate plan into ``schedule`` (a changed train.epochs re-plans the cosine). What
        the resume changes in the recipe is logged, named. ``read``: that file already read (engine.preflight);
        ``resolved``: ``read`` is train.resume resolved already (None: nothing to resume), not looked up again.
        Returns the file resumed from."""
        if resolved:
            path = Path(read.file) if read is not None else None
        else:
            path = agreed_resume_path(self.cfg.train.resume, self.out_dir)
        if path is None:
            if self.rank == 0 and self.cfg.train.resume == "auto":
                log.info(
                    "train.resume=auto: %s holds no last.pt yet; the run starts from the beginning there", self.out_dir
                )
            return None
        ckpt = read if read is not None and Path(read.file) == path else Checkpoint.load(path)
        check_same_model(ckpt, self.cfg)
        saved_cfg = ckpt.run_config()
        state = TrainState.of(ckpt)
        if state is None:
            raise CheckpointError(
                f"{path} holds weights only, no training state to resume; to start from its weights "
                f"use train.init_weights={path}",
                file=path,
                key="train_state",
            )
        ckpt.load_into(
            self.model,
            expected_by="this run",
            fix=f"resume with the same data.skeleton, or start a new "
            f"run (train.out_dir) with train.init_weights={path}",
        )
        self._restore_optimizer(state, path, saved_cfg)
        if state.scaler:
            self.scaler.load_state_dict(state.scaler)
        self._restore_average(state, path)
        saved = state.position
        position.epoch, position.step, position.global_step = saved.epoch, saved.step, saved.global_step
        position.best_metric = saved.best_metric
        position.counters.update(saved.counters)
        position.validation_due = saved.validation_due
        position.epoch_loss = self._restored_epoch_loss(state, position.step)
        if path.resolve() == (self.out_dir / "last.pt").resolve():
            self.last_saved_step = saved.global_step
        if position.step and state.world_size != self.world_size:
            # Mid-epoch positions are counted in batches of the old world size: restart that epoch's order there.
            position.step = min(steps_per_epoch, position.step * state.world_size // self.world_size)
        if state.rng and state.world_size == self.world_size:
            set_rng_state(state.rng[self.rank])
        changes = self._restore_schedule(state, saved_cfg, position, steps_per_epoch)
        if self.rank == 0:
            if not state.ranks_in_sync:
                log.warning("%s was written while the processes' weights differed; it holds rank 0's", path)
            log.info(
                "resumed from %s: epoch %d, step %d, global step %d%s",
                path,
                position.epoch,
                position.step,
                position.global_step,
                f" (written by code {ckpt.code_version})" if ckpt.code_version else "",
            )
            for line in changes:
                log.info(line)
        return path

    def _restored_epoch_loss(self, state: TrainState, step: int) -> torch.Tensor | None:
        """This rank's sums of the epoch's loss so far (a mid-epoch checkpoint; the same world size: its own, else
        an equal share of every rank's), float64 (2,) on the CPU; None at an epoch start or without them."""
        if not step or not state.epoch_loss:
            return None
        if state.world_size == self.world_size and len(state.epoch_loss) == self.world_size:
            return torch.tensor(state.epoch_loss[self.rank], dtype=torch.float64)
        return torch.tensor(state.epoch_loss, dtype=torch.float64).sum(0) / self.world_size

    def _restore_optimizer(self, state: TrainState, path: Path, saved_cfg: Config | None) -> None:
        """The saved optimiser state (moments, step counts) under this run's settings (decay, momentum: the config's);
        none when train.optimizer changed (named on the resume's recipe line)."""
        t = self.cfg.train
        if saved_cfg is not None and saved_cfg.train.optimizer != t.optimizer:
            return
        try:
            load_optimizer_state(self.optimizer, state.optimizer)
        except (ValueError, KeyError) as e:
            if saved_cfg is None:
                cause = f"resume with the train.optimizer and train.freeze it was trained with (now {t.optimizer}, "
                cause += f"{t.freeze})"
            elif saved_cfg.train.freeze != t.freeze:
                cause = f"train.freeze changed ({saved_cfg.train.freeze} -> {t.freeze}): resume with the same"
            else:
                cause = "it was saved for other trainable parameters"
            raise CheckpointError(
                f"the {t.optimizer} state in {path} does not fit this run's trainable parameters ({e}); {cause}, or "
                f"start a new run from its weights (train.init_weights={path}, another train.out_dir)",
                file=path,
                key="optimizer",
            ) from None

    def _restore_schedule(
        self, state: TrainState, saved_cfg: Config | None, position: TrainingPosition, steps_per_epoch: int
    ) -> list[str]:
        """The saved run's learning-rate plan continued in ``schedule`` (re-planned when train.epochs changed), and
        the lines naming what the resume changes: the recipe's settings, the rate there, the cosine's plan."""
        if saved_cfg is None:
            return []
        saved = LRSchedule.from_config(saved_cfg.train, steps_per_epoch, state.world_size)
        plan = state.schedule or saved.state_dict()
        saved.resume(plan, position.epoch, position.step)
        replanned = self.schedule.resume(plan, position.epoch, position.step) if self.schedule is not None else None
        changes = recipe_changes(saved_cfg.train, self.cfg.train, state.world_size, self.world_size)
        lines = [replanned] if replanned else []
        if changes:
            rate = ""
            if self.schedule is not None:
                before, now = (s.lr(position.epoch, position.step) for s in (saved, self.schedule))
                if not math.isclose(before, now, rel_tol=1e-9):
                    rate = f"; the learning rate at global step {position.global_step:,}: {before:.3g} before, "
                    rate += f"{now:.3g} now"
            lines.insert(0, f"this resume changes the recipe: {'; '.join(changes)}{rate}")
        return lines

    def _restore_average(self, state: TrainState, path: Path) -> None:
        """The weight average as saved; a checkpoint without one (train.ema newly on) starts it at the weights."""
        if self.ema is None:
            if state.ema and self.rank == 0:
                log.info("%s holds a weight average, which this run (train.ema=0) does not continue", path)
            return
        if state.ema:
            self.ema.load_state_dict(state.ema)
            return
        self.ema.reset_to(self.model)
        if self.rank == 0:
            log.info("%s holds no weight average: train.ema starts one at its weights", path)


def agreed_resume_path(resume: str, out_dir: Path) -> Path | None:
    """The checkpoint to resume from, the same on every rank (a collective: no rank starts afresh while the
    others resume). Only rank 0 writes checkpoints, so every node must see ``out_dir``."""
    try:
        mine, error = resolve_resume(resume, out_dir), None
    except UserError as e:
        mine, error = None, e
    seen = du.all_gather_object((str(mine) if mine else None, str(error) if error else ""))
    if error is not None:
        raise error
    errors = [e for _, e in seen if e]
    if errors:
        raise CheckpointError(errors[0], key="train.resume")
    if any(p != seen[0][0] for p, _ in seen):
        raise CheckpointError(
            f"the processes disagree on the checkpoint to resume from ({[p for p, _ in seen]}, by rank): put "
            f"train.out_dir={out_dir} on a filesystem every node shares, or give train.resume=PATH on each",
            key="train.resume",
        )
    return Path(seen[0][0]) if seen[0][0] else None


def check_same_model(ckpt: Checkpoint, cfg: Config) -> None:
    """CheckpointError unless the checkpoint was trained with this run's ``model.*`` settings (those that only change
    how the network runs, such as ``model.checkpoint_activations``, may differ)."""
    saved_cfg = ckpt.run_config()
    if saved_cfg is None:
        return
    saved, current = architecture(saved_cfg), architecture(cfg)
    if saved != current:
        raise CheckpointError(
            f"checkpoint {ckpt.file} was trained with model settings {saved}, this run has {current}; resume with the "
            f"same model.* settings",
            file=ckpt.file,
            key="config",
        )


def architecture(cfg: Config) -> dict[str, Any]:
    """The ``model.*`` settings that decide the weights."""
    return {k: v for k, v in to_dict(cfg.model).items() if k not in WEIGHT_NEUTRAL_SETTINGS}


def state_fingerprint(model: nn.Module) -> list[float | str]:
    """Per-tensor float64 sums and sums of squares of the whole state (parameters and buffers: BatchNorm's running
    statistics and batch counts): equal on all ranks unless they diverged ("nan" stands for NaN, so that NaN equals
    itself)."""
    with torch.no_grad():
        rows = [torch.stack([t.double().sum(), t.double().square().sum()]) for t in model.state_dict().values()]
        values = torch.stack(rows).flatten().cpu().tolist() if rows else []
    return [v if v == v else "nan" for v in values]


def ranks_in_sync(model: nn.Module) -> bool:
    """True when every rank holds the same state, parameters and buffers (a collective)."""
    fingerprints = du.all_gather_object(state_fingerprint(model))
    return all(f == fingerprints[0] for f in fingerprints)


def rng_state() -> dict[str, Any]:
    """Every global RNG state, as tensors and plain values (loadable with weights_only=True)."""
    np_state = np.random.get_state(legacy=True)
    assert isinstance(np_state, tuple)  # the legacy form: (name, keys, pos, has_gauss, cached_gaussian)
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


def remove_stale_temporaries(out_dir: str | Path) -> list[Path]:
    """Delete the temporary files of checkpoint writes that never finished (their process was killed before the
    rename; the checkpoint itself is then the previous, complete file). Returns the removed paths."""
    stale = list(Path(out_dir).glob(".*.pt.*.tmp")) if Path(out_dir).is_dir() else []
    for p in stale:
        p.unlink(missing_ok=True)
    return stale


def resolve_resume(resume: str, out_dir: str | Path) -> Path | None:
    """``""`` -> None; ``auto`` -> out_dir/last.pt if it exists; otherwise the given path (must exist)."""
    if not resume:
        return None
    if resume == "auto":
        last = Path(out_dir) / "last.pt"
        return last if last.is_file() else None
    p = Path(resume)
    if not p.exists():
        raise CheckpointError(
            f"train.resume={resume}: no such checkpoint (use train.resume=auto to resume if possible)",
            file=p,
            key="train.resume",
        )
    return p
