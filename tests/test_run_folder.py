"""A new run never overwrites an earlier one (engine/run_folder.py): a second training into a folder holding a run is
refused before anything is written, through every launcher, naming both ways out; the run's own continuation (resume,
an elastic restart of the launch that claimed the folder) is not."""

from __future__ import annotations

import hashlib
import json
import shlex
import shutil

import pytest

from simplepose import train, train_distributed, train_parallel
from simplepose.engine import run_folder
from simplepose.engine.hook_base import Hook
from simplepose.engine.run import restart_overrides, run
from simplepose.engine.run_folder import (
    LAUNCH_FILE,
    RunFolderInUse,
    claim_run_folder,
    free_folder,
    launch_id,
    launch_owns,
    run_files,
    undone_if_start_fails,
)
from simplepose.engine.trainer import Trainer
from tests.helpers import saved_state, tiny_cfg, tiny_run_args

SHORT = ["train.epochs=1", "train.max_steps_per_epoch=2", "train.optimizer=sgd", "train.lr=0.01"]


def snapshot(folder) -> dict[str, str]:
    """{relative path: SHA-256} of every file under ``folder`` (hidden ones too)."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}  # fmt: skip


@pytest.fixture(scope="module")
def first_run(synthetic_h5_64, tmp_path_factory):
    """A finished one-epoch run of train.py (the command a user would repeat)."""
    run = tmp_path_factory.mktemp("first") / "run"
    assert train.main(tiny_run_args(synthetic_h5_64, run, *SHORT)) == 0
    return run


@pytest.fixture
def earlier_run(first_run, tmp_path):
    """A copy of the first run in this test's own folder, and its files' hashes."""
    run = tmp_path / "run"
    shutil.copytree(first_run, run)
    return run, snapshot(run)


def error_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("error: ")]


@pytest.mark.parametrize("main", [train.main, train_parallel.main, train_distributed.main],
                         ids=["train.py", "train_parallel.py", "train_distributed.py"])  # fmt: skip
def test_a_second_run_into_the_same_folder_changes_nothing(earlier_run, synthetic_h5_64, capsys, main):
    """The same command again: one error line naming the folder, what it holds and both ways out; every file of the
    first run byte-identical, and none added."""
    run, before = earlier_run
    assert set(before) >= {"last.pt", "metrics.jsonl", "config.yaml", "curves.png"}
    capsys.readouterr()
    assert main(tiny_run_args(synthetic_h5_64, run, *SHORT)) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    [line] = error_lines(err)
    assert f"train.out_dir={run} already holds a run" in line
    assert "last.pt after 1 of 1 epoch at global step 2" in line and "metrics.jsonl of 3 records" in line
    assert "train.resume=auto" in line and "add train.epochs=N" in line
    assert f"train.out_dir={run.parent / 'run-2'}" in line
    assert snapshot(run) == before
    assert not (run.parent / "run-2").exists()


def test_resume_from_another_folder_into_a_run_folder_is_refused(earlier_run, synthetic_h5_64, first_run, tmp_path):
    """train.resume=PATH starts a new run from PATH: it needs a free folder too."""
    run, before = earlier_run
    elsewhere = tmp_path / "other.pt"
    shutil.copyfile(first_run / "last.pt", elsewhere)
    with pytest.raises(RunFolderInUse) as e:
        Trainer(tiny_cfg(synthetic_h5_64, run, *SHORT, f"train.resume={elsewhere}"))
    assert (e.value.file, e.value.key) == (str(run), "train.out_dir")
    assert snapshot(run) == before
    # into a free folder it starts where the checkpoint stood
    resumed = Trainer(tiny_cfg(synthetic_h5_64, tmp_path / "new", *SHORT, "train.epochs=2",
                               f"train.resume={elsewhere}"))  # fmt: skip
    assert resumed.position.epoch == 1


def test_continuing_the_run_is_allowed(earlier_run, synthetic_h5_64):
    """The first way out: train.resume=auto (or a checkpoint of the folder itself) continues the run there."""
    run, _ = earlier_run
    Trainer(tiny_cfg(synthetic_h5_64, run, *SHORT, "train.epochs=2", "train.resume=auto")).fit()
    assert saved_state(run / "last.pt").position.epoch == 2
    trainer = Trainer(tiny_cfg(synthetic_h5_64, run, *SHORT, "train.epochs=3", f"train.resume={run / 'last.pt'}"))
    assert trainer.position.epoch == 2


def test_the_files_of_a_run_are_known(first_run):
    """Every file a run leaves is one that marks a run folder (a writer added without it would be overwritten)."""
    names = {p.name for p in first_run.iterdir()}
    assert names and {p.name for p in run_files(first_run)} == names


def test_unrelated_files_and_dead_temporaries_do_not_make_a_run(synthetic_h5_64, tmp_path):
    """A folder of other files (notes, data) is free; a checkpoint write's leftover temporary is removed, never a
    result."""
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / ".last.pt.x1.tmp").write_bytes(b"half a checkpoint")
    Trainer(tiny_cfg(synthetic_h5_64, tmp_path, *SHORT)).fit()
    assert (tmp_path / "notes.txt").read_text() == "mine" and not (tmp_path / ".last.pt.x1.tmp").exists()
    assert (tmp_path / "last.pt").is_file()


def test_the_suggested_folder_is_free(tmp_path):
    assert free_folder(tmp_path / "quickstart") == tmp_path / "quickstart-2"
    (tmp_path / "quickstart-2").mkdir()
    (tmp_path / "quickstart-3").mkdir()
    assert free_folder(tmp_path / "quickstart") == tmp_path / "quickstart-4"
    assert free_folder(tmp_path / "quickstart-2") == tmp_path / "quickstart-4"
    assert free_folder(tmp_path / "run-v2") == tmp_path / "run-v2-2"


def test_a_run_without_a_checkpoint_yet_is_still_a_run(synthetic_h5_64, tmp_path):
    (tmp_path / "config.yaml").write_text("train: {}\n")
    with pytest.raises(RunFolderInUse) as e:
        Trainer(tiny_cfg(synthetic_h5_64, tmp_path, *SHORT))
    assert "config.yaml, no checkpoint yet" in str(e.value) and "finished" not in str(e.value)


class FailsAt(Hook):
    """Raises ``error`` at the hook ``stage`` (a Hook method's name) of the step ``step`` (the first: 0)."""

    def __init__(self, stage: str, error: BaseException, step: int = 0) -> None:
        self.error, self.step = error, step
        setattr(self, stage, self.fail)

    def fail(self, position, *_) -> None:
        if position.global_step >= self.step:
            raise self.error


@pytest.mark.parametrize(
    "stage, error",
    [("before_train", RuntimeError("injected")), ("before_step", KeyboardInterrupt()), ("before_epoch", MemoryError())],
)
def test_a_start_that_fails_leaves_no_run_folder_and_the_same_command_then_runs(
    synthetic_h5_64, tmp_path, stage, error
):
    """A run that stops before its first checkpoint or metrics record removes what it wrote, and the folders it
    made; the next run into that folder is not refused."""
    out = tmp_path / "runs" / "new"
    args = tiny_run_args(synthetic_h5_64, out, *SHORT)
    with pytest.raises(type(error)):
        run("single", "", args, extra_hooks=lambda trainer: [FailsAt(stage, error)])
    assert not (tmp_path / "runs").exists()
    assert train.main(args) == 0 and (out / "last.pt").is_file()


def test_a_failed_start_in_an_existing_folder_keeps_its_other_files(synthetic_h5_64, tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(RuntimeError):
        run("single", "", tiny_run_args(synthetic_h5_64, tmp_path, *SHORT),
            extra_hooks=lambda trainer: [FailsAt("before_train", RuntimeError("injected"))])  # fmt: skip
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_a_clean_up_that_fails_does_not_hide_why_the_start_failed(tmp_path, monkeypatch):
    def refuse(*_):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(run_folder, "_remove_new_run_files", refuse)
    out = tmp_path / "new"
    with pytest.raises(RuntimeError, match="injected"), undone_if_start_fails(out, rank=0):
        out.mkdir()
        (out / "config.yaml").write_text("train: {}\n")
        raise RuntimeError("injected")
    assert (out / "config.yaml").is_file()


def test_a_run_that_failed_after_its_first_record_keeps_it(synthetic_h5_64, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(RuntimeError):
        run("single", "", tiny_run_args(synthetic_h5_64, out, *SHORT, "train.log_every=1"),
            extra_hooks=lambda trainer: [FailsAt("before_step", RuntimeError("injected"), step=1)])  # fmt: skip
    assert {"config.yaml", "metrics.jsonl"} <= {p.name for p in out.iterdir()}
    with pytest.raises(RunFolderInUse):
        Trainer(tiny_cfg(synthetic_h5_64, out, *SHORT))


# ---------------------------------------------------------------------------------------------- torchrun restarts
@pytest.fixture
def torchrun_env(monkeypatch):
    """This process as a (single) torchrun worker; ``restart(n)`` makes it attempt n."""
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "none")

    def restart(n: int) -> None:
        monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", str(n))

    restart(0)
    return restart


def test_a_restart_of_the_launch_that_claimed_the_folder_continues_it(synthetic_h5_64, tmp_path, torchrun_env):
    """The first attempt records its torchrun agent; a restart of that launch is the same run (train.resume=auto,
    also before any last.pt), even when given train.resume=PATH from elsewhere."""
    cfg = tiny_cfg(synthetic_h5_64, tmp_path, *SHORT)
    claim_run_folder(cfg.train, rank=0)
    assert json.loads((tmp_path / LAUNCH_FILE).read_text())["agents"] == [launch_id()]
    (tmp_path / "config.yaml").write_text("written by the first attempt, which then died\n")
    torchrun_env(1)
    assert launch_owns(tmp_path)
    assert restart_overrides(cfg) == {"train.resume": "auto"}
    claim_run_folder(cfg.train, rank=0)  # resume="" too: the restart is this launch's
    claim_run_folder(tiny_cfg(synthetic_h5_64, tmp_path, f"train.resume={tmp_path.parent / 'x.pt'}").train, 0)


def test_a_restart_of_a_refused_launch_is_refused_again(earlier_run, synthetic_h5_64, torchrun_env):
    """A second launch of the same command is refused; torchrun restarts it; that restart must not take the folder
    as its own (the launch file names the first launch's agent)."""
    run, before = earlier_run
    (run / LAUNCH_FILE).write_text(json.dumps({"agents": ["otherhost:4242:1"]}))
    before = snapshot(run)
    cfg = tiny_cfg(synthetic_h5_64, run, *SHORT)
    for attempt in (0, 1):
        torchrun_env(attempt)
        assert restart_overrides(cfg) == {}
        with pytest.raises(RunFolderInUse):
            claim_run_folder(cfg.train, rank=0)
    assert snapshot(run) == before


def test_resuming_a_finished_run_trains_nothing_changes_no_file_and_says_how_to_train_further(
    earlier_run, synthetic_h5_64, capsys
):
    """train.resume=auto on a run that trained its train.epochs: one line saying so (nothing trained, no file
    changed: bytes and times) and the command that trains further, which then does."""
    run, before = earlier_run
    times = {p: p.stat().st_mtime_ns for p in run.rglob("*")}
    args = tiny_run_args(synthetic_h5_64, run, *SHORT, "train.resume=auto")
    assert train.main(args) == 0
    printed = capsys.readouterr().out
    assert snapshot(run) == before and {p: p.stat().st_mtime_ns for p in run.rglob("*")} == times
    assert "done in" not in printed
    (line,) = [x for x in printed.splitlines() if "holds a finished run" in x]
    assert line.startswith(
        f"{run / 'last.pt'} holds a finished run: 1 epoch done of train.epochs=1 (global step 2); nothing was "
        "trained and no file was changed. To train further, raise train.epochs"
    )
    hint = line.split("e.g.: ", 1)[1]
    kept = [a for a in args if not a.startswith("train.epochs=")]
    assert hint == shlex.join(["python", "train.py", *kept, "train.epochs=2"])
    assert train.main(shlex.split(hint)[2:]) == 0  # the command given trains the next epoch
    assert saved_state(run / "last.pt").position.epoch == 2 and "resumed from" in capsys.readouterr().out
