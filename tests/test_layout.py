"""The code shipped to users (the package: everything outside tests/, bench/ and the build's folders) does not
depend on the test suite. The benches, not shipped, use what the tests use to find the repository and the sample
(tests/paths.py)."""

from __future__ import annotations

import ast

from tests.own_tree import package_modules
from tests.paths import REPO_ROOT


def imported_modules(source: str) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module)
    return modules


def test_imported_modules_sees_every_form_of_import():
    source = "import tests.conftest\nfrom tests import x\ndef f():\n    from tests.test_engine import TINY\n"
    assert imported_modules(source) == {"tests.conftest", "tests", "tests.test_engine"}


def test_shipped_code_does_not_import_the_tests():
    files = [REPO_ROOT / rel for rel in package_modules(REPO_ROOT)]  # what the wheel holds (tests/own_tree.py)
    assert any(p.parts[-2:] == ("engine", "trainer.py") for p in files)
    found = [f"{p.relative_to(REPO_ROOT)}: {m}" for p in files for m in sorted(imported_modules(p.read_text()))
             if m == "tests" or m.startswith("tests.")]  # fmt: skip
    assert found == []


def test_subprocesses_of_the_tests_keep_packages_installed_on_pythonpath(tmp_path, monkeypatch):
    """Machines that install dependencies with ``pip --target DIR`` and PYTHONPATH=DIR (the lent GPU machine does)
    must still import them in the tests' subprocesses, beside the repository."""
    import subprocess
    import sys

    from tests.helpers import subprocess_env

    (tmp_path / "installed_elsewhere.py").write_text("VALUE = 7\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    code = "import installed_elsewhere, engine.trainer; print(installed_elsewhere.VALUE)"
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=subprocess_env(), capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "7", r.stderr
