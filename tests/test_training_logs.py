"""What a run's output looks like: progress as a bar on a terminal and as plain lines (no carriage returns) in a log
file (utils/progress_bar.py), and TensorBoard as ``train.tensorboard`` says (auto, on, off)."""

from __future__ import annotations

import fcntl
import io
import logging
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import h5py
import pytest
from tqdm import tqdm

import simplepose.engine.logger as engine_logger
from simplepose.engine.logger import MetricsLogger
from simplepose.engine.trainer import Trainer
from simplepose.utils.errors import UserError
from simplepose.utils.progress_bar import ProgressLines, progress_bar
from tests.helpers import subprocess_env, tiny_cfg, tiny_run_args
from tests.paths import COCO_SAMPLE_ANNOTATIONS, REPO_ROOT

SHORT = ["train.epochs=1", "train.max_steps_per_epoch=3", "train.log_every=1"]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def lines_of(bar_updates, total, every_s=30.0, step_s=1.0, caplog=None) -> list[str]:
    clock = Clock()
    bar = ProgressLines(None, total, "eval", "img", every_s=every_s, clock=clock)
    for n in bar_updates:
        clock.now += step_s
        bar.update(n)
    bar.close()
    return [r.getMessage() for r in caplog.records if r.name == "simplepose.utils.progress_bar"]


def test_a_log_file_gets_a_line_per_tenth_with_the_rate(caplog):
    caplog.set_level(logging.INFO, logger="simplepose.utils.progress_bar")
    lines = lines_of([1] * 500, 500, step_s=0.25, caplog=caplog)
    assert len(lines) == 10
    assert lines[0] == "eval 50/500 img (10 %), 4 img/s" and lines[-1] == "eval 500/500 img (100 %), 4 img/s"


def test_a_slow_loop_gets_a_line_at_least_every_so_many_seconds(caplog):
    caplog.set_level(logging.INFO, logger="simplepose.utils.progress_bar")
    lines = lines_of([1] * 100, 100, every_s=4.0, step_s=1.0, caplog=caplog)
    assert [line.split("/")[0] for line in lines[:4]] == ["eval 4", "eval 8", "eval 10", "eval 14"]


def test_without_a_total_a_line_every_so_many_seconds_and_one_at_the_end(caplog):
    caplog.set_level(logging.INFO, logger="simplepose.utils.progress_bar")
    lines = lines_of([1] * 95, None, every_s=30.0, step_s=1.0, caplog=caplog)
    assert [line.split(" img")[0] for line in lines] == ["eval 30", "eval 60", "eval 90", "eval 95"]


def test_figures_given_to_the_bar_appear_on_its_next_line(caplog):
    caplog.set_level(logging.INFO, logger="simplepose.utils.progress_bar")
    clock = Clock()
    bar = ProgressLines(None, 4, "epoch 3", "step", initial=2, clock=clock)
    clock.now = 2.0
    bar.set_postfix(loss="0.12", refresh=False)
    bar.update(1)
    bar.close()
    bar.close()
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["epoch 3 3/4 step (75 %), 0.5 step/s, loss=0.12"]  # the rate counts from where it started


@pytest.fixture
def pseudo_terminal():
    """A pseudo-terminal's writing end, opened as a text file: without a size, as ``script`` makes one."""
    leader, follower = pty.openpty()
    with os.fdopen(follower, "w") as stream:
        yield stream
    os.close(leader)


def set_size(stream, rows: int, columns: int) -> None:
    fcntl.ioctl(stream.fileno(), termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))


def test_a_terminal_gets_a_tqdm_bar_and_a_log_file_does_not(monkeypatch, pseudo_terminal):
    set_size(pseudo_terminal, 24, 80)
    monkeypatch.setattr(sys, "stderr", pseudo_terminal)
    with progress_bar(range(3), desc="x") as bar:
        assert isinstance(bar, tqdm)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    bar = progress_bar(range(3), desc="x")
    assert isinstance(bar, ProgressLines) and bar.total == 3 and list(bar) == [0, 1, 2]
    assert sys.stderr.getvalue() == ""


def test_a_terminal_without_a_size_gets_lines(monkeypatch, pseudo_terminal, caplog):
    """Under ``script`` stderr is a terminal of 0 columns, where tqdm draws nothing: progress comes as lines."""
    caplog.set_level(logging.INFO, logger="simplepose.utils.progress_bar")
    monkeypatch.setattr(sys, "stderr", pseudo_terminal)
    assert pseudo_terminal.isatty() and os.get_terminal_size(pseudo_terminal.fileno()).columns == 0
    bar = progress_bar(range(10), desc="epoch 0", unit="step")
    assert isinstance(bar, ProgressLines) and list(bar) == list(range(10))
    assert [r.getMessage() for r in caplog.records][-1].startswith("epoch 0 10/10 step (100 %)")


@pytest.mark.parametrize("command", ["train.py", "data.coco_to_hdf5"])
def test_progress_in_a_log_file_has_no_carriage_return(command, synthetic_h5_64, synthetic_sample, tmp_path):
    """The real commands with their output captured (not a terminal, as under CI or nohup): plain progress lines."""
    if command == "train.py":
        argv = ["train.py", *tiny_run_args(synthetic_h5_64, tmp_path / "run", *SHORT)]
        expected = "epoch 0 3/3 step (100 %)"
    else:
        argv = ["-m", "data.coco_to_hdf5", "--images", str(synthetic_sample / "images"), "--annotations",
                str(synthetic_sample / COCO_SAMPLE_ANNOTATIONS), "--out", str(tmp_path / "out.h5"), "--input-size",
                "64"]  # fmt: skip
        expected = "converting to out.h5 27/27 img (100 %)"
    r = subprocess.run([sys.executable, *argv], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
                       env=subprocess_env(OMP_NUM_THREADS="1"))  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    assert "\r" not in r.stdout and "\r" not in r.stderr
    assert expected in r.stdout
    if command == "train.py":  # a sample is a main person: the log says of how many images
        with h5py.File(synthetic_h5_64, "r", locking=False) as f:  # open elsewhere in this process too
            samples, images = len(f["samples/image"]), len(f["images/id"])
        assert f"{samples} samples (one per main person, of {images} images)" in r.stdout


# ---------------------------------------------------------------------------------------------- TensorBoard
class FakeWriter:
    made: list[FakeWriter] = []

    def __init__(self, log_dir: str) -> None:
        self.log_dir, self.scalars, self.closed = log_dir, [], False
        FakeWriter.made.append(self)

    def add_scalar(self, tag, value, step) -> None:
        self.scalars.append((tag, value, step))

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def installed(monkeypatch):
    FakeWriter.made.clear()
    monkeypatch.setattr(engine_logger, "summary_writer", lambda: (FakeWriter, ""))


@pytest.fixture
def not_installed(monkeypatch):
    monkeypatch.setattr(engine_logger, "summary_writer", lambda: (None, "No module named 'tensorboard'"))


@pytest.mark.parametrize("mode", ["auto", "on"])
def test_tensorboard_gets_the_scalars_when_installed(installed, synthetic_h5_64, tmp_path, mode):
    Trainer(tiny_cfg(synthetic_h5_64, tmp_path, *SHORT, f"train.tensorboard={mode}")).fit()
    [writer] = FakeWriter.made
    assert writer.log_dir == str(tmp_path / "tensorboard") and writer.closed
    tags = {tag for tag, _, _ in writer.scalars}
    assert {"train/loss", "train/lr", "epoch/train_loss"} <= tags


def test_tensorboard_off_is_never_used(installed, tmp_path):
    MetricsLogger(tmp_path, tensorboard="off").close()
    assert FakeWriter.made == []


def test_auto_without_tensorboard_says_so_once(not_installed, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="simplepose.engine")
    logger = MetricsLogger(tmp_path, tensorboard="auto")
    logger.log("train", 0, 1, loss=1.0)
    said = [r.getMessage() for r in caplog.records if "TensorBoard" in r.getMessage()]
    assert len(said) == 1 and "pip install tensorboard" in said[0] and "train.tensorboard=off" in said[0]
    assert (tmp_path / "metrics.jsonl").is_file() and not (tmp_path / "tensorboard").exists()
    caplog.clear()
    MetricsLogger(tmp_path / "quiet", tensorboard="off")
    assert not [r for r in caplog.records if "TensorBoard" in r.getMessage()]


def test_on_without_tensorboard_refuses_before_writing_anything(not_installed, synthetic_h5_64, tmp_path):
    with pytest.raises(UserError) as e:
        Trainer(tiny_cfg(synthetic_h5_64, tmp_path / "run", "train.tensorboard=on"))
    assert e.value.key == "train.tensorboard" and "pip install tensorboard" in str(e.value)
    assert not (tmp_path / "run").exists()


# ---------------------------------------------------------------------------------------------- the console
def test_the_console_shows_every_logged_step_and_every_checkpoint_written(synthetic_h5_64, tmp_path, capsys):
    """``train.log_every`` sets the console's step lines as it sets metrics.jsonl's records (and the epoch's last
    step), and each checkpoint written gets a line with its file and position."""
    from simplepose import train

    out = tmp_path / "run"
    argv = tiny_run_args(synthetic_h5_64, out, "train.epochs=2", "train.max_steps_per_epoch=5", "train.log_every=2")
    assert train.main(argv) == 0
    printed = capsys.readouterr().out
    steps = [(int(e), int(s)) for e, s in re.findall(r"^epoch (\d+) step (\d+): loss \S+, lr \S+, ", printed, re.M)]
    records = [(r["epoch"], r["step"]) for r in engine_logger.read_metrics(out) if r["kind"] == "train"]
    assert steps == records == [(0, 2), (0, 4), (0, 5), (1, 2), (1, 4), (1, 5)]
    written = re.findall(r"^wrote (\S+) \(epoch (\d+), step (\d+) \(global step (\d+)\)\)", printed, re.M)
    assert written and all(Path(f).parent == out and Path(f).is_file() for f, *_ in written), printed
    assert (str(out / "last.pt"), "1", "5", "10") in written or (str(out / "last.pt"), "2", "0", "10") in written
