"""Fault injection on real training runs of a tiny model: kill -9 then resume, SIGTERM then resume (1 and 2
processes), a torchrun worker death, a full or read-only disk at the checkpoint write, a corrupt sample and a killed
DataLoader worker. Each scenario adds what
it saw to a ``Tally``; ``python -m tests.harness.fault_table`` runs them all and prints the table (its help says
what each scenario measures), tests/test_faults.py reuses ``write_fault`` and ``temporaries`` for its quick cases.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import hashlib
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import h5py
import torch

import simplepose.utils.io as utils_io
from simplepose import train
from simplepose.checkpoint.format import Checkpoint
from simplepose.config.schema import DataConfig
from simplepose.data.conversion import Source, convert
from simplepose.data.synthetic_images import generate
from simplepose.engine import batch_errors
from simplepose.engine.batch_errors import LoaderError
from simplepose.engine.logger import read_metrics
from simplepose.utils import progress_bar
from simplepose.utils.errors import UserError
from simplepose.utils.folder_lock import LOCK_NAME
from tests.harness.cases import CaseResult
from tests.helpers import saved_state, subprocess_env, tiny_run_args, torchrun_command
from tests.paths import REPO_ROOT, TINY_PRESET

TRACEBACK = "Traceback (most recent call last)"
CHECKPOINTS = ("last.pt", "best.pt")
# 6 epochs of 2 steps, last.pt after every step, validation (val loss) and best.pt after every epoch; with weight
# averaging, so that a resume must continue the average exactly too (best.pt then holds the average alone)
RUN_STEPS = 6 * 2
RUN = ["train.epochs=6", "train.max_steps_per_epoch=2", "train.checkpoint_every_steps=1", "train.val_every=1",
       "train.optimizer=sgd", "train.lr=0.01", "train.ema=0.9", "train.ema_warmup_steps=2"]  # fmt: skip
ENV = subprocess_env(OMP_NUM_THREADS="1")
# the SIGTERM trials: last.pt at epoch ends only, so that the one a stop writes is its own
STOP_RUN = ["train.checkpoint_every_steps=0"]


@dataclass
class Tally:
    """What the scenarios saw: the counts of tests.harness.fault_table' table, and one line per failure."""

    trials: int = 0
    kills: int = 0
    kills_during_write: int = 0
    checkpoints: int = 0
    checkpoints_loadable: int = 0
    resumes: int = 0
    resumes_completed: int = 0
    fault_cases: int = 0
    clean_errors: int = 0
    raw_tracebacks: int = 0
    lost: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    translation_points: int = 0  # a worker's death injected at each line of a loader failure's translation
    failed_starts: int = 0  # starts that fail (failed_starts)
    torchrun_deaths: int = 0  # torchrun groups whose worker died (torchrun_worker_death)
    peers_killed: int = 0  # torchrun workers killed mid-collective (tests.harness.peer_faults)
    peers_named: int = 0  # of those: the survivor's one line naming it, last.pt's step and the resume command
    stops: dict[int, int] = field(default_factory=dict)  # SIGTERM stops tried, by number of processes
    rank_stops: int = 0  # SIGTERM to one of 2 processes in validation (tests.harness.rank_stops)
    stops_clean: int = 0  # of both: exit 143, the line naming the step and the resume command, last.pt there
    corpus: list[CaseResult] = field(default_factory=list)  # the bad-input corpus (tests.harness.bad_inputs)
    life_cases: int = 0  # faults of a run's life (run_life_faults): a live folder, stale locks, signals in validation
    life_clean: int = 0  # of those: the expected exit and line, nothing of the live run touched
    records_checked: int = 0  # runs (and resumed runs) whose metrics.jsonl was compared with the unbroken run's
    records_equal: int = 0

    def lose(self, kind: str, detail: str) -> None:
        self.lost[kind] = self.lost.get(kind, 0) + 1
        self.failures.append(f"{kind}: {detail}")


# ---------------------------------------------------------------------------------------------- fault injection
@contextlib.contextmanager
def write_fault(code: int, name: str = "last.pt", skip: int = 0) -> Iterator[None]:
    """Make the atomic writes of ``name`` fail with OSError ``code`` after ``skip`` successful ones.

    EROFS (and EACCES) fail where a read-only folder fails: creating the temporary file. Any other code (ENOSPC)
    fails at the fsync of a temporary file already holding data, the worst case for clean-up.
    """
    prefix, seen = f".{name}.", [0]
    real_mkstemp, real_fsync = utils_io.tempfile.mkstemp, utils_io.os.fsync

    def fires() -> bool:
        seen[0] += 1
        return seen[0] > skip

    def mkstemp(*args, **kwargs):
        if code in (errno.EROFS, errno.EACCES) and kwargs.get("prefix") == prefix and fires():
            raise OSError(code, os.strerror(code), str(Path(kwargs["dir"]) / prefix))
        return real_mkstemp(*args, **kwargs)

    def fsync(fd: int) -> None:
        target = os.readlink(f"/proc/self/fd/{fd}")
        if code not in (errno.EROFS, errno.EACCES) and Path(target).name.startswith(prefix) and fires():
            raise OSError(code, os.strerror(code), target)
        real_fsync(fd)

    utils_io.tempfile.mkstemp, utils_io.os.fsync = mkstemp, fsync
    try:
        yield
    finally:
        utils_io.tempfile.mkstemp, utils_io.os.fsync = real_mkstemp, real_fsync


def train_with_write_fault(code_name: str, skip: int, argv: list[str]) -> int:
    """``python train.py ARGV`` in this process with ``write_fault`` on last.pt (for the subprocess cases)."""
    with write_fault(getattr(errno, code_name), "last.pt", skip):
        return train.main(argv)


def write_fault_train_code(code_name: str) -> str:
    """Python code for ``python -c CODE ARGS``: train.py with every last.pt write failing with ``code_name``."""
    call = f"train_with_write_fault('{code_name}', 0, sys.argv[1:])"
    return f"import sys; from tests.harness.faults import train_with_write_fault; sys.exit({call})"


# ---------------------------------------------------------------------------------------------- helpers
def make_data(root: Path) -> tuple[Path, Path]:
    """A 16-image synthetic dataset converted for input size 64: (train.h5, val.h5)."""
    generate(root / "synthetic", num_images=16, seed=0, val_fraction=0.25)
    out = []
    for split in ("train", "val"):
        h5 = root / f"{split}64.h5"
        ann = root / "synthetic" / "annotations" / f"person_keypoints_{split}.json"
        convert([Source(root / "synthetic" / "images", ann)], h5, input_size=64, split=split, progress=False)
        out.append(h5)
    return out[0], out[1]


def start(command: list[str]) -> subprocess.Popen:
    return subprocess.Popen(command, cwd=REPO_ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def run(command: list[str]) -> subprocess.CompletedProcess:
    p = start(command)
    out, err = p.communicate(timeout=600)
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def train_command(args: list[str], python_code: str | None = None) -> list[str]:
    """``python train.py ARGS``, or ``python -c CODE ARGS`` (CODE calls train.main in its own way)."""
    return [sys.executable, "-c", python_code, *args] if python_code else [sys.executable, "train.py", *args]


def start_train(args: list[str], python_code: str | None = None) -> subprocess.Popen:
    return start(train_command(args, python_code))


def run_train(args: list[str], python_code: str | None = None) -> subprocess.CompletedProcess:
    return run(train_command(args, python_code))


def temporaries(out_dir: Path) -> list[Path]:
    return sorted(out_dir.glob(".*.tmp")) if out_dir.is_dir() else []


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def check_checkpoints(out_dir: Path, tally: Tally, when: str) -> dict[str, Checkpoint]:
    """Load every last.pt / best.pt in ``out_dir``; an unloadable one is data lost (a half-written final file)."""
    loaded = {}
    for name in CHECKPOINTS:
        path = out_dir / name
        if not path.exists():
            continue
        tally.checkpoints += 1
        try:
            loaded[name] = Checkpoint.load(path)
            tally.checkpoints_loadable += 1
        except UserError as e:
            tally.lose("unloadable or half-written checkpoint", f"{when}: {e}")
    return loaded


def same_training_state(a: Checkpoint, b: Checkpoint) -> bool:
    """The same weights, optimiser state, weight average and step (best.pt of an averaged run: its weights alone)."""

    def tensors(ckpt: Checkpoint) -> list[torch.Tensor]:
        if ckpt.train_state is None:
            return list(ckpt.model.values())
        state = saved_state(ckpt)
        opt = [v for s in state.optimizer["state"].values() for v in s.values() if torch.is_tensor(v)]
        return [*ckpt.model.values(), *opt, *state.ema.get("model", {}).values()]

    def step(ckpt: Checkpoint) -> int | None:
        return None if ckpt.train_state is None else saved_state(ckpt).position.global_step

    ta, tb = tensors(a), tensors(b)
    return step(a) == step(b) and len(ta) == len(tb) and all(map(torch.equal, ta, tb))


def classify_error(tally: Tally, name: str, r: subprocess.CompletedProcess, must_name: list[str]) -> None:
    """A fault case must exit non-zero with an ``error:`` line that holds every string of ``must_name``."""
    tally.fault_cases += 1
    if TRACEBACK in r.stderr:
        tally.raw_tracebacks += 1
        tally.failures.append(f"{name}: raw traceback\n{r.stderr[-2000:]}")
        return
    found = re.search(r"(?:^|\r)(error: [^\r\n]*)", r.stderr, re.MULTILINE)  # progress bars end in \r
    message = found.group(1) if found else ""
    missing = [s for s in must_name if s not in message]
    if r.returncode == 0 or not message or missing:
        tally.failures.append(f"{name}: exit {r.returncode}, message {message!r} lacks {missing}")
        return
    tally.clean_errors += 1


# ---------------------------------------------------------------------------------------------- a. kill -9
def kill_when(p: subprocess.Popen, out_dir: Path, delay: float | None, nth_write: int) -> bool:
    """SIGKILL ``p`` after ``delay`` seconds, or (delay None) as the ``nth_write``-th checkpoint temporary file
    appears. Returns whether the process was still running when killed."""
    deadline = time.perf_counter() + (delay if delay is not None else 600)
    seen: set[str] = set()
    while p.poll() is None and time.perf_counter() < deadline:
        if delay is None:
            seen.update(t.name for t in temporaries(out_dir) if ".pt." in t.name)
            if len(seen) >= nth_write:
                break
            time.sleep(0.0003)
        else:
            time.sleep(0.01)
    if p.poll() is not None:
        return False
    os.kill(p.pid, signal.SIGKILL)
    p.communicate()
    return True


TIMED = ("time", "data_time", "compute_time", "samples_per_s")  # record fields that vary from run to run


def records(out_dir: Path) -> list[dict]:
    """``out_dir/metrics.jsonl`` without the figures of time ([] without one)."""
    try:
        return [{k: v for k, v in r.items() if k not in TIMED} for r in read_metrics(out_dir)]
    except OSError:
        return []


def reference_run(train_h5: Path, out_dir: Path, common: list[str]) -> tuple[dict[str, Checkpoint], float]:
    """The uninterrupted run: ({checkpoint name: its final state}, wall seconds); its records stay in ``out_dir``
    (``REFERENCE_RECORDS``)."""
    start = time.perf_counter()
    r = run_train(tiny_run_args(train_h5, out_dir, *common))
    seconds = time.perf_counter() - start
    if r.returncode != 0:
        raise SystemExit(f"the uninterrupted reference run failed:\n{r.stderr[-3000:]}")
    REFERENCE_RECORDS[tuple(common)] = records(out_dir)
    return {name: Checkpoint.load(out_dir / name) for name in CHECKPOINTS}, seconds


# the records of each reference run, by its settings: every resumed run of those settings must end with them
REFERENCE_RECORDS: dict[tuple[str, ...], list[dict]] = {}


def check_records(out_dir: Path, common: list[str], label: str, tally: Tally) -> None:
    """``out_dir/metrics.jsonl`` holds the unbroken run's records (of the same settings), none missing or twice."""
    expected = REFERENCE_RECORDS.get(tuple(common))
    if expected is None:
        return
    tally.records_checked += 1
    got = records(out_dir)
    if got == expected:
        tally.records_equal += 1
        return
    differ = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))
    tally.lose("metrics.jsonl differs from the unbroken run's", f"{label}: {len(got)} records for {len(expected)}, "
               f"the first difference at record {differ}")  # fmt: skip


def kill_run(train_h5: Path, out_dir: Path, common: list[str], trial: int, rng: random.Random, run_seconds: float,
             tally: Tally) -> float:  # fmt: skip
    """Start the run and SIGKILL it at a moment drawn from ``rng`` (every 4th trial: at a checkpoint write).
    Returns the shortest uninterrupted run time seen so far (s)."""
    writes = 6 * 3  # at least: last.pt after each step and at each epoch end (and best.pt when val loss improves)
    aimed = trial % 4 == 3
    for _attempt in range(2):  # a run that ended before its moment (a loaded machine) is run again, sooner
        delay, nth = rng.uniform(0.05, 0.85) * run_seconds, rng.randint(1, writes)
        started = time.perf_counter()
        p = start_train(tiny_run_args(train_h5, out_dir, *common))
        if kill_when(p, out_dir, None if aimed else delay, nth):
            tally.kills += 1
            tally.kills_during_write += bool(temporaries(out_dir))
            break
        if p.returncode != 0:
            tally.failures.append(f"trial {trial}: the run to be killed failed (exit {p.returncode})")
        run_seconds = min(run_seconds, time.perf_counter() - started)
        shutil.rmtree(out_dir, ignore_errors=True)
    return run_seconds


def resume_and_compare(train_h5: Path, out_dir: Path, common: list[str], trial: int, reference: dict[str, Checkpoint],
                       tally: Tally) -> None:  # fmt: skip
    """``train.resume=auto`` after a kill must finish the run with no temporary file left and end bit-identical to
    the uninterrupted ``reference``."""
    tally.resumes += 1
    r = run_train(tiny_run_args(train_h5, out_dir, *common, "train.resume=auto"))
    if TRACEBACK in r.stderr:
        tally.raw_tracebacks += 1
    if r.returncode != 0:
        tally.failures.append(f"trial {trial}: resume failed (exit {r.returncode}): {r.stderr[-1500:]}")
        return
    tally.resumes_completed += 1
    if temporaries(out_dir):
        tally.lose("stray temporary file", f"trial {trial}: {temporaries(out_dir)}")
    check_records(out_dir, common, f"trial {trial}", tally)
    final = check_checkpoints(out_dir, tally, f"trial {trial} after the resume")
    for name in CHECKPOINTS:
        if name in final and not same_training_state(final[name], reference[name]):
            tally.lose("resumed weights differ from the uninterrupted run", f"trial {trial}: {name}")
    shutil.rmtree(out_dir, ignore_errors=True)


def kill_and_resume(train_h5: Path, val_h5: Path, work: Path, trials: int, seed: int, tally: Tally) -> None:
    """``trials`` kill -9 trials at seeded moments, each followed by a check of the checkpoints left and a resume
    (why the resumed run must be bit-identical: the help of ``python -m tests.harness.fault_table``)."""
    common = [f"data.val={val_h5}", *RUN]
    reference, run_seconds = reference_run(train_h5, work / "reference", common)
    rng = random.Random(seed)
    for trial in range(trials):
        out_dir = work / f"trial{trial:02d}"
        tally.trials += 1
        run_seconds = kill_run(train_h5, out_dir, common, trial, rng, run_seconds, tally)
        check_checkpoints(out_dir, tally, f"trial {trial} after the kill")
        resume_and_compare(train_h5, out_dir, common, trial, reference, tally)


# ---------------------------------------------------------------------------------------------- SIGTERM
STOPPED = re.compile(r"terminated \(SIGTERM\): stopped (?:at epoch \d+, step \d+|in the validation of epoch \d+) "
                     r"\(global step (?P<step>\d+)\), where (\S+) was written; continue the run with: "
                     r"(.+ train\.resume=auto)$", re.MULTILINE)  # fmt: skip
STOPPED_EARLY = "terminated (SIGTERM): stopped before the first step, nothing trained or kept; start the run with: "


def check_stop(r: subprocess.CompletedProcess, out_dir: Path, label: str, tally: Tally, torchrun: bool) -> bool:
    """A run stopped by SIGTERM: exit 143 (torchrun: its own failure status), no traceback of ours, the line naming
    the step and the command that continues, last.pt loadable and holding that step; or, stopped while starting, the
    line saying so and no run folder left. Returns whether it held and a resume should follow."""
    ours = f'File "{REPO_ROOT}' in r.stderr if torchrun else TRACEBACK in r.stderr  # torchrun prints its own
    if ours:
        tally.raw_tracebacks += 1
        tally.failures.append(f"{label}: raw traceback\n{r.stderr[-2000:]}")
        return False
    line, early = STOPPED.search(r.stderr), STOPPED_EARLY in r.stderr
    if (not torchrun and r.returncode != 143) or (line is None and not early):
        tally.failures.append(f"{label}: exit {r.returncode}, no stop line:\n{r.stderr[-1500:]}")
        return False
    if line is None:  # before the first step: nothing kept, the folder left as it was (here: none)
        if out_dir.exists():
            tally.lose("run folder left by a run stopped while starting", f"{label}: {sorted(out_dir.iterdir())}")
            return False
        tally.stops_clean += 1
        return False
    last = check_checkpoints(out_dir, tally, label).get("last.pt")
    if last is None or saved_state(last).position.global_step != int(line.group("step")):
        tally.lose("stopped without last.pt at the step reached", f"{label}: {line.group(0)}")
        return False
    tally.stops_clean += 1
    return True


def steps_logged(out_dir: Path) -> int:
    """The training steps ``out_dir/metrics.jsonl`` has recorded so far (the tiny preset logs every step)."""
    try:
        return (out_dir / "metrics.jsonl").read_text().count('"kind": "train"')
    except OSError:
        return 0


def sigterm_run(train_h5: Path, out_dir: Path, common: list[str], trial: int, rng: random.Random,
                tally: Tally) -> subprocess.CompletedProcess | None:  # fmt: skip
    """``python train.py`` sent SIGTERM once it has logged a number of steps drawn from ``rng`` (0: as soon as its
    folder is claimed, while it starts; its handlers are in place then: earlier, in the interpreter's start, the
    signal ends it as any program, with nothing written yet); a run that ends first is run once more. None when it
    never could be signalled."""
    for _attempt in range(3):
        steps = rng.randint(0, RUN_STEPS - 2)
        p = start_train(tiny_run_args(train_h5, out_dir, *common))
        while p.poll() is None and not (out_dir.is_dir() and steps_logged(out_dir) >= steps):
            time.sleep(0.005)
        if p.poll() is None:
            os.kill(p.pid, signal.SIGTERM)
            out, err = p.communicate(timeout=600)
            if p.returncode == 143 or not trained_to_the_end(out_dir):
                return subprocess.CompletedProcess(p.args, p.returncode, out, err)
            # the signal came as the last step ended or after it (validation, the curves): the run had finished
        p.communicate()
        shutil.rmtree(out_dir, ignore_errors=True)
    tally.failures.append(f"SIGTERM trial {trial}: the run ended three times before its signal")
    return None


def trained_to_the_end(out_dir: Path) -> bool:
    """Whether ``out_dir/last.pt`` holds the end of the run (``RUN_STEPS``)."""
    try:
        return saved_state(Checkpoint.load(out_dir / "last.pt")).position.global_step == RUN_STEPS
    except UserError:
        return False


def sigterm_and_resume(train_h5: Path, val_h5: Path, work: Path, trials: int, seed: int, tally: Tally) -> None:
    """``trials`` SIGTERMs to ``python train.py`` at seeded random moments, each followed by the checks of
    ``check_stop`` and ``train.resume=auto``, which must end bit-identical to the uninterrupted run."""
    common = [f"data.val={val_h5}", *RUN, *STOP_RUN]
    reference, _ = reference_run(train_h5, work / "sigterm_reference", common)
    rng = random.Random(seed + 1)
    for trial in range(trials):
        out_dir = work / f"sigterm{trial:02d}"
        tally.trials += 1
        tally.stops[1] = tally.stops.get(1, 0) + 1
        r = sigterm_run(train_h5, out_dir, common, trial, rng, tally)
        if r is not None and check_stop(r, out_dir, f"SIGTERM trial {trial}", tally, torchrun=False):
            resume_and_compare(train_h5, out_dir, common, trial, reference, tally)


def torchrun_sigterm(train_h5: Path, work: Path, trials: int, seed: int, tally: Tally) -> None:
    """SIGTERM to torchrun's agent (as a cluster stopping the job: it sends it on to both processes) at a seeded
    random step of a 2-process run, ``trials`` times: the checks of ``check_stop``, then ``train.resume=auto`` under
    torchrun must end bit-identical to the 2-process run never stopped."""
    ref_dir = work / "torchrun_reference"
    r = run(torchrun_command(["train_distributed.py", *tiny_run_args(train_h5, ref_dir, *RUN)], nproc=2))
    if r.returncode != 0:
        raise SystemExit(f"the uninterrupted 2-process run failed:\n{r.stderr[-3000:]}")
    reference = {name: Checkpoint.load(ref_dir / name) for name in CHECKPOINTS if (ref_dir / name).is_file()}
    REFERENCE_RECORDS[("2 processes", *RUN)] = records(ref_dir)
    rng = random.Random(seed + 2)
    for trial in range(trials):
        out_dir, step = work / f"torchrun_sigterm{trial:02d}", rng.randint(1, RUN_STEPS - 3)
        tally.trials += 1
        tally.stops[2] = tally.stops.get(2, 0) + 1
        faulty = ["-m", "tests.harness.faulty_trainer", "--launcher", "distributed", "--signal-step", str(step),
                  "--signal-parent", "--"]  # fmt: skip
        r = run(torchrun_command([*faulty, *tiny_run_args(train_h5, out_dir, *RUN, *STOP_RUN)], nproc=2))
        label = f"torchrun SIGTERM at global step {step}"
        if not check_stop(r, out_dir, label, tally, torchrun=True):
            continue
        resume_in_two(tiny_run_args(train_h5, out_dir, *RUN, *STOP_RUN), out_dir, label, reference, tally)


def resume_in_two(args: list[str], out_dir: Path, label: str, reference: dict[str, Checkpoint], tally: Tally,
                  settings: list[str] = RUN) -> None:  # fmt: skip
    """``train.resume=auto`` of the run ``args`` in 2 processes under torchrun must finish, its checkpoints loadable
    and bit-identical to ``reference`` (the 2-process run never stopped), its records those of that run (of
    ``settings``)."""
    tally.resumes += 1
    resumed = run(torchrun_command(["train_distributed.py", *args, "train.resume=auto"], nproc=2))
    if resumed.returncode != 0 or f'File "{REPO_ROOT}' in resumed.stderr:
        tally.failures.append(f"{label}: the resume failed (exit {resumed.returncode}):\n{resumed.stderr[-1500:]}")
        return
    tally.resumes_completed += 1
    check_records(out_dir, ["2 processes", *settings], label, tally)
    final = check_checkpoints(out_dir, tally, f"{label}, after the resume")
    for name in CHECKPOINTS:
        if (name in final) != (name in reference):
            tally.lose("resumed run's checkpoints differ from the uninterrupted run's", f"{label}: {name}")
        elif name in final and not same_training_state(final[name], reference[name]):
            tally.lose("resumed weights differ from the uninterrupted run", f"{label}: {name}")


# ---------------------------------------------------------------------------------------------- a run's life
LIVE = re.compile(r"^error: train\.out_dir=\S+ is in use by a live run \(host \S+, pid (\d+), since [^)]+\)",
                  re.MULTILINE)  # fmt: skip
TOOK_OVER = "took over the lock of a run that is no longer running"


def life_case(tally: Tally, label: str, r: subprocess.CompletedProcess, status: int, says: str) -> bool:
    """A case of ``run_life_faults`` ended with exit ``status``, a line holding ``says`` and no traceback."""
    tally.life_cases += 1
    if TRACEBACK in r.stderr:
        tally.raw_tracebacks += 1
        tally.failures.append(f"{label}: raw traceback\n{r.stderr[-2000:]}")
        return False
    if r.returncode != status or says not in r.stderr:
        tally.failures.append(f"{label}: exit {r.returncode} (expected {status}), no {says!r}:\n{r.stderr[-1500:]}")
        return False
    tally.life_clean += 1
    return True


def resumed_as_unbroken(train_h5: Path, out_dir: Path, common: list[str], label: str,
                        reference: dict[str, Checkpoint], tally: Tally) -> None:  # fmt: skip
    """``train.resume=auto`` in ``out_dir``: completed, its checkpoints and records those of the unbroken run."""
    tally.resumes += 1
    r = run_train(tiny_run_args(train_h5, out_dir, *common, "train.resume=auto"))
    if r.returncode != 0 or TRACEBACK in r.stderr:
        tally.raw_tracebacks += TRACEBACK in r.stderr
        tally.failures.append(f"{label}: the resume failed (exit {r.returncode}):\n{r.stderr[-1500:]}")
        return
    tally.resumes_completed += 1
    check_records(out_dir, common, label, tally)
    final = check_checkpoints(out_dir, tally, f"{label}, after the resume")
    for name in CHECKPOINTS:
        if name in final and not same_training_state(final[name], reference[name]):
            tally.lose("resumed weights differ from the uninterrupted run", f"{label}: {name}")


def fake_lock(out_dir: Path, host: str, pid: int, refreshed: float) -> None:
    """The lock file of a run that died (utils.folder_lock's record)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    record = {"host": host, "pid": pid, "started": refreshed - 60, "refreshed": refreshed}
    (out_dir / LOCK_NAME).write_text(json.dumps(record))


def run_life_faults(train_h5: Path, val_h5: Path, work: Path, tally: Tally) -> None:
    """A second run on a live run's folder (and with train.resume=auto), a dead process's lock on this host, a lock
    of another host not refreshed for an hour, SIGTERM during validation (mid-run and on the last epoch), SIGTERM
    then SIGINT during validation; each followed by train.resume=auto, which must end with the unbroken run's
    checkpoints and records (metrics.jsonl)."""
    common = [f"data.val={val_h5}", *RUN, *STOP_RUN]
    reference, _ = reference_run(train_h5, work / "life_reference", common)

    live = work / "life_live"
    slow = ["-m", "tests.harness.faulty_trainer", "--step-sleep", "3", "--"]  # 36 s of steps: alive for the others
    first = start([sys.executable, *slow, *tiny_run_args(train_h5, live, *common)])
    while first.poll() is None and not (live / "metrics.jsonl").exists():
        time.sleep(0.01)
    for extra in ([], ["train.resume=auto"]):
        tally.trials += 1
        second = run_train(tiny_run_args(train_h5, live, *common, *extra))
        seen = LIVE.search(second.stderr)
        named = seen is not None and int(seen.group(1)) == first.pid and "resume" not in seen.group(0)
        if (
            life_case(tally, f"a second run {extra} on a live folder", second, 2, "is in use by a live run")
            and not named
        ):
            tally.failures.append(f"the refusal does not name the live run {first.pid}: {second.stderr[-500:]}")
    out, err = first.communicate(timeout=600)
    if first.returncode != 0:
        tally.failures.append(f"the live run failed beside the refused ones (exit {first.returncode}):\n{err[-1500:]}")
    check_records(live, common, "the live run beside refused ones", tally)
    finished = run_train(tiny_run_args(train_h5, live, *common, "train.resume=auto"))  # the resume after it
    tally.resumes += 1
    tally.resumes_completed += finished.returncode == 0 and "holds a finished run" in finished.stdout

    for label, host, pid, age in (("a dead process's lock", socket.gethostname(), dead_pid(), 0.0),
                                  ("another host's stale lock", "node-gone.cluster", 4242, 3600.0)):  # fmt: skip
        tally.trials += 1
        out_dir = work / f"life_{label.split()[1]}"
        fake_lock(out_dir, host, pid, time.time() - age)
        r = run_train(tiny_run_args(train_h5, out_dir, *common))
        if life_case(tally, label, r, 0, TOOK_OVER):
            check_records(out_dir, common, label, tally)
        resumed_as_unbroken(train_h5, out_dir, common, f"{label}, then a resume", reference, tally)

    in_validation = [(["SIGTERM"], 2, 143, "terminated (SIGTERM): stopped in the validation of epoch 2"),
                     (["SIGTERM"], 5, 143, "terminated (SIGTERM): stopped in the validation of epoch 5"),
                     (["SIGTERM", "SIGINT"], 3, 130, "interrupted: stopped at epoch 4, step 0")]  # fmt: skip
    for signals, epoch, status, says in in_validation:
        tally.trials += 1
        label = f"{' then '.join(signals)} in the validation of epoch {epoch}"
        out_dir = work / f"life_{'_'.join(signals)}_{epoch}"
        faulty = ["-m", "tests.harness.faulty_trainer", "--validation-signals", *signals, "--validation-epoch",
                  str(epoch), "--"]  # fmt: skip
        r = run([sys.executable, *faulty, *tiny_run_args(train_h5, out_dir, *common)])
        if not life_case(tally, label, r, status, says):
            continue
        last = check_checkpoints(out_dir, tally, label).get("last.pt")
        if last is None or not saved_state(last).position.validation_due:
            tally.lose("stopped in validation without the epoch end's last.pt", label)
            continue
        resumed_as_unbroken(train_h5, out_dir, common, f"{label}, then a resume", reference, tally)


def dead_pid() -> int:
    """The pid of a process that has ended."""
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


# ---------------------------------------------------------------------------------------------- b. torchrun
def torchrun_worker_death(train_h5: Path, work: Path, tally: Tally) -> None:
    out_dir = work / "torchrun"
    tally.trials += 1
    tally.torchrun_deaths += 1
    tally.resumes += 1
    faulty = ["-m", "tests.harness.faulty_trainer", "--launcher", "distributed", "--exit-step", "3", "--"]
    program = [*faulty, *tiny_run_args(train_h5, out_dir, *RUN)]
    r = run(torchrun_command(program, nproc=2, max_restarts=1))
    if r.returncode != 0:
        tally.failures.append(f"torchrun restart did not complete (exit {r.returncode}):\n{r.stderr[-1500:]}")
        return
    if "rank 1 dies at global step 3" in r.stdout:
        tally.kills += 1
    if TRACEBACK in r.stderr and "rank 1 dies" not in r.stdout:
        tally.raw_tracebacks += 1
    final = check_checkpoints(out_dir, tally, "torchrun after the restart")
    last = final.get("last.pt")
    if "resumed from" in r.stdout and last is not None and saved_state(last).position.global_step == RUN_STEPS:
        tally.resumes_completed += 1
    else:
        tally.failures.append(f"torchrun: no resume to global step {RUN_STEPS}:\n{r.stdout[-1500:]}")


# ---------------------------------------------------------------------------------------------- c. disk faults
@contextlib.contextmanager
def tmpfs(path: Path, size_bytes: int) -> Iterator[bool]:
    """Mount a tmpfs of ``size_bytes`` at ``path``; yields False (nothing mounted) where mounting is refused."""
    path.mkdir(parents=True, exist_ok=True)
    ok = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(path)],
                        capture_output=True).returncode == 0  # fmt: skip
    try:
        yield ok
    finally:
        if ok:
            subprocess.run(["umount", str(path)], capture_output=True)


def disk_case(tally: Tally, name: str, out_dir: Path, args: list[str], must_name: list[str], code: str = "") -> None:
    """Resume the one-epoch run in ``out_dir`` for a second epoch while writes fail (really, or injected with
    ``code``): a clean error, and last.pt byte-for-byte unchanged and loadable, no temporary file."""
    before = file_digest(out_dir / "last.pt")
    r = run_train([*args, f"train.out_dir={out_dir}", "train.epochs=2", "train.resume=auto"],
                  write_fault_train_code(code) if code else None)  # fmt: skip
    classify_error(tally, name, r, must_name)
    if not (out_dir / "last.pt").is_file() or file_digest(out_dir / "last.pt") != before:
        tally.lose("previous checkpoint changed by a failed write", f"{name}: {out_dir / 'last.pt'}")
    if temporaries(out_dir):
        tally.lose("stray temporary file", f"{name}: {temporaries(out_dir)}")
    if "last.pt" not in check_checkpoints(out_dir, tally, name):
        tally.lose("previous checkpoint unloadable after a failed write", name)


def disk_faults(train_h5: Path, work: Path, tally: Tally) -> list[str]:
    args = ["--config", str(TINY_PRESET), f"data.train={train_h5}", "train.max_steps_per_epoch=2"]
    base = work / "disk_base"
    r = run_train([*args, f"train.out_dir={base}", "train.epochs=1"])
    if r.returncode != 0:
        raise SystemExit(f"the one-epoch run for the disk cases failed:\n{r.stderr[-3000:]}")
    kinds = []
    for code, words in (("ENOSPC", ["last.pt", "ENOSPC", "resume=auto"]), ("EROFS", ["last.pt", "EROFS"])):
        out_dir = work / f"injected_{code}"
        shutil.copytree(base, out_dir)
        disk_case(tally, f"injected {code} at the last.pt write", out_dir, args, words, code)
        kinds.append(f"{code} injected")
    used = sum(f.stat().st_size for f in base.rglob("*") if f.is_file())
    ckpt = (base / "last.pt").stat().st_size
    mount = work / "mnt"
    with tmpfs(mount, used + ckpt // 2 + 64 * 1024) as mounted:  # room for the files, not for a second last.pt
        if mounted:
            shutil.copytree(base, mount / "run")
            disk_case(tally, "full tmpfs", mount / "run", args, ["last.pt", "ENOSPC", "resume=auto"])
            kinds.append("ENOSPC on a full tmpfs")
            if subprocess.run(["mount", "-o", "remount,ro", str(mount)], capture_output=True).returncode == 0:
                disk_case(tally, "read-only tmpfs", mount / "run", args, [str(mount / "run"), "EROFS"])
                kinds.append("EROFS on a read-only tmpfs")
    return kinds


# ---------------------------------------------------------------------------------------------- d. loader faults
def corrupt_jpeg(src: Path, dst: Path, image: int) -> int:
    """A copy of ``src`` whose image number ``image`` has its JPEG header zeroed; returns that image's id."""
    shutil.copyfile(src, dst)
    with h5py.File(dst, "r+") as f:
        start = int(f["images/jpeg_offsets"][image])
        f["images/jpeg"][start : start + 64] = 0
        return int(f["images/id"][image])


def worker_pids(pid: int) -> list[int]:
    """Child processes of ``pid`` running the same program (DataLoader workers; not git and the like)."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        exe = os.readlink(f"/proc/{pid}/exe")
        return [int(c) for c in children if os.readlink(f"/proc/{c}/exe") == exe]
    except OSError:
        return []


def loader_faults(train_h5: Path, work: Path, tally: Tally) -> None:
    bad = work / "corrupt.h5"
    image_id = corrupt_jpeg(train_h5, bad, image=2)
    r = run_train(tiny_run_args(bad, work / "corrupt", "data.num_workers=1"))
    classify_error(tally, "corrupt JPEG in a worker", r, ["sample", f"image id {image_id}", str(bad)])

    out_dir = work / "killed_worker"
    p = start_train(tiny_run_args(train_h5, out_dir, "data.num_workers=1", "train.epochs=30"))
    deadline = time.perf_counter() + 300
    # once the first step is logged the epoch's worker runs; workers restart each epoch, so retry a missed kill
    while p.poll() is None and time.perf_counter() < deadline:
        workers = worker_pids(p.pid) if (out_dir / "metrics.jsonl").is_file() else []
        for w in workers[:1]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(w, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=30)
        time.sleep(0.05)
    if p.poll() is None:
        p.kill()
    out, err = p.communicate()
    r = subprocess.CompletedProcess(p.args, p.returncode, out, err)
    classify_error(tally, "DataLoader worker killed by SIGKILL", r, ["DataLoader worker", "step", "num_workers"])


# ---------------------------------------------------------------------------------------------- e. failed starts
def failed_starts(train_h5: Path) -> list[tuple[str, list[str], list[str]]]:
    """(name, what is added to a tiny run's command, what its error must name) of starts that fail: a setting out of
    its range, a setting given as an option, a data file that is not there, data smaller than one step (the last two
    after the run folder was made)."""
    missing = train_h5.with_name("missing.h5")
    return [
        ("a setting out of its range", ["train.batch_size=0"], ["train.batch_size", ">= 1", "got 0"]),
        ("a setting given as an option", ["--device", "cpu"], ["--device", "train.device=cpu"]),
        ("a missing data file", [f"data.train={missing}"], ["data.train", str(missing)]),
        ("data smaller than one step", ["train.batch_size=1000"], ["train.batch_size", str(train_h5)]),
    ]


def start_faults(train_h5: Path, work: Path, tally: Tally) -> None:
    """Each failed start: a clean error naming what to change, and no run folder left behind (else the same command,
    corrected, would be refused the folder)."""
    for name, extra, must_name in failed_starts(train_h5):
        tally.failed_starts += 1
        out_dir = work / "failed_start" / name.replace(" ", "_") / "run"
        r = run_train([*tiny_run_args(train_h5, out_dir), *extra])
        classify_error(tally, f"failed start: {name}", r, must_name)
        if out_dir.exists():
            tally.lose("run folder left by a failed start", f"{name}: {sorted(p.name for p in out_dir.iterdir())}")


# ---- a worker's death reported at any point of a failure's translation (torch's SIGCHLD handler raises between
# bytecodes): deterministic, a trace function raises it at the N-th line

DEAD = "DataLoader worker (pid 4242) is killed by signal: Killed. "
SAMPLE = ("Caught DataFileError in DataLoader worker process 0.\nOriginal Traceback (most recent call last):\n"
          '  File "x.py", line 1, in f\nutils.errors.DataFileError: sample 7 (image id 3) of train.h5 cannot be '
          "loaded: the JPEG bytes do not decode")  # fmt: skip


def _where_now() -> str:
    return "epoch 0, step 1 (global step 1), next batch: samples [4, 5]"


def translated_with_death_at(original: BaseException, line: int) -> tuple[BaseException, bool]:
    """``original`` raised in a training loop's ``loader_errors`` block, inside the run's backstop
    (``dead_workers_named``), with torch's report of a dead worker raised at the ``line``-th line the translation
    executes (its code, contextlib's exit, the progress bars it closes, the position it asks for), as the SIGCHLD
    handler raises it; (what the run's backstop lets out, whether the death was raised: False once ``line`` is past
    the last line). Line 0: no death."""
    cfg = DataConfig(num_workers=1)
    files = {batch_errors.__file__, progress_bar.__file__, contextlib.__file__}
    state = {"lines": 0, "armed": False, "raised": False}

    def local(frame, event, arg):
        if event == "line" and state["armed"]:
            state["lines"] += 1
            if state["lines"] == line:
                state["raised"] = True
                raise RuntimeError(DEAD)  # a trace function's error is raised in the traced frame, then tracing stops
        return local

    def tracer(frame, event, arg):
        return local if frame.f_code.co_filename in files or frame.f_code is _where_now.__code__ else None

    original.__traceback__, original.__context__ = None, None  # the same object is raised once per point
    previous, sigchld = sys.gettrace(), signal.getsignal(signal.SIGCHLD)
    sys.settrace(tracer)
    try:
        with batch_errors.dead_workers_named("train.h5", cfg, _where_now):
            try:
                with batch_errors.loader_errors("train.h5", cfg, _where_now):
                    state["armed"] = True  # from the failure on, until it has left the training loop's block
                    raise original
            finally:
                state["armed"] = False
    except BaseException as e:  # noqa: BLE001  what the run lets out is the result
        out = e
    finally:
        sys.settrace(previous)
        if sigchld is not None:  # the translation of a death sets it aside for the rest of the process
            signal.signal(signal.SIGCHLD, sigchld)
        gc.collect(0)  # a block whose exit the death interrupted is closed now, untraced, not in the next call
    return out, state["raised"]


BROKEN = ConnectionResetError(104, "Connection reset by peer")  # a worker killed while handing over a batch
ORIGINALS = {
    "a dead worker": RuntimeError(DEAD),
    "a sample's error": RuntimeError(SAMPLE),
    "a broken connection": BROKEN,
}


def deaths_at_every_point(original: BaseException, limit: int = 500) -> tuple[int, list[str]]:
    """(the points of injection: every line the translation of ``original`` executes, what went wrong at each:
    anything but the LoaderError of the undisturbed translation, same message)."""
    undisturbed, _ = translated_with_death_at(original, 0)
    wrong = [] if isinstance(undisturbed, LoaderError) else [f"undisturbed: {type(undisturbed).__name__}"]
    points = 0
    for line in range(1, limit):
        out, raised = translated_with_death_at(original, line)
        if not raised:
            break
        points += 1
        if not isinstance(out, LoaderError) or (str(out), out.key) != (str(undisturbed), undisturbed.key):
            wrong.append(f"line {line}: {type(out).__name__}: {str(out)[:200]}")
    return points, wrong


def translation_faults(tally: Tally) -> None:
    """A DataLoader worker's death (torch's RuntimeError) raised at each point of the translation of each kind of
    loader failure: every one must end in the undisturbed translation's line."""
    for name, original in ORIGINALS.items():
        points, wrong = deaths_at_every_point(original)
        tally.translation_points += points
        tally.fault_cases += points
        tally.clean_errors += points - len(wrong)
        tally.raw_tracebacks += len(wrong)
        tally.failures += [f"worker death while translating {name}, {w}" for w in wrong]
