"""The runtime without PyTorch (evaluate/onnx_estimator.py, the distribution of runtime/pyproject.toml): with torch
made unimportable (tests/no_torch.py), the API and the demo's --onnx find the people, boxes, scores and JSON of
``PoseEstimator.from_onnx`` under PyTorch, at one scale + flip and five + flip; the runtime wheel holds exactly the
modules that path imports, none of which imports torch."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from simplepose.evaluate import PoseEstimator, coco_results_json, export_onnx
from tests.helpers import AGREEMENT_IMAGES, UNSCORED_IMAGES, image_folder, subprocess_env
from tests.paths import REPO_ROOT
from tests.test_import_layers import module_files

SETTINGS = {  # a small box keeps five scales fast; the thresholds are the defaults
    "1 scale + flip": dict(scales=[1.0], flip=True, boxsize=128),
    "5 scales + flip": dict(scales=[0.5, 1.0, 1.5, 2.0, 3.0], flip=True, boxsize=96),
}
KEYPOINT_PX, SCORE = 1e-3, 1e-5  # what "the same people" allows: image pixels, scores
# what the runtime API and command are: the runtime wheel holds them and what they import (runtime_closure)
RUNTIME_ENTRIES = ("simplepose.evaluate.onnx_estimator", "simplepose.evaluate.demo", "simplepose.evaluate.track")
# the runtime's own script: people of each image of argv[2:] as JSON, per setting of SETTINGS, without torch
RUN_WITHOUT_TORCH = """
import json, sys
from tests.no_torch import block_torch
block_torch()
from simplepose import OnnxPoseEstimator, coco_results_json
settings, path, files = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3:]
out = {}
for name, overrides in settings.items():
    found = OnnxPoseEstimator.from_onnx(path, **overrides)(files)
    out[name] = {"json": coco_results_json(list(range(len(files))), found),
                 "people": [[[p.keypoints.tolist(), p.score, list(p.box)] for p in people] for people in found]}
assert sys.modules["torch"] is None  # still blocked: nothing imported it another way
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def trained_onnx(trained_tiny_ckpt, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("runtime") / "tiny.onnx"
    assert export_onnx.main(["--ckpt", str(trained_tiny_ckpt), "--out", str(out), "--input-size", "64x128"]) == 0
    return out


def without_torch(argv: list[str], **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *argv], cwd=REPO_ROOT, env=subprocess_env(OMP_NUM_THREADS="1", **env), capture_output=True,
        text=True, timeout=600,
    )  # fmt: skip


def test_without_torch_the_runtime_finds_from_onnxs_people(trained_onnx, synthetic_sample_images, one_thread):
    files = [str(synthetic_sample_images / name) for name in AGREEMENT_IMAGES[:3]]
    run = without_torch(["-c", RUN_WITHOUT_TORCH, json.dumps(SETTINGS), str(trained_onnx), *files])
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout)
    for name, overrides in SETTINGS.items():
        want = PoseEstimator.from_onnx(trained_onnx, **overrides)(files)
        assert sum(map(len, want)) >= 5, name  # people worth comparing
        assert got[name]["json"] == coco_results_json(list(range(len(files))), want), name
        for runtime_people, people in zip(got[name]["people"], want):
            assert len(runtime_people) == len(people), name
            for (keypoints, score, box), person in zip(runtime_people, people):
                np.testing.assert_allclose(np.array(keypoints, float), person.keypoints, atol=KEYPOINT_PX, rtol=0)
                assert abs(score - person.score) <= SCORE and np.allclose(box, person.box, atol=KEYPOINT_PX, rtol=0)


def test_the_demo_runs_an_onnx_model_without_torch(trained_onnx, synthetic_sample_images, tmp_path):
    """The command of the runtime install: a folder's pictures drawn and their people in a JSON file, those of the
    demo under PyTorch (run in process, its --onnx path as it was before the runtime: ``PoseEstimator.from_onnx``)."""
    folder = image_folder(synthetic_sample_images, tmp_path / "photos")
    out_json, out_dir = tmp_path / "found.json", tmp_path / "drawn"
    argv = ["--onnx", str(trained_onnx), "--input", str(folder), "--json", str(out_json), "eval.scales=[1.0]"]
    run = without_torch(["-m", "tests.no_torch", "simplepose.evaluate.demo", *argv, "--out", str(out_dir)])
    assert run.returncode == 0, run.stderr
    assert "images/s" in run.stdout and len(list(out_dir.glob("*_pose.jpg"))) == len(UNSCORED_IMAGES)
    files = sorted(folder.iterdir())
    want = PoseEstimator.from_onnx(trained_onnx, scales=[1.0])([str(f) for f in files])
    assert sum(map(len, want)) > 0
    assert out_json.read_text() == coco_results_json([int(f.stem) for f in files], want)


@pytest.mark.parametrize("installed", ["all modules", "the runtime's modules"])
def test_without_torch_the_pytorch_paths_say_what_to_do(installed, tiny_ckpt, synthetic_sample_images, tmp_path):
    """With torch unimportable, and also the modules the runtime's wheel leaves out (as in its install)."""
    env = {}
    if installed == "the runtime's modules":
        left_out = {f"simplepose.{name}" for name in module_files()} - runtime_closure()[0]
        env["NO_TORCH_ALSO"] = ",".join(
            sorted(m for m in left_out if not m.startswith(("simplepose.tests", "simplepose.bench")))
        )
    image = str(synthetic_sample_images / AGREEMENT_IMAGES[0])
    run = without_torch(["-m", "tests.no_torch", "simplepose.evaluate.demo", "--ckpt", str(tiny_ckpt), "--input",
                         image, "--json", str(tmp_path / "x.json")], **env)  # fmt: skip
    assert run.returncode == 2 and not (tmp_path / "x.json").exists()
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "--ckpt needs PyTorch" in lines[0] and "--onnx model.onnx" in lines[0], run.stderr
    code = "from tests.no_torch import block_torch; block_torch(); from simplepose import PoseEstimator"
    run = without_torch(["-c", code], **env)
    assert run.returncode == 1 and "PoseEstimator needs PyTorch" in run.stderr and "OnnxPoseEstimator" in run.stderr


def imports(path: Path) -> tuple[set[str], set[str]]:
    """(the modules a file imports when it is loaded: at module level, not under ``TYPE_CHECKING``; those it imports
    later, inside functions)."""
    loaded, later = set(), set()

    def names(node) -> set[str]:
        if isinstance(node, ast.Import):
            return {a.name for a in node.names}
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            return {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        return set()

    def visit(body):
        for node in body:
            loaded.update(names(node))
            if isinstance(node, ast.If) and not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
                visit(node.body + node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body + node.orelse + node.finalbody + [n for h in node.handlers for n in h.body])
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                later.update(n for inner in ast.walk(node) for n in names(inner))

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    return loaded, later


def runtime_closure() -> tuple[set[str], set[str]]:
    """(the project's modules the runtime's entries load or import later, with their packages, leaving out those that
    load torch (the PyTorch paths the runtime refuses in one line); the outside modules they load)."""
    shipped = module_files().items()  # the package's modules: not the tests' and benches' (no package of it)
    files = {f"simplepose.{name}": path for name, path in shipped if name.split(".")[0] not in ("tests", "bench")}
    files["simplepose"] = REPO_ROOT / "__init__.py"
    parsed = {name: imports(path) for name, path in files.items()}

    def project(names: set[str]) -> set[str]:  # a name imported from a module is not a module: dropped
        return {n for n in names if n in files}

    def loads(name: str) -> set[str]:
        """Every module that loading ``name`` loads, itself and its packages included."""
        out, todo = set(), [name]
        while todo:
            module = todo.pop()
            if module in out:
                continue
            out.add(module)
            todo.extend(project(parsed[module][0]) | ({module.rpartition(".")[0]} - {""}))
        return out

    def outside(name: str) -> set[str]:
        return {n.split(".")[0] for n in parsed[name][0] if n.split(".")[0] != "simplepose"}

    needs_torch = {n for n in files if any("torch" in outside(m) for m in loads(n))}
    todo, modules = list(RUNTIME_ENTRIES), set()
    while todo:
        name = todo.pop()
        if name in modules or name in needs_torch:
            continue
        loaded = loads(name)
        modules |= loaded
        todo.extend(later for module in loaded for later in project(parsed[module][1]))
    return modules, {n for m in modules for n in outside(m)}


def test_the_runtime_wheel_holds_what_the_runtime_loads_and_no_torch():
    modules, outside = runtime_closure()
    assert "torch" not in outside
    tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")  # Python 3.10: tomli
    project = tomllib.loads((REPO_ROOT / "runtime" / "pyproject.toml").read_text(encoding="utf-8"))
    setup = project["tool"]["setuptools"]
    listed = {m.removesuffix(".__init__") for m in setup["py-modules"]}
    for package in setup["packages"]:  # a whole package: its every module
        folder = REPO_ROOT.joinpath(*package.split(".")[1:])
        listed |= {package} | {f"{package}.{f.stem}" for f in folder.glob("*.py") if f.stem != "__init__"}
    assert listed == modules
    declared = {d.split(">")[0].split("=")[0].strip() for d in project["project"]["dependencies"]}
    pip_name = {"cv2": "opencv-python-headless", "yaml": "PyYAML", "PIL": "Pillow"}
    third_party = {m for m in outside if m not in sys.stdlib_module_names}
    assert {pip_name.get(m, m) for m in third_party} <= declared, third_party
