"""The runtime without PyTorch (evaluate/onnx_estimator.py, the distribution simplepose-runtime of runtime/): with
torch made unimportable (tests/no_torch.py), the API and the demo's --onnx find the people, boxes, scores and JSON of
``PoseEstimator.from_onnx`` under PyTorch, at one scale + flip and five + flip; the runtime's distribution holds
exactly the modules that path imports (derived by runtime/backend.py), none of which imports torch, under an import
name of its own; its wheel and sdist build, install and run beside the full install."""

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import simplepose
from simplepose.evaluate import PoseEstimator, coco_eval, coco_results_json, export_onnx
from simplepose.utils.optional import RUNTIME_EXTRAS
from tests.helpers import AGREEMENT_IMAGES, UNSCORED_IMAGES, image_folder, imperfect_results, subprocess_env
from tests.paths import REPO_ROOT
from tests.test_import_layers import module_files

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

# the runtime distribution's build backend: what it holds, derived (runtime/pyproject.toml)
_spec = importlib.util.spec_from_file_location("runtime_backend", REPO_ROOT / "runtime" / "backend.py")
backend = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(backend)
RUNTIME_ENTRIES = backend.RUNTIME_ENTRIES

SETTINGS = {  # a small box keeps five scales fast; the thresholds are the defaults
    "1 scale + flip": dict(scales=[1.0], flip=True, boxsize=128),
    "5 scales + flip": dict(scales=[0.5, 1.0, 1.5, 2.0, 3.0], flip=True, boxsize=96),
}
KEYPOINT_PX, SCORE = 1e-3, 1e-5  # what "the same people" allows: image pixels, scores
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


def runtime_modules_only() -> dict[str, str]:
    """The environment that makes the modules the runtime's wheel leaves out unimportable too (tests/no_torch.py)."""
    left_out = {f"simplepose.{name}" for name in module_files()} - runtime_closure()[0]
    return {
        "NO_TORCH_ALSO": ",".join(
            sorted(m for m in left_out if not m.startswith(("simplepose.tests", "simplepose.bench")))
        )
    }


@pytest.mark.parametrize("installed", ["all modules", "the runtime's modules"])
def test_without_torch_the_pytorch_paths_say_what_to_do(installed, tiny_ckpt, synthetic_sample_images, tmp_path):
    """With torch unimportable, and also the modules the runtime's wheel leaves out (as in its install)."""
    env = runtime_modules_only() if installed == "the runtime's modules" else {}
    image = str(synthetic_sample_images / AGREEMENT_IMAGES[0])
    run = without_torch(["-m", "tests.no_torch", "simplepose.evaluate.demo", "--ckpt", str(tiny_ckpt), "--input",
                         image, "--json", str(tmp_path / "x.json")], **env)  # fmt: skip
    assert run.returncode == 2 and not (tmp_path / "x.json").exists()
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "--ckpt needs PyTorch" in lines[0] and "--onnx model.onnx" in lines[0], run.stderr
    code = "from tests.no_torch import block_torch; block_torch(); from simplepose import PoseEstimator"
    run = without_torch(["-c", code], **env)
    assert run.returncode == 1 and "PoseEstimator needs PyTorch" in run.stderr and "OnnxPoseEstimator" in run.stderr


def test_without_torch_eval_scores_a_results_file_as_the_full_install(synthetic_sample_annotations, tmp_path, capsys):
    """``eval --results`` with the runtime's modules alone and no torch: the figures and lines of the full package's
    eval on the same file; ``--ckpt`` and ``--from-ground-truth`` there say in one line that they need the full
    install; without pycocotools, one line naming its pip command."""
    results = tmp_path / "results.json"
    results.write_text(json.dumps(imperfect_results(json.loads(synthetic_sample_annotations.read_text()))))
    argv = ["--results", str(results), "--annotations", str(synthetic_sample_annotations)]
    assert coco_eval.main(argv) == 0
    full = capsys.readouterr().out
    assert re.search(r"^AP 0\.\d+ ", full, re.M) and "AP 0.000" not in full  # figures worth comparing
    run = without_torch(["-m", "tests.no_torch", "simplepose.evaluate.coco_eval", *argv], **runtime_modules_only())
    assert run.returncode == 0 and run.stdout == full, run.stderr
    run = without_torch(["-m", "tests.no_torch", "simplepose.evaluate.coco_eval"], **runtime_modules_only())
    assert run.returncode == 2 and "error: give --results FILE (this install scores results files" in run.stderr
    for option in (["--ckpt", "x.pt"], ["--from-ground-truth"]):
        run = without_torch(["-m", "tests.no_torch", "simplepose.evaluate.coco_eval", *option, "--images", ".",
                             "--annotations", str(synthetic_sample_annotations)], **runtime_modules_only())  # fmt: skip
        lines = run.stderr.strip().splitlines()
        assert (
            run.returncode == 2
            and len(lines) == 1
            and lines[0].endswith(f"eval {option[0]} needs the full install (PyTorch): pip install simplepose")
        ), run.stderr
    env = runtime_modules_only()
    env["NO_TORCH_ALSO"] += ",pycocotools"
    run = without_torch(["-m", "tests.no_torch", "simplepose.evaluate.coco_eval", *argv], **env)
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1, run.stderr
    assert "scoring a results file needs pycocotools" in lines[0] and lines[0].endswith("pip install pycocotools")


def test_the_runtime_holds_what_its_entries_load_and_no_torch(tmp_path):
    """runtime/backend.py derives the runtime's modules (what its entries load, read with ``ast``) and dependencies
    (the main pyproject's, as written there): none loads torch, every outside import is a dependency, and the
    staged tree is those modules under the runtime's import name, no ``simplepose`` import left."""
    modules, outside = runtime_closure()
    assert "torch" not in outside and set(RUNTIME_ENTRIES) <= modules
    assert "simplepose.evaluate.estimator" not in modules and "simplepose.engine" not in modules
    declared = {re.split(r"[<>=!~;\[ ]", d, maxsplit=1)[0] for d in backend.dependencies()}
    third_party = {m for m in outside if m not in sys.stdlib_module_names}
    assert {backend.PIP_NAME.get(m, m) for m in third_party} | {"onnxruntime"} == declared, third_party
    main = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert set(backend.dependencies()) <= set(main["dependencies"]) | set(main["optional-dependencies"]["onnx"])
    # its extra eval: what scoring a results file imports inside functions, pins as the main pyproject writes them
    (extra,) = backend.optional_dependencies().values()
    assert set(extra) <= set(main["dependencies"]) and not set(extra) & set(backend.dependencies())
    assert {re.split(r"[<>=]", d)[0] for d in extra} == {p for e, p in RUNTIME_EXTRAS.values() if e == "eval"}
    assert {"simplepose.evaluate.coco_eval", "simplepose.evaluate.results_scoring"} <= modules
    staged = backend.stage(tmp_path)
    files = {p.relative_to(staged / "simplepose_runtime") for p in (staged / "simplepose_runtime").rglob("*.py")}
    expected = {backend.package_files()[m].relative_to(REPO_ROOT) for m in modules}
    assert files == expected
    for path in (staged / "simplepose_runtime").rglob("*.py"):
        assert not re.search(r"^\s*(from|import) simplepose\b(?!_runtime)", path.read_text(), re.M), path
    assert f'version = "{simplepose.__version__}"' in (staged / "pyproject.toml").read_text()


def build(kind: str, folder: Path) -> Path:
    """``runtime/backend.py``'s ``build_wheel`` or ``build_sdist`` into ``folder``, in a subprocess (setuptools'
    logs stay there); the built file."""
    code = f"import sys; sys.path.insert(0, sys.argv[1]); import backend; print(backend.build_{kind}(sys.argv[2]))"
    r = subprocess.run([sys.executable, "-c", code, str(REPO_ROOT / "runtime"), str(folder)], cwd=folder.parent,
                       capture_output=True, text=True, timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    return folder / r.stdout.strip().splitlines()[-1]


RUNTIME_USER = """
import json, sys
sys.modules["torch"] = None  # as where PyTorch is not installed
from simplepose_runtime import OnnxPoseEstimator
people = OnnxPoseEstimator.from_onnx(sys.argv[1], scales=[1.0], flip=True, boxsize=128)(sys.argv[2])
print(json.dumps([[p.keypoints.tolist(), p.score] for p in people]))
"""


@pytest.mark.slow
def test_the_runtime_builds_installs_and_runs_beside_the_full_install(
    trained_onnx, synthetic_sample_images, synthetic_sample_annotations, tmp_path
):
    """Its wheel and sdist build (the sdist's wheel with setuptools alone, away from the checkout, which keeps no
        build output); in a venv its import name and console command run the exported model; its files and the main
        wheel's are disjoint, so both install in either order and uninstalling either leaves the other whole; its eval
    scores a results file as the full install's does, and names its extra where pycocotools is missing."""
    before = sorted(p.name for p in (REPO_ROOT / "runtime").iterdir())
    dist = tmp_path / "dist"
    dist.mkdir()
    wheel, sdist = build("wheel", dist), build("sdist", dist)
    assert sorted(p.name for p in (REPO_ROOT / "runtime").iterdir()) == before
    unpacked = tmp_path / "sdist"
    shutil.unpack_archive(sdist, unpacked)
    (source,) = unpacked.iterdir()
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
    r = subprocess.run([*pip_wheel, "-w", str(tmp_path / "from_sdist"), str(source)], capture_output=True, text=True,
                       timeout=600)  # fmt: skip
    assert r.returncode == 0 and len(list((tmp_path / "from_sdist").glob("*.whl"))) == 1, r.stderr[-2000:]

    names = zipfile.ZipFile(wheel).namelist()
    assert all(n.startswith(("simplepose_runtime/", "simplepose_runtime-")) for n in names), names[:5]
    main = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert set(main["project"]["scripts"]) == {"simplepose"}  # the runtime's script: simplepose-runtime
    assert (
        "simplepose-runtime = "
        in zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    )

    venv = tmp_path / "venv"  # this environment's packages (numpy, onnxruntime, ...) seen, torch blocked below
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    python, command = str(venv / "bin" / "python"), str(venv / "bin" / "simplepose-runtime")
    r = subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "-q",
                        str(wheel)], capture_output=True, text=True, timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    user = tmp_path / "user"
    user.mkdir()
    (user / "find.py").write_text(RUNTIME_USER)
    image = str(synthetic_sample_images / AGREEMENT_IMAGES[0])
    r = subprocess.run([python, "find.py", str(trained_onnx), image], cwd=user, capture_output=True, text=True,
                       timeout=600, env={**subprocess_env(OMP_NUM_THREADS="1"), "PYTHONPATH": ""})  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    found = json.loads(r.stdout.strip().splitlines()[-1])
    here = PoseEstimator.from_onnx(trained_onnx, scales=[1.0], flip=True, boxsize=128)(image)
    assert len(found) == len(here) and [s for _, s in found] == pytest.approx([p.score for p in here], abs=SCORE)
    r = subprocess.run([command, "--version"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == f"simplepose-runtime {simplepose.__version__}", r.stderr
    on_path = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"}  # as an activated venv
    r = subprocess.run([command, "train"], capture_output=True, text=True, timeout=300, env=on_path)
    assert r.returncode == 2 and r.stderr.strip() == (
        "error: simplepose-runtime train needs the full install (PyTorch): pip install simplepose"
    ), r.stderr
    # torch is importable in this venv, yet the runtime has no PyTorch path: one line each, not a traceback
    for argv in (["demo", "--ckpt", "x.pt", "--input", image], ["eval", "--ckpt", "x.pt", "--images", "."]):
        r = subprocess.run([command, *argv], capture_output=True, text=True, timeout=300, env=on_path)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "PyTorch" in r.stderr, r.stderr
        assert "simplepose-runtime export" not in r.stderr  # the runtime has no export: the full install's command
    r = subprocess.run([command, "eval", "--help"], capture_output=True, text=True, timeout=300, env=on_path)
    assert "this install scores results files" in " ".join(r.stdout.split()), r.stdout
    # eval of a results file: the figures of the full package's eval; without pycocotools, its extra's pip command
    results = tmp_path / "results.json"
    results.write_text(json.dumps(imperfect_results(json.loads(synthetic_sample_annotations.read_text()))))
    argv = ["eval", "--results", str(results), "--annotations", str(synthetic_sample_annotations)]
    full = subprocess.run([sys.executable, "-m", "simplepose", *argv], cwd=user, capture_output=True, text=True,
                          timeout=300, env=subprocess_env())  # fmt: skip
    r = subprocess.run([command, *argv], cwd=user, capture_output=True, text=True, timeout=300, env=on_path)
    assert full.returncode == 0 and r.returncode == 0 and "AP 0." in r.stdout, r.stderr + full.stderr
    assert r.stdout.splitlines()[-1] == full.stdout.splitlines()[-1]
    code = "import sys; sys.modules['pycocotools'] = None; from simplepose_runtime.cli import main; sys.exit(main())"
    r = subprocess.run([python, "-c", code, *argv], cwd=user, capture_output=True, text=True, timeout=300, env=on_path)
    assert r.returncode == 2 and r.stderr.strip().endswith(
        'pip install "simplepose-runtime[eval]" (or pip install pycocotools)'
    ), r.stderr


def runtime_closure() -> tuple[set[str], set[str]]:
    return backend.runtime_closure()
