"""Quick fault-injection cases on the synthetic sample with a tiny model (`python -m tests.harness.fault_table` runs
the long ones):
kill -9 mid-run then resume, a full disk and a read-only folder at the checkpoint write, a corrupt sample inside
a DataLoader worker, a DataLoader worker stuck without dying, starts that fail."""

from __future__ import annotations

import errno
import hashlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time

import h5py
import pytest
from torch.utils.data import Dataset

from simplepose import train
from simplepose.checkpoint.format import Checkpoint
from simplepose.config.schema import DataConfig
from simplepose.engine.batch_errors import LoaderError, worker_error_message
from simplepose.engine.hook_base import Hook
from simplepose.engine.run import run
from simplepose.engine.trainer import Trainer
from simplepose.utils.errors import cli_main
from simplepose.utils.io import WriteError
from tests.harness.faults import (
    BROKEN,
    DEAD,
    SAMPLE,
    Tally,
    deaths_at_every_point,
    failed_starts,
    same_training_state,
    start_faults,
    temporaries,
    translated_with_death_at,
    write_fault,
)
from tests.helpers import saved_state, tiny_cfg, tiny_run_args
from tests.paths import REPO_ROOT

SHORT = ["train.max_steps_per_epoch=2", "train.optimizer=sgd", "train.lr=0.01"]


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_kill_9_mid_run_then_resume_auto_completes(synthetic_h5_64, tmp_path):
    run = tiny_run_args(synthetic_h5_64, tmp_path, *SHORT, "train.epochs=4", "train.checkpoint_every_steps=1")
    args = [sys.executable, "train.py", *run]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    p = subprocess.Popen(args, cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while p.poll() is None and not (tmp_path / "last.pt").exists() and time.monotonic() < deadline:
        time.sleep(0.005)
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert p.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    killed_at = Checkpoint.load(tmp_path / "last.pt")  # the checkpoint present after the kill loads
    assert saved_state(killed_at).position.global_step < 8

    r = subprocess.run([*args, "train.resume=auto"], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                       timeout=300)  # fmt: skip
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "resumed from" in r.stdout
    final = Checkpoint.load(tmp_path / "last.pt")
    assert (saved_state(final).position.epoch, saved_state(final).position.global_step) == (4, 8)
    assert temporaries(tmp_path) == []


@pytest.fixture(scope="module")
def one_epoch_run(synthetic_h5_64, tmp_path_factory):
    out = tmp_path_factory.mktemp("one_epoch")
    Trainer(tiny_cfg(synthetic_h5_64, out, *SHORT, "train.epochs=1")).fit()
    return out


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS])
def test_full_disk_or_read_only_folder_at_checkpoint_save(one_epoch_run, synthetic_h5_64, tmp_path, capsys, code):
    run = tmp_path / "run"
    shutil.copytree(one_epoch_run, run)
    before = digest(run / "last.pt")
    with write_fault(code, "last.pt"), pytest.raises(WriteError) as e:
        Trainer(tiny_cfg(synthetic_h5_64, run, *SHORT, "train.epochs=2", "train.resume=auto")).fit()
    assert (e.value.file, e.value.errno) == (str(run / "last.pt"), code)
    # the command: one error line, no traceback
    with write_fault(code, "last.pt"):
        rc = train.main(tiny_run_args(synthetic_h5_64, run, *SHORT, "train.epochs=2", "train.resume=auto"))
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and err.count("error: ") == 1
    assert digest(run / "last.pt") == before and saved_state(run / "last.pt").position.epoch == 1
    assert temporaries(run) == []


def test_corrupt_sample_in_a_dataloader_worker_is_named(synthetic_h5_64, tmp_path):
    bad = tmp_path / "corrupt.h5"
    shutil.copyfile(synthetic_h5_64, bad)
    with h5py.File(bad, "r+") as f:
        start, image_id = int(f["images/jpeg_offsets"][0]), int(f["images/id"][0])
        f["images/jpeg"][start : start + 64] = 0  # the JPEG header of the first image
        samples = [i for i, img in enumerate(f["samples/image"][:]) if img == 0]
    trainer = Trainer(tiny_cfg(bad, tmp_path / "run", "data.num_workers=1", "train.epochs=1"))
    trainer.batches.sampler.shuffle = False  # the corrupt image's samples come first
    with pytest.raises(LoaderError) as e:
        trainer.fit()
    assert e.value.file == str(bad) and e.value.key is None  # a sample's own error, not the loader's
    message = str(e.value)  # only its text crosses from the worker: it names the sample and the image
    assert "Traceback" not in message and "DataLoader worker" not in message
    assert f"sample {samples[0]} (image id {image_id})" in message


class HangingDataset(Dataset):
    """A dataset whose every sample takes ``seconds``: a worker stuck without dying (a deadlock, a read hanging on a
    network file system). It keeps the real dataset's path and length."""

    def __init__(self, real, seconds: float):
        self.path, self.size, self.seconds = real.path, len(real), seconds

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int):
        time.sleep(self.seconds)
        raise RuntimeError(f"sample {index} took {self.seconds} s")


def test_a_worker_stuck_without_dying_stops_training_with_the_batch_named(synthetic_h5_64, tmp_path):
    trainer = Trainer(tiny_cfg(synthetic_h5_64, tmp_path, "data.num_workers=1", "data.loader_timeout=2"))
    trainer.batches.dataset = HangingDataset(trainer.train_set, seconds=120)
    trainer.batches.sampler.shuffle = False
    with pytest.raises(LoaderError) as e:
        trainer.fit()
    assert (e.value.file, e.value.key) == (str(synthetic_h5_64), "data.loader_timeout")
    assert e.value.where == "epoch 0, step 0 (global step 0), next batch: samples [0, 1]"
    assert "Traceback" not in str(e.value)


def test_a_non_user_error_in_a_worker_keeps_its_type_and_message_only():
    text = ("Caught ValueError in DataLoader worker process 0.\nOriginal Traceback (most recent call last):\n"
            '  File "x.py", line 1, in f\n    g()\nValueError: bad batch shape\n')  # fmt: skip
    message = worker_error_message(text)
    assert message.startswith("ValueError: bad batch shape") and "num_workers=0" in message
    assert "Traceback" not in message


class CtrlC(Hook):
    """Ctrl-C (a KeyboardInterrupt) after optimiser step ``at`` (a global step)."""

    def __init__(self, at: int) -> None:
        self.at = at

    def after_step(self, progress, result) -> None:
        if progress.global_step == self.at:
            raise KeyboardInterrupt


def interrupted_training(argv: list[str], at: int) -> int:
    """train.py's run of ``argv`` with Ctrl-C after global step ``at``, through the command's guard."""
    return cli_main(lambda args: run("single", "train.py", args, extra_hooks=lambda trainer: [CtrlC(at)]))(argv)


@pytest.mark.parametrize("at, checkpoint", [(3, 2), (1, None)], ids=["after_a_checkpoint", "before_any"])
def test_ctrl_c_says_how_to_continue_and_the_steps_redone(synthetic_h5_64, tmp_path, capsys, at, checkpoint):
    """Ctrl-C during training: one line saying where it stopped, the command that continues it (train.resume=auto
    added to the command as given) and how many steps since the last checkpoint it will redo; that command then
    finishes the run."""
    run_dir = tmp_path / "run"
    argv = tiny_run_args(synthetic_h5_64, run_dir, *SHORT, "train.epochs=2")  # last.pt at each epoch end: step 2
    assert interrupted_training(argv, at) == 130
    err = capsys.readouterr().err.strip()
    (line,) = err.splitlines()
    again = shlex.join(["python", "train.py", *argv, "train.resume=auto"])
    stopped = f"interrupted: stopped at epoch {at // 2}, step {at % 2} (global step {at})"
    if checkpoint is None:
        assert line == f"{stopped}, before the run's first checkpoint; {again} starts it again from the beginning " \
                       "(1 step redone)"  # fmt: skip
        assert not (run_dir / "last.pt").exists()
    else:
        assert line == f"{stopped}; continue the run with: {again} (it resumes from {run_dir / 'last.pt'} at global " \
                       f"step {checkpoint}: {at - checkpoint} step since that checkpoint will be redone)"  # fmt: skip
        assert saved_state(run_dir / "last.pt").position.global_step == checkpoint
    assert train.main(shlex.split(again)[2:]) == 0
    assert saved_state(run_dir / "last.pt").position.global_step == 4


class SendSignal(Hook):
    """Sends ``signum`` to this process after optimiser step ``at`` (a global step), as a cluster stopping the job."""

    def __init__(self, at: int, signum: int) -> None:
        self.at, self.signum = at, signum

    def after_step(self, progress, result) -> None:
        if progress.global_step == self.at:
            os.kill(os.getpid(), self.signum)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_saves_the_step_reached_and_the_resume_ends_as_the_unstopped_run(
    synthetic_h5_64, tmp_path, capfd, signum
):
    """SIGTERM (what SLURM, Kubernetes and torchrun send before a kill) or Ctrl-C mid-epoch: the step under way
    finishes, last.pt holds the step reached (not only the last epoch end), one line says where and gives the command
    that continues, the exit status is 128 + the signal; that command ends bit-identical to a run never stopped."""
    run_dir, reference_dir = tmp_path / "run", tmp_path / "reference"
    argv = tiny_run_args(synthetic_h5_64, run_dir, *SHORT, "train.max_steps_per_epoch=3", "train.epochs=2")
    Trainer(tiny_cfg(synthetic_h5_64, reference_dir, *SHORT, "train.max_steps_per_epoch=3", "train.epochs=2")).fit()
    capfd.readouterr()
    main = cli_main(lambda args: run("single", "train.py", args, extra_hooks=lambda t: [SendSignal(1, signum)]))
    assert main(argv) == 128 + signum
    name = signal.Signals(signum).name
    again = shlex.join(["python", "train.py", *argv, "train.resume=auto"])
    how = "interrupted (SIGINT)" if signum == signal.SIGINT else "terminated (SIGTERM)"
    assert capfd.readouterr().err.strip().splitlines()[-2:] == [
        f"{name} received: stopping after this step, with last.pt saved there"
        + ("; Ctrl-C again stops at once" if signum == signal.SIGINT else ""),
        f"{how}: stopped at epoch 0, step 2 (global step 2), where {run_dir / 'last.pt'} was written; continue the "
        f"run with: {again}",
    ]
    assert saved_state(run_dir / "last.pt").position.global_step == 2  # the step reached: no epoch end yet
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # the handlers are put back
    assert train.main(shlex.split(again)[2:]) == 0
    final, reference = Checkpoint.load(run_dir / "last.pt"), Checkpoint.load(reference_dir / "last.pt")
    assert same_training_state(final, reference) and saved_state(final).position.global_step == 6


def test_a_stop_signal_while_the_run_starts_stops_it_before_the_first_step_leaving_no_folder(
    synthetic_h5_64, tmp_path, capfd
):
    """SIGTERM while the run is being built (reading its data, its checkpoints): it stops before its first step,
    keeps nothing (no run folder: the same command runs again), and says so, exit 143."""
    run_dir = tmp_path / "run"
    argv = tiny_run_args(synthetic_h5_64, run_dir, *SHORT)

    def signal_now(trainer):
        os.kill(os.getpid(), signal.SIGTERM)
        return []

    assert cli_main(lambda args: run("single", "train.py", args, extra_hooks=signal_now))(argv) == 143
    again = shlex.join(["python", "train.py", *argv, "train.resume=auto"])
    line = capfd.readouterr().err.strip().splitlines()[-1]
    assert (
        line
        == f"terminated (SIGTERM): stopped before the first step, nothing trained or kept; start the run with: {again}"
    )
    assert not run_dir.exists()


def test_last_pt_is_written_every_checkpoint_every_minutes(synthetic_h5_64, tmp_path, monkeypatch):
    """train.checkpoint_every_minutes: last.pt at the first step after that many minutes since the last one (rank
    0's clock), what a hard kill can lose; the epoch end's last.pt counts as one."""
    from simplepose.engine import hooks

    clock = [0.0]
    monkeypatch.setattr(hooks.time, "monotonic", lambda: clock[0])

    class Minutes(Hook):
        def before_step(self, progress) -> None:
            clock[0] += 60.0  # each step takes a minute

    cfg = tiny_cfg(synthetic_h5_64, tmp_path, *SHORT, "train.max_steps_per_epoch=4", "train.epochs=2",
                   "train.checkpoint_every_minutes=2.5")  # fmt: skip
    trainer = Trainer(cfg)
    written: list[int] = []
    save = trainer.checkpointer.save
    trainer.checkpointer.save = lambda name, position: (written.append(position.global_step), save(name, position))
    trainer.register_hooks([Minutes()])
    trainer.fit()
    # after step 3, 3 minutes since the start: due; the epoch end (step 4) writes it and resets the clock; 7; 8
    assert written == [3, 4, 7, 8]


# ---- a worker's death reported at any point of the translation (torch's SIGCHLD handler raises between bytecodes)


@pytest.mark.parametrize("original, key", [(RuntimeError(DEAD), "data.num_workers"), (RuntimeError(SAMPLE), None),
                                           (BROKEN, "data.num_workers")],
                         ids=["dead_worker", "sample_error", "broken_connection"])  # fmt: skip
def test_a_worker_death_reported_at_any_point_of_the_translation_ends_in_the_same_line(original, key):
    """The dead worker's RuntimeError raised at each line of the translation in turn (deterministic: a trace function
    raises it, as torch's SIGCHLD handler does between any two bytecodes): every time the run ends in the
    LoaderError it ends in undisturbed, the same message, never the RuntimeError (a raw traceback)."""
    undisturbed, raised = translated_with_death_at(original, 0)
    assert isinstance(undisturbed, LoaderError) and undisturbed.key == key and not raised
    points, wrong = deaths_at_every_point(original)
    assert wrong == [] and points >= 10  # the translation has that many lines: each was a point of injection


def test_a_death_reported_after_the_line_prints_nothing():
    """A worker's death that torch's SIGCHLD handler reports after the run's line is printed (the fault table saw one
    at the interpreter's exit, from an atexit hook): once a death is translated, SIGCHLD no longer raises."""
    from simplepose.engine import batch_errors as module

    def torch_like(signum, frame):  # torch.utils.data._utils.signal_handling's handler, its failing worker listed
        raise RuntimeError(DEAD)

    previous = signal.signal(signal.SIGCHLD, torch_like)
    try:
        with pytest.raises(RuntimeError, match="killed by signal"):  # the handler in place raises, as torch's does
            os.kill(os.getpid(), signal.SIGCHLD)
            time.sleep(0.1)
        with pytest.raises(LoaderError) as e, module.loader_errors("train.h5", DataConfig(num_workers=1), lambda: "x"):
            raise BROKEN
        assert e.value.key == "data.num_workers"
        os.kill(os.getpid(), signal.SIGCHLD)  # the killed worker's signal, delivered late
        time.sleep(0.1)
        assert signal.getsignal(signal.SIGCHLD) == signal.SIG_DFL
    finally:
        signal.signal(signal.SIGCHLD, previous if previous is not None else signal.SIG_DFL)


def test_failed_starts_end_in_one_line_and_leave_no_run_folder(synthetic_h5_64, tmp_path):
    """The fault table's failed starts (through the real command): each a clean error, none leaves its folder."""
    tally = Tally()
    start_faults(synthetic_h5_64, tmp_path, tally)
    assert tally.failures == [] and tally.lost == {}
    assert tally.clean_errors == tally.fault_cases == len(failed_starts(synthetic_h5_64)) and tally.raw_tracebacks == 0


def test_the_fault_table_runs_to_its_end_and_prints_its_table(capsys):
    """``python -m tests.harness.fault_table`` prints its table after its scenarios (it crashed there, on
    ``failed_starts(Path())``): here the quickest scenario, in process; every row, the failures none."""
    from tests.harness import fault_table

    assert fault_table.main(["--scenarios", "translation"]) == 0
    out = capsys.readouterr().out
    rows = {line.split("|")[1].strip(): line.split("|")[2].strip() for line in out.splitlines()[2:] if "|" in line}
    names = ["trials", "SIGTERM stops", "run-life faults", "metrics.jsonl true", "peers lost", "kills",
             "checkpoints loadable", "resumes completed", "bad inputs tried", "clean errors", "raw tracebacks",
             "data lost"]  # fmt: skip
    assert list(rows) == names
    assert int(rows["bad inputs tried"]) == int(rows["clean errors"]) >= 10  # each point of the translation
    assert rows["raw tracebacks"] == rows["data lost"] == "0" and "min, seed 0" in out
