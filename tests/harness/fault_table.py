"""Fault injection: kill -9 and SIGTERM during training (1 and 2 processes), a torchrun worker death, a full disk, a
read-only run folder, a corrupt sample and a killed DataLoader worker, plus the bad-input corpus
(tests.harness.bad_inputs); prints one table.

    python -m tests.harness.fault_table [--trials 20] [--sigterm-trials 6] [--seed 0] [--work DIR]
    python -m tests.harness.fault_table --scenarios translation      # some of them (tests/test_faults.py)

What is measured (all on a tiny model, 64 px input, a 16-image synthetic dataset made once by data.synthetic and
data.coco_to_hdf5):

- kill -9 of ``python train.py`` at a seeded random moment of the run (one trial in four is aimed instead at a
  checkpoint write: the kill is sent as the N-th checkpoint's temporary file appears). The random moments are
  drawn between 5% and 85% of an uninterrupted run's wall time (the shortest seen); a run that ends first on a
  loaded machine is run once more with a new moment. The run writes ``last.pt``
  every step and ``best.pt`` after each validation, so many kills land near a write. After each kill every
  ``last.pt``/``best.pt`` must load with checkpoint.format.Checkpoint.load, then ``train.resume=auto`` must finish
  the run, leave no temporary file, and end with the same weights and optimizer state, bit for bit, as an
  uninterrupted reference run. Why bit-identical: a checkpoint holds every RNG state and the position in the
  epoch, the sample order depends only on (seed, epoch) and each sample's augmentation only on (seed, epoch,
  index), so a resumed run redoes exactly the steps lost since the last checkpoint (deterministic CPU kernels,
  one thread).
- SIGTERM (what SLURM, Kubernetes and torchrun send before they kill a job) to ``python train.py`` once it has
  logged a seeded random number of steps (0: as soon as its folder is claimed, while it starts; last.pt at epoch ends
  only), and to torchrun's agent of a 2-process run at a seeded random step (it sends it on to both processes): exit
  143, one line naming the step and the command that continues, no traceback of ours (torchrun prints its own on
  SIGTERM), ``last.pt`` loadable and holding that step (or, stopped while starting, a line saying so and no run
  folder); then ``train.resume=auto`` (in as many processes) must end bit-identical to the run never stopped.
- a run's life: a second run (and one with ``train.resume=auto``) on a live run's folder, refused with a line naming
  it; a dead process's lock and another host's lock not refreshed for an hour, taken over; SIGTERM in validation
  (epoch 2 and the last), SIGTERM then SIGINT there; each followed by ``train.resume=auto``. Every resumed run's
  ``metrics.jsonl`` (and the kill and SIGTERM trials') must equal the unbroken run's, record for record but for the
  figures of time.
- torchrun --nproc_per_node=2 --max-restarts=1 with rank 1 dying (os._exit, no clean-up) at step 3: the group
  restarts, resumes from last.pt and completes the same 6 x 2 steps.
- a peer killed mid-collective: a 2-process torchrun run (no restarts) whose rank (seeded) hangs in a seeded step
  while the other waits for it in a collective, then is killed with SIGKILL: the survivor's one line names it, the
  step last.pt holds and the command that continues, no traceback of ours; then ``train.resume=auto`` must end
  bit-identical to the run never broken (tests.harness.peer_faults).
- SIGTERM to one rank of a 2-process torchrun run in validation (seeded rank and epoch; it waits 3 s first, the other
  waits in validation's collective): each rank exits 143 at the one point they agree on, one stop line naming that
  validation, the epoch end's last.pt with validation due; then ``train.resume=auto`` in 2 processes must end with
  the unbroken run's checkpoints, bit for bit, and records (tests.harness.rank_stops).
- ENOSPC and EROFS at the checkpoint write, injected (``write_fault``) and, where this process may mount, on a
  real small / read-only tmpfs: exit 2, a message naming the path and what to do, previous last.pt intact and
  loadable, no temporary file left.
- a JPEG corrupted in the HDF5 file and a DataLoader worker killed by SIGKILL (num_workers=1): exit 2 and a
  message naming the sample (or the step and the batch then loading) and what to do.
- starts that fail (a setting out of its range, a setting given as an option, a missing data file, data smaller
  than one step): exit 2, a message naming what to change, and no run folder left behind.
- a DataLoader worker's death reported while a loader failure (a dead worker, a sample's error, a broken
  connection) is being translated into its line: torch's SIGCHLD handler raises it between any two bytecodes, so
  a trace function raises it at each line the translation executes in turn (deterministic); each must end in the
  undisturbed translation's line.

A subprocess's stderr holding "Traceback (most recent call last)" counts as a raw traceback.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from tests.harness.bad_inputs import run_corpus
from tests.harness.cases import OUTCOMES
from tests.harness.faults import (
    Tally,
    disk_faults,
    kill_and_resume,
    loader_faults,
    make_data,
    run_life_faults,
    sigterm_and_resume,
    start_faults,
    torchrun_sigterm,
    torchrun_worker_death,
    translation_faults,
)
from tests.harness.peer_faults import peer_killed_and_resume
from tests.harness.rank_stops import rank_stopped_in_validation

NO_DATA_LOST = ("no unloadable or half-written checkpoint, no stray temporary file, every resumed run bit-identical "
                "to the uninterrupted one, no changed previous checkpoint, no run folder left by a failed "
                "start")  # fmt: skip


def table_rows(t: Tally, trials: int, disk_kinds: list[str]) -> list[tuple[str, str, str]]:
    """(name, value, detail) of every row of the table."""
    outcomes = {k: sum(r.outcome == k for r in t.corpus) for k in OUTCOMES}
    partial = sum(bool(r.partial_output) for r in t.corpus)
    corpus_note = (f"tests.harness.bad_input_table: {len(t.corpus)} inputs ({outcomes['counted_skip']} counted skips, "
                   f"{outcomes['accepted']} accepted)")  # fmt: skip
    stops = sum(t.stops.values()) + t.rank_stops
    kill_trials = t.trials - stops - t.torchrun_deaths - t.life_cases - t.peers_killed
    lost = f"{sum(t.lost.values()) + partial}" + (f" (+{partial} partial outputs)" if partial else "")
    return [
        (
            "trials",
            f"{t.trials}",
            f"{kill_trials} kill -9 of train.py (seeded; 1 in 4 aimed at "
            f"a checkpoint write), {t.stops.get(1, 0)} SIGTERM to train.py and {t.stops.get(2, 0)} to torchrun's agent "
            f"of 2 processes (seeded), {t.rank_stops} to one of 2 processes in validation (seeded), "
            f"{t.torchrun_deaths} torchrun worker death, {t.life_cases} run-life faults, "
            f"{t.peers_killed} torchrun worker killed mid-collective (seeded)",
        ),
        (
            "SIGTERM stops",
            f"{t.stops_clean}/{stops}",
            "exit 143 (one rank stopped in validation: each rank), one line naming the step reached and the resume "
            "command, last.pt holding that step",
        ),
        (
            "run-life faults",
            f"{t.life_clean}/{t.life_cases}",
            "a second run (also train.resume=auto) on a live folder refused naming it; a dead pid's lock and another "
            "host's stale lock taken over; SIGTERM in validation (mid-run, last epoch), SIGTERM then SIGINT there",
        ),
        (
            "metrics.jsonl true",
            f"{t.records_equal}/{t.records_checked}",
            "runs and resumed runs whose metrics.jsonl equals the unbroken run's, record for record (times aside)",
        ),
        (
            "peers lost",
            f"{t.peers_named}/{t.peers_killed}",
            "the survivor of a worker killed mid-collective: one line naming it, the step last.pt holds and the "
            "resume command, no traceback",
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
        (
            "resumes completed",
            f"{t.resumes_completed}/{t.resumes}",
            "train.resume=auto after kills, stops and lost peers (1 and 2 processes); torchrun --max-restarts=1",
        ),
        (
            "bad inputs tried",
            f"{len(t.corpus) + t.fault_cases}",
            f"{corpus_note}; {t.fault_cases} fault cases ({', '.join(disk_kinds)}; "
            f"corrupt JPEG in a worker; worker SIGKILL; {t.failed_starts} failed starts; a worker's "
            f"death raised at each of the "
            f"{t.translation_points} lines of a loader failure's translation)",
        ),
        (
            "clean errors",
            f"{outcomes['clean_error'] + t.clean_errors}",
            "exit 2 with one `error:` line naming the file/sample and what to do",
        ),
        ("raw tracebacks", f"{outcomes['raw_traceback'] + t.raw_tracebacks}", "must be 0"),
        ("data lost", lost, ", ".join(f"{k} {v}" for k, v in t.lost.items()) or NO_DATA_LOST),
    ]


def table(t: Tally, trials: int, seed: int, disk_kinds: list[str], seconds: float) -> str:
    """The Markdown table the README quotes, then the run time and the seed."""
    rows = table_rows(t, trials, disk_kinds)
    width = max(len(r[0]) for r in rows)
    lines = [f"| {'':<{width}} | value | detail |", f"|{'-' * (width + 2)}|------:|--------|"]
    lines += [f"| {name:<{width}} | {value:>5} | {detail} |" for name, value, detail in rows]
    lines.append(f"\n{seconds / 60:.1f} min, seed {seed}")
    return "\n".join(lines)


def timed(label: str, step):
    """``step()``, its wall time printed to stderr under ``label``."""
    t0 = time.perf_counter()
    result = step()
    print(f"{label}: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return result


SCENARIOS = ("kill", "sigterm", "torchrun", "life", "disk", "translation", "corpus")


def run_all(work: Path, trials: int, sigterm_trials: int, seed: int, tally: Tally,
            scenarios: tuple[str, ...] = SCENARIOS) -> list[str]:  # fmt: skip
    """The ``scenarios`` (every one by default), into ``tally``; returns the kinds of disk fault tried."""
    needs_data = set(scenarios) & {"kill", "sigterm", "torchrun", "life", "disk"}
    train_h5, val_h5 = make_data(work) if needs_data else (Path(), Path())
    if "kill" in scenarios:
        timed("kill -9 and resume", lambda: kill_and_resume(train_h5, val_h5, work, trials, seed, tally))
    if "sigterm" in scenarios:
        timed("SIGTERM and resume", lambda: sigterm_and_resume(train_h5, val_h5, work, sigterm_trials, seed, tally))
    if "torchrun" in scenarios:
        timed("torchrun worker death", lambda: torchrun_worker_death(train_h5, work, tally))
        stops = max(1, sigterm_trials // 3)
        timed("torchrun SIGTERM and resume", lambda: torchrun_sigterm(train_h5, work, stops, seed, tally))
        timed("a peer killed mid-collective", lambda: peer_killed_and_resume(train_h5, work, stops, seed, tally))
        timed("SIGTERM to one rank in validation", lambda: rank_stopped_in_validation(
            train_h5, val_h5, work, stops, seed, tally))  # fmt: skip
    if "life" in scenarios:
        timed("a run's life: live folder, stale locks, signals in validation", lambda: run_life_faults(
            train_h5, val_h5, work, tally))  # fmt: skip

    def disk_and_loader() -> list[str]:
        kinds = disk_faults(train_h5, work, tally)
        loader_faults(train_h5, work, tally)
        start_faults(train_h5, work, tally)
        return kinds

    disk_kinds = timed("disk, loader and start faults", disk_and_loader) if "disk" in scenarios else []
    if "translation" in scenarios:
        timed("a worker's death at each point of a translation", lambda: translation_faults(tally))
    if "corpus" in scenarios:
        tally.corpus = timed("bad-input corpus", lambda: run_corpus(work / "bad_inputs"))
    return disk_kinds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=20, help="kill -9 trials (default 20)")
    parser.add_argument(
        "--sigterm-trials",
        type=int,
        default=6,
        help="SIGTERM trials of train.py (default 6; a third as many, at least 1, of 2 processes)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the kill and signal moments")
    parser.add_argument(
        "--scenarios",
        default=",".join(SCENARIOS),
        help=f"which to run, comma-separated (default all: {','.join(SCENARIOS)})",
    )
    parser.add_argument("--work", type=Path, default=None, help="working folder (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the working folder")
    args = parser.parse_args(argv)
    scenarios = tuple(x for x in args.scenarios.split(",") if x)
    if set(scenarios) - set(SCENARIOS):
        parser.error(f"--scenarios: {', '.join(sorted(set(scenarios) - set(SCENARIOS)))} unknown; choose of "
                     f"{','.join(SCENARIOS)}")  # fmt: skip
    work = args.work or Path(tempfile.mkdtemp(prefix="simplepose_faults_"))
    work.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    tally = Tally()
    try:
        disk_kinds = run_all(work, args.trials, args.sigterm_trials, args.seed, tally, scenarios)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    for f in tally.failures:
        print(f"FAILED {f}", file=sys.stderr)
    print(table(tally, args.trials, args.seed, disk_kinds, time.perf_counter() - start))
    return 1 if tally.failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
