"""Imports run one way, from the ground up (docs/design.md#layers):

    utils  <  config  <  codec  <  data, models  <  checkpoint  <  evaluate  <  engine  <  entry points, bench, tests

A module imports only modules of the layers below its own, or of its own package; the packages of one layer do not
import each other (data and models are independent); no modules import each other, directly or round a circle.
Inside ``evaluate`` the same rule holds for its stages: inference, metrics < the rest (``EVALUATE_STAGES``).
Nothing but the tests imports a command (``command_modules``).
Every import counts: at the top of a module, inside a function, or under ``TYPE_CHECKING``; each names the package
(``simplepose.utils...``), never a bare folder name (``bare_imports``).

The graph is read from the source with ``ast`` (nothing is imported), so the test is fast and sees lazy imports too.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Top-level package (or module) -> layer; higher layers may import lower ones.
LAYERS: dict[str, int] = {
    # the checkout's guard, imported by its bare name before the package can be (installed_tree.py): imports nothing
    "installed_tree": 0,
    "utils": 0,
    "config": 1,
    "codec": 2,
    "data": 3,
    "models": 3,
    "checkpoint": 4,
    "evaluate": 5,
    "engine": 6,
    "__init__": 7,  # the package itself (simplepose): the API's names, looked up in evaluate
    "train": 7,
    "train_parallel": 7,
    "train_distributed": 7,
    "cli": 7,  # the console command simplepose: starts the commands by name (importlib), imports none
    "__main__": 7,
    "bench": 7,
    "tests": 7,
}
ENTRY_LAYER = 7
# The checkout's root is the package ``simplepose``: its modules import each other as ``simplepose.<package>...``
# (``bare_imports``), never by the bare folder names, which would find a user's own ``utils`` or ``config`` first.
PACKAGE = "simplepose"
SUBPACKAGES = ({name for name, layer in LAYERS.items() if layer < ENTRY_LAYER} - {"installed_tree"}) | {
    "train", "train_parallel", "train_distributed"}  # fmt: skip

# Stages inside evaluate/, the same rule one level down: the inference (images -> maps) and the metrics (people ->
# figures) stand apart (each builds on the codec, a layer below); the rest of evaluate (the estimator API, the
# evaluation loop, the tracker, drawing, the commands) on both.
EVALUATE_STAGES: dict[str, int] = {"evaluate.inference": 0, "evaluate.metrics": 0}
EVALUATE_TOP = 1


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the project's packages and top-level scripts."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if rel.parts[0] not in LAYERS and rel.with_suffix("").as_posix() not in LAYERS:
            continue
        name = ".".join(rel.with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


def _resolve(name: str, modules: Mapping[str, Path]) -> str | None:
    """The project module ``name`` is or lies in (``config.schema.Config`` -> ``config.schema``); None outside."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str, source: str, modules: Mapping[str, Path]) -> set[str]:
    """The project modules ``module`` imports anywhere in ``source`` (``from pkg import sub`` counts ``pkg.sub``)."""
    package = module if modules[module].name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            target = _resolve(name.removeprefix(PACKAGE + "."), modules)
            if target is not None and target != module:
                found.add(target)
    return found


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    modules = module_files(root)
    return {m: imports_of(m, p.read_text(encoding="utf-8"), modules) for m, p in modules.items()}


def layer_of(module: str) -> int:
    return LAYERS[module.split(".")[0]]


def upward_imports(graph: Mapping[str, Iterable[str]]) -> list[str]:
    """``a -> b`` for every import of a module of the same or a higher layer in another package."""
    bad = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            same_package = module.split(".")[0] == target.split(".")[0]
            if layer_of(module) == ENTRY_LAYER:
                continue  # entry points, bench and tests may import anything below them
            if same_package:
                continue
            if layer_of(target) >= layer_of(module):
                bad.append(f"{module} (layer {layer_of(module)}) -> {target} (layer {layer_of(target)})")
    return bad


def stage_of(module: str) -> int:
    """The stage of a module of ``evaluate`` (``EVALUATE_STAGES``; ``EVALUATE_TOP`` for the others)."""
    for package, stage in EVALUATE_STAGES.items():
        if module == package or module.startswith(package + "."):
            return stage
    return EVALUATE_TOP


def _stage_package(module: str) -> str:
    return next((p for p in EVALUATE_STAGES if module == p or module.startswith(p + ".")), "evaluate")


def stage_imports(graph: Mapping[str, Iterable[str]]) -> list[str]:
    """``a -> b`` for every import inside ``evaluate`` of a module of the same or a higher stage in another of its
    packages."""
    bad = []
    for module, targets in sorted(graph.items()):
        if module.split(".")[0] != "evaluate":
            continue
        for target in sorted(targets):
            if target.split(".")[0] != "evaluate" or _stage_package(target) == _stage_package(module):
                continue
            if stage_of(target) >= stage_of(module):
                bad.append(f"{module} (stage {stage_of(module)}) -> {target} (stage {stage_of(target)})")
    return bad


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


# Commands are what users run: the entry points, and every module outside tests/ with a ``__main__`` block
# (``python -m evaluate.coco_eval``, ``data.coco_to_hdf5``, ``engine.plot``, ``bench.grouping``...). A command parses
# its arguments and calls the libraries; nothing imports one but the tests, which run it through its ``main``.
ENTRY_POINTS = ("train", "train_parallel", "train_distributed")


def command_modules(root: Path = ROOT) -> set[str]:
    """The command modules: the entry points, and the modules outside tests/ that run as ``python -m``."""
    out = set(ENTRY_POINTS)
    for module, path in module_files(root).items():
        if module.split(".")[0] != "tests" and 'if __name__ == "__main__"' in path.read_text(encoding="utf-8"):
            out.add(module)
    return out


def command_imports(graph: Mapping[str, Iterable[str]], commands: set[str]) -> list[str]:
    """``a -> b`` for every import of a command ``b`` by a module ``a`` outside tests/."""
    bad = []
    for module, targets in sorted(graph.items()):
        if module.split(".")[0] == "tests":
            continue
        bad += [f"{module} -> {target}" for target in sorted(targets) if target in commands]
    return bad


def test_nothing_imports_a_command():
    commands = command_modules()
    assert {
        "evaluate.coco_eval",
        "evaluate.demo",
        "data.coco_to_hdf5",
        "engine.plot",
        "bench.grouping",
        "train",
    } <= commands
    bad = command_imports(import_graph(), commands)
    assert not bad, "modules that import a command (move what they use into a library module):\n  " + "\n  ".join(bad)


def test_the_command_check_finds_a_library_importing_a_command():
    graph = {
        "engine.validation": {"evaluate.coco_eval", "evaluate.evaluation"},
        "bench.grouping": {"evaluate.demo"},
        "tests.test_eval_coco": {"evaluate.coco_eval"},
        "evaluate.coco_eval": {"evaluate.evaluation"},
    }
    commands = {"evaluate.coco_eval", "evaluate.demo"}
    assert command_imports(graph, commands) == [
        "bench.grouping -> evaluate.demo",
        "engine.validation -> evaluate.coco_eval",
    ]


def bare_imports(root: Path = ROOT) -> list[str]:
    """``file:line name`` for every absolute import, anywhere in the checkout, of one of the package's modules by its
    bare name (``from utils.io import ...`` where ``from simplepose.utils.io import ...`` is meant)."""
    bad = []
    for path in module_files(root).values():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            else:
                continue
            bad += [f"{path.relative_to(root)}:{node.lineno} {n}" for n in names if n.split(".")[0] in SUBPACKAGES]
    return bad


def test_every_import_of_the_package_names_simplepose():
    bad = bare_imports()
    assert not bad, "imports by a bare folder name (write simplepose.<name>):\n  " + "\n  ".join(bad)


def test_the_bare_import_check_finds_one(tmp_path):
    (tmp_path / "engine").mkdir()
    (tmp_path / "engine" / "__init__.py").write_text("")
    (tmp_path / "engine" / "hooks.py").write_text("import json\nfrom simplepose.utils.io import atomic_write_text\n")
    (tmp_path / "engine" / "trainer.py").write_text("from utils.io import atomic_write_text\nimport config.schema\n")
    assert bare_imports(tmp_path) == ["engine/trainer.py:1 utils.io", "engine/trainer.py:2 config.schema"]


def test_every_package_has_a_layer():
    top = {p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    top |= {p.stem for p in ROOT.glob("*.py")}
    assert top <= set(LAYERS), f"give these a layer in LAYERS: {sorted(top - set(LAYERS))}"


def test_no_import_points_up_a_layer():
    bad = upward_imports(import_graph())
    assert not bad, "imports that point up (or across) a layer:\n  " + "\n  ".join(bad)


def test_evaluate_stages_import_downwards():
    bad = stage_imports(import_graph())
    assert not bad, "imports inside evaluate/ that point up (or across) a stage:\n  " + "\n  ".join(bad)


def test_the_stage_check_finds_an_import_up_and_across():
    graph = {
        "evaluate.inference.oracle": {"evaluate.inference.multiscale", "evaluate.estimator"},  # up
        "evaluate.metrics.oks": {"codec.decoder.decode", "evaluate.inference.oracle"},  # across
        "evaluate.estimator": {"evaluate.inference.multiscale", "evaluate.metrics.oks", "evaluate.demo"},
    }
    assert stage_imports(graph) == [
        "evaluate.inference.oracle (stage 0) -> evaluate.estimator (stage 1)",
        "evaluate.metrics.oks (stage 0) -> evaluate.inference.oracle (stage 0)",
    ]


def test_no_modules_import_each_other_round_a_circle():
    found = cycles(import_graph())
    assert not found, "modules that import each other: " + "; ".join(" <-> ".join(c) for c in found)


def test_the_checks_find_an_upward_import_and_a_circle(tmp_path):
    """The checks themselves, on a small tree that breaks both rules."""
    for package, body in {
        "models": "from simplepose.evaluate.decode import decode_people\n",  # up two layers
        "evaluate": "from evaluate import decode\n",
        "engine": "",
    }.items():
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
        (tmp_path / package / "part.py").write_text(body)
    (tmp_path / "evaluate" / "decode.py").write_text("def decode_people(): ...\nfrom .part import x\n")
    (tmp_path / "engine" / "trainer.py").write_text("import engine.hooks\n")
    (tmp_path / "engine" / "hooks.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                                   "    from engine.trainer import StepResult\n")  # fmt: skip
    graph = import_graph(tmp_path)
    assert upward_imports(graph) == ["models.part (layer 3) -> evaluate.decode (layer 5)"]
    assert cycles(graph) == [["engine.hooks", "engine.trainer"], ["evaluate.decode", "evaluate.part"]]


def test_the_codec_needs_no_more_than_numpy_and_opencv():
    """The codec (targets, decoder, layout) runs wherever the data pipeline or the decoder does: of the libraries
    outside the standard one it imports only numpy and OpenCV (no torch)."""
    project = set(LAYERS) | {PACKAGE}
    found = set()
    for path in sorted((ROOT / "codec").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                found.add(node.module.split(".")[0])
    third_party = found - project - set(sys.stdlib_module_names)
    assert third_party <= {"numpy", "cv2"}, f"the codec imports {sorted(third_party - {'numpy', 'cv2'})}"
