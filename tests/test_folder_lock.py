"""One run per folder (utils/folder_lock.py, engine/run_life.py): a live run's folder is refused to a second run and
to an evaluation writing there, with one line naming the live run; a dead run's lock (a gone pid on this host, a lock
of another host not refreshed in time) is taken over with a line saying so; the lock goes at every exit; the
one-process launchers refuse to run under torchrun with several processes."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from simplepose import train, train_parallel
from simplepose.evaluate import coco_eval
from simplepose.utils.folder_lock import LOCK_NAME, FolderHeld, FolderLock, LockRecord, check_not_held
from tests.helpers import REPO_ROOT, subprocess_env, tiny_run_args

SHORT = ["train.epochs=1", "train.max_steps_per_epoch=2", "train.optimizer=sgd", "train.lr=0.01"]


def error_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("error: ")]


def fake_lock(folder: Path, **fields) -> Path:
    """A lock record of another holder in ``folder`` (``fields`` override this host's live-looking values)."""
    folder.mkdir(parents=True, exist_ok=True)
    record = {"host": socket.gethostname(), "pid": os.getpid(), "started": time.time(), "refreshed": time.time()}
    record.update(fields)
    (folder / LOCK_NAME).write_text(json.dumps(record))
    return folder / LOCK_NAME


def dead_pid() -> int:
    """The pid of a process that has ended (and was reaped)."""
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def wait_for(path: Path, proc: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.1)


def test_a_second_run_on_a_live_runs_folder_is_refused_and_the_lock_goes_with_the_first(synthetic_h5_64, tmp_path):
    """Two real training processes on one folder: the second (also with train.resume=auto) is refused with one line
    naming the live run's host, pid and start, never advising train.resume=auto; SIGTERM stops the first, which
    removes its lock; then the same resume runs."""
    run = tmp_path / "run"
    long = ["train.epochs=100", "train.optimizer=sgd", "train.lr=0.01", "data.num_workers=0"]
    env = subprocess_env()
    first = subprocess.Popen([sys.executable, "train.py", *tiny_run_args(synthetic_h5_64, run, *long)], cwd=REPO_ROOT,
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        wait_for(run / "metrics.jsonl", first)
        record = LockRecord.read(run / LOCK_NAME)
        assert record is not None and record.pid == first.pid and record.host == socket.gethostname()
        for extra in ([], ["train.resume=auto"]):
            second = subprocess.run(
                [sys.executable, "train.py", *tiny_run_args(synthetic_h5_64, run, *long, *extra)],
                cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300,
            )  # fmt: skip
            assert second.returncode == 2, second.stderr
            assert "Traceback" not in second.stderr
            [line] = error_lines(second.stderr)
            assert f"train.out_dir={run} is in use by a live run" in line
            assert f"host {socket.gethostname()}, pid {first.pid}, since {record.since()}" in line
            assert "resume" not in line
        assert first.poll() is None  # untouched by the refusals
    finally:
        first.send_signal(signal.SIGTERM)
        _, err = first.communicate(timeout=300)
    assert first.returncode == 143, err
    assert "terminated (SIGTERM)" in err
    assert not (run / LOCK_NAME).exists()
    resume = tiny_run_args(synthetic_h5_64, run, *SHORT, "train.resume=auto")
    again = subprocess.run([sys.executable, "train.py", *resume], cwd=REPO_ROOT, env=env, capture_output=True,
                           text=True, timeout=300)  # fmt: skip
    assert again.returncode == 0 and "in use by a live run" not in again.stderr, again.stderr
    assert not (run / LOCK_NAME).exists()


def test_the_lock_of_a_dead_process_on_this_host_is_taken_over(synthetic_h5_64, tmp_path, caplog):
    run = tmp_path / "run"
    pid = dead_pid()
    fake_lock(run, pid=pid, refreshed=time.time())
    assert train.main(tiny_run_args(synthetic_h5_64, run, *SHORT)) == 0
    took = f"took over the lock of a run that is no longer running (host {socket.gethostname()}, pid {pid}"
    assert took in caplog.text
    assert (run / "last.pt").is_file() and not (run / LOCK_NAME).exists()


def test_another_hosts_lock_is_taken_over_only_when_not_refreshed_in_time(synthetic_h5_64, tmp_path, capsys, caplog):
    """Refreshed a minute ago: a live run elsewhere, refused (the folder untouched); an hour ago (train.lock_stale_
    minutes=5): a dead one, taken over."""
    run = tmp_path / "run"
    lock = fake_lock(run, host="node-17.cluster", pid=4242, refreshed=time.time() - 60)
    before = lock.read_text()
    assert train.main(tiny_run_args(synthetic_h5_64, run, *SHORT)) == 2
    [line] = error_lines(capsys.readouterr().err)
    assert "in use by a live run (host node-17.cluster, pid 4242" in line
    assert sorted(p.name for p in run.iterdir()) == [LOCK_NAME] and lock.read_text() == before

    fake_lock(run, host="node-17.cluster", pid=4242, refreshed=time.time() - 3600)
    assert train.main(tiny_run_args(synthetic_h5_64, run, *SHORT)) == 0
    assert "took over the lock of a run that is no longer running (host node-17.cluster, pid 4242" in caplog.text
    assert not lock.exists()


def test_a_reused_pid_is_not_a_live_holder(tmp_path):
    """A record naming this process's pid with another start time: the process it named is gone."""
    fake_lock(tmp_path, process_start="1")
    with FolderLock.acquire(tmp_path, 300) as lock:
        assert lock.holds()


def test_the_lock_is_refreshed_and_released(tmp_path):
    with FolderLock.acquire(tmp_path, stale_s=0.5) as lock:  # refreshed every 0.1 s
        first = LockRecord.read(tmp_path / LOCK_NAME)
        time.sleep(0.5)
        later = LockRecord.read(tmp_path / LOCK_NAME)
        assert first is not None and later is not None and later.refreshed > first.refreshed
        assert later.alive(0.5)
        with pytest.raises(FolderHeld, match=f"pid {os.getpid()}"):
            FolderLock.acquire(tmp_path, 0.5)
        assert lock.holds()
    assert list(tmp_path.iterdir()) == []


def test_an_evaluation_writing_into_a_live_runs_folder_is_refused(tmp_path, capsys):
    run = tmp_path / "run"
    out = run / "eval" / "results.json"
    with FolderLock.acquire(run, 300):
        with pytest.raises(FolderHeld, match="where a live run writes"):
            check_not_held(out, "--out")
        rc = coco_eval.main(["--from-ground-truth", "--images", str(tmp_path), "--annotations", "x.json",
                             "--out", str(out)])  # fmt: skip
        assert rc == 2
        [line] = error_lines(capsys.readouterr().err)
        assert f"--out={out} is inside {run}" in line
    check_not_held(out, "--out")  # released: allowed
    assert not out.parent.exists()


@pytest.mark.parametrize("main, name", [(train.main, "train.py"), (train_parallel.main, "train_parallel.py")])
def test_one_process_launchers_refuse_several_torchrun_processes(main, name, tmp_path, monkeypatch, capsys):
    """``torchrun --nproc_per_node=2 train.py``: rank 0 says to use train_distributed.py (the command as it runs
    here), every rank exits 2 before anything is written."""
    monkeypatch.chdir(REPO_ROOT)
    monkeypatch.setenv("WORLD_SIZE", "2")
    args = [f"train.out_dir={tmp_path / 'run'}"]
    monkeypatch.setenv("RANK", "1")
    assert main(args) == 2
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("RANK", "0")
    assert main(args) == 2
    [line] = error_lines(capsys.readouterr().err)
    assert f"python {name} trains in one process, but torchrun started 2 (WORLD_SIZE=2)" in line
    assert f"torchrun --nproc_per_node=2 train_distributed.py train.out_dir={tmp_path / 'run'}" in line
    assert not (tmp_path / "run").exists()


def test_a_torchrun_restart_takes_over_its_launchs_lock_at_once(tmp_path):
    """A lock fresh from another host, written by an earlier attempt of this torchrun launch (its agent among this
    launch's): torchrun ended that attempt on every node, so the restart takes it over without waiting; the lock
    of another launch stays a live run's."""
    fake_lock(tmp_path, host="node-2", pid=77, owner="node-2:900:5")
    with pytest.raises(FolderHeld, match="host node-2, pid 77"):
        FolderLock.acquire(tmp_path, 300, owners=frozenset({"node-1:800:4"}), owner="node-1:800:4")
    with FolderLock.acquire(tmp_path, 300, owners=frozenset({"node-1:800:4", "node-2:900:5"}), owner="node-1:800:4"):
        record = LockRecord.read(tmp_path / LOCK_NAME)
        assert record is not None and record.owner == "node-1:800:4" and record.pid == os.getpid()
