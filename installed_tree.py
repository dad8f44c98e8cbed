"""A command run from a checkout's root by its file or folder name (a launcher, or a command module in the short
spelling of ``simplepose.utils.commands``) runs the package ``simplepose`` that Python finds: without an install
there is none, and with another checkout's install it would run that checkout's code while this one's files are
edited. ``require`` stops such a command with one line first.

Imported by its top-level name, before anything of ``simplepose``: the launchers and the command subpackages' first
lines do so when they run as the checkout's short form (their ``__package__`` has no ``simplepose.`` prefix). It
imports nothing of the package: it checks what an import of it would find.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

TREE = Path(__file__).resolve().parent
INSTALL = 'pip install -e ".[dev]"'


def problem(tree: Path = TREE) -> str | None:
    """Why a command of ``tree`` must not run, in one line; None when ``simplepose`` is ``tree``'s own files
    (directly or through the editable install's links)."""
    spec = importlib.util.find_spec("simplepose")
    found = Path(spec.origin) if spec is not None and spec.origin else None
    if found is None:
        return (
            f"the package simplepose is not installed: run {INSTALL} in {tree} (README: Install; a virtual "
            "environment of its own is best), then this command again"
        )
    own = tree / "__init__.py"
    if not (own.is_file() and found.exists() and found.samefile(own)):
        return (
            f"this checkout is {tree} but simplepose is installed from {found.resolve().parent}: run {INSTALL} in "
            f"{tree} to run this checkout's code (a virtual environment of its own keeps both), or run the installed "
            "one's command, simplepose (simplepose --help lists its subcommands)"
        )
    return None


def require() -> None:
    """Exit with status 2 and one ``error:`` line when this checkout's commands would not run its own package."""
    line = problem()
    if line is not None:
        sys.stderr.write(f"error: {line}\n")
        raise SystemExit(2)
