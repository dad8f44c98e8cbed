"""Every command line the project prints runs where the user is (utils/commands.py, README "Commands"): the
checkout's short form from its root, the console command ``simplepose SUB`` where the package is installed (``python
-m simplepose SUB`` where that is not on PATH); usage lines, help texts and library messages alike, and no command
spelled by hand elsewhere in the library. The console command itself: its subcommands are the modules' commands."""

from __future__ import annotations

import ast
import functools
import os
import re
import shlex
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

from simplepose import __version__, cli, train_distributed
from simplepose.config.skeleton_check import NAME_MATCHES
from simplepose.data.dataset import read_settings
from simplepose.utils import commands
from simplepose.utils.commands import PACKAGE_ROOT, SUBCOMMANDS, command, commands_here
from simplepose.utils.errors import UserError

TRAIN_DISTRIBUTED_DOC = (PACKAGE_ROOT / "train_distributed.py").read_text()


@pytest.fixture
def started_as(monkeypatch, tmp_path):
    """``started_as(name, folder, on_path=False, argv0="x.py")``: this process as if started by ``python -m name``
    (None: not by ``-m``, as ``python train.py`` or a notebook; ``argv0``: the script's path) in ``folder``, with
    the console command ``simplepose`` on PATH or not."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "simplepose").write_text("#!/bin/sh\n")
    (bin_dir / "simplepose").chmod(0o755)

    def start(name: str | None, folder: Path, on_path: bool = False, argv0: str = "x.py") -> None:
        spec = types.SimpleNamespace(name=name) if name else None
        monkeypatch.setitem(sys.modules, "__main__", types.SimpleNamespace(__spec__=spec))
        monkeypatch.setattr(sys, "argv", [argv0])
        monkeypatch.setenv("PATH", str(bin_dir if on_path else tmp_path))
        monkeypatch.chdir(folder)

    return start


def test_the_short_form_from_the_checkouts_root(started_as):
    """A checkout run without an install (``python train.py``, ``python -m data.synthetic`` there): no console
    command."""
    started_as(None, PACKAGE_ROOT, on_path=True)
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


@pytest.mark.parametrize("on_path", [True, False])
def test_the_console_command_elsewhere_or_when_started_by_it(started_as, tmp_path, on_path):
    program = "simplepose" if on_path else "python -m simplepose"
    for name, folder, argv0 in (
        (None, tmp_path, "x.py"),
        ("simplepose.data.coco_to_hdf5", PACKAGE_ROOT, "x.py"),
        ("simplepose.__main__", PACKAGE_ROOT, "x.py"),  # python -m simplepose convert
        (None, PACKAGE_ROOT, "/venv/bin/simplepose"),  # the console script, in the checkout too
        ("x.y", tmp_path, "x.py"),
    ):
        started_as(name, folder, on_path=on_path, argv0=argv0)
        assert command("data.coco_to_hdf5", "--out x.h5") == f"{program} convert --out x.h5"
        assert command("train") == f"{program} train"
        assert command("models") == f"{program} summary"
        # torchrun starts a module: -m simplepose runs wherever the package is importable
        assert command("train_distributed", torchrun="--nproc_per_node=4") == (
            "torchrun --nproc_per_node=4 -m simplepose train-distributed"
        )
        assert command("evaluate.coco_eval", torchrun="--nproc_per_node=2") == (
            "torchrun --nproc_per_node=2 -m simplepose eval"
        )
        # a module without a subcommand; not in the package: the checkout's root alone runs them, spelled short
        assert command("evaluate.no_such_command") == "python -m simplepose.evaluate.no_such_command"
        assert command("tests.fetch_coco_sample") == "python -m tests.fetch_coco_sample"
        assert command("bench.model", "--memory") == "python -m bench.model --memory"


def test_a_help_text_keeps_its_prose_and_respells_its_commands(started_as, tmp_path):
    doc = ast.get_docstring(ast.parse(TRAIN_DISTRIBUTED_DOC), clean=False)
    started_as(None, tmp_path, on_path=True)
    assert commands_here(doc) == doc  # written as the console command spells it
    started_as(None, PACKAGE_ROOT)
    here = commands_here(doc)
    assert "torchrun --nproc_per_node=4 train_distributed.py --config" in here
    # a command continued over lines: the launcher on the next line is respelled too
    assert "--rdzv_id=pose1 \\\n        train_distributed.py --config" in here
    assert "--max-restarts=3 train_distributed.py ..." in here
    assert not re.search(r"simplepose [a-z]", here)
    text = "simplepose train; simplepose demo --ckpt X; torchrun -m simplepose eval; python -m bench.model"
    assert commands_here(text) == (
        "python train.py; python -m evaluate.demo --ckpt X; torchrun -m evaluate.coco_eval; python -m bench.model"
    )
    started_as(None, tmp_path)
    assert commands_here(text) == (
        "python -m simplepose train; python -m simplepose demo --ckpt X; torchrun -m simplepose eval; "
        "python -m bench.model"
    )
    prose = "the simplepose package; simplepose trainer; simplepose.train; simplepose eval-like"
    assert commands_here(prose) == prose  # only a subcommand after the name is a command


def test_a_library_message_spells_the_command_of_where_it_runs(started_as, tmp_path):
    for name, folder, on_path, expected in (
        (None, PACKAGE_ROOT, True, "`python -m data.coco_to_hdf5 ... --out nope.h5`"),
        (None, tmp_path, True, "`simplepose convert ... --out nope.h5`"),
        ("simplepose.train", PACKAGE_ROOT, False, "`python -m simplepose convert ... --out nope.h5`"),
    ):
        started_as(name, folder, on_path=on_path)
        with pytest.raises(UserError) as e:
            read_settings("nope.h5")
        assert str(e.value).endswith(expected), str(e.value)


def run_python(folder: Path, *argv: str, path: str | None = None) -> subprocess.CompletedProcess:
    """``python argv`` in ``folder``; ``path``: the PATH it sees (where a console command ``simplepose`` is)."""
    env = {**os.environ, "PATH": path or str(folder)}
    return subprocess.run([sys.executable, *argv], cwd=folder, env=env, capture_output=True, text=True, timeout=300)


def test_help_and_printed_commands_under_both_starts(tmp_path):
    """Subprocesses: ``--help`` and a command's own hint, started by the short name from the checkout's root and
    by the package's name from it and from another folder."""
    for folder, argv, shown in (
        (PACKAGE_ROOT, ["-m", "data.map_keypoints"], "python -m data.map_keypoints"),
        (PACKAGE_ROOT, ["-m", "simplepose.data.map_keypoints"], "python -m simplepose map-keypoints"),
        (tmp_path, ["-m", "simplepose", "map-keypoints"], "python -m simplepose map-keypoints"),
    ):
        r = run_python(folder, *argv, "--help", path=str(tmp_path))
        assert r.returncode == 0 and r.stdout.startswith(f"usage: {shown} "), r.stdout + r.stderr
    for n, (folder, argv, convert) in enumerate(
        (
            (PACKAGE_ROOT, ["-m", "data.synthetic"], "python -m data.coco_to_hdf5"),
            (tmp_path, ["-m", "simplepose", "synthetic"], "python -m simplepose convert"),
        )
    ):
        out = tmp_path / f"synth{n}"
        r = run_python(folder, *argv, "--out", str(out), "--num-images", "1", "--val-fraction", "0")
        assert r.returncode == 0 and f"next: {convert}" in r.stdout, r.stdout + r.stderr


def test_a_launchers_help_under_the_package_name_from_another_folder(started_as, tmp_path, capsys):
    started_as("simplepose.train_distributed", tmp_path, on_path=True)
    with pytest.raises(SystemExit) as e:
        train_distributed.main(["--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0 and re.match(r"usage: torchrun --nproc_per_node=N -m simplepose train-distributed\s", out)
    assert "--rdzv_id=pose1 \\\n        -m simplepose train-distributed --config" in out
    assert "train_distributed.py --config" not in out


# ------------------------------------------------------------------------------------------ the console command
def test_the_console_command_lists_its_subcommands_and_its_version(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0
    listed = dict(re.findall(r"^    ([a-z-]+)\s+(\S.*)$", out, re.M))
    assert [s.name for s in SUBCOMMANDS if s.name in listed] == [s.name for s in SUBCOMMANDS]
    assert listed["demo"].startswith(SUBCOMMANDS[[s.name for s in SUBCOMMANDS].index("demo")].summary[:20])
    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"simplepose {__version__}"
    with pytest.raises(SystemExit) as e:
        cli.main(["trian"])
    assert e.value.code == 2 and "invalid choice: 'trian'" in capsys.readouterr().err


def test_every_command_module_has_a_subcommand():
    """Each module of the package with an argument parser and a ``main`` is reachable as ``simplepose SUB``, and
    each subcommand's module has a ``main``."""
    reachable = {s.module for s in SUBCOMMANDS}
    found = {
        ".".join(path.relative_to(PACKAGE_ROOT).with_suffix("").parts).removesuffix(".__main__")
        for path, tree in library_modules().items()
        if any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body)
        and (is_command(tree) or path.parent == PACKAGE_ROOT and path.stem in commands.LAUNCHERS)
        and path != PACKAGE_ROOT / "cli.py"  # the console command itself
    }
    assert found == reachable


def test_a_subcommand_runs_its_modules_main_with_its_arguments(capsys, monkeypatch):
    seen = []
    monkeypatch.setattr("simplepose.engine.plot.main", lambda argv: seen.append(argv) or 3)
    assert cli.main(["plot", "runs/x", "--out", "c.png"]) == 3
    assert seen == [["runs/x", "--out", "c.png"]]


def test_a_subcommand_this_install_lacks_says_which_install_brings_it(capsys, monkeypatch):
    monkeypatch.setattr(cli.importlib.util, "find_spec", lambda name: None)  # as in the runtime distribution
    assert cli.main(["train"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and err.endswith("train needs the full install (PyTorch): pip install simplepose")
    assert len(err.splitlines()) == 1


def test_every_subcommands_help_runs(capsys):
    """``simplepose SUB --help`` of each subcommand: its usage, status 0 (``summary``'s module is a package: its
    ``main`` is its ``__main__``'s)."""
    for sub in SUBCOMMANDS:
        with pytest.raises(SystemExit) as e:
            cli.main([sub.name, "--help"])
        assert e.value.code == 0 and capsys.readouterr().out.startswith("usage: "), sub.name


def test_the_runtime_spells_a_command_it_lacks_as_the_full_install_runs_it(monkeypatch, tmp_path):
    """In the runtime distribution (``simplepose_runtime``, command ``simplepose-runtime``), a hint naming
    ``export`` or ``train`` names ``simplepose export``: the runtime has no such subcommand."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(commands, "PACKAGE", "simplepose_runtime")
    monkeypatch.setattr(commands, "installed", lambda module: module.startswith("evaluate.demo"))
    monkeypatch.setattr(commands, "console", lambda: "simplepose-runtime")
    assert command("evaluate.export_onnx", "--ckpt CKPT") == "simplepose export --ckpt CKPT"
    assert command("train") == "simplepose train"
    assert command("evaluate.demo", "--onnx m.onnx") == "simplepose-runtime demo --onnx m.onnx"


def test_diagnose_is_eval_with_its_folder(capsys):
    assert cli.main(["diagnose", "--results", "r.json", "--annotations", "a.json"]) == 2
    assert "diagnose: give --diagnose DIR" in capsys.readouterr().err


def test_each_subcommands_help_is_its_modules(tmp_path):
    for sub, module in (("map-keypoints", "data.map_keypoints"), ("plot", "engine.plot")):
        by_sub = run_python(tmp_path, "-m", "simplepose", sub, "--help")
        by_module = run_python(tmp_path, "-m", f"simplepose.{module}", "--help")
        assert by_sub.returncode == by_module.returncode == 0, by_sub.stderr + by_module.stderr
        assert by_sub.stdout == by_module.stdout
        assert by_sub.stdout.startswith(f"usage: python -m simplepose {sub} ")


# ------------------------------------------------------------------------------------- no command spelled by hand
# a command line in a string: `python -m x`, `python x.py`, a torchrun command naming its program, `-m <our module>`
HAND_SPELLED = re.compile(
    rf"\bpython3? (?:-m\b|\S+\.py\b)|\btorchrun\b.*(?:\s-m\s|\w\.py\b)"
    rf"|\b{commands.PACKAGE} (?:{'|'.join(s.name for s in commands.SUBCOMMANDS)})\b"
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
            'F = "run simplepose demo --ckpt X"\n'
            'G = "the simplepose package, simplepose.train"\n'
        )
    )
    assert sorted(line for line, _ in found) == [2, 3, 4, 5, 7]


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
    """Docstrings and comments are read where the package is installed (``help()``, an editor, ``--help``): a
    command's own help spells ``simplepose SUB``, which ``commands_here`` respells where it is printed; any other
    module's ``simplepose SUB`` or ``python -m simplepose.X``, which run from any folder once installed. None spells
    the checkout's short form, which runs from the checkout's root alone."""
    found = [
        f"{path.relative_to(PACKAGE_ROOT)}:{n}: {line.strip()[:80]}"
        for path in [*library_modules(), *sorted((PACKAGE_ROOT / "config").rglob("*.yaml"))]  # presets: in the wheel
        if path != PACKAGE_ROOT / "utils" / "commands.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if SHORT_FORM.search(line)
    ]
    assert not found, "spell these simplepose SUB:\n" + "\n".join(found)


def test_every_argument_parser_of_the_library_names_its_program_through_command():
    unnamed = []
    for path, tree in library_modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "ArgumentParser":
                prog = next((k.value for k in node.keywords if k.arg == "prog"), None)
                named = isinstance(prog, ast.Call) and getattr(prog.func, "id", None) in ("command", "console")
                if not named:  # console(): the console command's own parser (cli.py)
                    unnamed.append(f"{path.relative_to(PACKAGE_ROOT)}:{node.lineno}")
    assert not unnamed, f"give prog=command(...) to: {unnamed}"


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash here")
def test_bash_completes_subcommands_options_choices_files_and_config_keys(tmp_path, capsys):
    """The completion script in bash, with COMP_WORDS set as bash sets them: the subcommands, then a subcommand's
    options and an option's choices (asked of ``simplepose --complete SUB`` once per shell), files, config keys."""
    assert cli.main(["--completion", "bash"]) == 0
    script = tmp_path / "completion.sh"
    script.write_text(capsys.readouterr().out)
    (tmp_path / "model.onnx").write_bytes(b"")
    bin_dir, asked = tmp_path / "bin", tmp_path / "asked.log"
    bin_dir.mkdir()
    (bin_dir / "simplepose").write_text(f'#!/bin/sh\necho "$*" >> {asked}\nexec {sys.executable} -m simplepose "$@"\n')
    (bin_dir / "simplepose").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}

    def complete(*words: str, times: int = 1) -> list[str]:
        code = f"source {script}; COMP_WORDS=({' '.join(map(shlex.quote, words))}); COMP_CWORD={len(words) - 1}; "
        code += "COMPREPLY=(); _simplepose_complete; " * times
        r = subprocess.run(["bash", "-c", code + 'printf "%s\\n" "${COMPREPLY[@]}"'], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=300)  # fmt: skip
        assert r.returncode == 0, r.stderr
        return r.stdout.split()

    assert complete("simplepose", "tr") == ["train", "train-parallel", "train-distributed"]
    assert complete("simplepose", "ex") == ["export"]
    assert not asked.exists()  # the first word needs no question
    assert complete("simplepose", "eval", "--keyp", times=2) == ["--keypoint-names"]
    assert asked.read_text() == "--complete eval\n"  # asked once in a shell, then kept
    assert complete("simplepose", "eval", "--keypoint-names", "") == list(NAME_MATCHES)
    assert complete("simplepose", "eval", "--keypoint-names", "=", "sp") == ["spelling"]  # --keypoint-names=sp
    assert complete("simplepose", "demo", "--onnx", "mod") == ["model.onnx"]
    assert complete("simplepose", "demo", "eval.sca") == ["eval.scales="]  # a config override's key
    assert {"model.onnx", "model.stacks="} <= set(complete("simplepose", "demo", "mo"))  # a file or a key
    assert complete("simplepose", "demo", "--overwrite", "eval.sca") == ["eval.scales="]  # after a flag: the same


def test_every_subcommands_main_parses_with_its_modules_build_parser(capsys):
    """Each subcommand's module has ``build_parser()``, the parser its ``main`` parses with (``main`` builds none of
    its own, and its --help is that parser's), and ``simplepose --complete SUB`` offers that parser's options."""
    for sub in SUBCOMMANDS:
        module = cli.command_module(sub)
        assert callable(getattr(module, "build_parser", None)), f"{module.__name__} has no build_parser()"
        main = next(n for n in ast.parse(Path(module.__file__).read_text()).body if getattr(n, "name", "") == "main")
        calls = {getattr(n.func, "attr", None) for n in ast.walk(main) if isinstance(n, ast.Call)}
        assert not calls & {"ArgumentParser", "add_argument"}, f"{module.__name__}.main builds its own parser"
        parser = module.build_parser()
        with pytest.raises(SystemExit) as e:
            module.main(["--help"])
        assert e.value.code == 0 and capsys.readouterr().out == parser.format_help(), sub.name
        assert cli.main(["--complete", sub.name]) == 0
        offered = [line.split()[0] for line in capsys.readouterr().out.splitlines() if line.startswith("-")]
        assert sorted(offered) == sorted(parser._option_string_actions), sub.name


def test_the_completion_table_is_each_parsers_own(capsys, monkeypatch):
    """``simplepose --complete SUB``: an option's choices, any file, or no value; the config keys where the command
    takes overrides; nothing where this installation lacks the subcommand; eval's without torch (the runtime
    completes it too)."""
    assert cli.main(["--complete", "eval"]) == 0
    table = {line.split()[0]: line.split()[1:] for line in capsys.readouterr().out.splitlines()}
    assert table["--keypoint-names"] == list(NAME_MATCHES) and table["--ckpt"] == ["*"] and table["--overwrite"] == []
    assert "eval.scales=" in table["="]
    assert cli.main(["--complete", "plot"]) == 0
    assert "--out" in capsys.readouterr().out.split()
    run = subprocess.run([sys.executable, "-m", "tests.no_torch", "simplepose", "--complete", "eval"],
                         cwd=PACKAGE_ROOT, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0 and "--results" in run.stdout.split(), run.stderr
    monkeypatch.setattr(commands, "installed", lambda module: False)  # as the runtime distribution for train
    assert cli.main(["--complete", "train"]) == 0 and capsys.readouterr().out.strip() == ""
