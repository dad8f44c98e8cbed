"""CPU thread settings: the training commands shorten OpenMP's idle spin before torch loads, unless the user chose."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers import subprocess_env
from tests.paths import REPO_ROOT

# imports a module and prints GOMP_SPINCOUNT as it was at the moment torch started loading
SPIN_WHEN_TORCH_LOADS = """
import os, sys
seen = []
class Spy:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" and not seen:
            seen.append(os.environ.get("GOMP_SPINCOUNT"))
sys.meta_path.insert(0, Spy())
import {module}
print(seen[0])
"""


def spin_when_torch_loads(module: str, **env: str) -> str:
    clean = {k: v for k, v in subprocess_env().items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    r = subprocess.run([sys.executable, "-c", SPIN_WHEN_TORCH_LOADS.format(module=module)], cwd=REPO_ROOT,
                       env={**clean, **env}, capture_output=True, text=True)  # fmt: skip
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


@pytest.mark.parametrize("module", ["train", "train_parallel", "train_distributed"])
def test_training_commands_set_a_short_spin_before_torch_loads(module):
    assert spin_when_torch_loads(module) == "1000"


def test_a_spin_or_wait_policy_chosen_by_the_user_is_kept():
    assert spin_when_torch_loads("train", GOMP_SPINCOUNT="50") == "50"
    assert spin_when_torch_loads("train", OMP_WAIT_POLICY="ACTIVE") == "None"
