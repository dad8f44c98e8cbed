"""The fault table's stops of one rank in validation (tests.harness.fault_table, scenario ``torchrun``): a 2-process
torchrun run validating every epoch; at the first validation forward pass of a seeded epoch a seeded rank waits 3 s
(the other one finishes its share and waits in validation's collective), then gets SIGTERM alone. Both ranks must
leave validation at the one point they agree on (engine.validation.StopAgreement): each exits 143 (torchrun's
failure table), one stop line naming that validation, the epoch end's global step and the command that continues, no
traceback of ours, ``last.pt`` of the epoch end loadable with validation due; then ``train.resume=auto`` in 2
processes must end with the unbroken 2-process run's checkpoints, bit for bit, and records."""

from __future__ import annotations

import random
import re
from pathlib import Path

from tests.harness.faults import RUN, STOP_RUN, STOPPED, Tally, check_stop, resume_in_two, run
from tests.harness.peer_faults import reference
from tests.helpers import saved_state, tiny_run_args, torchrun_command
from tests.paths import REPO_ROOT

EPOCHS = 6  # RUN's train.epochs
STEPS_PER_EPOCH = 2  # RUN's train.max_steps_per_epoch
RANK_EXITS = re.compile(r"^\s*exitcode\s+:\s*(-?\d+)", re.MULTILINE)  # torchrun's failure table, one per rank


def rank_stopped_in_validation(train_h5: Path, val_h5: Path, work: Path, trials: int, seed: int,
                               tally: Tally) -> None:  # fmt: skip
    """``trials`` stops of one rank (seeded) in the validation of a seeded epoch, each followed by the checks above."""
    common = [f"data.val={val_h5}", *RUN, *STOP_RUN]
    expected = reference(train_h5, work, common, "rank_stop_reference")
    rng = random.Random(seed + 4)
    draws = [(rng.randint(0, EPOCHS - 1), rng.randint(0, 1)) for _ in range(trials)]  # (epoch, rank)
    tally.trials += trials
    tally.rank_stops += trials
    for trial, (epoch, rank) in enumerate(draws):
        out_dir = work / f"rank_stop{trial:02d}"
        label = f"SIGTERM to rank {rank} of 2 in the validation of epoch {epoch}"
        faulty = ["-m", "tests.harness.faulty_trainer", "--launcher", "distributed", "--validation-signals",
                  "SIGTERM", "--validation-epoch", str(epoch), "--validation-rank", str(rank), "--validation-wait",
                  "3", "--"]  # fmt: skip
        r = run(torchrun_command([*faulty, *tiny_run_args(train_h5, out_dir, *common)], nproc=2))
        exits, line = RANK_EXITS.findall(r.stderr), STOPPED.search(r.stderr)
        where = f"stopped in the validation of epoch {epoch} (global step {(epoch + 1) * STEPS_PER_EPOCH})"
        agreed = exits == ["143", "143"] and r.stderr.count("terminated (SIGTERM)") == 1
        if not (agreed and line is not None and where in line.group(0)) and f'File "{REPO_ROOT}' not in r.stderr:
            tally.failures.append(f"{label}: not each rank 143 (torchrun's table: {exits}) with one line: "
                                  f"{where}:\n{r.stderr[-2000:]}")  # fmt: skip
            continue
        if not check_stop(r, out_dir, label, tally, torchrun=True):
            continue
        if not saved_state(out_dir / "last.pt").position.validation_due:
            tally.lose("stopped in validation without the epoch end's last.pt", label)
            continue
        resume_in_two(tiny_run_args(train_h5, out_dir, *common), out_dir, label, expected, tally, common)
