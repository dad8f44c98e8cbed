"""The tests test the tree they are in: ``simplepose`` must be this checkout's files, or the run stops at once.

An editable install made in one checkout would otherwise serve ``simplepose`` to the tests of another (a second
worktree, a copy, a clone beside the installed one): they would run the other tree's code and read its files, and
pass or fail for it. tests/conftest.py imports this module before anything else of the project; when
``simplepose`` comes from elsewhere, or from a link tree (setuptools' strict editable install, README "Install") that
lacks a module of this tree (added since that install), pytest stops with one line naming both, before a test runs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import simplepose

TREE = Path(__file__).resolve().parents[1]
# folders of the checkout that are not the package (pyproject's [tool.setuptools] packages)
NOT_PACKAGE = {"tests", "bench", "build", "build_backend", "runtime", "cache", "runs", "docs", "dist"}


def package_modules(tree: Path) -> list[Path]:
    """The package's modules in ``tree``, relative to it: its ``*.py`` outside ``NOT_PACKAGE`` and hidden folders."""
    found = []
    for path in tree.rglob("*.py"):
        rel = path.relative_to(tree)
        if rel.parts[0] in NOT_PACKAGE or any(p.startswith(".") for p in rel.parts):
            continue
        found.append(rel)
    return sorted(found)


def tree_problem(tree: Path, package_file: str | Path) -> str | None:
    """Why the tests of ``tree`` must not run with ``simplepose`` imported from ``package_file`` (its
    ``__init__.py``), in one line; None when it is ``tree``'s own, directly or through links."""
    imported, own = Path(package_file), tree / "__init__.py"
    if not (own.is_file() and imported.samefile(own)):
        return (
            f"the tests of {tree} would import simplepose from {imported.resolve().parent}, another tree: install "
            f'this one (pip install -e ".[dev]" in {tree}, in a virtual environment of its own) or put a folder '
            f"holding a link simplepose -> {tree} first on PYTHONPATH"
        )
    folder = imported.parent
    missing = [rel for rel in package_modules(tree) if not (folder / rel).exists()]
    if missing:
        return (
            f"the editable install of {tree} lacks {len(missing)} of its modules ({missing[0].as_posix()}, added "
            f'since the install: its link tree {folder} holds the files there were then): run pip install -e ".[dev]" '
            "again"
        )
    return None


problem = tree_problem(TREE, simplepose.__file__)
if problem is not None:  # one line, no traceback (pytest.exit here would show the conftest's import as failed)
    print(f"tests/own_tree.py: {problem}", file=sys.stderr)
    raise SystemExit(pytest.ExitCode.USAGE_ERROR)
