"""The version of this code: the git commit it runs from, written into every checkpoint (``code_version``)."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path


@functools.cache
def code_version() -> str:
    """The git commit of the code (with ``-dirty`` when modified), or ``unknown``; asked once per process (two
    git commands at every checkpoint cost more than the write of a small model)."""
    root = Path(__file__).resolve().parents[1]
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5
        ).stdout.strip()
        status = ["git", "status", "--porcelain", "--untracked-files=no"]
        dirty = subprocess.run(status, cwd=root, capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (sha + ("-dirty" if dirty else "")) if sha else "unknown"
