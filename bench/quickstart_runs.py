"""Quick-start training runs for the benches that compare settings over seeds (bench.precision_seeds,
bench.recipes): one run per folder, kept when complete so that an interrupted comparison continues."""

from __future__ import annotations

import dataclasses
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from simplepose.config.config_file import load_config
from simplepose.data.quickstart_data import prepare_synthetic_data
from simplepose.engine.run import QUICKSTART_PRESET
from simplepose.utils.errors import UserError
from tests.paths import REPO_ROOT


def prepare_data(overrides: list[str]) -> None:
    """Make the quick start's synthetic data before any run is timed, so that the first run's wall time is
    training alone."""
    data = load_config(QUICKSTART_PRESET, overrides).data
    # train.py runs in the repository's root, where a relative data.synthetic_dir lies
    prepare_synthetic_data(dataclasses.replace(data, synthetic_dir=str(REPO_ROOT / data.synthetic_dir)))


def train(out: Path, overrides: list[str]) -> float:
    """``python train.py train.out_dir=out overrides...`` (the quick start) unless ``out`` holds a finished run;
    returns the wall seconds (0: kept)."""
    if (out / "last.pt").is_file():
        return 0.0
    args = [sys.executable, "train.py", f"train.out_dir={out}", *overrides]
    start = time.perf_counter()
    done = subprocess.run(args, cwd=REPO_ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise UserError(f"run {out} failed (exit {done.returncode}): {done.stderr.strip().splitlines()[-1:]}")
    return time.perf_counter() - start


def read_records(out: Path) -> list[dict]:
    """The records of the run in ``out`` (metrics.jsonl)."""
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]


def last_validation(out: Path) -> dict:
    """The last validation record of the run in ``out`` that has an AP."""
    return [r for r in read_records(out) if r["kind"] == "val" and "AP" in r][-1]


def mean_spread(values: list[float], digits: int = 3) -> str:
    """``mean +- sample standard deviation`` (0 for one value)."""
    spread = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.{digits}f} +- {spread:.{digits}f}"


def cpu_name() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        return next(line.split(":", 1)[1].strip() for line in lines if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()
