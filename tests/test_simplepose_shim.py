"""The API and the commands from a user's own folder (shim/simplepose: README "Use in Python"): a script outside the
checkout, with only shim/ on its path (what `pip install -e .` installs, or PYTHONPATH=<checkout>/shim), imports
``simplepose`` and finds the same people as the API in the checkout; ``python -m simplepose`` runs a command there;
none of the checkout's generic package names is importable without it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from evaluate import PoseEstimator
from utils.paths import REPO_ROOT

SHIM = REPO_ROOT / "shim"
GENERIC = ("config", "data", "models", "checkpoint", "evaluate", "engine", "utils")
ONE_SCALE = ["eval.scales=[1.0]", "eval.flip=false"]


def outside_env() -> dict[str, str]:
    """This process's environment with the checkout's root taken off PYTHONPATH and shim/ put on it: a user's
    process after `pip install -e <checkout>` (packages installed on PYTHONPATH, e.g. with pip --target, kept)."""
    kept = [
        p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and os.path.realpath(p) != str(REPO_ROOT)
    ]
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(SHIM), *kept]), "OMP_NUM_THREADS": "1"}


def run_outside(argv: list[str], cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *argv], cwd=cwd, env=outside_env(), capture_output=True, text=True,
                          timeout=300)  # fmt: skip


SCRIPT = """
import importlib.util, json, sys
generic = [n for n in {generic!r} if importlib.util.find_spec(n) is not None]
from simplepose import PoseEstimator
estimator = PoseEstimator.from_checkpoint(sys.argv[1], device="cpu", scales=[1.0], flip=False)
people = estimator(sys.argv[2])
print(json.dumps({{"generic_before": generic, "scores": [p.score for p in people]}}))
"""


def test_a_script_in_its_own_folder_uses_the_api_through_simplepose(tiny_ckpt, synthetic_sample_images, tmp_path):
    image = sorted(synthetic_sample_images.iterdir())[0]
    (tmp_path / "my_script.py").write_text(SCRIPT.format(generic=GENERIC))
    r = run_outside(["my_script.py", str(tiny_ckpt), str(image)], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["generic_before"] == []  # nothing of the checkout but simplepose on the path
    here = PoseEstimator.from_checkpoint(tiny_ckpt, device="cpu", scales=[1.0], flip=False)(str(image))
    assert out["scores"] == pytest.approx([p.score for p in here], abs=1e-6)
    # the checkout's names are still missing without it: the documented way is the only one needed
    r = run_outside(["-c", "import evaluate"], tmp_path)
    assert r.returncode != 0 and "No module named 'evaluate'" in r.stderr


def test_python_m_simplepose_runs_a_command_with_the_callers_paths(tiny_ckpt, synthetic_sample_images, tmp_path):
    image = sorted(synthetic_sample_images.iterdir())[0]
    r = run_outside(["-m", "simplepose", "evaluate.demo", "--ckpt", str(tiny_ckpt), "--input", str(image), "--json",
                     "found.json", "--device", "cpu", *ONE_SCALE], tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    written = json.loads((tmp_path / "found.json").read_text())  # relative to the caller's folder
    here = PoseEstimator.from_checkpoint(tiny_ckpt, device="cpu", scales=[1.0], flip=False)(str(image))
    assert len(written) == len(here)
    for argv, words in ((["-m", "simplepose", "evaluate.no_such_command"], "is no module of the checkout"),
                        (["-m", "simplepose", "no_such_script.py"], "is not a script of the checkout")):  # fmt: skip
        r = run_outside(argv, tmp_path)
        assert r.returncode == 2 and "Traceback" not in r.stderr and words in r.stderr
    r = run_outside(["-m", "simplepose", "train.py", "--help"], tmp_path)
    assert r.returncode == 0 and "train.resume=auto" in r.stdout


def test_a_module_of_a_checkout_name_imported_first_is_named(tmp_path):
    (tmp_path / "utils.py").write_text("HELPER = 1\n")
    r = run_outside(["-c", "import utils, simplepose"], tmp_path)
    assert r.returncode != 0 and "Traceback" in r.stderr  # an ImportError, as Python reports one
    assert "a module named 'utils'" in r.stderr and "import simplepose before it, or rename your module" in r.stderr
    # imported first, simplepose keeps the checkout's packages in front of the caller's own modules
    r = run_outside(["-c", "import simplepose, utils.errors; print(utils.errors.__file__)"], tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == str(REPO_ROOT / "utils" / "errors.py"), r.stderr


def test_pyproject_installs_the_shim_alone():
    """`pip install -e .` installs one package, from shim/ (so its editable path exposes nothing else)."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 on
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    assert project["project"]["name"] == "simplepose"
    assert project["tool"]["setuptools"]["packages"] == ["simplepose"]
    assert project["tool"]["setuptools"]["package-dir"] == {"": "shim"}
