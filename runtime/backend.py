"""Build backend of ``simplepose-runtime`` (runtime/pyproject.toml): the runtime without PyTorch as a distribution
of its own import name, ``simplepose_runtime``, made from the checkout's files.

What it holds is derived, never listed: the modules that the runtime's entries (``RUNTIME_ENTRIES``: the ONNX
estimator, the demo, the tracker, the console command) load or import later, read with ``ast``, leaving out those
that load torch (the PyTorch paths, which refuse in one line without it); the config presets and skeletons. Its
version is ``simplepose/__init__.py``'s ``__version__``; its dependencies are those of the main pyproject's that
these modules load (and onnxruntime, of its ``onnx`` extra), with the same floors; its extra ``eval``, those they
import only inside functions (scoring a results file: pycocotools and the like).

A wheel or an sdist is built from a staging folder outside the checkout (nothing is written here): the modules
copied under ``simplepose_runtime/`` with their ``simplepose`` imports renamed, and a plain setuptools pyproject, so
the sdist builds its wheel anywhere with setuptools alone. Why a name of its own: docs/design.md#two-distributions.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

from setuptools import build_meta

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

CHECKOUT = Path(__file__).resolve().parents[1]
NAME, IMPORT_NAME, COMMAND = "simplepose-runtime", "simplepose_runtime", "simplepose-runtime"
RUNTIME_ENTRIES = (
    "simplepose.evaluate.onnx_estimator",
    "simplepose.evaluate.demo",
    "simplepose.evaluate.track",
    "simplepose.evaluate.coco_eval",
    "simplepose.cli",
    "simplepose.__main__",
)
NOT_PACKAGE = ("tests", "bench", "build", "build_backend", "runtime", "cache", "runs", "docs", "dist")
PACKAGE_DATA = ("py.typed", "config/*.yaml", "config/skeletons/*.yaml")
# import name -> distribution
PIP_NAME = {"cv2": "opencv-python-headless", "yaml": "PyYAML", "PIL": "Pillow", "faster_coco_eval": "faster-coco-eval"}
DESCRIPTION = "Simple Pose (AAAI 2020) without PyTorch: exported models run by ONNX Runtime, NumPy and OpenCV"
_IMPORT = re.compile(r"^(\s*)(from|import) simplepose(?=[.\s])", re.M)


def package_files(root: Path = CHECKOUT) -> dict[str, Path]:
    """Dotted name (``simplepose.evaluate.demo``; a package by its name) -> file, for the package's modules."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if rel.parts[0] in NOT_PACKAGE or any(p.startswith(".") for p in rel.parts):
            continue
        out[".".join(("simplepose", *rel.with_suffix("").parts)).removesuffix(".__init__")] = path
    return out


def imports(path: Path) -> tuple[set[str], set[str]]:
    """(what a file imports when loaded: at module level, not under ``TYPE_CHECKING``; what it imports later,
    inside functions and classes)."""
    loaded: set[str] = set()
    later: set[str] = set()

    def names(node: ast.AST) -> set[str]:
        if isinstance(node, ast.Import):
            return {a.name for a in node.names}
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            return {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        return set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            loaded.update(names(node))
            if isinstance(node, ast.If) and not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
                visit(node.body + node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body + node.orelse + node.finalbody + [n for h in node.handlers for n in h.body])
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                later.update(n for inner in ast.walk(node) for n in names(inner))

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    return loaded, later


def runtime_closure(root: Path = CHECKOUT) -> tuple[set[str], set[str]]:
    """(the package's modules the runtime's entries load or import later, with their packages, leaving out those
    that load torch; the top-level names of the outside modules they load)."""
    files = package_files(root)
    parsed = {name: imports(path) for name, path in files.items()}

    def loads(name: str) -> set[str]:
        """Every module that loading ``name`` loads: itself, its packages and what they import at load."""
        out: set[str] = set()
        todo = [name]
        while todo:
            module = todo.pop()
            if module in out:
                continue
            out.add(module)
            todo.extend({n for n in parsed[module][0] if n in files} | ({module.rpartition(".")[0]} - {""}))
        return out

    def outside(name: str) -> set[str]:
        # installed_tree, the checkout's guard, is imported by its bare name only when run from a checkout
        return {n.split(".")[0] for n in parsed[name][0] if n.split(".")[0] not in ("simplepose", "installed_tree")}

    needs_torch = {n for n in files if any("torch" in outside(m) for m in loads(n))}
    todo, modules = list(RUNTIME_ENTRIES), set()
    while todo:
        name = todo.pop()
        if name in modules or name in needs_torch:
            continue
        loaded = loads(name)
        modules |= loaded
        todo.extend(n for module in loaded for n in parsed[module][1] if n in files)
    return modules, {n for m in modules for n in outside(m)}


def version(root: Path = CHECKOUT) -> str:
    """``__version__`` of the package's ``__init__.py``: the one place the version is written."""
    for node in ast.parse((root / "__init__.py").read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__version__" for t in node.targets):
            return str(ast.literal_eval(node.value))
    raise RuntimeError(f"{root / '__init__.py'} sets no __version__")


def _written(root: Path) -> dict[str, str]:
    """Distribution name -> requirement as the main pyproject writes it (its dependencies and its ``onnx`` extra)."""
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = [*project["dependencies"], *project["optional-dependencies"]["onnx"]]
    return {re.split(r"[<>=!~;\[ ]", d, maxsplit=1)[0]: d for d in requirements}


def _as_written(names: set[str], root: Path, what: str) -> list[str]:
    written = _written(root)
    missing = sorted(names - set(written))
    if missing:
        raise RuntimeError(f"the runtime imports {missing} ({what}), which {root / 'pyproject.toml'} does not require")
    return sorted(written[name] for name in names)


def dependencies(root: Path = CHECKOUT) -> list[str]:
    """The main pyproject's requirements (and its ``onnx`` extra's onnxruntime) that the runtime's modules load, as
    written there."""
    imported = {PIP_NAME.get(m, m) for m in runtime_closure(root)[1] if m not in sys.stdlib_module_names}
    imported.add("onnxruntime")  # loaded by name when a model is opened (utils.optional.require)
    return _as_written(imported, root, "when loaded")


def lazily_imported(root: Path = CHECKOUT) -> set[str]:
    """The top-level names of the outside modules that the runtime's modules import only inside functions (scoring a
    results file: pycocotools, faster_coco_eval, matplotlib), torch left out (its paths refuse in one line)."""
    modules, loaded = runtime_closure(root)
    files = package_files(root)
    later = {n.split(".")[0] for m in modules for n in imports(files[m])[1]}
    return {n for n in later - loaded - {"simplepose", "torch"} if n not in sys.stdlib_module_names}


def optional_dependencies(root: Path = CHECKOUT) -> dict[str, list[str]]:
    """The runtime's extra ``eval`` (``pip install "simplepose-runtime[eval]"``): the main pyproject's requirements
    that its modules import only inside functions, as written there (docs/design.md#two-distributions)."""
    return {"eval": _as_written({PIP_NAME.get(m, m) for m in lazily_imported(root)}, root, "inside functions")}


def pyproject(root: Path = CHECKOUT) -> str:
    """The staged tree's pyproject.toml: plain setuptools, everything written out."""
    deps = "".join(f'    "{d}",\n' for d in dependencies(root))
    extras = "".join(f"{name} = {json.dumps(required)}\n" for name, required in optional_dependencies(root).items())
    return (
        '[build-system]\nrequires = ["setuptools>=64"]\nbuild-backend = "setuptools.build_meta"\n\n'
        f'[project]\nname = "{NAME}"\nversion = "{version(root)}"\ndescription = "{DESCRIPTION}"\n'
        f'requires-python = ">=3.10"\ndependencies = [\n{deps}]\n\n'
        f"[project.optional-dependencies]\n{extras}\n"
        f'[project.scripts]\n{COMMAND} = "{IMPORT_NAME}.cli:main"\n\n'
        '[tool.setuptools.packages.find]\ninclude = ["simplepose_runtime*"]\n\n'
        '[tool.setuptools.package-data]\n"*" = ["*.yaml", "skeletons/*.yaml", "py.typed"]\n'
    )


def stage(folder: Path, root: Path = CHECKOUT) -> Path:
    """The runtime's source tree in ``folder``: its modules renamed into ``simplepose_runtime``, its data, a
    pyproject; returns ``folder``."""
    files = package_files(root)
    for name in sorted(runtime_closure(root)[0]):
        source = files[name]
        target = folder / IMPORT_NAME / source.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(_IMPORT.sub(rf"\1\2 {IMPORT_NAME}", source.read_text(encoding="utf-8")), encoding="utf-8")
    for pattern in PACKAGE_DATA:
        for source in root.glob(pattern):
            target = folder / IMPORT_NAME / source.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
    (folder / "pyproject.toml").write_text(pyproject(root), encoding="utf-8")
    return folder


def _in_stage(build, directory: str, *args):
    """Run setuptools' ``build`` (``build_wheel``, ``build_sdist``) in a fresh staging folder, writing its result
    into ``directory`` (made absolute first: the build runs elsewhere)."""
    directory = str(Path(directory).resolve())
    here = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="simplepose-runtime-") as tmp:
        os.chdir(stage(Path(tmp)))
        try:
            return build(directory, *args)
        finally:
            os.chdir(here)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _in_stage(build_meta.build_wheel, wheel_directory, config_settings)


def build_sdist(sdist_directory, config_settings=None):
    return _in_stage(build_meta.build_sdist, sdist_directory, config_settings)


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []
