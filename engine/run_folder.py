"""A run's folder (``train.out_dir``): which files are a run's, whether this run may write there, and which launch
owns it. A new run never overwrites an earlier run's files.

    claim_run_folder(cfg.train, rank)      # first thing a Trainer does, before it writes anything (a collective)

Who may write into a folder that already holds a run's files (``RUN_FILES``):

- the run itself, continued: ``train.resume=auto``, or ``train.resume=PATH`` of a checkpoint inside the folder;
- an elastic restart of the torchrun launch that claimed the folder (``launch_owns``): the restarted group is the
  same run, also when its first attempt died before writing ``last.pt``;
- nobody else: a new run (``train.resume=""``, or ``train.resume=PATH`` from another folder) is refused, before
  any file is written and on every rank, with one message naming the folder, what it holds (how far ``last.pt``
  got) and both ways out: ``train.resume=auto`` to continue that run, or a free folder (``runs/x-2``).

Refusing (not a silent resume, not a new numbered folder of our choosing): the command's result stays where the
command says (the README's ``runs/quickstart/best.pt``), every rank of every node decides the same from the same
folder, and an elastic restart continues the folder it started in.

Under torchrun, the claiming launch leaves ``.launch.json`` in the folder: the identity of every node's torchrun agent
(host, process id, start time; the parent of the workers, the same for all attempts of one launch). A restart whose
agents include one of them owns the folder; a second launch of the same command (new agents) does not, so a refused
first attempt that torchrun restarts is refused again instead of continuing the earlier run. Temporary files of
unfinished checkpoint writes (``.last.pt.*.tmp``) are not a run's files: they are never results (the checkpoint they
were to replace is intact) and the claiming run removes them.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from simplepose.checkpoint.format import Checkpoint
from simplepose.config.schema import TrainConfig
from simplepose.engine.checkpointer import TrainState
from simplepose.utils import distributed as du
from simplepose.utils.errors import UserError
from simplepose.utils.folder_lock import FolderHeld
from simplepose.utils.io import atomic_write_text, check_writable

log = logging.getLogger(__name__)

LAUNCH_FILE = ".launch.json"
# Every file or folder a run writes into train.out_dir, and who writes it: checkpoints (engine.hooks.CheckpointHook),
# the metrics log and TensorBoard's events (engine.logger), the resolved config (engine.trainer), the curves
# (engine.curves), the quick start's predictions (evaluate.prediction_sheet), the validation results
# (engine.validation: val_results_epoch{N}.json, diagnosis_epoch{N}/ with eval.diagnose).
RUN_FILES = ("last.pt", "best.pt", "metrics.jsonl", "config.yaml", "curves.png", "predictions.png", "tensorboard")
RUN_FILE_PATTERNS = ("val_results_epoch*.json", "diagnosis_epoch*")


class RunFolderInUse(UserError):
    """``train.out_dir`` (``file``) holds an earlier run's files and this run is not its continuation."""


def run_files(out_dir: str | Path) -> list[Path]:
    """The run files (``RUN_FILES``, ``RUN_FILE_PATTERNS``) present in ``out_dir``, in that order."""
    out = Path(out_dir)
    if not out.is_dir():
        return []
    found = [out / name for name in RUN_FILES if (out / name).exists()]
    return found + [p for pattern in RUN_FILE_PATTERNS for p in sorted(out.glob(pattern))]


def has_trained(out_dir: Path) -> bool:
    """Whether a run in ``out_dir`` got as far as a checkpoint or a metrics record (its results, never removed)."""
    if (out_dir / "last.pt").exists() or (out_dir / "best.pt").exists():
        return True
    try:
        with open(out_dir / "metrics.jsonl", "rb") as f:
            return any(line.strip() for line in f)
    except OSError:
        return False


@contextmanager
def undone_if_start_fails(out_dir: str | Path, rank: int) -> Iterator[None]:
    """Around a new run's start and training: when it fails (any exception, Ctrl-C included) before its first
    checkpoint or metrics record, rank 0 removes the run files it made in ``out_dir`` (config.yaml, an empty
    metrics.jsonl, tensorboard/, the launch file) and the folders it created, so that the same command can simply be
    run again. A folder that held run files before (a continued run) is left as it is."""
    out = Path(out_dir)
    created = _first_missing(out)
    before = set(os.listdir(out)) if out.is_dir() else set()
    continued = bool(run_files(out))
    try:
        yield
    except FolderHeld:  # another run's folder, written by it meanwhile: nothing here is this start's
        raise
    except BaseException:
        if rank == 0 and not continued and out.is_dir() and not has_trained(out):
            try:
                _remove_new_run_files(out, before, created)
            except OSError as e:  # a read-only or vanished folder: the start's own error is the one to report
                log.warning("could not remove what the failed start wrote to %s: %s", out, e)
        raise


def _first_missing(path: Path) -> Path | None:
    """The outermost folder of ``path`` (itself included) that does not exist yet; None when it exists."""
    missing = None
    for p in [path, *path.parents]:
        if p.exists():
            break
        missing = p
    return missing


def _remove_new_run_files(out: Path, before: set[str], created: Path | None) -> None:
    """Remove the run files of ``out`` not in ``before`` (names), then the empty folders up to ``created``."""
    new = [p for p in [*run_files(out), out / LAUNCH_FILE] if p.name not in before and p.exists()]
    for p in new:
        if p.is_dir():
            shutil.rmtree(p)
        else:
            p.unlink()
    log.debug("the run stopped before it trained: removed what it had written to %s", out)
    if created is None:
        return
    for folder in [out, *out.parents]:
        if any(folder.iterdir()):
            break
        folder.rmdir()
        if folder == created:
            break


def continues_folder(train: TrainConfig) -> bool:
    """Whether ``train.resume`` continues the run in ``train.out_dir`` (auto, or a checkpoint inside it)."""
    if train.resume == "auto":
        return True
    return bool(train.resume) and Path(train.resume).resolve().parent == Path(train.out_dir).resolve()


def claim_run_folder(train: TrainConfig, rank: int) -> None:
    """Make sure this run may write into ``train.out_dir`` (see the module docstring), that it can, and (under
    torchrun) record this launch as its owner; a collective (rank 0 looks and writes, every rank gets the verdict).
    RunFolderInUse when the folder holds another run; WriteError when it cannot be written."""
    out_dir = Path(train.out_dir)
    agents = du.all_gather_object(launch_id()) if du.under_torchrun() else []
    owned = launch_owns(out_dir, agents)
    error: UserError | None = None
    if rank == 0:
        try:
            found = [] if owned or continues_folder(train) else run_files(out_dir)
            if found:
                raise RunFolderInUse(refusal(out_dir, found), file=out_dir, key="train.out_dir")
            check_writable(out_dir)
            if agents:
                known = read_launch_file(out_dir) if owned or continues_folder(train) else []
                record = {"agents": sorted({*known, *agents}), "note": "the torchrun launch(es) that wrote this run"}
                atomic_write_text(out_dir / LAUNCH_FILE, json.dumps(record, indent=1) + "\n")
        except UserError as e:
            error = e
    refused, message = du.broadcast_object((isinstance(error, RunFolderInUse), str(error) if error else ""))
    if error is not None:
        raise error
    if message:  # the same message on every rank, so that none waits for the others
        raise (RunFolderInUse if refused else UserError)(message, file=out_dir, key="train.out_dir")


def refusal(out_dir: Path, found: list[Path]) -> str:
    """The message refusing a new run in ``out_dir``, which holds ``found``."""
    held, finished_epochs = describe_run(out_dir, found)
    further = (
        f" (it finished its {_epochs(finished_epochs)}: add train.epochs=N to train further)"
        if (finished_epochs)
        else ""
    )
    return (
        f"train.out_dir={out_dir} already holds a run ({held}); a new run never overwrites one. Continue that "
        f"run with train.resume=auto{further}, or start this one in a free folder: "
        f"train.out_dir={free_folder(out_dir)}"
    )


def describe_run(out_dir: Path, found: list[Path]) -> tuple[str, int]:
    """(what the run files ``found`` in ``out_dir`` are, in words; the epochs of a finished run, else 0)."""
    parts, finished = [], 0
    for path in found:
        name = path.name
        if name == "last.pt":
            text, finished = _last_checkpoint(path)
            parts.append(text)
        elif name == "metrics.jsonl":
            with open(path, "rb") as f:
                parts.append(f"metrics.jsonl of {sum(1 for line in f if line.strip())} records")
        elif name == "tensorboard":
            parts.append("tensorboard/")
        elif not name.startswith(("val_results_epoch", "diagnosis_epoch")):
            parts.append(name)
    for prefix, shown in (("val_results_epoch", "val_results_epoch*.json"), ("diagnosis_epoch", "diagnosis_epoch*/")):
        per_epoch = [p for p in found if p.name.startswith(prefix)]
        if per_epoch:
            parts.append(f"{len(per_epoch)} {shown}")
    if not any(p.name == "last.pt" for p in found):
        parts.append("no checkpoint yet")
    return ", ".join(parts), finished


def _last_checkpoint(path: Path) -> tuple[str, int]:
    """``last.pt after E of N epochs at global step G`` (or where in an epoch it stopped), and N when finished."""
    try:
        ckpt = Checkpoint.load(path)
    except UserError:
        return "last.pt (unreadable)", 0
    try:
        state = TrainState.of(ckpt)
    except UserError:
        return "last.pt (unreadable)", 0
    if state is None:
        return "last.pt (weights only)", 0
    p = state.position
    epochs = ckpt.config.train.epochs if ckpt.config is not None else None
    done = f"{p.epoch} of {_epochs(epochs)}" if isinstance(epochs, int) else _epochs(p.epoch)
    into = f" and {p.step} steps into the next" if p.step else ""
    finished = epochs if isinstance(epochs, int) and p.epoch >= epochs and not p.step and not p.validation_due else 0
    return f"last.pt after {done}{into} at global step {p.global_step}", finished


def _epochs(n: int) -> str:
    return f"{n} epoch{'' if n == 1 else 's'}"


def free_folder(out_dir: Path) -> Path:
    """The first of ``out_dir-2``, ``-3``, ... (counting on from a name that already ends in -N) that does not
    exist."""
    out = Path(out_dir)
    if out.name in ("", ".", ".."):
        out = out.resolve()
    numbered = re.fullmatch(r"(.+)-(\d+)", out.name)
    stem, n = (numbered.group(1), int(numbered.group(2)) + 1) if numbered else (out.name, 2)
    while out.with_name(f"{stem}-{n}").exists():
        n += 1
    return out.with_name(f"{stem}-{n}")


# ---------------------------------------------------------------------------------------------- torchrun launches
def launch_id() -> str:
    """This worker's torchrun agent (its parent process): ``host:pid:start time``, the same for every attempt of a
    launch and different for the next launch of the same command."""
    parent = os.getppid()
    try:  # the start time, in clock ticks since boot (field 22 of /proc/PID/stat), tells a reused pid apart
        started = Path(f"/proc/{parent}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        started = "?"
    return f"{socket.gethostname()}:{parent}:{started}"


def read_launch_file(out_dir: Path) -> list[str]:
    """The agents recorded in ``out_dir/.launch.json`` ([] without a readable one)."""
    try:
        agents = json.loads((out_dir / LAUNCH_FILE).read_text()).get("agents", [])
    except (OSError, ValueError, AttributeError):
        return []
    return [a for a in agents if isinstance(a, str)]


def restarted() -> bool:
    """True in a torchrun restart (an attempt after the first)."""
    return os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") != "0"


def launch_owns(out_dir: str | Path, agents: list[str] | None = None) -> bool:
    """True in a torchrun restart of the launch that claimed ``out_dir`` (one of this launch's agents, ``agents``
    of every rank, is recorded there). A collective under torchrun: every rank gets rank 0's answer."""
    if not restarted():
        return False
    agents = agents if agents is not None else du.all_gather_object(launch_id())
    owned = du.get_rank() == 0 and bool(set(agents) & set(read_launch_file(Path(out_dir))))
    return bool(du.broadcast_object(owned))
