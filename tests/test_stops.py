"""Every stop is saved and the records stay true (engine/run_life.py, engine.hooks.CheckpointHook): last.pt of an
epoch is written before its validation; a stop signal during validation ends it at the next forward pass, keeps that
last.pt (no best.pt from the validation cut short), says where and how to continue, exit 128 + the signal, on the
last epoch too; a second Ctrl-C never cuts a checkpoint's write short. After any stop and resume, metrics.jsonl
holds every record of the unbroken run, equal (the epoch's train_loss over all its steps), none twice."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import time

import pytest

from simplepose import train
from simplepose.checkpoint.format import Checkpoint
from simplepose.engine.hook_base import Hook
from simplepose.engine.logger import read_metrics
from simplepose.engine.run import run
from simplepose.engine.trainer import Trainer
from simplepose.models.weights import unwrap
from simplepose.utils import stop_signals
from simplepose.utils.errors import cli_main
from tests.harness.faults import same_training_state
from tests.helpers import saved_state, subprocess_env, tiny_cfg, tiny_run_args, torchrun_command
from tests.paths import REPO_ROOT

# 2 epochs of 3 steps, validated after each on the training file itself (its loss)
RUN = [
    "train.max_steps_per_epoch=3",
    "train.optimizer=sgd",
    "train.lr=0.01",
    "train.epochs=2",
    "train.log_every=1",
    "train.val_every=1",
]
TIMED = ("time", "data_time", "compute_time", "samples_per_s")


def records(run_dir) -> list[dict]:
    """metrics.jsonl without the figures of time."""
    return [{k: v for k, v in r.items() if k not in TIMED} for r in read_metrics(run_dir)]


@pytest.fixture(scope="module")
def reference(synthetic_h5_64, tmp_path_factory):
    """The unbroken run: its folder."""
    out = tmp_path_factory.mktemp("reference") / "run"
    Trainer(tiny_cfg(synthetic_h5_64, out, *RUN, f"data.val={synthetic_h5_64}")).fit()
    return out


class SignalsInValidation(Hook):
    """Sends ``signals`` to this process, one per forward pass, from the first forward pass of the validation of
    epoch ``epoch`` on (the network in eval mode)."""

    def __init__(self, network, epoch: int, *signals: int) -> None:
        self.network, self.epoch, self.signals = unwrap(network), epoch, list(signals)
        self.handle = None

    def before_train(self, position) -> None:
        def pre_hook(module, args):
            if not module.training and position.epoch == self.epoch + 1 and self.signals:
                os.kill(os.getpid(), self.signals.pop(0))

        self.handle = self.network.register_forward_pre_hook(pre_hook)

    def after_train(self, position) -> None:
        self.handle.remove()


class SigtermAt(Hook):
    """SIGTERM to this process during global step ``at`` (acted on at its end)."""

    def __init__(self, at: int) -> None:
        self.at = at

    def before_step(self, position) -> None:
        if position.global_step == self.at - 1:
            os.kill(os.getpid(), signal.SIGTERM)


def stopped_run(argv: list[str], make_hook) -> int:
    return cli_main(lambda args: run("single", "train.py", args, extra_hooks=lambda t: [make_hook(t)]))(argv)


@pytest.mark.parametrize("epoch", [0, 1], ids=["first_epoch", "last_epoch"])
def test_sigterm_during_validation_keeps_the_epochs_last_pt_and_the_resume_validates_it(
    synthetic_h5_64, tmp_path, capfd, reference, epoch
):
    """SIGTERM at validation's first forward pass: validation ends there (no record, no best.pt of it), last.pt of
    the epoch end (written before validation, validation due) is kept, one line, exit 143, on the last epoch too;
    the resume validates that epoch first and ends with the unbroken run's records and state."""
    run_dir = tmp_path / "run"
    argv = tiny_run_args(synthetic_h5_64, run_dir, *RUN, f"data.val={synthetic_h5_64}")
    capfd.readouterr()
    assert stopped_run(argv, lambda t: SignalsInValidation(t.model, epoch, signal.SIGTERM)) == 143
    again = shlex.join(["python", "train.py", *argv, "train.resume=auto"])
    step = 3 * (epoch + 1)
    assert capfd.readouterr().err.strip().splitlines()[-1] == (
        f"terminated (SIGTERM): stopped in the validation of epoch {epoch} (global step {step}), where "
        f"{run_dir / 'last.pt'} was written; continue the run with: {again}"
    )
    state = saved_state(run_dir / "last.pt")
    assert (state.position.epoch, state.position.step, state.position.global_step) == (epoch + 1, 0, step)
    assert state.position.validation_due
    got = records(run_dir)
    assert got[-1]["kind"] == "epoch" and got[-1]["epoch"] == epoch
    assert (run_dir / "best.pt").exists() == (epoch == 1)  # epoch 0's finished validation made one
    assert not (run_dir / ".run.lock").exists()

    assert train.main(shlex.split(again)[2:]) == 0
    assert records(run_dir) == records(reference)
    final, unbroken = Checkpoint.load(run_dir / "last.pt"), Checkpoint.load(reference / "last.pt")
    assert same_training_state(final, unbroken) and not saved_state(final).position.validation_due
    assert saved_state(run_dir / "best.pt").position == saved_state(reference / "best.pt").position


def test_sigterm_then_ctrl_c_in_validation_stops_at_once_and_keeps_last_pt(synthetic_h5_64, tmp_path, capfd, reference):
    """SIGTERM, then Ctrl-C at the next forward pass (before the first is acted on: both in one pass): the second
    stops at once, saying where; the epoch end's last.pt stays whole and the resume ends as the unbroken run."""
    run_dir = tmp_path / "run"
    argv = tiny_run_args(synthetic_h5_64, run_dir, *RUN, f"data.val={synthetic_h5_64}")

    class Both(SignalsInValidation):
        def before_train(self, position) -> None:
            def pre_hook(module, args):
                if not module.training and position.epoch == 1 and self.signals:
                    os.kill(os.getpid(), signal.SIGTERM)
                    os.kill(os.getpid(), signal.SIGINT)
                    self.signals = []

            self.handle = self.network.register_forward_pre_hook(pre_hook, prepend=True)

    assert stopped_run(argv, lambda t: Both(t.model, 0, 1)) == 130
    assert "interrupted: stopped at epoch 1, step 0 (global step 3)" in capfd.readouterr().err
    assert saved_state(run_dir / "last.pt").position.validation_due
    again = [*argv, "train.resume=auto"]
    assert train.main(again) == 0
    assert records(run_dir) == records(reference)


def test_a_second_ctrl_c_waits_for_the_checkpoint_being_written(synthetic_h5_64, tmp_path, monkeypatch):
    """SIGTERM at a step, then Ctrl-C while its last.pt is being written: the file is written whole (the step
    reached), then the run stops at once (exit 130)."""
    run_dir = tmp_path / "run"
    argv = tiny_run_args(synthetic_h5_64, run_dir, *RUN)
    written = []
    save = Checkpoint.save

    def save_with_ctrl_c(self, path):
        if stop_signals.requested():
            os.kill(os.getpid(), signal.SIGINT)
        save(self, path)
        written.append(path)

    monkeypatch.setattr(Checkpoint, "save", save_with_ctrl_c)

    assert stopped_run(argv, lambda t: SigtermAt(2)) == 130
    assert written == [run_dir / "last.pt"]
    assert saved_state(run_dir / "last.pt").position.global_step == 2


def test_uninterrupted_holds_a_second_ctrl_c_to_its_end():
    with stop_signals.stop_requests(say=False):
        os.kill(os.getpid(), signal.SIGINT)
        assert stop_signals.requested() == signal.SIGINT
        time.sleep(stop_signals.ONE_CTRL_C_S)  # a second Ctrl-C, not the first one delivered twice
        done = []
        with pytest.raises(KeyboardInterrupt), stop_signals.uninterrupted():
            os.kill(os.getpid(), signal.SIGINT)
            done.append(1)
        assert done == [1]


class CtrlCTwiceAt(Hook):
    """Ctrl-C delivered twice to this process during global step ``at``, ``apart`` seconds apart: the terminal's
    and torchrun's copy of one Ctrl-C (milliseconds apart), or two presses."""

    def __init__(self, at: int, apart: float) -> None:
        self.at, self.apart = at, apart

    def before_step(self, position) -> None:
        if position.global_step == self.at - 1:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(self.apart)
            os.kill(os.getpid(), signal.SIGINT)


def test_one_ctrl_c_delivered_twice_at_once_is_one_stop_and_two_presses_are_two(synthetic_h5_64, tmp_path, capfd):
    """Two SIGINTs milliseconds apart (one Ctrl-C under torchrun reaches a worker from the terminal and again from
    the agent): one stop, at the step's end, last.pt written there, exit 130. Two a second apart (Ctrl-C pressed
    again): the second stops at once, without last.pt of that step."""
    once, twice = tmp_path / "once", tmp_path / "twice"
    capfd.readouterr()
    assert stopped_run(tiny_run_args(synthetic_h5_64, once, *RUN), lambda t: CtrlCTwiceAt(2, 0.0)) == 130
    err = capfd.readouterr().err
    assert err.count("SIGINT received") == 1
    assert (
        err.strip()
        .splitlines()[-1]
        .startswith(
            f"interrupted (SIGINT): stopped at epoch 0, step 2 (global step 2), where {once / 'last.pt'} was written"
        )
    )
    assert saved_state(once / "last.pt").position.global_step == 2

    later = lambda t: CtrlCTwiceAt(2, stop_signals.ONE_CTRL_C_S + 0.5)  # noqa: E731
    assert stopped_run(tiny_run_args(synthetic_h5_64, twice, *RUN), later) == 130
    assert "interrupted: stopped at epoch 0, step 1 (global step 1), before the run's first checkpoint" in (
        capfd.readouterr().err
    )
    assert not (twice / "last.pt").exists()


@pytest.mark.parametrize("at", [2, 3, 5], ids=["mid_epoch", "epoch_last_step", "second_epoch"])
def test_after_a_stop_at_any_step_and_the_resume_every_record_equals_the_unbroken_runs(
    synthetic_h5_64, tmp_path, reference, at
):
    """SIGTERM after global step ``at`` (mid-epoch, on an epoch's last step, in the last epoch), then resume: the
    epoch's train_loss averages every step of the epoch (its sums carried in last.pt), no record missing or twice,
    no NaN."""
    run_dir = tmp_path / "run"
    argv = tiny_run_args(synthetic_h5_64, run_dir, *RUN, f"data.val={synthetic_h5_64}")

    assert stopped_run(argv, lambda t: SigtermAt(at)) == 143
    assert saved_state(run_dir / "last.pt").position.global_step == at
    assert train.main([*argv, "train.resume=auto"]) == 0
    assert records(run_dir) == records(reference)
    assert [r["epoch"] for r in records(run_dir) if r["kind"] == "epoch"] == [0, 1]


@pytest.mark.parametrize("measure", ["loss", "AP"])
def test_sigterm_to_one_of_two_processes_in_validation_stops_both_at_one_agreed_point(
    synthetic_h5_64, synthetic_sample_images, synthetic_sample_annotations, tmp_path, measure
):
    """torchrun, 2 processes (gloo): rank 1 waits at its first validation forward pass of epoch 0, then gets SIGTERM
    alone, while rank 0 has finished its share and waits in validation's collective (the loss's mean over the
    ranks; the evaluation's gather of its images). Both leave validation at one point they agree on (no collective
    left waiting, no hang): each exits 143, one stop line (rank 0's), last.pt of the epoch end kept and loadable
    (validation due), no best.pt; the 2-process resume ends with the unbroken run's records."""
    validation = {
        "loss": [f"data.val={synthetic_h5_64}"],
        "AP": [f"data.val_images={synthetic_sample_images}", f"data.val_annotations={synthetic_sample_annotations}",
               "eval.max_images=8"],
    }[measure]  # fmt: skip
    common = [*RUN, *validation, "data.num_workers=0"]
    faulty = ["-m", "tests.harness.faulty_trainer", "--launcher", "distributed", "--validation-signals", "SIGTERM",
              "--validation-epoch", "0", "--validation-rank", "1", "--validation-wait", "3", "--"]  # fmt: skip

    def torchrun(program: list[str], out_dir, *extra: str) -> subprocess.CompletedProcess:
        command = torchrun_command([*program, *tiny_run_args(synthetic_h5_64, out_dir, *common, *extra)], 2)
        env = subprocess_env(OMP_NUM_THREADS="1")
        return subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)

    run_dir, unbroken = tmp_path / "run", tmp_path / "unbroken"
    r = torchrun(faulty, run_dir)
    assert "fault: SIGTERM in the validation of epoch" in r.stdout, r.stdout[-2000:] + r.stderr[-3000:]
    assert r.returncode != 0
    exits = re.findall(r"^\s*exitcode\s+:\s*(-?\d+)", r.stderr, re.MULTILINE)
    assert exits == ["143", "143"], r.stderr[-3000:]  # torchrun's failure table: each rank's exit status
    again = shlex.join(["torchrun", "--nproc_per_node=2", "train_distributed.py",
                        *tiny_run_args(synthetic_h5_64, run_dir, *common), "train.resume=auto"])  # fmt: skip
    line = (f"terminated (SIGTERM): stopped in the validation of epoch 0 (global step 3), where {run_dir / 'last.pt'} "
            f"was written; continue the run with: {again}")  # fmt: skip
    assert r.stderr.count("terminated (SIGTERM)") == 1 and line in r.stderr.splitlines(), r.stderr[-3000:]
    assert f'File "{REPO_ROOT}' not in r.stderr, r.stderr[-3000:]  # torchrun prints its own ChildFailedError
    state = saved_state(run_dir / "last.pt")
    assert (state.position.global_step, state.position.validation_due) == (3, True)
    assert not (run_dir / "best.pt").exists() and not (run_dir / ".run.lock").exists()

    for done in (torchrun(["train_distributed.py"], run_dir, "train.resume=auto"),
                 torchrun(["train_distributed.py"], unbroken)):  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
    assert records(run_dir) == records(unbroken)
    assert saved_state(run_dir / "best.pt").position == saved_state(unbroken / "best.pt").position
