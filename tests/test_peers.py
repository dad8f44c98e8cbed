"""A peer lost by a 2-process gloo run on the CPU: kill -9 of one torchrun worker while the other waits for it in a
collective, and the loss of a whole "node" (one of two torchrun agents, with its worker): the survivor ends with one
line naming the lost rank, the last checkpoint's step and the command that continues, no traceback; that command
continues the run from the checkpoint. And the line's parts, without processes."""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from simplepose.utils import peers
from tests.harness.peer_faults import worker_pids
from tests.helpers import saved_state, subprocess_env, tiny_run_args, torchrun_command
from tests.paths import REPO_ROOT

# per process: batch 2, 8 steps, a checkpoint every 2; rank R hangs in the forward pass of global step 3 (first
# attempt only: tests/harness/faulty_trainer.py) so that the other waits for it in the step's gradient all-reduce
RUN = ["train.epochs=1", "train.max_steps_per_epoch=8", "train.checkpoint_every_steps=2", "train.optimizer=sgd",
       "train.lr=0.01"]  # fmt: skip
TIMEOUT_S = 300  # each torchrun here, on a loaded 2-core machine; the test's bound, not a measure


def faults(rank: int) -> list[str]:
    return ["-m", "tests.harness.faulty_trainer", "--launcher", "distributed", "--hang-step", "3", "--hang-rank",
            str(rank), "--"]  # fmt: skip


def wait_for(path: Path, text: str, processes: list[subprocess.Popen]) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while text not in path.read_text():
        assert time.monotonic() < deadline and all(p.poll() is None for p in processes), path.read_text()[-3000:]
        time.sleep(0.2)


def finish(process: subprocess.Popen) -> int:
    try:
        return process.wait(timeout=TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def lost_peer_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if " lost a peer at " in line]


def ours_without_traceback(stderr: str) -> None:
    """No traceback of this project's code (torchrun prints its own ChildFailedError after the workers' lines)."""
    assert f'File "{REPO_ROOT}' not in stderr and "[rank0]: Traceback" not in stderr, stderr[-3000:]
    assert "[rank1]: Traceback" not in stderr, stderr[-3000:]


@pytest.mark.parametrize("killed", [1, 0])
def test_a_worker_killed_mid_collective_ends_the_other_with_one_line_and_its_command_continues(
    synthetic_h5_64, tmp_path, killed
):
    out = tmp_path / "run"
    args = tiny_run_args(synthetic_h5_64, out, *RUN)
    log_out, log_err = tmp_path / "out.txt", tmp_path / "err.txt"
    with log_out.open("w") as o, log_err.open("w") as e:
        agent = subprocess.Popen(torchrun_command([*faults(killed), *args], 2), cwd=REPO_ROOT, stdout=o, stderr=e,
                                 env=subprocess_env(OMP_NUM_THREADS="1"))  # fmt: skip
        try:
            wait_for(log_out, f"rank {killed} hangs at global step 3", [agent])
            os.kill(worker_pids(agent.pid)[killed], signal.SIGKILL)
        finally:
            rc = finish(agent)
    stderr = log_err.read_text()
    assert rc != 0 and f"exitcode  : {peers.EXIT_PEER_LOST} " in stderr, stderr[-3000:]  # torchrun's table
    survivor = 1 - killed
    again = shlex.join(["torchrun", "--nproc_per_node=2", "train_distributed.py", *args, "train.resume=auto"])
    (line,) = lost_peer_lines(stderr)
    assert line.startswith(f"error: rank {survivor} lost a peer at epoch 0, step 3 (global step 3): rank {killed} is "
                           "gone (its process ended); RuntimeError: ")  # fmt: skip
    assert f"; {out / 'last.pt'} holds global step 2: continue the run with: {again};" in line
    assert "Connection" in line and "GLHF" not in line  # gloo's gist, not its whole text
    ours_without_traceback(stderr)
    assert saved_state(out / "last.pt").position.global_step == 2

    # the printed command continues the run from that checkpoint (torchrun here on a free port)
    r = subprocess.run(torchrun_command(["train_distributed.py", *args, "train.resume=auto"], 2), cwd=REPO_ROOT,
                       env=subprocess_env(OMP_NUM_THREADS="1"), capture_output=True, text=True,
                       timeout=TIMEOUT_S)  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert "resumed from" in r.stdout and "global step 2" in r.stdout
    assert saved_state(out / "last.pt").position.global_step == 8


def test_a_node_lost_ends_the_other_nodes_rank_with_one_line(synthetic_h5_64, tmp_path):
    """Two torchrun agents, one worker each, as two machines run them (c10d rendezvous): the "node" of rank 1 (its
    agent and worker) killed while rank 0 waits for it in a collective; rank 0's agent gets no signal, its worker
    meets the lost peer in the collective and says so, with what the job's command on every node continues with.
    Which agent hosts the rendezvous store (the first to start it) is not fixed here."""
    out = tmp_path / "run"
    args = tiny_run_args(synthetic_h5_64, out, *RUN)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rendezvous = ["--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{port}", "--rdzv_id=peers_test"]
    node = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc_per_node=1", *rendezvous,
            "--max-restarts=0", *faults(1), *args]  # fmt: skip
    logs = [(tmp_path / f"out{n}.txt", tmp_path / f"err{n}.txt") for n in (0, 1)]
    agents: list[subprocess.Popen] = []
    try:
        for o, e in logs:
            with o.open("w") as fo, e.open("w") as fe:
                agents.append(subprocess.Popen(node, cwd=REPO_ROOT, stdout=fo, stderr=fe,
                                               env=subprocess_env(OMP_NUM_THREADS="1")))  # fmt: skip
        deadline = time.monotonic() + TIMEOUT_S
        while not any("rank 1 hangs at global step 3" in o.read_text() for o, _ in logs):
            assert time.monotonic() < deadline and all(a.poll() is None for a in agents), logs[0][1].read_text()
            time.sleep(0.2)
        lost = next(n for n, (o, _) in enumerate(logs) if "rank 1 hangs" in o.read_text())
        os.kill(worker_pids(agents[lost].pid)[1], signal.SIGKILL)
        agents[lost].kill()
        rc = finish(agents[1 - lost])
    finally:
        for a in agents:
            finish(a) if a.poll() is None else None
    stderr = logs[1 - lost][1].read_text()
    assert rc != 0, stderr[-3000:]
    # the agent reports its worker's exit, unless the lost node hosted the rendezvous store: then it fails on its own
    # (torchrun's RendezvousConnectionError), after the worker's line
    assert f"exitcode  : {peers.EXIT_PEER_LOST} " in stderr or "RendezvousConnectionError" in stderr, stderr[-3000:]
    (line,) = lost_peer_lines(stderr)
    assert line.startswith("error: rank 0 lost a peer at epoch 0, step 3 (global step 3): rank 1 is gone"), line
    continued = shlex.join(["train_distributed.py", *args, "train.resume=auto"])
    assert (f"; {out / 'last.pt'} holds global step 2: continue the run with the job's torchrun command on each of "
            f"its 2 nodes, running: {continued};") in line  # fmt: skip
    ours_without_traceback(stderr)


def test_the_line_names_the_lost_rank_or_says_that_it_cannot_be_known(monkeypatch):
    monkeypatch.setenv("RANK", "3")
    error = RuntimeError("[/x/gloo/transport/tcp/pair.cc:545] Read error [10.0.0.2]:4242: Connection closed by peer. "
                         "This is typically caused by a remote worker hanging. GLHF!")  # fmt: skip
    assert peers.cause(error) == "RuntimeError: Read error [10.0.0.2]:4242: Connection closed by peer"
    line = peers.peer_lost_line(error, "epoch 1, step 5 (global step 9)", "HINT", ([1], [6, 7]))
    assert line.startswith("error: rank 3 lost a peer at epoch 1, step 5 (global step 9): rank 1 is gone (its "
                           "process ended), no answer from rank 6, 7 (its process or node lost); RuntimeError: Read "
                           "error")  # fmt: skip
    assert f"(exit code {peers.EXIT_PEER_LOST}); HINT; under torchrun --max-restarts" in line
    assert "which rank could not be learnt" in peers.peer_lost_line(error, "here", "HINT", None)


def test_only_a_collective_failure_in_a_group_counts_as_a_lost_peer(monkeypatch):
    gloo = RuntimeError("[../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer [1.2.3.4]:5")
    loader = RuntimeError("DataLoader timed out after 600 seconds")
    assert not peers.collective_failure(gloo)  # one process, no group
    for key, value in {"RANK": "0", "WORLD_SIZE": "2", "TORCHELASTIC_RUN_ID": "x"}.items():
        monkeypatch.setenv(key, value)
    assert peers.collective_failure(gloo) and not peers.collective_failure(loader)
    assert not peers.collective_failure(ValueError("gloo"))
    import torch.distributed as dist

    assert peers.collective_failure(dist.DistNetworkError("the store went away"))


def test_a_stall_line_ends_with_the_checkpoint_and_the_command_that_continue():
    from simplepose.utils.watchdog import Watchdog, continue_hint

    dog = Watchdog(5, rank=0, world_size=2, store=None)
    assert "holds global step" not in dog.report()
    with continue_hint(lambda: "runs/x/last.pt holds global step 7: continue the run with: CMD"):
        line = dog.report()
    assert "(exit code 75); runs/x/last.pt holds global step 7: continue the run with: CMD; under torchrun" in line


def test_two_sigterms_to_torchrun_stop_the_workers_once_with_last_pt(synthetic_h5_64, tmp_path):
    """SIGTERM to torchrun's agent twice (a job manager that repeats it, a user who presses on): the agent passes
    each on to both workers and still waits for them; they act on the first alone: one "SIGTERM received", one stop
    line, last.pt of that step, no traceback of ours."""
    out = tmp_path / "run"
    args = tiny_run_args(synthetic_h5_64, out, "train.epochs=20", "train.checkpoint_every_steps=1000")
    log_out, log_err = tmp_path / "out.txt", tmp_path / "err.txt"
    with log_out.open("w") as o, log_err.open("w") as e:
        agent = subprocess.Popen(torchrun_command(["train_distributed.py", *args], 2), cwd=REPO_ROOT, stdout=o,
                                 stderr=e, env=subprocess_env(OMP_NUM_THREADS="1"))  # fmt: skip
        try:
            wait_for(log_out, "epoch 0 ", [agent])
            workers = worker_pids(agent.pid)
            agent.send_signal(signal.SIGTERM)
            wait_for(log_err, "SIGTERM received", [agent])
            agent.send_signal(signal.SIGTERM)
        finally:
            rc = finish(agent)
    stderr = log_err.read_text()
    for pid in workers.values():  # the agent waited for them
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert rc != 0 and stderr.count("closing signal SIGTERM") >= 2, stderr[-3000:]
    assert stderr.count("SIGTERM received") == 1, stderr[-3000:]
    (stop,) = [line for line in stderr.splitlines() if line.startswith("terminated (SIGTERM): stopped at ")]
    step = saved_state(out / "last.pt").position.global_step
    assert f"(global step {step}), where {out / 'last.pt'} was written" in stop
    ours_without_traceback(stderr)


def test_a_multi_node_jobs_commands_give_the_processes_of_one_node(monkeypatch):
    """On 2 nodes of 2 processes, a printed torchrun command starts 2 processes a node (not the job's 4), and the
    command that continues a stopped run is the program for the job's torchrun on each node."""
    from simplepose.engine.run import command_line, program, resume_command

    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.setenv("GROUP_WORLD_SIZE", "1")
    assert "--nproc_per_node=2" in program("distributed").split()
    single_node = resume_command(command_line("distributed", ["train.epochs=3"]))
    assert single_node.startswith("torchrun") and single_node.endswith("train.epochs=3 train.resume=auto")
    monkeypatch.setenv("GROUP_WORLD_SIZE", "2")
    again = resume_command(command_line("distributed", ["train.epochs=3"]))
    assert again.startswith("the job's torchrun command on each of its 2 nodes, running: ")
    assert "--nproc_per_node" not in again and again.endswith("train.epochs=3 train.resume=auto")
