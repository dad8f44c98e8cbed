"""A case (one bad input and the command that consumes it), running it (in a subprocess, or by calling the command's
``main`` in this process) and classifying the result.

Outcomes: ``clean_error`` (non-zero exit, an ``error:`` message), ``counted_skip`` (exit 0, the output reports a
non-zero count of skipped / left-out items), ``raw_traceback`` (a Python traceback, or a failure without a message)
and ``accepted`` (exit 0, nothing skipped). ``partial_output``: the intended output exists after a failed run, or a
temporary file was left behind.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from tests.paths import REPO_ROOT

Outcome = Literal["clean_error", "counted_skip", "raw_traceback", "accepted"]
OUTCOMES: tuple[Outcome, ...] = ("clean_error", "counted_skip", "raw_traceback", "accepted")


@dataclass
class Case:
    """One bad input and the command that consumes it (run from the repo root)."""

    name: str
    what: str
    argv: list[str]
    expected: Outcome
    outputs: list[Path]  # files the command would write: must not exist after a failure
    names: tuple[str, ...] = ()  # what the message must name (file, id, field)
    folder: Path = field(default=Path("."))  # where leftover temporary files are looked for


@dataclass
class CaseResult:
    name: str
    outcome: Outcome
    partial_output: bool
    message: str


_COUNTED = re.compile(r"\b[1-9]\d* [a-z -]*\b(skipped|left out|not used)\b|^warning: skipping", re.I | re.M)


def classify(returncode: int, stdout: str, stderr: str) -> tuple[Outcome, str]:
    """(outcome, the message that decided it) of one finished command."""
    if "Traceback (most recent call last)" in stderr:
        last = [line for line in stderr.splitlines() if line.strip()]
        return "raw_traceback", last[-1] if last else ""
    if returncode != 0:
        start = stderr.rfind("error: ")
        if start < 0:
            return "raw_traceback", f"exit status {returncode} without an error message: {stderr.strip()[-300:]}"
        return "clean_error", " ".join(stderr[start:].split())
    counted = [m.group(0) for m in _COUNTED.finditer(stdout + "\n" + stderr)]
    if counted:
        lines = [line for line in (stdout + stderr).splitlines() if any(c in line for c in counted)]
        return "counted_skip", " | ".join(lines)
    return "accepted", stdout.strip().splitlines()[-1] if stdout.strip() else ""


def leftover_temporaries(folder: Path) -> list[Path]:
    """Temporary files (``*.tmp``, as utils.io writes them) under ``folder``."""
    return sorted(folder.rglob("*.tmp")) if folder.is_dir() else []


def run_case(case: Case, timeout: float = 300) -> CaseResult:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    try:
        proc = subprocess.run(case.argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return CaseResult(case.name, "raw_traceback", bool(leftover_temporaries(case.folder)), f"timed out {timeout}s")
    return result_of(case, proc.returncode, proc.stdout, proc.stderr)


def run_in_process(case: Case, main: Callable[[list[str]], int], args: list[str]) -> CaseResult:
    """Run ``case`` by calling its command's ``main(args)`` from the repo root, stdout and stderr captured: what a
    subprocess costs in start-up (Python and torch imported anew) is saved. An exception that escapes ``main`` is
    printed as the subprocess would print it, so it classifies as a raw traceback. One case at a time: the streams
    and the working folder are the process's."""
    out, err = io.StringIO(), io.StringIO()
    before = os.getcwd()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            os.chdir(REPO_ROOT)
            rc = main(args)
        except SystemExit as e:  # argparse's usage errors (their message already printed)
            rc = e.code if isinstance(e.code, int) else int(e.code is not None)
        except Exception:  # noqa: BLE001  what a subprocess would die of
            traceback.print_exc()
            rc = 1
        finally:
            os.chdir(before)
    return result_of(case, rc, out.getvalue(), err.getvalue())


def result_of(case: Case, returncode: int, stdout: str, stderr: str) -> CaseResult:
    """Classify a finished run of ``case`` (by subprocess, or by calling the command's ``main`` in process)."""
    outcome, message = classify(returncode, stdout, stderr)
    partial = returncode != 0 and any(p.exists() for p in case.outputs)
    partial = partial or bool(leftover_temporaries(case.folder))
    return CaseResult(case.name, outcome, partial, message)


def run_cases(cases: list[Case], jobs: int = 2) -> list[CaseResult]:
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(run_case, cases))
