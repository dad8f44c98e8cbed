"""Fault injection: kill -9 during training, a torchrun worker death, a full disk, a read-only run folder, a
corrupt sample and a killed DataLoader worker, plus the bad-input corpus of bench.bad_inputs; prints one table.

    python -m bench.faults [--trials 20] [--seed 0] [--work DIR]

What is measured (all on a tiny model, 64 px input, a 16-image synthetic dataset made once by data.synthetic and
data.coco_to_hdf5):

- kill -9 of ``python train.py`` at a seeded random moment of the run (one trial in four is aimed instead at a
  checkpoint write: the kill is sent as the N-th checkpoint's temporary file appears). The random moments are
  drawn between 5% and 85% of an uninterrupted run's wall time (the shortest seen); a run that ends first on a
  loaded machine is run once more with a new moment. The run writes ``last.pt``
  every step and ``best.pt`` after each validation, so many kills land near a write. After each kill every
  ``last.pt``/``best.pt`` must load with engine.checkpoint.load_checkpoint, then ``train.resume=auto`` must finish
  the run, leave no temporary file, and end with the same weights and optimizer state, bit for bit, as an
  uninterrupted reference run. Why bit-identical: a checkpoint holds every RNG state and the position in the
  epoch, the sample order depends only on (seed, epoch) and each sample's augmentation only on (seed, epoch,
  index), so a resumed run redoes exactly the steps lost since the last checkpoint (deterministic CPU kernels,
  one thread).
- torchrun --nproc_per_node=2 --max-restarts=1 with rank 1 dying (os._exit, no clean-up) at step 3: the group
  restarts, resumes from last.pt and completes the same 6 x 2 steps.
- ENOSPC and EROFS at the checkpoint write, injected (``write_fault``) and, where this process may mount, on a
  real small / read-only tmpfs: exit 2, a message naming the path and what to do, previous last.pt intact and
  loadable, no temporary file left.
- a JPEG corrupted in the HDF5 file and a DataLoader worker killed by SIGKILL (num_workers=1): exit 2 and a
  message naming the sample (or the step and the batch then loading) and what to do.

A subprocess's stderr holding "Traceback (most recent call last)" counts as a raw traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import hashlib
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch

from engine.checkpoint import load_checkpoint
from utils.distributed import torchrun_command
from utils.errors import UserError
from utils.paths import REPO_ROOT, TINY_PRESET, tiny_run_args

TRACEBACK = "Traceback (most recent call last)"
CHECKPOINTS = ("last.pt", "best.pt")
# 6 epochs of 2 steps, last.pt after every step, validation (val loss) and best.pt after every epoch
RUN_STEPS = 6 * 2
RUN = ["train.epochs=6", "train.max_steps_per_epoch=2", "train.checkpoint_every_steps=1", "train.val_every=1",
       "train.optimizer=sgd", "train.lr=0.01"]  # fmt: skip
ENV = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "OMP_NUM_THREADS": "1"}


@dataclass
class Tally:
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
    corpus: list | None = None

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
    import utils.io

    prefix, seen = f".{name}.", [0]
    real_mkstemp, real_fsync = utils.io.tempfile.mkstemp, utils.io.os.fsync

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

    utils.io.tempfile.mkstemp, utils.io.os.fsync = mkstemp, fsync
    try:
        yield
    finally:
        utils.io.tempfile.mkstemp, utils.io.os.fsync = real_mkstemp, real_fsync


def train_with_write_fault(code_name: str, skip: int, argv: list[str]) -> int:
    """``python train.py ARGV`` in this process with ``write_fault`` on last.pt (for the subprocess cases)."""
    import train

    with write_fault(getattr(errno, code_name), "last.pt", skip):
        return train.main(argv)


# ---------------------------------------------------------------------------------------------- helpers
def make_data(root: Path) -> tuple[Path, Path]:
    """A 16-image synthetic dataset converted for input size 64: (train.h5, val.h5)."""
    from data.coco_to_hdf5 import Source, convert
    from data.synthetic import generate

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


def check_checkpoints(out_dir: Path, tally: Tally, when: str) -> dict[str, dict]:
    """Load every last.pt / best.pt in ``out_dir``; an unloadable one is data lost (a half-written final file)."""
    loaded = {}
    for name in CHECKPOINTS:
        path = out_dir / name
        if not path.exists():
            continue
        tally.checkpoints += 1
        try:
            loaded[name] = load_checkpoint(path)
            tally.checkpoints_loadable += 1
        except UserError as e:
            tally.lose("unloadable or half-written checkpoint", f"{when}: {e}")
    return loaded


def same_training_state(a: dict, b: dict) -> bool:
    def tensors(ckpt: dict) -> list[torch.Tensor]:
        opt = [v for s in ckpt["optimizer"]["state"].values() for v in s.values() if torch.is_tensor(v)]
        return [*ckpt["model"].values(), *opt]

    ta, tb = tensors(a), tensors(b)
    return a["global_step"] == b["global_step"] and len(ta) == len(tb) and all(map(torch.equal, ta, tb))


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


def kill_and_resume(train_h5: Path, val_h5: Path, work: Path, trials: int, seed: int, tally: Tally) -> None:
    common = [f"data.val={val_h5}", *RUN]
    ref_dir = work / "reference"
    start = time.perf_counter()
    r = run_train(tiny_run_args(train_h5, ref_dir, *common))
    ref_seconds = time.perf_counter() - start
    if r.returncode != 0:
        raise SystemExit(f"the uninterrupted reference run failed:\n{r.stderr[-3000:]}")
    reference = {name: load_checkpoint(ref_dir / name) for name in CHECKPOINTS}
    writes = 6 * 3  # at least: last.pt after each step and at each epoch end (and best.pt when val loss improves)
    rng = random.Random(seed)
    for trial in range(trials):
        out_dir = work / f"trial{trial:02d}"
        aimed = trial % 4 == 3
        tally.trials += 1
        for _attempt in range(2):  # a run that ended before its moment (a loaded machine) is run again, sooner
            delay, nth = rng.uniform(0.05, 0.85) * ref_seconds, rng.randint(1, writes)
            started = time.perf_counter()
            p = start_train(tiny_run_args(train_h5, out_dir, *common))
            if kill_when(p, out_dir, None if aimed else delay, nth):
                tally.kills += 1
                tally.kills_during_write += bool(temporaries(out_dir))
                break
            if p.returncode != 0:
                tally.failures.append(f"trial {trial}: the run to be killed failed (exit {p.returncode})")
            ref_seconds = min(ref_seconds, time.perf_counter() - started)
            shutil.rmtree(out_dir, ignore_errors=True)
        check_checkpoints(out_dir, tally, f"trial {trial} after the kill")

        tally.resumes += 1
        r = run_train(tiny_run_args(train_h5, out_dir, *common, "train.resume=auto"))
        if TRACEBACK in r.stderr:
            tally.raw_tracebacks += 1
        if r.returncode != 0:
            tally.failures.append(f"trial {trial}: resume failed (exit {r.returncode}): {r.stderr[-1500:]}")
            continue
        tally.resumes_completed += 1
        if temporaries(out_dir):
            tally.lose("stray temporary file", f"trial {trial}: {temporaries(out_dir)}")
        final = check_checkpoints(out_dir, tally, f"trial {trial} after the resume")
        for name in CHECKPOINTS:
            if name in final and not same_training_state(final[name], reference[name]):
                tally.lose("resumed weights differ from the uninterrupted run", f"trial {trial}: {name}")
        shutil.rmtree(out_dir, ignore_errors=True)


# ---------------------------------------------------------------------------------------------- b. torchrun
def torchrun_worker_death(train_h5: Path, work: Path, tally: Tally) -> None:
    out_dir = work / "torchrun"
    tally.trials += 1
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
    if "resumed from" in r.stdout and final.get("last.pt", {}).get("global_step") == RUN_STEPS:
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
    injected = (
        f"import sys; from bench.faults import train_with_write_fault as t; sys.exit(t('{code}', 0, sys.argv[1:]))"
    )
    r = run_train([*args, f"train.out_dir={out_dir}", "train.epochs=2", "train.resume=auto"],
                  injected if code else None)  # fmt: skip
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
    import h5py

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


# ---------------------------------------------------------------------------------------------- e. bad inputs
def bad_input_corpus(work: Path, tally: Tally) -> None:
    try:
        from bench.bad_inputs import run_corpus
    except ImportError:
        return
    tally.corpus = run_corpus(work / "bad_inputs")


# ---------------------------------------------------------------------------------------------- the table
def table(t: Tally, trials: int, seed: int, disk_kinds: list[str], seconds: float) -> str:
    corpus = t.corpus or []
    outcomes = {k: sum(r.outcome == k for r in corpus) for k in ("clean_error", "counted_skip", "raw_traceback",
                                                                 "accepted")}  # fmt: skip
    partial = sum(bool(r.partial_output) for r in corpus)
    lost = sum(t.lost.values()) + partial
    not_run = t.corpus is None
    tried = f"{t.fault_cases}" if not_run else f"{len(corpus) + t.fault_cases}"
    clean = f"{t.clean_errors}" if not_run else f"{outcomes['clean_error'] + t.clean_errors}"
    raw = f"{t.raw_tracebacks}" if not_run else f"{outcomes['raw_traceback'] + t.raw_tracebacks}"
    corpus_note = "bench.bad_inputs: not run (not on this branch)" if not_run else (
        f"bench.bad_inputs: {len(corpus)} inputs ({outcomes['counted_skip']} counted skips, "
        f"{outcomes['accepted']} accepted)")  # fmt: skip
    lost_detail = ", ".join(f"{k} {v}" for k, v in t.lost.items()) or (
        "no unloadable or half-written checkpoint, no stray temporary file, every resumed run bit-identical "
        "to the uninterrupted one, no changed previous checkpoint")  # fmt: skip
    rows = [
        (
            "trials",
            f"{t.trials}",
            f"{trials} kill -9 of train.py (seeded; 1 in 4 aimed at a checkpoint write), 1 torchrun worker death",
        ),
        (
            "kills",
            f"{t.kills}",
            f"{t.kills_during_write} while a checkpoint temporary file existed; the rest at "
            "start-up, in a step, in validation or at exit",
        ),
        (
            "checkpoints loadable",
            f"{t.checkpoints_loadable}/{t.checkpoints}",
            "every last.pt/best.pt after each kill, each resume and each disk fault",
        ),
        ("resumes completed", f"{t.resumes_completed}/{t.resumes}", "train.resume=auto; torchrun --max-restarts=1"),
        (
            "bad inputs tried",
            tried,
            f"{corpus_note}; {t.fault_cases} fault cases ({', '.join(disk_kinds)}; "
            "corrupt JPEG in a worker; worker SIGKILL)",
        ),
        ("clean errors", clean, "exit 2 with one `error:` line naming the file/sample and what to do"),
        ("raw tracebacks", raw, "must be 0"),
        ("data lost", f"{lost}" + (f" (+{partial} partial outputs)" if partial else ""), lost_detail),
    ]
    width = max(len(r[0]) for r in rows)
    lines = [f"| {'':<{width}} | value | detail |", f"|{'-' * (width + 2)}|------:|--------|"]
    lines += [f"| {name:<{width}} | {value:>5} | {detail} |" for name, value, detail in rows]
    lines.append(f"\n{seconds / 60:.1f} min, seed {seed}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=20, help="kill -9 trials (default 20)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the kill moments")
    parser.add_argument("--work", type=Path, default=None, help="working folder (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the working folder")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="simplepose_faults_"))
    work.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    tally = Tally()
    try:
        train_h5, val_h5 = make_data(work)
        steps = [("kill -9 and resume", lambda: kill_and_resume(train_h5, val_h5, work, args.trials, args.seed, tally)),
                 ("torchrun worker death", lambda: torchrun_worker_death(train_h5, work, tally))]  # fmt: skip
        for label, step in steps:
            t0 = time.perf_counter()
            step()
            print(f"{label}: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        t0 = time.perf_counter()
        disk_kinds = disk_faults(train_h5, work, tally)
        loader_faults(train_h5, work, tally)
        print(f"disk and loader faults: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        t0 = time.perf_counter()
        bad_input_corpus(work, tally)
        print(f"bad-input corpus: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    for f in tally.failures:
        print(f"FAILED {f}", file=sys.stderr)
    print(table(tally, args.trials, args.seed, disk_kinds, time.perf_counter() - start))
    return 1 if tally.failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
