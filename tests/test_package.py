"""One package, ``simplepose``, whose subpackages are the checkout's folders (README "Use in Python", docs/design.md
"The package"): from any folder the API and every command work, a user's own ``utils``, ``config``, ``data`` and
``models`` stay theirs in either import order, the built wheel installs and runs on its own, runtime dependencies
stand apart from development ones, and checkpoints written before the package existed still load."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from simplepose import __version__
from simplepose.checkpoint.format import Checkpoint
from simplepose.evaluate import PoseEstimator
from simplepose.models.posenet import build_model
from simplepose.utils.errors import UserError
from simplepose.utils.optional import require
from tests.paths import REPO_ROOT

ONE_SCALE = ["eval.scales=[1.0]", "eval.flip=false"]
# written by `python train.py --config config/tiny.yaml` (model shrunk to 8 channels) on f18947d, the last commit
# before the package: a training checkpoint with its optimiser state, config and skeleton (tests/data/checkpoints)
OLD_CHECKPOINT = REPO_ROOT / "tests" / "data" / "checkpoints" / "tiny_last_f18947d.pt"


def outside_env(**extra: str) -> dict[str, str]:
    """This process's environment without the checkout on PYTHONPATH: a user's process after the install line."""
    kept = [
        p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and os.path.realpath(p) != str(REPO_ROOT)
    ]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(kept), "OMP_NUM_THREADS": "1", **extra}


def run_in(folder: Path, argv: list[str], python: str = sys.executable, **env: str) -> subprocess.CompletedProcess:
    environment = outside_env(**env)
    if python != sys.executable and "PYTHONPATH" not in env:
        # a fresh venv sees what its own site-packages give, not a folder linking simplepose to a worktree
        environment.pop("PYTHONPATH", None)
    return subprocess.run([python, *argv], cwd=folder, env=environment, capture_output=True, text=True,
                          timeout=600)  # fmt: skip


FIND_PEOPLE = """
import json, sys
import simplepose
from simplepose import PoseEstimator
estimator = PoseEstimator.from_checkpoint(sys.argv[1], device="cpu", scales=[1.0], flip=False)
people = estimator(sys.argv[2])
print(json.dumps({"package": simplepose.__file__, "scores": [p.score for p in people]}))
"""


def test_a_script_in_its_own_folder_finds_people_through_simplepose(tiny_ckpt, synthetic_sample_images, tmp_path):
    image = sorted(synthetic_sample_images.iterdir())[0]
    (tmp_path / "my_script.py").write_text(FIND_PEOPLE)
    r = run_in(tmp_path, ["my_script.py", str(tiny_ckpt), str(image)])
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    here = PoseEstimator.from_checkpoint(tiny_ckpt, device="cpu", scales=[1.0], flip=False)(str(image))
    assert out["scores"] == pytest.approx([p.score for p in here], abs=1e-6)
    # the checkout's folder names are not importable outside it: nothing of the project but simplepose is installed
    for name in ("evaluate", "engine", "codec", "checkpoint"):
        r = run_in(tmp_path, ["-c", f"import {name}"])
        assert r.returncode != 0 and f"No module named '{name}'" in r.stderr


USERS_FOLDER = {
    "utils.py": "WHOSE = 'user utils'\n",
    "config.py": "WHOSE = 'user config'\n",
    "data/__init__.py": "WHOSE = 'user data'\n",
    "models/__init__.py": "WHOSE = 'user models'\n",
}
USERS_MODULES = "import utils, config, data, models\n"
SIMPLEPOSE = (
    "import simplepose\n"
    "from simplepose.config.config_file import load_config\n"
    "from simplepose.models.posenet import build_model\n"
    "from simplepose.utils.errors import UserError\n"
    "model = build_model(load_config(sys.argv[1]))\n"
)
REPORT = (
    "print(json.dumps({'mine': [utils.WHOSE, config.WHOSE, data.WHOSE, models.WHOSE],\n"
    "                  'parameters': sum(p.numel() for p in model.parameters()),\n"
    "                  'files': [m.__file__ for m in (utils, config, data, models)]}))\n"
)


@pytest.mark.parametrize("order", ["user first", "simplepose first"])
def test_a_users_own_utils_config_data_and_models_stay_theirs(order, tmp_path):
    """A user's folder with modules named as the checkout's folders, imported before or after simplepose."""
    for name, text in USERS_FOLDER.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    body = USERS_MODULES + SIMPLEPOSE if order == "user first" else SIMPLEPOSE + USERS_MODULES
    (tmp_path / "script.py").write_text("import json, sys\n" + body + REPORT)
    r = run_in(tmp_path, ["script.py", str(REPO_ROOT / "config" / "tiny.yaml")])
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["mine"] == ["user utils", "user config", "user data", "user models"]
    assert all(Path(f).resolve().is_relative_to(tmp_path.resolve()) for f in out["files"])
    from simplepose.config.config_file import load_config

    expected = sum(p.numel() for p in build_model(load_config(REPO_ROOT / "config" / "tiny.yaml")).parameters())
    assert out["parameters"] == expected


def test_every_command_runs_as_python_m_simplepose_from_any_folder(tiny_ckpt, synthetic_sample_images, tmp_path):
    image = sorted(synthetic_sample_images.iterdir())[0]
    r = run_in(tmp_path, ["-m", "simplepose.evaluate.demo", "--ckpt", str(tiny_ckpt), "--input", str(image),
                          "--json", "found.json", "--device", "cpu", *ONE_SCALE])  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    written = json.loads((tmp_path / "found.json").read_text())  # relative to the caller's folder
    here = PoseEstimator.from_checkpoint(tiny_ckpt, device="cpu", scales=[1.0], flip=False)(str(image))
    assert len(written) == len(here)
    for module, sub, words in (("simplepose.train", "train", "train.resume=auto"),
                               ("simplepose.evaluate.coco_eval", "eval", "--ckpt"),
                               ("simplepose.data.coco_to_hdf5", "convert", "--input-size")):  # fmt: skip
        r = run_in(tmp_path, ["-m", module, "--help"], PATH=str(tmp_path))  # no console command on PATH
        assert r.returncode == 0 and words in r.stdout, (module, r.stderr[-1000:])
        # as it runs here: the console command through python, as no simplepose is on PATH
        assert r.stdout.split()[:5] == ["usage:", "python", "-m", "simplepose", sub], r.stdout[:200]


def _wheel(folder: Path) -> Path:
    """The wheel ``pip wheel .`` builds from the checkout (no download: this environment's setuptools)."""
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", str(REPO_ROOT), "--no-deps", "--no-build-isolation",
                        "--disable-pip-version-check", "-q", "-w", str(folder)], capture_output=True, text=True,
                       timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    (wheel,) = folder.glob("simplepose-*.whl")
    return wheel


@pytest.mark.slow
def test_the_wheel_installs_and_runs_in_a_fresh_venv(tiny_ckpt, synthetic_sample_images, tmp_path):
    """The wheel alone, in a new virtual environment outside the checkout (its dependencies seen through a .pth
    line to this environment's site-packages, nothing of the checkout): load a checkpoint, find people in a
    picture, write COCO results, export ONNX."""
    wheel = _wheel(tmp_path / "dist")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[1] for n in names if n.startswith("simplepose/") and n.count("/") > 1}
    assert tops == {"checkpoint", "codec", "config", "data", "engine", "evaluate", "models", "utils"}
    assert {"simplepose/__init__.py", "simplepose/train.py", "simplepose/train_distributed.py", "simplepose/py.typed",
            "simplepose/config/tiny.yaml", "simplepose/config/skeletons/coco.yaml"} <= set(names)  # fmt: skip
    assert not [n for n in names if any(part in n.split("/") for part in ("tests", "bench", "cache", "runs"))]
    # what only the tests and benches use stays in tests/: the sample's whereabouts, the host-read counter
    assert not [n for n in names if n.endswith(("/paths.py", "/host_syncs.py")) or "build_backend" in n]

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    python = str(venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python"))
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    # the dependencies (torch & co.) from here; a path added by a .pth line is not scanned for .pth files, so this
    # environment's editable install of the checkout stays out
    outer = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    Path(site, "outer_dependencies.pth").write_text("\n".join(sorted(outer)) + "\n")
    r = subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index",
                        "--disable-pip-version-check", "-q", str(wheel)], capture_output=True, text=True,
                       timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]

    user = tmp_path / "user"
    user.mkdir()
    image = sorted(synthetic_sample_images.iterdir())[0]
    script = FIND_PEOPLE + (
        "from simplepose import coco_results_json\nopen('results.json', 'w').write(coco_results_json([7], [people]))\n"
    )
    (user / "find.py").write_text(script)
    r = run_in(user, ["find.py", str(tiny_ckpt), str(image)], python=python)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert Path(out["package"]).resolve().is_relative_to(venv.resolve())  # the wheel's copy, not the checkout
    here = PoseEstimator.from_checkpoint(tiny_ckpt, device="cpu", scales=[1.0], flip=False)(str(image))
    assert out["scores"] == pytest.approx([p.score for p in here], abs=1e-6)
    results = json.loads((user / "results.json").read_text())
    assert len(results) == len(here) and all(r["image_id"] == 7 for r in results)
    r = run_in(user, ["-m", "simplepose.evaluate.export_onnx", "--ckpt", str(tiny_ckpt), "--out", "model.onnx"],
               python=python)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    assert (user / "model.onnx").stat().st_size > 10_000
    # the console command the wheel installs: its version, a subcommand's help spelled as it runs
    console = str(venv / ("Scripts/simplepose.exe" if os.name == "nt" else "bin/simplepose"))
    r = subprocess.run([console, "--version"], cwd=user, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == f"simplepose {__version__}", r.stderr[-2000:]
    r = run_in(user, ["-m", "simplepose", "export", "--help"], python=python, PATH=str(venv / "bin"))
    assert r.returncode == 0 and r.stdout.startswith("usage: simplepose export "), r.stdout[:300] + r.stderr[-1000:]
    # presets by name from the installed package, whatever the folder (issue 52 item 7)
    presets = "from simplepose.config.config_file import preset_file; import sys; print(preset_file(sys.argv[1]))"
    for given in ("tiny", "tiny.yaml", "config/tiny.yaml", "simplepose_coco_modern"):
        r = run_in(user, ["-c", presets, given], python=python)
        assert r.returncode == 0, r.stderr[-2000:]
        assert Path(r.stdout.strip()).resolve().is_relative_to(venv.resolve()), r.stdout


NOT_THE_PACKAGE = shutil.ignore_patterns(
    ".git", "build", "cache", "runs", "tests", "bench", "docs", "__pycache__", ".*_cache"
)
EDITABLE_CHECK = """
import importlib.util, json, sys
import simplepose
print(json.dumps({"package": simplepose.__file__, "path": sys.path,
                  "tests": importlib.util.find_spec("simplepose.tests") is not None}))
"""


@pytest.mark.slow
def test_the_editable_install_is_a_link_tree_that_static_tools_see(tmp_path):
    """The README's install line, in a fresh venv, of a copy of the package's files: ``simplepose`` is a folder on
    ``sys.path`` (a .pth line to the link tree, where pyright and mypy look; no import hook) whose files are the
    checkout's (an edit takes effect), holding what the wheel holds (``simplepose.tests`` does not import)."""
    checkout = tmp_path / "checkout"  # the install writes its link tree into build/ there, not into this checkout
    shutil.copytree(REPO_ROOT, checkout, ignore=NOT_THE_PACKAGE)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    python = str(venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python"))
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    outer = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}  # dependencies, as in the wheel test
    Path(site, "outer_dependencies.pth").write_text("\n".join(sorted(outer)) + "\n")
    r = subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index",
                        "--no-build-isolation", "--disable-pip-version-check", "-q", "-e", f"{checkout}[dev]"],
                       capture_output=True, text=True, timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]

    user = tmp_path / "user"
    user.mkdir()
    r = run_in(user, ["-c", EDITABLE_CHECK], python=python)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert Path(out["package"]).samefile(checkout / "__init__.py") and not out["tests"]
    folders = [Path(p) / "simplepose" for p in out["path"] if p and (Path(p) / "simplepose" / "engine").is_dir()]
    assert folders and (folders[0] / "engine" / "ema.py").samefile(checkout / "engine" / "ema.py")
    assert not (folders[0] / "tests").exists() and (folders[0] / "py.typed").is_file()


def _pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 on
    return tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())


def test_runtime_dependencies_stand_apart_from_development_ones():
    project = _pyproject()["project"]
    runtime = {d.split(">")[0].split("=")[0].split("<")[0].strip().lower() for d in project["dependencies"]}
    assert {"torch", "numpy", "pycocotools", "h5py"} <= runtime
    assert not runtime & {"pytest", "ruff", "onnx", "onnxruntime", "tensorboard", "motmetrics"}
    extras = project["optional-dependencies"]
    assert {"onnx", "tensorboard", "dev"} <= set(extras)
    assert any(d.startswith("pytest") for d in extras["dev"]) and any(d.startswith("ruff") for d in extras["dev"])
    # the README's install line for developers, and requirements.txt for those who expect one, install the same
    lines = [x for x in (REPO_ROOT / "requirements.txt").read_text().splitlines() if x and not x.startswith("#")]
    assert lines == ["-e .[dev]"]


@pytest.mark.parametrize(
    ("module", "purpose", "extra"),
    [("onnx", "exporting ONNX", "onnx"), ("onnxruntime", "running an ONNX model", "onnx"),
     ("torch.utils.tensorboard", "train.tensorboard=on", "tensorboard")],
)  # fmt: skip
def test_a_missing_optional_dependency_names_its_extra(module, purpose, extra, monkeypatch):
    monkeypatch.setitem(sys.modules, module, None)  # import fails as if not installed
    with pytest.raises(UserError) as e:
        require(module, purpose)
    assert f'pip install "simplepose[{extra}]"' in str(e.value) and "\n" not in str(e.value)
    assert extra in _pyproject()["project"]["optional-dependencies"]


def test_exporting_without_onnx_is_one_line_naming_the_extra(tiny_ckpt, tmp_path):
    code = "import sys; sys.modules['onnx'] = None; from simplepose.evaluate.export_onnx import main; sys.exit(main())"
    r = run_in(tmp_path, ["-c", code, "--ckpt", str(tiny_ckpt), "--out", "m.onnx"])
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert 'pip install "simplepose[onnx]"' in r.stderr and not (tmp_path / "m.onnx").exists()


def test_no_module_changes_sys_path():
    found = []
    for path in sorted(REPO_ROOT.rglob("*.py")):
        rel = path.relative_to(REPO_ROOT)
        if rel.parts[0] in ("cache", "runs", "build") or rel == Path("tests/test_package.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "path" and getattr(node.value, "id", "") == "sys":
                found.append(f"{rel}:{node.lineno}")
    assert not found, f"sys.path used (import the package instead): {found}"


def test_a_checkpoint_written_before_the_package_still_loads(synthetic_sample_images):
    loaded = Checkpoint.load(OLD_CHECKPOINT)
    assert loaded.config is not None and loaded.config.model.inp_dim == 8
    assert loaded.skeleton is not None and loaded.skeleton.name == "coco"
    assert loaded.train_state is not None  # a training checkpoint: what train.resume reads
    model = build_model(loaded.config)
    model.load_state_dict(loaded.model)
    estimator = PoseEstimator.from_checkpoint(OLD_CHECKPOINT, device="cpu", scales=[1.0], flip=False)
    image = sorted(synthetic_sample_images.iterdir())[0]
    assert isinstance(estimator(str(image)), list)  # end to end (a model trained two steps finds no one in particular)
