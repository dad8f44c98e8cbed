"""The public API is typed end to end (README "Use in Python"): mypy reads a user's script (tests/typed_user.py)
without an error, and every object that script gets from the API (``from_checkpoint``, ``from_onnx``, a call, a
frame of ``stream``) has its type, none is ``Any``."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import simplepose
from tests.paths import REPO_ROOT

USER_SCRIPT = REPO_ROOT / "tests" / "typed_user.py"


def test_a_users_script_type_checks_and_sees_no_any(tmp_path):
    pytest.importorskip("mypy")
    # the folder holding this tree's package (a link simplepose -> the checkout, or the editable install's link tree)
    search = Path(simplepose.__file__).parent.parent
    r = subprocess.run(
        [sys.executable, "-m", "mypy", "--python-version", "3.10", "--follow-imports=silent", "--no-error-summary",
         "--cache-dir", str(tmp_path / "cache"), str(USER_SCRIPT)],
        cwd=tmp_path, env={"MYPYPATH": str(search), "PATH": ""}, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    revealed = re.findall(r':(\d+): note: Revealed type is "(.*)"', r.stdout)
    errors = [line for line in r.stdout.splitlines() if ": error:" in line]
    assert r.returncode == 0 and not errors, r.stdout + r.stderr
    calls = [
        n.lineno
        for n in ast.walk(ast.parse(USER_SCRIPT.read_text()))
        if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "reveal_type"
    ]
    assert sorted(int(line) for line, _ in revealed) == sorted(calls)
    types = {int(line): t for line, t in revealed}
    assert not [t for t in types.values() if t == "Any" or t.startswith("Any ")], types
    lines = USER_SCRIPT.read_text().splitlines()
    by_text = {lines[n - 1].strip(): t for n, t in types.items()}
    assert by_text["reveal_type(estimator)"] == "simplepose.evaluate.estimator.PoseEstimator"
    assert by_text["reveal_type(people)"] == "list[simplepose.codec.person.Person]"
    assert by_text["reveal_type(estimator(paths))"] == "list[list[simplepose.codec.person.Person]]"
    assert by_text['reveal_type(PoseEstimator.from_onnx("model.onnx"))'] == (
        "simplepose.evaluate.estimator.PoseEstimator"
    )
    assert by_text["reveal_type(runtime)"] == "simplepose.evaluate.onnx_estimator.OnnxPoseEstimator"
    assert by_text["reveal_type(frame)"] == "simplepose.evaluate.estimator_base.Frame"
