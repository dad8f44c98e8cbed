"""The cluster examples (examples/cluster/, docs/cluster.md) as far as they run here, with no SLURM, Kubernetes or
second machine: the scripts parse (``bash -n``); every torchrun command line in them parses with this torch's torchrun
and its training arguments resolve to a config; and the SLURM script runs for real on this machine with stand-ins
for ``srun`` (runs its command) and ``scontrol`` (names this host, records a requeue): SIGTERM to the batch script
stops the run at a step with last.pt and requeues the job, the requeued job (the same script again) continues from
last.pt to the end, and a third start finds the run finished and trains nothing."""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from torch.distributed.run import get_args_parser

from simplepose.config.config_file import load_config
from simplepose.engine.run import parse_args
from tests.helpers import saved_state, subprocess_env, tiny_run_args
from tests.paths import REPO_ROOT

EXAMPLES = REPO_ROOT / "examples" / "cluster"
SCRIPTS = sorted(EXAMPLES.glob("*.sh"))
TIMEOUT_S = 300  # each run here, on a loaded 2-core machine; the test's bound, not a measure


def test_the_examples_are_there_and_the_scripts_parse():
    assert {p.name for p in EXAMPLES.iterdir()} >= {"slurm_train.sh", "elastic.sh", "kubernetes_job.yaml"}
    for script in SCRIPTS:
        r = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, f"{script.name}: {r.stderr}"
        assert os.access(script, os.X_OK), script.name


def torchrun_lines(script: Path) -> list[list[str]]:
    """The torchrun command lines of a shell script as words (``\\``-continued lines joined), its variables
    replaced by sample values, and the script's own arguments (``"$@"``) by a small training's."""
    text = re.sub(r"\\\n\s*", " ", script.read_text())
    values = {"SLURM_NNODES": "2", "nproc": "4", "head_node": "node1", "port": "29500", "SLURM_JOB_ID": "4242",
              "HOST": "node1", "RUN_ID": "pose1"}  # fmt: skip
    lines = []
    for line in text.splitlines():
        if not re.match(r"(srun .*|exec )?torchrun ", line):  # a command, not a comment that names it
            continue
        line = line[line.index("torchrun ") :].split(" &")[0]
        line = re.sub(r"\$\{(\w+):-([^}]*)\}", lambda m: values.get(m.group(1), m.group(2)), line)
        line = re.sub(r"\$\{?(\w+)\}?", lambda m: values.get(m.group(1), m.group(0)), line)
        lines.append(shlex.split(line.replace('"$@"', "--config tiny train.out_dir=runs/x")))
    return lines


def kubernetes_command() -> list[str]:
    job = [d for d in yaml.safe_load_all((EXAMPLES / "kubernetes_job.yaml").read_text()) if d["kind"] == "Job"]
    (container,) = job[0]["spec"]["template"]["spec"]["containers"]
    return container["command"]


@pytest.mark.parametrize("source", ["slurm_train.sh", "elastic.sh", "kubernetes_job.yaml"])
def test_each_torchrun_line_parses_and_its_training_arguments_resolve(source):
    lines = [kubernetes_command()] if source.endswith(".yaml") else torchrun_lines(EXAMPLES / source)
    assert lines, source
    for words in lines:
        assert words[0] == "torchrun"
        a = get_args_parser().parse_args(words[1:])  # this torch's torchrun accepts its options
        assert a.rdzv_backend == "c10d" and a.rdzv_endpoint and a.rdzv_id and a.max_restarts > 0
        assert a.module and a.training_script == "simplepose.train_distributed", words
        args = parse_args("", a.training_script_args, "distributed")
        cfg = load_config(args.config, args.overrides)
        assert cfg.train.resume == "auto" and cfg.train.out_dir  # the requeued or restarted job continues the run


def shims(folder: Path) -> Path:
    """``srun`` and ``scontrol`` stand-ins in ``folder``: srun runs its command (in its place: a SIGTERM to it
    reaches torchrun, as srun passes one to its tasks), scontrol names this host and records a requeue."""
    folder.mkdir()
    (folder / "srun").write_text('#!/bin/bash\nwhile [[ "$1" == --* ]]; do shift; done\nexec "$@"\n')
    (folder / "scontrol").write_text(
        '#!/bin/bash\ncase "$1" in\n  show) echo localhost ;;\n  requeue) echo "requeue $2" >> "$REQUEUED" ;;\nesac\n'
    )
    for name in ("srun", "scontrol"):
        (folder / name).chmod(0o755)
    return folder


def test_the_slurm_script_stops_on_sigterm_requeues_and_the_requeued_job_finishes_the_run(synthetic_h5_64, tmp_path):
    out = tmp_path / "run"
    # 15 epochs of 13 steps (2 processes x batch 2 of the sample's 55 people)
    args = tiny_run_args(synthetic_h5_64, out, "train.epochs=15", "train.checkpoint_every_steps=1000")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    requeued = tmp_path / "requeued.txt"
    env = subprocess_env(
        OMP_NUM_THREADS="1", PATH=f"{shims(tmp_path / 'bin')}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}"
        f"{os.environ['PATH']}", SLURM_JOB_ID="4242", SLURM_NNODES="1", SLURM_JOB_NODELIST="localhost", NPROC="2",
        RDZV_PORT=str(port), REQUEUED=str(requeued),
    )  # fmt: skip
    job = ["bash", str(EXAMPLES / "slurm_train.sh"), *args]

    log = tmp_path / "slurm-4242.out"
    with log.open("w") as f:
        batch = subprocess.Popen(job, cwd=tmp_path, env=env, stdout=f, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + TIMEOUT_S
            while not re.search(r"epoch 0 \d+/13 step", log.read_text()):
                assert time.monotonic() < deadline and batch.poll() is None, log.read_text()[-3000:]
                time.sleep(0.2)
            batch.send_signal(signal.SIGTERM)  # what --signal=B:TERM@120 sends to the batch script
            rc = batch.wait(timeout=TIMEOUT_S)
        finally:
            if batch.poll() is None:
                batch.kill()
                batch.wait()
    text = log.read_text()
    assert "SIGTERM: the run stops at its next step, with last.pt; then the job is requeued" in text
    (stop,) = [line for line in text.splitlines() if line.startswith("terminated (SIGTERM): stopped at ")]
    step = saved_state(out / "last.pt").position.global_step
    assert 0 < step < 195 and f"(global step {step}), where {out / 'last.pt'} was written" in stop
    assert requeued.read_text() == "requeue 4242\n" and rc != 0
    assert f'File "{REPO_ROOT}' not in text, text[-3000:]

    # the requeued job: the same script and arguments
    r = subprocess.run(job, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "resumed from" in r.stdout and f"global step {step}" in r.stdout
    assert saved_state(out / "last.pt").position.global_step == 195
    assert requeued.read_text() == "requeue 4242\n"  # not requeued again
    # a job requeued once more (by hand, or a stop that came as the run ended) trains nothing and changes nothing
    r = subprocess.run(job, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert r.returncode == 0 and "holds a finished run" in r.stdout + r.stderr, r.stderr[-3000:]
