"""CPU training speed by thread setting, with and without a competing busy process.

    python -m bench.cpu_threads                      # the quick start's model and data, float32, a table
    python -m bench.cpu_threads --steps 8 --settings "threads=1 workers=0" "threads=2 wait=PASSIVE" "spin=10000"

Each setting trains the quick-start preset (``config/quickstart.yaml``, its synthetic data made once) for a few
steps in a fresh ``python train.py`` process with ``OMP_NUM_THREADS``, ``OMP_WAIT_POLICY`` and ``GOMP_SPINCOUNT``
(how long an idle OpenMP thread spins before it sleeps) set as given (they must be set before torch starts), once on
an otherwise idle machine and once while another process keeps one core busy. It prints the median step time of each
(steps after the first two) and how much the busy neighbour slowed it. Figures are printed, never asserted; the
machine's own drift (other users) adds noise: alternate, repeat."""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from simplepose.config.config_file import load_config
from simplepose.data.quickstart_data import prepare_synthetic_data
from simplepose.engine.run import QUICKSTART_PRESET
from simplepose.utils.errors import cli_main
from tests.paths import REPO_ROOT

DEFAULT_SETTINGS = [
    "threads=default",  # what train.py picks by itself: cores - workers threads, GOMP_SPINCOUNT=1000 (utils/openmp.py)
    "spin=300000",  # GNU OpenMP's own default spin
    "wait=PASSIVE",  # idle threads sleep at once
    "threads=1",
    "threads=default workers=1",
]


def spin(stop) -> None:
    """A busy neighbour: one core at 100% until ``stop`` is set."""
    x = 0
    while not stop.is_set():
        for _ in range(100_000):
            x += 1


def parse_setting(text: str) -> dict[str, str]:
    out = {"threads": "default", "wait": "default", "spin": "default", "workers": "0"}
    for part in text.split():
        key, _, value = part.partition("=")
        if key not in out:
            raise SystemExit(f"unknown key {key!r} in setting {text!r} (threads, wait, spin, workers)")
        out[key] = value
    return out


def step_times(setting: dict[str, str], steps: int, work: Path) -> list[float]:
    """Seconds per training step of one ``python train.py`` run with ``setting`` (first two steps dropped)."""
    names = {"threads": "OMP_NUM_THREADS", "wait": "OMP_WAIT_POLICY", "spin": "GOMP_SPINCOUNT"}
    env = {k: v for k, v in os.environ.items() if k not in names.values()}
    env.update({names[k]: v for k, v in setting.items() if k in names and v != "default"})
    out_dir = Path(tempfile.mkdtemp(dir=work))
    args = [sys.executable, "train.py", "train.amp=off", "train.epochs=1", f"train.max_steps_per_epoch={steps + 2}",
            "train.val_every=0", "train.log_every=1", f"data.num_workers={setting['workers']}",
            f"train.out_dir={out_dir}"]  # fmt: skip
    r = subprocess.run(args, cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"train.py failed for {setting}:\n{r.stderr[-2000:]}")
    records = [json.loads(line) for line in (out_dir / "metrics.jsonl").read_text().splitlines()]
    times = [rec["time"] for rec in records if rec["kind"] == "train"]
    return [b - a for a, b in zip(times[1:], times[2:])]


def measure(setting: dict[str, str], steps: int, work: Path, busy: bool) -> float:
    """Median step time, with a busy neighbour process on one core if ``busy``."""
    if not busy:
        return statistics.median(step_times(setting, steps, work))
    stop = multiprocessing.Event()
    neighbour = multiprocessing.Process(target=spin, args=(stop,), daemon=True)
    neighbour.start()
    try:
        return statistics.median(step_times(setting, steps, work))
    finally:
        stop.set()
        neighbour.join()


def make_quickstart_data() -> None:
    """The quick start's synthetic data where ``python train.py`` run from the checkout makes it (once)."""
    data = load_config(QUICKSTART_PRESET).data
    prepare_synthetic_data(dataclasses.replace(data, synthetic_dir=str(REPO_ROOT / data.synthetic_dir)))


@cli_main
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.cpu_threads", description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=6, help="timed steps per run (after two warm-up steps)")
    p.add_argument("--settings", nargs="+", default=DEFAULT_SETTINGS, help='e.g. "threads=2 wait=PASSIVE workers=1"')
    p.add_argument("--rounds", type=int, default=1, help="repeat every measurement, alternating the settings")
    args = p.parse_args(argv)
    settings = [parse_setting(s) for s in args.settings]
    make_quickstart_data()
    print(f"{os.cpu_count()} cores; quick-start preset, float32, {args.steps} timed steps per run, "
          f"{args.rounds} round(s)")  # fmt: skip
    results: dict[int, dict[bool, list[float]]] = {i: {False: [], True: []} for i in range(len(settings))}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.rounds):
            for busy in (False, True):
                for i, setting in enumerate(settings):
                    results[i][busy].append(measure(setting, args.steps, Path(tmp), busy))
    print(f"{'threads':>8} {'wait':>8} {'spin':>8} {'workers':>7} {'idle s/step':>12} {'busy s/step':>12} "
          f"{'slowdown':>9}")  # fmt: skip
    for i, s in enumerate(settings):
        idle, busy = statistics.median(results[i][False]), statistics.median(results[i][True])
        print(f"{s['threads']:>8} {s['wait']:>8} {s['spin']:>8} {s['workers']:>7} {idle:12.2f} {busy:12.2f} "
              f"{busy / idle:8.1f}x")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
