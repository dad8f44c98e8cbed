"""The tests test the tree they are in (tests/own_tree.py, docs/design.md#the-package): a copy of the checkout, in a
folder named ``copy`` (which pytest once registered in place of the standard library's ``copy``), collects and
imports its own ``simplepose``; with ``simplepose`` from another tree, or from a link tree missing a module, the run
stops at once with one line naming both."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import simplepose
from tests.own_tree import TREE, package_modules, tree_problem

# what a fresh clone does not hold (generated, fetched or built), left out of the copies
NOT_COPIED = shutil.ignore_patterns(".git", "build", "cache", "runs", "images", "__pycache__", "*.egg-info", ".*_cache")

WHICH_TREE = """
import copy
from pathlib import Path

import simplepose
from tests.paths import REPO_ROOT


def test_this_tree():
    here = Path(__file__).resolve().parents[1]
    assert Path(simplepose.__file__).samefile(here / "__init__.py")
    assert REPO_ROOT == here
    assert copy.deepcopy([1]) == [1]  # the standard library's copy, not the checkout
"""


def test_this_tree_passes_another_one_is_named(tmp_path):
    assert tree_problem(TREE, simplepose.__file__) is None
    other = Path(simplepose.__file__).resolve().parent
    (tmp_path / "__init__.py").write_text("")  # a checkout's package file, not the imported one
    for tree in (tmp_path, tmp_path / "no_checkout_here"):
        problem = tree_problem(tree, simplepose.__file__)
        assert problem is not None and "\n" not in problem
        assert str(tree) in problem and str(other) in problem and 'pip install -e ".[dev]"' in problem


def test_a_link_tree_missing_a_module_is_named(tmp_path):
    """A strict editable install holds the modules there were at its time: one added since is named."""
    linked = tmp_path / "simplepose"
    modules = package_modules(TREE)
    assert {Path("__init__.py"), Path("train.py"), Path("engine/trainer.py")} <= set(modules)
    assert not [m for m in modules if m.parts[0] in ("tests", "bench", "build_backend")]
    for rel in modules:
        if rel != Path("engine/ema.py"):
            (linked / rel).parent.mkdir(parents=True, exist_ok=True)
            (linked / rel).symlink_to(TREE / rel)
    problem = tree_problem(TREE, linked / "__init__.py")
    assert problem is not None and "engine/ema.py" in problem and "1 of its modules" in problem
    (linked / "engine" / "ema.py").symlink_to(TREE / "engine" / "ema.py")
    assert tree_problem(TREE, linked / "__init__.py") is None


@pytest.mark.slow
def test_a_copy_named_copy_tests_its_own_tree_or_stops_naming_both(tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(TREE, copy, ignore=NOT_COPIED)
    (copy / "tests" / "test_which_tree.py").write_text(WHICH_TREE)
    link = tmp_path / "link"
    link.mkdir()
    (link / "simplepose").symlink_to(copy)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_which_tree.py"]
    path = os.environ.get("PYTHONPATH", "")

    def pytest_in_copy(pythonpath: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "PYTHONPATH": pythonpath, "OMP_NUM_THREADS": "1"}
        return subprocess.run(command, cwd=copy, env=env, capture_output=True, text=True, timeout=600)

    r = pytest_in_copy(os.pathsep.join([str(link), path]) if path else str(link))
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]

    r = pytest_in_copy(path)  # simplepose from the tree these tests run in
    assert r.returncode == pytest.ExitCode.USAGE_ERROR, r.stdout[-2000:] + r.stderr[-2000:]
    lines = [x for x in (r.stdout + r.stderr).splitlines() if x.strip()]
    assert len(lines) == 1 and "Traceback" not in r.stderr, lines
    assert str(copy) in lines[0] and str(Path(simplepose.__file__).resolve().parent) in lines[0]


def _commands_in(folder: Path) -> Path:
    """A checkout's launcher and a command subpackage's first file, copied into ``folder`` (nothing else of it)."""
    for rel in ("__init__.py", "installed_tree.py", "train.py", "data/__init__.py"):
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(TREE / rel, folder / rel)
    return folder


@pytest.mark.parametrize("command", [["train.py", "--help"], ["-m", "data.coco_to_hdf5", "--help"]])
def test_a_checkout_command_with_another_trees_package_or_none_stops_in_one_line(tmp_path, command):
    """``python train.py`` or ``python -m data.coco_to_hdf5`` in a checkout runs the installed ``simplepose``:
    another tree's code, or nothing when none is installed. Either stops with one line naming the fix, before any
    import of it."""
    checkout = _commands_in(tmp_path / "checkout")
    installed = Path(simplepose.__file__).resolve().parent
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    cases = {
        "another tree": ([sys.executable, *command], {**env, "PYTHONPATH": os.environ.get("PYTHONPATH", "")}),
        "none": ([sys.executable, "-S", *command], env),  # -S: no site-packages, so no install at all
    }
    for case, (argv, environment) in cases.items():
        r = subprocess.run(argv, cwd=checkout, env=environment, capture_output=True, text=True, timeout=120)
        lines = [x for x in (r.stdout + r.stderr).splitlines() if x.strip()]
        assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), (case, lines)
        assert str(checkout) in lines[0] and 'pip install -e ".[dev]"' in lines[0], (case, lines)
        assert (str(installed) in lines[0]) == (case == "another tree"), (case, lines)
    r = subprocess.run([sys.executable, *command], cwd=TREE, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "usage:" in r.stdout, r.stderr[-2000:]  # this tree's own install runs
