"""Every command line the project prints runs where the user is (utils/commands.py, README "Commands"): the
checkout's short form from its root, ``python -m simplepose.X`` when started so or from any other folder; usage
lines, help texts and library messages alike, and no command spelled by hand elsewhere in the library."""

from __future__ import annotations

import ast
import functools
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

from simplepose import train_distributed
from simplepose.data.dataset import read_settings
from simplepose.utils import commands
from simplepose.utils.commands import PACKAGE_ROOT, command, commands_here
from simplepose.utils.errors import UserError

TRAIN_DISTRIBUTED_DOC = (PACKAGE_ROOT / "train_distributed.py").read_text()


@pytest.fixture
def started_as(monkeypatch):
    """``started_as(name, folder)``: this process as if started by ``python -m name`` (None: not by ``-m``, as
    ``python train.py`` or a notebook) in ``folder``."""

    def start(name: str | None, folder: Path) -> None:
        spec = types.SimpleNamespace(name=name) if name else None
        monkeypatch.setitem(sys.modules, "__main__", types.SimpleNamespace(__spec__=spec))
        monkeypatch.chdir(folder)

    return start


def test_the_short_form_from_the_checkouts_root(started_as):
    started_as(None, PACKAGE_ROOT)
    assert command("data.coco_to_hdf5", "--out x.h5") == "python -m data.coco_to_hdf5 --out x.h5"
    assert command("train") == "python train.py"
    assert command("train_distributed", "a=1", torchrun="--nproc_per_node=4") == (
        "torchrun --nproc_per_node=4 train_distributed.py a=1"
    )
    assert (
        command("evaluate.coco_eval", torchrun="--nproc_per_node=2")
        == "torchrun --nproc_per_node=2 -m evaluate.coco_eval"
    )
    started_as("data.coco_to_hdf5", PACKAGE_ROOT)  # python -m data.coco_to_hdf5 there
    assert command("models") == "python -m models"


def test_the_package_name_elsewhere_or_when_started_by_it(started_as, tmp_path):
    for name, folder in ((None, tmp_path), ("simplepose.data.coco_to_hdf5", PACKAGE_ROOT), ("x.y", tmp_path)):
        started_as(name, folder)
        assert command("data.coco_to_hdf5", "--out x.h5") == "python -m simplepose.data.coco_to_hdf5 --out x.h5"
        assert command("train") == "python -m simplepose.train"
        assert command("train_distributed", torchrun="--nproc_per_node=4") == (
            "torchrun --nproc_per_node=4 -m simplepose.train_distributed"
        )
        assert command("evaluate.coco_eval", torchrun="--nproc_per_node=2") == (
            "torchrun --nproc_per_node=2 -m simplepose.evaluate.coco_eval"
        )
        # not in the package: the checkout's root alone runs them, in the one spelling
        assert command("tests.fetch_coco_sample") == "python -m tests.fetch_coco_sample"
        assert command("bench.model", "--memory") == "python -m bench.model --memory"


def test_a_help_text_keeps_its_prose_and_respells_its_commands(started_as, tmp_path):
    doc = ast.get_docstring(ast.parse(TRAIN_DISTRIBUTED_DOC), clean=False)
    started_as(None, PACKAGE_ROOT)
    assert commands_here(doc) == doc
    started_as(None, tmp_path)
    here = commands_here(doc)
    assert "torchrun --nproc_per_node=4 -m simplepose.train_distributed --config" in here
    # a command continued over lines: the launcher on the next line is respelled too
    assert "--rdzv_id=pose1 \\\n        -m simplepose.train_distributed --config" in here
    assert "--max-restarts=3 -m simplepose.train_distributed ..." in here
    assert "like train.py." in here  # prose naming the file stays
    assert commands_here("python train.py; python -m evaluate.demo --ckpt X; python -m bench.model") == (
        "python -m simplepose.train; python -m simplepose.evaluate.demo --ckpt X; python -m bench.model"
    )


def test_a_library_message_spells_the_command_of_where_it_runs(started_as, tmp_path):
    for name, folder, expected in (
        (None, PACKAGE_ROOT, "`python -m data.coco_to_hdf5 ... --out nope.h5`"),
        (None, tmp_path, "`python -m simplepose.data.coco_to_hdf5 ... --out nope.h5`"),
        ("simplepose.train", PACKAGE_ROOT, "`python -m simplepose.data.coco_to_hdf5 ... --out nope.h5`"),
    ):
        started_as(name, folder)
        with pytest.raises(UserError) as e:
            read_settings("nope.h5")
        assert str(e.value).endswith(expected), str(e.value)


def run_python(folder: Path, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *argv], cwd=folder, capture_output=True, text=True, timeout=300)


def test_help_and_printed_commands_under_both_starts(tmp_path):
    """Subprocesses: ``--help`` and a command's own hint, started by the short name from the checkout's root and
    by the package's name from it and from another folder."""
    for folder, module, shown in (
        (PACKAGE_ROOT, "data.map_keypoints", "python -m data.map_keypoints"),
        (PACKAGE_ROOT, "simplepose.data.map_keypoints", "python -m simplepose.data.map_keypoints"),
        (tmp_path, "simplepose.data.map_keypoints", "python -m simplepose.data.map_keypoints"),
    ):
        r = run_python(folder, "-m", module, "--help")
        assert r.returncode == 0 and r.stdout.startswith(f"usage: {shown} "), r.stdout + r.stderr
    for n, (module, convert) in enumerate(
        (
            ("data.synthetic", "python -m data.coco_to_hdf5"),
            ("simplepose.data.synthetic", "python -m simplepose.data.coco_to_hdf5"),
        )
    ):
        out = tmp_path / f"synth{n}"
        r = run_python(PACKAGE_ROOT, "-m", module, "--out", str(out), "--num-images", "1", "--val-fraction", "0")
        assert r.returncode == 0 and f"next: {convert}" in r.stdout, r.stdout + r.stderr


def test_a_launchers_help_under_the_package_name_from_another_folder(started_as, tmp_path, capsys):
    started_as("simplepose.train_distributed", tmp_path)
    with pytest.raises(SystemExit) as e:
        train_distributed.main(["--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0 and re.match(r"usage: torchrun --nproc_per_node=N -m simplepose.train_distributed\s", out)
    assert "--rdzv_id=pose1 \\\n        -m simplepose.train_distributed --config" in out
    assert "train_distributed.py --config" not in out


# ------------------------------------------------------------------------------------- no command spelled by hand
# a command line in a string: `python -m x`, `python x.py`, a torchrun command naming its program, `-m <our module>`
HAND_SPELLED = re.compile(
    rf"\bpython3? (?:-m\b|\S+\.py\b)|\btorchrun\b.*(?:\s-m\s|\w\.py\b)"
    rf"|(?:^|\s)-m (?:{commands.PACKAGE}\.)?(?:{'|'.join(commands.SUBPACKAGES + commands.LAUNCHERS)})\b"
)


@functools.cache
def library_modules() -> dict[Path, ast.Module]:
    """The wheel's modules, parsed: the root's (the API, the launchers) and the subpackages'."""
    files = sorted(PACKAGE_ROOT.glob("*.py"))
    for package in commands.SUBPACKAGES:
        files += sorted((PACKAGE_ROOT / package).rglob("*.py"))
    return {path: ast.parse(path.read_text()) for path in files}


def hand_spelled(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, text) of each string of ``tree``, docstrings aside, that spells a command line itself."""
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
        if HAND_SPELLED.search(node.value)
    ]


def test_the_check_finds_a_hand_spelled_command():
    found = hand_spelled(
        ast.parse(
            '"""python -m data.synthetic: a docstring"""\n'
            'A = "make it with python -m data.coco_to_hdf5"\n'
            'B = f"or {x} python train.py"\n'
            'C = "torchrun --nproc_per_node={n} train_distributed.py"\n'
            'D = "torchrun --nproc_per_node=2 -m " + "evaluate.coco_eval"\n'
            'E = "under torchrun --max-restarts the group restarts from last.pt"\n'
        )
    )
    assert sorted(line for line, _ in found) == [2, 3, 4, 5]


def test_no_library_module_spells_a_command_by_hand():
    """Every command line in the library's strings comes from utils.commands (docstrings are the checkout's
    documentation; those shown by --help go through ``commands_here``)."""
    found = [
        f"{path.relative_to(PACKAGE_ROOT)}:{line}: {text[:80]!r}"
        for path, tree in library_modules().items()
        if path != PACKAGE_ROOT / "utils" / "commands.py"
        for line, text in hand_spelled(tree)
    ]
    assert not found, "spell these with simplepose.utils.commands.command:\n" + "\n".join(found)


SHORT_FORM = re.compile(
    rf"\bpython -m (?:{'|'.join(commands.SUBPACKAGES)})\.|\bpython (?:{'|'.join(commands.LAUNCHERS)})\.py\b"
)


def is_command(tree: ast.Module) -> bool:
    """A command module: its help is its docstring, printed through ``commands_here``."""
    return any(isinstance(n, ast.Call) and getattr(n.func, "attr", None) == "ArgumentParser" for n in ast.walk(tree))


def test_library_docstrings_spell_commands_by_the_package_name():
    """A library module's docstrings and comments are read where the package is installed (``help()``, an editor):
    a command there is ``python -m simplepose.X``, which runs from any folder once installed. Only a command's own
    docstring, its help, keeps the checkout's spelling, which ``commands_here`` respells where it is printed."""
    found = [
        f"{path.relative_to(PACKAGE_ROOT)}:{n}: {line.strip()[:80]}"
        for path, tree in library_modules().items()
        if path.parent != PACKAGE_ROOT and path != PACKAGE_ROOT / "utils" / "commands.py" and not is_command(tree)
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if SHORT_FORM.search(line)
    ]
    assert not found, "spell these python -m simplepose.X:\n" + "\n".join(found)


def test_every_argument_parser_of_the_library_names_its_program_through_command():
    unnamed = []
    for path, tree in library_modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "ArgumentParser":
                prog = next((k.value for k in node.keywords if k.arg == "prog"), None)
                if not (isinstance(prog, ast.Call) and getattr(prog.func, "id", None) == "command"):
                    unnamed.append(f"{path.relative_to(PACKAGE_ROOT)}:{node.lineno}")
    assert not unnamed, f"give prog=command(...) to: {unnamed}"
