"""The fault table's lost peers (tests.harness.fault_table, scenario ``torchrun``): a 2-process torchrun run (no
restarts) whose rank R hangs in the forward pass of a seeded step while the other waits for it in the gradient
all-reduce, then R is killed with SIGKILL. The survivor must end with one line naming the lost rank, the step
``last.pt`` holds and the command that continues, and no traceback of ours; every checkpoint must load; then
``train.resume=auto`` in 2 processes must end bit-identical to the run never broken."""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import time
from pathlib import Path

from simplepose.checkpoint.format import Checkpoint
from tests.harness.faults import (
    CHECKPOINTS,
    ENV,
    REFERENCE_RECORDS,
    RUN,
    RUN_STEPS,
    Tally,
    check_checkpoints,
    records,
    resume_in_two,
    run,
)
from tests.helpers import saved_state, tiny_run_args, torchrun_command
from tests.paths import REPO_ROOT

LOST_PEER = re.compile(r"^error: rank (\d) lost a peer at .*: rank (\d) is gone .* holds global step (\d+): continue "
                       r"the run with: .* train\.resume=auto;", re.M)  # fmt: skip
TIMEOUT_S = 300


def worker_pids(agent: int) -> dict[int, int]:
    """rank -> pid of the workers of torchrun's agent ``agent``."""
    ranks = {}
    for child in Path(f"/proc/{agent}/task/{agent}/children").read_text().split():
        try:
            env = Path(f"/proc/{child}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        ranks.update({int(v[5:]): int(child) for v in env if v.startswith(b"RANK=")})
    return ranks


def killed_mid_collective(program: list[str], rank: int, log: Path) -> tuple[int, str]:
    """Run ``program`` under torchrun (2 processes), SIGKILL rank ``rank`` once it says it hangs; (torchrun's exit
    status, its stderr). stdout goes to ``log``."""
    err = log.with_suffix(".err")
    with log.open("w") as out, err.open("w") as errors:
        agent = subprocess.Popen(torchrun_command(program, nproc=2), cwd=REPO_ROOT, env=ENV, stdout=out,
                                 stderr=errors)  # fmt: skip
        try:
            deadline = time.monotonic() + TIMEOUT_S
            while f"rank {rank} hangs" not in log.read_text() and agent.poll() is None:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            if agent.poll() is None and f"rank {rank} hangs" in log.read_text():
                os.kill(worker_pids(agent.pid)[rank], signal.SIGKILL)
            rc = agent.wait(timeout=TIMEOUT_S)
        finally:
            if agent.poll() is None:
                agent.kill()
                agent.wait()
    return rc, err.read_text()


def reference(train_h5: Path, work: Path, settings: list[str] = RUN, folder: str = "torchrun_reference"
              ) -> dict[str, Checkpoint]:  # fmt: skip
    """The 2-process run of ``settings`` never broken, in ``work / folder`` (that of
    tests.harness.faults.torchrun_sigterm when it ran already): its final checkpoints; its records in
    ``REFERENCE_RECORDS``."""
    ref_dir = work / folder
    if not (ref_dir / "last.pt").is_file():
        r = run(torchrun_command(["train_distributed.py", *tiny_run_args(train_h5, ref_dir, *settings)], nproc=2))
        if r.returncode != 0:
            raise SystemExit(f"the uninterrupted 2-process run failed:\n{r.stderr[-3000:]}")
    REFERENCE_RECORDS[("2 processes", *settings)] = records(ref_dir)
    return {name: Checkpoint.load(ref_dir / name) for name in CHECKPOINTS if (ref_dir / name).is_file()}


def peer_killed_and_resume(train_h5: Path, work: Path, trials: int, seed: int, tally: Tally) -> None:
    """``trials`` peers killed mid-collective (seeded rank and step), each followed by the checks above."""
    expected = reference(train_h5, work)
    rng = random.Random(seed + 3)
    for trial in range(trials):
        out_dir, step, rank = work / f"peer_killed{trial:02d}", rng.randint(2, RUN_STEPS - 2), rng.randint(0, 1)
        label = f"rank {rank} killed mid-collective at global step {step}"
        tally.trials += 1
        tally.peers_killed += 1
        faulty = ["-m", "tests.harness.faulty_trainer", "--launcher", "distributed", "--hang-step", str(step),
                  "--hang-rank", str(rank), "--"]  # fmt: skip
        rc, stderr = killed_mid_collective([*faulty, *tiny_run_args(train_h5, out_dir, *RUN)], rank,
                                           work / f"peer_killed{trial:02d}.log")  # fmt: skip
        if f'File "{REPO_ROOT}' in stderr or re.search(r"^\[rank\d\]: Traceback", stderr, re.M):
            tally.raw_tracebacks += 1
            tally.failures.append(f"{label}: raw traceback\n{stderr[-2000:]}")
            continue
        lines = LOST_PEER.findall(stderr)
        if rc == 0 or len(lines) != 1 or lines[0][:2] != (str(1 - rank), str(rank)):
            tally.failures.append(f"{label}: exit {rc}, not one lost-peer line naming rank {rank}:\n{stderr[-1500:]}")
            continue
        last = check_checkpoints(out_dir, tally, label).get("last.pt")
        if last is None or saved_state(last).position.global_step != int(lines[0][2]):
            tally.lose("lost-peer line names another step than last.pt's", f"{label}: {lines[0]}")
            continue
        tally.peers_named += 1
        resume_in_two(tiny_run_args(train_h5, out_dir, *RUN), out_dir, label, expected, tally)
